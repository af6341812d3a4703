"""Event presets: named sets of tracefs events a recording enables.

Events are written to an instance's ``set_event`` as ``system:event``. All syscalls go in as
``syscalls:*`` because this kernel's ``set_event`` rejects globs such as
``syscalls:sys_enter_*`` while accepting the whole system; the ``syscalls`` system holds exactly
the named ``sys_enter_NAME``/``sys_exit_NAME`` events, which the ftrace reader maps to LTTng's
``syscall_entry_NAME``/``syscall_exit_NAME``.
"""

from __future__ import annotations

from tracesynth.errors import ConfigError

SYSCALLS = ("syscalls:*",)
LIFECYCLE = (
    "sched:sched_process_fork",
    "sched:sched_process_exec",
    "sched:sched_process_exit",
)
SCHEDULING = ("sched:sched_switch", "sched:sched_wakeup")

SCHED_DETAIL = (
    "sched:sched_waking",
    "sched:sched_wakeup_new",
    "sched:sched_migrate_task",
    "sched:sched_process_wait",
    "sched:sched_process_free",
)
KERNEL_DETAIL = (
    "signal:signal_generate",
    "signal:signal_deliver",
    "block:block_rq_issue",
    "block:block_rq_complete",
    "timer:hrtimer_start",
    "timer:hrtimer_expire_entry",
)
DEFAULT = SYSCALLS + SCHEDULING + LIFECYCLE

#: name → (events, one-line description). ``default`` is what the issue asks for; the others
#: trade size for detail.
PRESETS: dict[str, tuple[tuple[str, ...], str]] = {
    "minimal": (SYSCALLS + LIFECYCLE, "all syscalls (entry/exit) + fork/exec/exit"),
    "default": (DEFAULT, "all syscalls + sched_switch, sched_wakeup + fork/exec/exit"),
    "sched": (DEFAULT + SCHED_DETAIL, "default + waking, wakeup_new, migrate_task, process_wait/free"),
    "full": (DEFAULT + SCHED_DETAIL + KERNEL_DETAIL, "sched + signals, block requests, hrtimers"),
}


def preset_events(name: str) -> tuple[str, ...]:
    """The tracefs event specs of preset `name` (ConfigError names the valid presets)."""
    try:
        return PRESETS[name][0]
    except KeyError:
        raise ConfigError(f"unknown event preset {name!r}; choose one of: {', '.join(PRESETS)}") from None

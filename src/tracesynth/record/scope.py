"""Keep only the recorded command's process tree, from its ``execve`` to its last event.

ftrace's pid filter (``set_event_pid`` + ``event-fork``) already limits most events to the
tree, but it keeps ``sched_switch``/``sched_wakeup*`` when *either* side is traced. That lets
in wakeups of unrelated tasks from interrupts that hit while a traced thread ran (a timer
waking a kworker, a network IRQ waking sshd). The rule applied here, per event:

- ``sched_switch``: kept when the thread switched out (``prev_tid``) or in (``next_tid``)
  belongs to the tree; the other side may be any task (``swapper``, a kworker, another
  user's process): that is what the CPU really did around our threads.
- ``sched_wakeup``/``sched_waking``/``sched_wakeup_new``/``sched_migrate_task``/
  ``sched_process_free``: kept when the task they are about (payload ``tid``) belongs to the
  tree, whoever the acting thread is (an IRQ on an idle CPU wakes our task as ``swapper``).
  Wakeups *by* our threads of tasks outside the tree are dropped: they cannot be told apart
  from interrupts that merely hit our thread.
- ``sched_process_fork``: kept when the parent belongs to the tree; the child joins it.
- everything else (syscalls, exec, exit, ...): kept when the acting thread belongs to it.

The tree is the command's thread plus every thread forked from the tree, in time order. The
trace starts at the command's first ``syscall_entry_execve`` (before it, the thread is still
the recorder's gated fork) and ends with the tree's last kept event.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pyarrow as pa

ABOUT_PAYLOAD_TID = frozenset({
    "sched_wakeup", "sched_waking", "sched_wakeup_new", "sched_migrate_task", "sched_process_free",
})
START_EVENT = "syscall_entry_execve"


@dataclass
class ScopeStats:
    """How many recorded events the scope rule removed, and why."""

    before_start: int = 0
    outside_tree: int = 0
    kept: int = 0
    threads: int = 0


def _payload(text: str | None) -> dict:
    return json.loads(text) if text else {}


def keep_process_tree(events: pa.Table, root_tid: int) -> tuple[pa.Table, ScopeStats]:
    """Rows of `events` (a time-ordered canonical table) that belong to `root_tid`'s tree."""
    stats = ScopeStats()
    names = events.column("event").to_pylist()
    tids = events.column("tid").to_pylist()
    payloads = events.column("payload").to_pylist()
    start = next((i for i, (name, tid) in enumerate(zip(names, tids))
                  if name == START_EVENT and tid == root_tid), None)
    if start is None:
        stats.before_start = len(names)
        return events.slice(0, 0), stats
    stats.before_start = start
    tree = {root_tid}
    keep = [False] * len(names)
    for i in range(start, len(names)):
        name = names[i]
        if name == "sched_switch":
            fields = _payload(payloads[i])
            keep[i] = fields.get("prev_tid") in tree or fields.get("next_tid") in tree
        elif name in ABOUT_PAYLOAD_TID:
            keep[i] = _payload(payloads[i]).get("tid") in tree
        elif name == "sched_process_fork":
            fields = _payload(payloads[i])
            if fields.get("parent_tid") in tree or tids[i] in tree:
                keep[i] = True
                if fields.get("child_tid") is not None:
                    tree.add(fields["child_tid"])
        else:
            keep[i] = tids[i] in tree
    kept = events.filter(pa.array(keep))
    stats.kept = kept.num_rows
    stats.outside_tree = len(names) - start - stats.kept
    stats.threads = len(tree)
    return kept, stats


def fill_pids(events: pa.Table, tgid_of: dict[int, int]) -> pa.Table:
    """Fill a null ``pid`` (process id, tgid) from the kernel's tid → tgid map: ftrace's text
    output names only the thread."""
    if events.column("pid").null_count == 0:
        return events
    pids = [p if p is not None else tgid_of.get(t) for p, t in
            zip(events.column("pid").to_pylist(), events.column("tid").to_pylist())]
    index = events.schema.get_field_index("pid")
    return events.set_column(index, "pid", pa.array(pids, pa.int64()))


__all__ = ["ScopeStats", "fill_pids", "keep_process_tree"]

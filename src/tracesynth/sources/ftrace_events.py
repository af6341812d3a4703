"""Event bodies of ftrace text → canonical (event, ret, payload), in LTTng naming.

The line prefix (task, CPU, time) is parsed by `ftrace.py`; this module only understands what
follows the timestamp. Two printers produce those bodies and they differ:

* tracefs (`trace`, `trace_pipe`) uses each event's kernel print format: syscalls read
  ``sys_openat(dfd: 0xffffff9c, ...)`` / ``sys_openat -> 0x4``, sched events ``key=value``.
* ``trace-cmd report`` prints ``sys_enter_openat: dfd: 0xffffff9c, ...`` /
  ``sys_exit_openat: 0x4``, and its plugins rewrite sched_switch (``sh:4915 [120] D ==>
  swapper/0:0 [120]``) and sched_wakeup (``sh:4915 [120] CPU:000``).

Both end in the same payload names, the ones LTTng's kernel tracer uses, so a trace converted
from ftrace compares column for column with one read from CTF.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from tracesynth.schema import SYSCALL_ENTRY_PREFIX, SYSCALL_EXIT_PREFIX
from tracesynth.sources.syscalls_x86_64 import SYSCALL_NAMES

U64 = 1 << 64
U32 = 1 << 32

#: sched_switch prev_state letters → the integer LTTng records (the kernel's TASK_REPORT bits:
#: 1 << (index - 1) for S D T t X Z P I; "+" marks a preempted, still runnable task).
PREV_STATE_BITS = {"R": 0, "S": 1, "D": 2, "T": 4, "t": 8, "X": 16, "Z": 32, "P": 64, "I": 128}
PREEMPTED = 256

#: Syscall arguments that are C ints: ftrace prints them as 32-bit hex (dfd: 0xffffff9c), LTTng
#: as signed numbers (-100 = AT_FDCWD).
#: Names as the kernel's syscall metadata spells them (wait4 and waitid take `upid`, tgkill
#: `tgid`, setpgid `pgid`, the fd-taking ones sometimes `ufd`).
INT_ARGS = frozenset({"fd", "dfd", "olddfd", "newdfd", "oldfd", "newfd", "fd_in", "fd_out", "epfd",
                      "ufd", "pid", "upid", "tgid", "pgid", "sig", "which", "who", "flag"})


@dataclass(slots=True)
class Decoded:
    """One parsed event body: canonical event name, syscall return value, payload fields."""

    event: str
    ret: int | None = None
    payload: dict[str, Any] | None = None
    #: False when a known event's body did not have its known shape and was kept as generic
    #: key=value pairs (another kernel's format, or a line cut short).
    exact: bool = True


def to_signed64(value: int) -> int:
    return value - U64 if value >= 1 << 63 else value


def parse_number(text: str) -> int | str:
    """ftrace prints numbers as decimal or 0x-hex; anything else stays text."""
    try:
        return int(text, 16) if text.startswith(("0x", "0X")) else int(text)
    except ValueError:
        return text


def parse_ret(text: str) -> int:
    """Return values: hex is the raw 64-bit register (two's complement), decimal is signed."""
    value = parse_number(text.strip())
    if not isinstance(value, int):
        raise ValueError(f"bad return value {text!r}")
    return to_signed64(value) if text.strip().startswith("0x") else value


def parse_syscall_args(text: str) -> dict[str, Any]:
    """``dfd: 0xffffff9c, filename: 0x7f03..., flags: 0x80000`` → {"dfd": -100, ...}."""
    payload: dict[str, Any] = {}
    if not text.strip():
        return payload
    for part in text.split(", "):
        name, sep, value = part.partition(": ")
        if not sep:
            # A value with ", " inside (a quoted string): glue it back to the previous arg.
            if payload:
                last = next(reversed(payload))
                payload[last] = f"{payload[last]}, {part}"
            continue
        number = parse_number(value.strip())
        if isinstance(number, int) and name in INT_ARGS and U32 // 2 <= number < U32:
            number -= U32
        payload[name.strip()] = number
    return payload


def syscall_name(nr: int) -> str:
    """x86_64 number → name; unknown numbers become ``unknown_<nr>``."""
    return SYSCALL_NAMES.get(nr) or f"unknown_{nr}"


# --- key=value bodies and the sched events ---------------------------------------------------

_KV = re.compile(r"(\w+)=(\S*)")
_BOOLS = {"true": True, "false": False, "": ""}
_SWITCH = re.compile(
    r"prev_comm=(?P<prev_comm>.*?) prev_pid=(?P<prev_tid>-?\d+) prev_prio=(?P<prev_prio>-?\d+) "
    r"prev_state=(?P<prev_state>\S+) ==> next_comm=(?P<next_comm>.*?) next_pid=(?P<next_tid>-?\d+) "
    r"next_prio=(?P<next_prio>-?\d+)\s*$"
)
_SWITCH_TRACECMD = re.compile(
    r"(?P<prev_comm>.*):(?P<prev_tid>-?\d+) \[(?P<prev_prio>-?\d+)\] (?P<prev_state>\S+) ==> "
    r"(?P<next_comm>.*):(?P<next_tid>-?\d+) \[(?P<next_prio>-?\d+)\]\s*$"
)
_WAKEUP = re.compile(
    r"comm=(?P<comm>.*?) pid=(?P<tid>-?\d+) prio=(?P<prio>-?\d+)(?: success=\d+)?"
    r" target_cpu=(?P<target_cpu>\d+)\s*$"
)
_WAKEUP_TRACECMD = re.compile(
    r"(?P<comm>.*):(?P<tid>-?\d+) \[(?P<prio>-?\d+)\](?: success=\d+)? CPU:(?P<target_cpu>\d+)\s*$"
)
_FORK = re.compile(
    r"comm=(?P<parent_comm>.*?) pid=(?P<parent_tid>-?\d+) child_comm=(?P<child_comm>.*?) "
    r"child_pid=(?P<child_tid>-?\d+)\s*$"
)
_EXEC = re.compile(r"filename=(?P<filename>.*?) pid=(?P<tid>-?\d+) old_pid=(?P<old_tid>-?\d+)\s*$")
_EXIT = re.compile(r"comm=(?P<comm>.*?) pid=(?P<tid>-?\d+) prio=(?P<prio>-?\d+)(?P<rest>.*)$")

#: Marks a known sched event whose body did not match its format (parsed generically instead).
GENERIC_KEY = "_generic"
_KNOWN_SCHED = frozenset({"sched_switch", "sched_wakeup", "sched_waking", "sched_wakeup_new",
                          "sched_process_fork", "sched_process_exec", "sched_process_exit",
                          "sched_process_free", "sched_process_wait"})
_INT_FIELDS = frozenset({"prev_tid", "prev_prio", "next_tid", "next_prio", "tid", "prio",
                         "target_cpu", "parent_tid", "child_tid", "old_tid"})


def prev_state_code(text: str) -> int:
    """``S`` → 1, ``R+`` → 256, ``D|K`` → 2|...: the integer LTTng stores for prev_state."""
    value = PREEMPTED if text.endswith("+") else 0
    for letter in re.split(r"[|+]", text):
        value |= PREV_STATE_BITS.get(letter, 0)
    return value


def _fields(match: re.Match) -> dict[str, Any]:
    return {k: int(v) if k in _INT_FIELDS else v for k, v in match.groupdict().items()}


def parse_kv(body: str) -> dict[str, Any]:
    """Generic ``key=value`` body; a body without any pair is kept whole as ``text``."""
    pairs = _KV.findall(body)
    if not pairs:
        return {"text": body.strip()} if body.strip() else {}
    return {k: _BOOLS.get(v, v) if v in _BOOLS else parse_number(v) for k, v in pairs}


def decode_sched(name: str, body: str) -> dict[str, Any]:
    """sched_* bodies in either printer's form → LTTng field names."""
    if name == "sched_switch":
        match = _SWITCH.match(body) or _SWITCH_TRACECMD.match(body)
        if match:
            fields = _fields(match)
            fields["prev_state"] = prev_state_code(fields["prev_state"])
            return fields
    elif name in ("sched_wakeup", "sched_waking", "sched_wakeup_new"):
        match = _WAKEUP.match(body) or _WAKEUP_TRACECMD.match(body)
        if match:
            return _fields(match)
    elif name == "sched_process_fork":
        match = _FORK.match(body)
        if match:
            return _fields(match)
    elif name == "sched_process_exec":
        match = _EXEC.match(body)
        if match:
            return _fields(match)
    elif name in ("sched_process_exit", "sched_process_free", "sched_process_wait"):
        match = _EXIT.match(body)
        if match:
            fields = _fields(match)
            rest = fields.pop("rest")
            fields.update(parse_kv(rest) if rest.strip() else {})
            return fields
    payload = parse_kv(body)
    if name in _KNOWN_SCHED:
        payload[GENERIC_KEY] = True
    return payload


# --- whole bodies ----------------------------------------------------------------------------

_TRACEFS_ENTRY = re.compile(r"sys_(\w+)\((.*)\)\s*$")
_TRACEFS_EXIT = re.compile(r"sys_(\w+) -> (0x[0-9a-fA-F]+|-?\d+)\s*$")
_NAMED = re.compile(r"(\w+):\s*(.*)$")
_RAW_ENTER = re.compile(r"NR (-?\d+) \((.*)\)\s*$")
_RAW_EXIT = re.compile(r"NR (-?\d+) = (-?\d+)\s*$")


def decode_body(rest: str) -> Decoded | None:
    """The text after the timestamp → Decoded, or None when it has no recognisable shape."""
    named = _NAMED.match(rest)
    if named is None:
        match = _TRACEFS_EXIT.match(rest)
        if match:
            return Decoded(SYSCALL_EXIT_PREFIX + match.group(1), parse_ret(match.group(2)))
        match = _TRACEFS_ENTRY.match(rest)
        if match:
            return Decoded(SYSCALL_ENTRY_PREFIX + match.group(1), None,
                           parse_syscall_args(match.group(2)))
        return None
    name, body = named.group(1), named.group(2)
    if name.startswith("sys_enter_"):
        return Decoded(SYSCALL_ENTRY_PREFIX + name[10:], None, parse_syscall_args(body))
    if name.startswith("sys_exit_"):
        return Decoded(SYSCALL_EXIT_PREFIX + name[9:], parse_ret(body))
    if name == "sys_enter":
        match = _RAW_ENTER.match(body)
        if match:
            nr = int(match.group(1))
            args = [int(a, 16) for a in match.group(2).split(", ") if a]
            return Decoded(SYSCALL_ENTRY_PREFIX + syscall_name(nr), None, {"id": nr, "args": args})
    if name == "sys_exit":
        match = _RAW_EXIT.match(body)
        if match:
            nr = int(match.group(1))
            return Decoded(SYSCALL_EXIT_PREFIX + syscall_name(nr), int(match.group(2)), {"id": nr})
    if name.startswith("sched_"):
        payload = decode_sched(name, body)
        return Decoded(name, None, payload, exact=not payload.get(GENERIC_KEY, False))
    return Decoded(name, None, parse_kv(body))

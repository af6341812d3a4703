"""Thread attribution for traces without event context, the way Trace Compass does it."""

from __future__ import annotations

import os
from typing import Any

from tracesynth.schema import SYSCALL_EXIT_PREFIX

#: Linux TASK_COMM_LEN - 1: exec sets comm to the file's basename, truncated to this.
COMM_MAX = 15
UNKNOWN_SYSCALL_EXIT = SYSCALL_EXIT_PREFIX + "unknown"

class ThreadState:
    """Who runs where, derived from scheduler and process events as Trace Compass does.

    `running[cpu]` is the tid switched in by the last ``sched_switch`` on that CPU (absent
    before the first switch: unknown, never guessed). `pid_of`/`comm_of` map tids to their
    tgid and command name, fed by statedump, fork, exec, exit and switch events.
    """

    __slots__ = ("running", "pid_of", "comm_of", "idle_comm")
    #: The only events `observe` learns from (the hot loop skips the call for the others).
    EVENTS = frozenset(
        {
            "sched_switch",
            "lttng_statedump_process_state",
            "sched_process_fork",
            "sched_process_exec",
            "sched_process_exit",
        }
    )

    def __init__(self):
        self.running: dict[int, int] = {}
        self.pid_of: dict[int, int] = {0: 0}
        self.comm_of: dict[int, str] = {}
        self.idle_comm: dict[int, str] = {}  # tid 0 is one idle thread per CPU

    def identity(self, cpu, tid) -> tuple[int | None, str | None]:
        if tid is None:
            return None, None
        if tid == 0:
            return 0, self.idle_comm.get(cpu)
        return self.pid_of.get(tid), self.comm_of.get(tid)

    def _name(self, cpu, tid, comm) -> None:
        if tid is None or not comm:
            return
        if tid == 0:
            self.idle_comm[cpu] = comm
        else:
            self.comm_of[tid] = comm

    def observe(self, event: str, cpu, payload: dict[str, Any], tid) -> int | None:
        """Update the state from one event; return the tid the event itself belongs to."""
        get = payload.get
        if event == "sched_switch":
            prev_tid, next_tid = get("prev_tid"), get("next_tid")
            self._name(cpu, prev_tid, get("prev_comm"))
            self._name(cpu, next_tid, get("next_comm"))
            if next_tid is not None and cpu is not None:
                self.running[cpu] = next_tid
            # The switch runs in the outgoing thread (what a tid context field would say).
            return prev_tid if prev_tid is not None else tid
        if event == "lttng_statedump_process_state":
            t = get("tid")
            if t is not None and t != 0:
                if get("pid") is not None:
                    self.pid_of[t] = get("pid")
                self._name(cpu, t, get("name"))
        elif event == "sched_process_fork":
            parent, child = get("parent_tid"), get("child_tid")
            if parent is not None and get("parent_pid") is not None:
                self.pid_of.setdefault(parent, get("parent_pid"))
            if child is not None:
                if get("child_pid") is not None:
                    self.pid_of[child] = get("child_pid")
                else:
                    self.pid_of.pop(child, None)  # thread or process: unknown, not guessed
                self._name(cpu, child, get("child_comm"))
        elif event == "sched_process_exec":
            t = get("tid", tid)
            filename = get("filename")
            if t is not None and filename:
                self._name(cpu, t, os.path.basename(filename)[:COMM_MAX])
        elif event == "sched_process_exit":
            self._name(cpu, get("tid"), get("comm"))
        return tid


class SyscallPairing:
    """Names old-style ``exit_syscall`` events after the entry they close, per thread.

    A pending entry on a CPU whose thread is still unknown is kept under the CPU and handed
    to the thread that the CPU's first ``sched_switch`` switches out.
    """

    __slots__ = ("pending", "unmatched")

    def __init__(self):
        self.pending: dict[Any, str] = {}
        self.unmatched = 0

    @staticmethod
    def _key(cpu, tid):
        return ("cpu", cpu) if tid is None else tid

    def enter(self, cpu, tid, syscall_exit_name: str) -> None:
        self.pending[self._key(cpu, tid)] = syscall_exit_name

    def exit(self, cpu, tid) -> str:
        name = self.pending.pop(self._key(cpu, tid), None)
        if name is None:
            self.unmatched += 1
            return UNKNOWN_SYSCALL_EXIT
        return name

    def switched_out(self, cpu, prev_tid) -> None:
        orphan = self.pending.pop(("cpu", cpu), None)
        if orphan is not None and prev_tid is not None:
            self.pending.setdefault(prev_tid, orphan)

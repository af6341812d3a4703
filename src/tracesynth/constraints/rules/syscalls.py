"""Syscall pairing per thread: a thread is in at most one syscall at a time, an exit closes
the pending entry of the same name, entries carry no return value and exits do.

rt_sigreturn may have no exit event (it restores orig_ax = -1, so the exit tracepoint does
not know the call): after its entry the thread may enter the next syscall.

A process image is replaced inside the execve/execveat call that asked for it: the kernel
emits sched_process_exec between that call's entry and its exit, on the calling thread, once.
So an exec event whose thread's previous syscall event is not an execve/execveat entry (a
second exec in one call, or one after the call returned) breaks the pairing too. The calling
thread is the event's old_tid where it records one (a non-leader thread's exec takes the
leader's tid). Judged only in traces that record execve/execveat at all (a recording may trace
exec events without those syscalls).

Trace boundaries are not violations: a thread's first syscall event may be an exit (the entry
happened before tracing started) and an entry may stay pending at the end. A thread created in
the trace starts by returning from clone/fork (the child's half of the call), so its first
syscall event must be that exit.
"""

from __future__ import annotations

import numpy as np

from tracesynth.constraints import syscall_table as sc
from tracesynth.constraints.rules.base import Edit, Findings, Rule
from tracesynth.constraints.view import ENTRY, EXIT, GENERIC, TraceView, thread_keys

IN_FLIGHT, MISMATCH, ORPHAN, ENTRY_RET, CHILD_START, AFTER_END, EXIT_NO_RET, EXEC_OUTSIDE = 1, 2, 3, 4, 5, 6, 7, 8
REASONS = {
    IN_FLIGHT: "syscall entry while another syscall of this thread is in flight",
    MISMATCH: "syscall exit does not match the pending entry's name",
    ORPHAN: "syscall exit with no pending entry on this thread",
    ENTRY_RET: "syscall entry carries a return value",
    CHILD_START: "a new thread's first syscall event is not its return from clone/fork",
    AFTER_END: "syscall after the thread entered exit/exit_group",
    EXIT_NO_RET: "syscall exit without a return value",
    EXEC_OUTSIDE: "sched_process_exec outside an execve call of its thread (or a second one in the call)",
}


def counterpart(event: str, kind: int, name: str) -> str:
    """The event name of the other half of a syscall, in the same naming style."""
    for entry, exit_ in (("compat_syscall_entry_", "compat_syscall_exit_"),
                         ("syscall_entry_", "syscall_exit_"), ("sys_enter_", "sys_exit_")):
        if event.startswith(entry if kind == ENTRY else exit_):
            return (exit_ if kind == ENTRY else entry) + name
    return ("syscall_exit_" if kind == ENTRY else "syscall_entry_") + name


def creation_markers(view: TraceView) -> tuple[np.ndarray, np.ndarray]:
    """(rows, child tids) where a thread is created: sched_process_fork, or, when the trace
    records no fork events, the parent's successful clone/fork exit."""
    def compute():
        child, ok = view.field("sched_process_fork", "child_tid")
        if ok.any():
            rows = np.flatnonzero(ok)
            return rows, child[rows]
        # The child may run before its parent's clone returns, so the life starts at the
        # parent's clone entry (the previous syscall event of the parent), when visible.
        calls = view.syscall_rows(sc.CHILD_RETURNING)
        calls = calls[view.tid[calls] >= 0]
        order = np.argsort(view.tid[calls], kind="stable")
        calls = calls[order]
        exits = (view.kind[calls] == EXIT) & view.ret_valid[calls] & (view.ret[calls] > 0)
        prev_entry = np.zeros(len(calls), bool)
        prev_entry[1:] = (view.kind[calls[:-1]] == ENTRY) & (view.tid[calls[:-1]] == view.tid[calls[1:]])
        start = np.where(prev_entry, np.roll(calls, 1), calls)
        return np.sort(start[exits]), view.ret[calls[exits]][np.argsort(start[exits], kind="stable")]

    return view.memo("creations", compute)


def life_keys(view: TraceView, rows: np.ndarray, tids: np.ndarray):
    """Sort key (thread, row) for `rows` and the life index of each: how many creations of
    that tid precede the row (tids are reused after a thread dies)."""
    m_rows, m_tids = creation_markers(view)
    stride = view.n + 1
    both = thread_keys(np.concatenate([tids, m_tids]), np.concatenate([rows, m_rows]), stride)
    keys, m_keys = both[: len(tids)], np.sort(both[len(tids):])
    life = (np.searchsorted(m_keys, keys, "right")
            - np.searchsorted(m_keys, keys - keys % stride, "left"))
    return keys, life


def pairing(view: TraceView):
    """Per-thread walk over syscall events, vectorized. Returns a dict with the sorted syscall
    rows, the previous syscall row of the same thread life (-1 at a life's start), the life
    index, and `entry_of` (per row: the entry an exit closes — same name, or a nameless exit —
    else -1)."""

    def compute():
        rows = np.flatnonzero((view.kind > 0) & (view.tid >= 0))
        keys, life = life_keys(view, rows, view.tid[rows])
        order = np.argsort(keys)
        rows, life, keys = rows[order], life[order], keys[order]
        stride = view.n + 1
        thread = keys // stride
        prev = np.full(len(rows), -1, np.int64)
        same = np.zeros(len(rows), bool)
        if len(rows) > 1:
            same[1:] = (thread[1:] == thread[:-1]) & (life[1:] == life[:-1])
        prev[1:][same[1:]] = rows[:-1][same[1:]]
        entry_of = np.full(view.n, -1, np.int64)
        has_prev = prev >= 0
        a, b = prev[has_prev], rows[has_prev]
        closing = ((view.kind[a] == ENTRY) & (view.kind[b] == EXIT)
                   & ((view.scid[a] == view.scid[b]) | view.scid_generic[view.scid[b]]))
        entry_of[b[closing]] = a[closing]
        return {"rows": rows, "prev": prev, "life": life, "entry_of": entry_of}

    return view.memo("pairing", compute)


def execs_outside(view: TraceView) -> np.ndarray:
    """Rows of sched_process_exec events not inside an execve/execveat call of their thread:
    the thread's previous syscall-or-exec event is not an exec call's entry. A thread's first
    such event is a trace boundary (the call began before tracing), never a violation."""
    execs = view.rows_of("sched_process_exec")
    calls = view.syscall_rows(sc.EXEC)
    if not len(execs) or not len(calls):
        return np.zeros(0, np.int64)
    caller = view.tid[execs].astype(np.int64)
    rows, _, before = view.exec_tids()
    at = np.searchsorted(execs, rows)
    caller[at] = before
    syscalls = np.flatnonzero((view.kind > 0) & (view.tid >= 0))
    keep = caller >= 0
    execs, caller = execs[keep], caller[keep]
    every = np.concatenate([syscalls, execs])
    tids = np.concatenate([view.tid[syscalls].astype(np.int64), caller])
    order = np.lexsort((every, tids))
    every, tids = every[order], tids[order]
    is_exec = np.zeros(view.n, bool)
    is_exec[execs] = True
    entered = np.zeros(view.n, bool)
    entered[calls[view.kind[calls] == ENTRY]] = True
    i = np.flatnonzero(is_exec[every][1:]) + 1  # an exec with an event before it in the order
    prev = every[i - 1]
    inside = (tids[i - 1] != tids[i]) | (entered[prev] & ~is_exec[prev])
    return np.sort(every[i][~inside])


class SyscallPairing(Rule):
    name = "syscall-pairing"
    explanation = ("one syscall in flight per thread; an exit closes the pending entry of the same name; "
                   "exec happens inside an execve")
    channels = ("event", "tid")

    def unmet_precondition(self, view):
        if not (view.kind > 0).any():
            return "trace has no syscall events"
        return None

    def find(self, view: TraceView) -> Findings:
        p = pairing(view)
        rows, prev, life = p["rows"], p["prev"], p["life"]
        kind, scid = view.kind, view.scid
        names = np.array(view.syscall_names + [""], dtype=object)
        ending = np.isin(names, list(sc.THREAD_ENDING))
        untraced = np.isin(names, list(sc.EXIT_UNTRACED))
        child = np.isin(names, list(sc.CHILD_RETURNING | {GENERIC})) | view.scid_generic
        first = prev < 0
        b = rows[~first]
        a = prev[~first]
        ka, kb = kind[a], kind[b]
        generic = view.scid_generic[scid[a]] | view.scid_generic[scid[b]]
        closes = (ka == ENTRY) & (kb == EXIT) & ((scid[a] == scid[b]) | generic)
        # An exit without a return value closing its own entry is "did not return" (strace's
        # `= ?` when the thread dies in the call): not activity after exit_group.
        not_returned = closes & ~view.ret_valid[b]
        after_end = (ka == ENTRY) & ending[scid[a]] & ~not_returned
        no_exit = (ka == ENTRY) & untraced[scid[a]]
        in_flight = (ka == ENTRY) & (kb == ENTRY) & ~after_end & ~no_exit
        mismatch = (ka == ENTRY) & (kb == EXIT) & ~closes & ~after_end & ~no_exit
        orphan = ((ka == EXIT) | no_exit) & (kb == EXIT) & ~closes
        f = rows[first]
        child_start = f[(life[first] > 0) & (kind[f] == EXIT) & ~child[scid[f]]]
        parts = [(b[after_end], AFTER_END), (b[in_flight], IN_FLIGHT), (b[mismatch], MISMATCH),
                 (b[orphan], ORPHAN), (child_start, CHILD_START), (execs_outside(view), EXEC_OUTSIDE)]
        if view.has_ret:
            parts.append((np.flatnonzero((kind == ENTRY) & view.ret_valid), ENTRY_RET))
            # A thread's last syscall may be one it never returned from (killed, exit_group).
            last = np.ones(len(rows), bool)
            last[:-1] = prev[1:] != rows[:-1]
            last_rows = np.zeros(view.n, bool)
            last_rows[rows[last]] = True
            parts.append((np.flatnonzero((kind == EXIT) & ~view.ret_valid & ~last_rows), EXIT_NO_RET))
        return Findings.of(parts, REASONS)

    def fix(self, view: TraceView, found: Findings) -> list[Edit]:
        p = pairing(view)
        prev_of = np.full(view.n, -1, np.int64)
        prev_of[p["rows"]] = p["prev"]
        edits: list[Edit] = []
        for row, code in zip(found.rows.tolist(), found.codes.tolist()):
            event = view.ev_names[view.ev_code[row]]
            name = view.syscall_names[view.scid[row]]
            if code in (AFTER_END, CHILD_START, EXEC_OUTSIDE) or (code == ORPHAN and view.scid_generic[view.scid[row]]):
                edits.append(Edit("drop", row, self.name, view.row_info(row)))
            elif code == IN_FLIGHT:
                a = int(prev_of[row])
                pending = view.syscall_names[view.scid[a]]
                ev = counterpart(view.ev_names[view.ev_code[a]], ENTRY, pending)
                # A trace without return values (a light model's) gets none: a value here would
                # make the ret channel "present" and every other exit then lacks one.
                ret = sc.default_ret(pending) if view.has_ret else None
                edits.append(Edit("insert", row, self.name, None, inserted(view, row, ev, ret)))
            elif code == MISMATCH:
                a = int(prev_of[row])
                pending = view.syscall_names[view.scid[a]]
                ev = counterpart(view.ev_names[view.ev_code[a]], ENTRY, pending)
                edits.append(Edit("set", row, self.name, {"event": event}, {"event": ev}))
            elif code == ORPHAN:
                ev = counterpart(event, EXIT, name)
                edits.append(Edit("insert", row, self.name, None, inserted(view, row, ev, None)))
            elif code == ENTRY_RET:
                edits.append(Edit("set", row, self.name, {"ret": int(view.ret[row])}, {"ret": None}))
            elif code == EXIT_NO_RET:
                edits.append(Edit("set", row, self.name, {"ret": None}, {"ret": sc.default_ret(name)}))
        return edits


def inserted(view: TraceView, row: int, event: str, ret: int | None) -> dict:
    """A new row placed just before `row`, on the same thread and CPU, halfway in time from the
    previous event (`TraceView.ts_before`)."""
    t = view.table
    return {
        "ts": view.ts_before(row),
        "cpu": int(view.cpu[row]) if view.cpu[row] >= 0 else None,
        "tid": view.known_tid(row),
        "pid": int(view.pid[row]) if view.pid[row] >= 0 else None,
        "procname": view.proc_names[view.proc_code[row]] if view.proc_code[row] >= 0 else None,
        "event": event,
        "ret": ret,
        "payload": None,
    } if t is not None else {}

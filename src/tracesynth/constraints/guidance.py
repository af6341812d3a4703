"""Constraint guidance for sampling: which decided positions of a partially generated window
break a rule given the values decided around them (the sampler re-masks them), and which
event names an undecided position may still take.

The contract (tracesynth.sampling.guide.SamplingGuide): `partial` holds numpy arrays over one
window of L events:
    event    object   event name, None where undecided
    tid      int64    -1 unknown/undecided; other negatives are provisional thread ids
    cpu      int64    -1 unknown/undecided
    ret      float64 (NaN = none) or object (None = none)
    decided  bool     the event name is decided

Undecided positions are treated permissively: a masked slot of the same thread (or of an
unknown thread) between two events could still become the missing entry, exit or switch, so a
pair is judged only when nothing undecided that could belong to the thread lies between. The
window's first events are judged like a trace's: an exit with no entry in the window is fine.
Everything is vectorized over the window (a few hundred microseconds for 4096 events).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracesynth.constraints import syscall_table as sc
from tracesynth.constraints.rules import select_rules
from tracesynth.constraints.rules.retvals import ret_ok
from tracesynth.constraints.view import ENTRY, EXIT, GENERIC, is_generic_name, parse_syscall

_F_SWITCH, _F_THREAD_END, _F_NO_EXIT, _F_SERIAL, _F_EXEC, _F_EXEC_CALL = 1, 2, 4, 8, 16, 32


class ConstraintGuide:
    """`ConstraintGuide(rules=None, single_thread=False, serial=())`: guidance for the named
    rules (default all that apply to a window: syscall-pairing, return-values, thread-lifecycle,
    thread-migration). `single_thread=True` reads windows without thread ids (a `light` model)
    as one thread, for workloads whose real traces have one thread. `serial` names syscalls
    the workload's real runs make one at a time (`encoding.serial`): in a window without
    thread ids they are read as one thread, whichever thread makes them."""

    GUIDED = ("syscall-pairing", "return-values", "thread-lifecycle", "thread-migration")

    def __init__(self, rules=None, single_thread: bool = False, rule_out_names: bool = False,
                 serial=()):
        names = [r.name for r in select_rules(rules)]
        self.single_thread = single_thread
        self.serial = frozenset(serial)
        self._before: str | None = None  # the last serial syscall event before the window
        # Whether the sampler should also rule names out before drawing (allowed_event_mask),
        # not only re-mask violations after each step. Off by default: on the bundled
        # workloads it lowered TSTR (fileio 0.98 -> 0.72 of TRTR; docs/constraints.md).
        self.rule_out_names = rule_out_names
        self.rules = [n for n in self.GUIDED if n in names]
        self._index: dict[str, int] = {}
        self._kind: list[int] = []
        self._scid: list[int] = []
        self._domain: list[int] = []
        self._flags: list[int] = []
        self._syscalls: dict[str, int] = {GENERIC: 0}
        self._tables = None

    # --- event-name tables (grow as new names appear) ----------------------------------
    def _code(self, name) -> int:
        if name is None:
            return -1
        code = self._index.get(name)
        if code is None:
            kind, syscall = parse_syscall(name)
            code = len(self._kind)
            self._index[name] = code
            self._kind.append(kind)
            if kind == EXIT and is_generic_name(syscall):
                syscall = GENERIC
            self._scid.append(self._syscalls.setdefault(syscall, len(self._syscalls)) if kind else -1)
            self._domain.append(sc.domain_of(syscall) if kind else sc.ANY)
            flags = _F_SWITCH if name == "sched_switch" else 0
            if name == "sched_process_exit" or (kind == ENTRY and syscall in sc.THREAD_ENDING):
                flags |= _F_THREAD_END
            if kind == ENTRY and syscall in sc.EXIT_UNTRACED:
                flags |= _F_NO_EXIT
            if kind and syscall in self.serial:
                flags |= _F_SERIAL
            if name == "sched_process_exec":
                flags |= _F_EXEC
            if kind == ENTRY and syscall in sc.EXEC:
                flags |= _F_EXEC_CALL
            self._flags.append(flags)
            self._tables = None
        return code

    def _arrays(self):
        if self._tables is None:
            self._tables = tuple(np.array(t + [0], np.int64) for t in
                                 (self._kind, self._scid, self._domain, self._flags))
        return self._tables

    def _decode(self, partial):
        events = partial["event"]
        decided = np.asarray(partial["decided"], bool)
        # Factorise the names (hashing in C), then look up only the distinct ones: a per-element
        # Python loop over 4,096 names was a tenth of guided sampling's time.
        labels, uniques = pd.factorize(np.asarray(events, dtype=object), use_na_sentinel=True)
        table = np.array([self._code(u) for u in uniques] + [-1], np.int64)
        codes = table[labels]  # label -1 (None) → the trailing -1
        codes[~decided] = -1
        kind_t, scid_t, dom_t, flag_t = self._arrays()
        kind, scid, dom, flags = kind_t[codes], scid_t[codes], dom_t[codes], flag_t[codes]
        known = codes >= 0
        kind[~known], flags[~known] = 0, 0
        tid = np.asarray(partial["tid"], np.int64)
        if self.single_thread and not (tid != -1).any():
            # A window of a model without thread ids, for a single-threaded workload: every
            # position, decided or not, belongs to the one thread (an undecided one can still
            # become that thread's missing entry or exit, and it is judged as such).
            tid = np.ones(len(events), np.int64)
        cpu = np.asarray(partial.get("cpu", np.full(len(events), -1)), np.int64)
        ret, has_ret = _rets(partial.get("ret"), len(events))
        return known, kind, scid, dom, flags, tid, cpu, ret, has_ret

    def begin_window(self, passed, new_trace: bool = False) -> None:
        """The event names that passed out of view before the next window: since the last call,
        in trace order (with `new_trace`, a new trace begins and they are all that precede
        it). The serial syscalls' pairing then continues across the seam: a window's first
        serial event is judged against the last one before the window, where a window alone
        would read it as a trace start (stream writes once every ~1,700 events, so a write's
        entry and exit often fall in different windows)."""
        if new_trace:
            self._before = None
        if not self.serial:
            return
        for name in reversed(list(passed)):
            kind, syscall = parse_syscall(name) if isinstance(name, str) else (0, "")
            if kind and syscall in self.serial:
                self._before = name
                return

    # --- the hook ----------------------------------------------------------------------
    def violating_positions(self, partial: dict) -> np.ndarray:
        known, kind, scid, dom, flags, tid, cpu, ret, has_ret = self._decode(partial)
        n = len(known)
        bad = np.zeros(n, bool)
        if not n:
            return bad
        pos = np.arange(n)
        thread = tid != -1
        if "syscall-pairing" in self.rules or "thread-lifecycle" in self.rules:
            # Positions that could still be a syscall of any thread: undecided, or a decided
            # syscall whose thread is unknown.
            anywild = (tid == -1) & (~known | (kind > 0))
            prev, nxt_ok = _pairs(pos, tid, thread & ((known & (kind > 0)) | ~known), anywild)
            a, b = prev[nxt_ok], pos[nxt_ok]
            both = known[a] & known[b]
            a, b = a[both], b[both]
            if "syscall-pairing" in self.rules:
                bad[b[_unpaired(a, b, kind, scid, flags, has_ret)]] = True
                bad |= known & (kind == ENTRY) & has_ret
                bad |= _exec_outside(pos, known, kind, flags, tid)
        if self.serial and "syscall-pairing" in self.rules and not thread.any():
            # No thread ids: the serial syscalls' events, in window order, pair up as one
            # thread's would. An undecided position could still become the missing half, so a
            # pair with one between is not judged yet.
            member = known & ((flags & _F_SERIAL) > 0)
            prev, ok = _pairs(pos, np.zeros(n, np.int64), member, ~known)
            a, b = prev[ok], pos[ok]
            bad[b[_unpaired(a, b, kind, scid, flags, has_ret)]] = True
            first = np.flatnonzero(member)[:1]
            if self._before is not None and len(first) and known[:first[0]].all():
                # The pair across the seam: the last serial event before the window at index n.
                code = self._code(self._before)  # may grow the tables: look them up after
                kind_t, scid_t, _, flag_t = self._arrays()
                ext = [np.append(arr, table[code]) for arr, table in
                       ((kind, kind_t), (scid, scid_t), (flags, flag_t))]
                seam = _unpaired(np.array([n]), first, *ext, np.append(has_ret, False))
                bad[first[seam]] = True
        if "return-values" in self.rules:
            exits = np.flatnonzero(known & (kind == EXIT) & has_ret)
            if len(exits):
                bad[exits[~ret_ok(dom[exits], ret[exits])]] = True
        if "thread-lifecycle" in self.rules:
            bad |= _after_end(known, kind, flags, tid)
        if "thread-migration" in self.rules:
            placed = thread & (tid != 0) & ((known & (cpu >= 0)) | ~known)
            anywild = (tid == -1) & (~known | ((flags & _F_SWITCH) > 0))
            prev, ok = _pairs(pos, tid, placed, anywild)
            a, b = prev[ok], pos[ok]
            judged = known[a] & known[b] & (cpu[a] >= 0) & (cpu[b] >= 0)
            a, b = a[judged], b[judged]
            moved = (cpu[a] != cpu[b]) & ((flags[a] & _F_SWITCH) == 0)
            bad[b[moved]] = True
        return bad & known

    def allowed_event_mask(self, partial: dict, vocabulary) -> np.ndarray:
        """bool[L, V]: for each undecided position with a known thread, the event names of
        `vocabulary` it may take given that thread's previous decided syscall event (no
        second entry while one is pending, only the pending call's exit, no exit without a
        pending entry, no syscall after the thread ended). Other positions allow everything."""
        known, kind, scid, dom, flags, tid, cpu, ret, has_ret = self._decode(partial)
        v_codes = np.array([self._code(v) for v in vocabulary], np.int64)
        kind_t, scid_t, _, _ = self._arrays()
        v_kind, v_scid = kind_t[v_codes], scid_t[v_codes]
        n = len(known)
        mask = np.ones((n, len(v_codes)), bool)
        pos = np.arange(n)
        thread = tid != -1
        anywild = (tid == -1) & (~known | (kind > 0))
        member = thread & ((known & (kind > 0)) | ~known)
        prev, ok = _pairs(pos, tid, member, anywild)
        target = ok & ~known & known[np.maximum(prev, 0)]
        rows = pos[target]
        p = prev[target]
        pending = (kind[p] == ENTRY) & ((flags[p] & _F_NO_EXIT) == 0)
        ended = pending & ((flags[p] & _F_THREAD_END) > 0)
        if len(rows):
            is_entry = v_kind == ENTRY
            is_exit = v_kind == EXIT
            wrong_exit = is_exit[None, :] & ((v_scid[None, :] != scid[p][:, None]) & (v_scid[None, :] != 0))
            block = np.where(pending[:, None], is_entry[None, :] | wrong_exit, is_exit[None, :])
            block |= ended[:, None] & (v_kind > 0)[None, :]
            mask[rows] = ~block
        return mask


def _unpaired(a, b, kind, scid, flags, has_ret) -> np.ndarray:
    """For consecutive syscall events a → b of one thread (or of the serial syscalls): whether
    b breaks the pairing (an entry while a call is pending, an exit that closes nothing or the
    wrong call, anything after entering a call that ends the thread)."""
    ka, kb = kind[a], kind[b]
    no_exit = (ka == ENTRY) & ((flags[a] & _F_NO_EXIT) > 0)
    generic = (scid[a] == 0) | (scid[b] == 0)
    closes = (ka == ENTRY) & (kb == EXIT) & ((scid[a] == scid[b]) | generic)
    ended = (ka == ENTRY) & ((flags[a] & _F_THREAD_END) > 0) & ~(closes & ~has_ret[b])
    wrong = ((ka == ENTRY) & (kb == ENTRY) & ~no_exit) | ended
    wrong |= ((ka == EXIT) | no_exit) & (kb == EXIT) & ~closes
    wrong |= (ka == ENTRY) & (kb == EXIT) & ~closes & ~no_exit
    return wrong


def _exec_outside(pos, known, kind, flags, tid) -> np.ndarray:
    """Decided sched_process_exec events whose thread's previous decided syscall-or-exec event
    is not an execve/execveat entry (the checker's rule, rules/syscalls.py). Judged only in a
    window that holds a decided exec call's entry (a model of a recording without the execve
    syscall has none) and only where nothing undecided that could belong to the thread lies
    between."""
    out = np.zeros(len(known), bool)
    execs = known & ((flags & _F_EXEC) > 0)
    if not execs.any() or not (known & ((flags & _F_EXEC_CALL) > 0)).any():
        return out
    member = (tid != -1) & ((known & ((kind > 0) | execs)) | ~known)
    anywild = (tid == -1) & (~known | (kind > 0) | execs)
    prev, ok = _pairs(pos, tid, member, anywild)
    b = np.flatnonzero(execs & ok)
    a = prev[b]
    b = b[known[a]]
    a = prev[b]
    out[b[((flags[a] & _F_EXEC_CALL) == 0) | ((flags[a] & _F_EXEC) > 0)]] = True
    return out


def _rets(values, n):
    if values is None:
        return np.zeros(n, np.int64), np.zeros(n, bool)
    arr = np.asarray(values)
    if arr.dtype == object:
        has = np.fromiter((v is not None and v == v for v in arr), bool, n)
        out = np.zeros(n, np.int64)
        if has.any():
            out[has] = np.array([int(v) for v in arr[has]], np.int64)
        return out, has
    arr = arr.astype(np.float64, copy=False)
    has = np.isfinite(arr)
    # Decoded values may exceed int64 (unsigned words); clip so the cast is defined.
    return np.clip(np.where(has, arr, 0), -(2.0**63), 2.0**63 - 1024).astype(np.int64), has


def _pairs(pos, tid, member, anywild):
    """For member positions grouped by thread: the previous member of the same thread, and
    whether the pair is judgeable (same thread, no wildcard of unknown thread between)."""
    idx = pos[member]
    order = np.lexsort((idx, tid[idx]))
    idx = idx[order]
    prev = np.full(len(pos), -1, np.int64)
    ok = np.zeros(len(pos), bool)
    if len(idx) > 1:
        same = tid[idx[1:]] == tid[idx[:-1]]
        wild = np.concatenate([[0], np.cumsum(anywild)])
        clean = (wild[idx[1:]] - wild[idx[:-1] + 1]) == 0
        sel = same & clean
        prev[idx[1:][sel]] = idx[:-1][sel]
        ok[idx[1:][sel]] = True
    return prev, ok


def _after_end(known, kind, flags, tid) -> np.ndarray:
    """Decided syscall events of a thread after its decided exit (sched_process_exit or
    entering exit/exit_group) in the window, or that exit when two or more follow it."""
    ends = np.flatnonzero(known & ((flags & _F_THREAD_END) > 0) & (tid != -1))
    if not len(ends):
        return np.zeros(len(known), bool)
    end_tid = tid[ends]
    order = np.lexsort((ends, end_tid))
    end_tid, ends = end_tid[order], ends[order]
    first_tid, first = np.unique(end_tid, return_index=True)
    first_end = ends[first]
    sys_rows = np.flatnonzero(known & (kind > 0) & (tid != -1))
    i = np.searchsorted(first_tid, tid[sys_rows])
    i = np.minimum(i, len(first_tid) - 1)
    hit = (first_tid[i] == tid[sys_rows]) & (sys_rows > first_end[i])
    out = np.zeros(len(known), bool)
    # As repair does: an exit followed by two or more syscalls of its thread is the mistake
    # (a premature exit), so it is redrawn instead of everything after it.
    followers = np.bincount(i[hit], minlength=len(first_end))
    premature = followers >= 2
    out[first_end[premature]] = True
    out[sys_rows[hit & ~premature[i]]] = True
    return out

"""Thread lifecycle: a thread does nothing before it is created (sched_process_fork, or the
parent's clone/fork returning its tid), makes no syscall after it exits
(sched_process_exit, or entering exit/exit_group), and does nothing at all once its task is
freed (sched_process_free). The parent's clone/fork returns the child tid the fork event
names.

A dying thread still runs kernel code after sched_process_exit (closing files, waking its
parent, the final switch), so only syscalls count as activity after exit. Threads present
when tracing starts have no creation event and are fine; tids are reused, so a creation
starts a new life.
"""

from __future__ import annotations

import numpy as np

from tracesynth.constraints import syscall_table as sc
from tracesynth.constraints.rules.base import Edit, Findings, Rule
from tracesynth.constraints.rules.syscalls import creation_markers, pairing
from tracesynth.constraints.view import ENTRY, EXIT, TraceView, thread_keys

NONE, CREATE, EXITED, FREED = 0, 1, 2, 3
BEFORE, AFTER_EXIT, AFTER_FREE, CLONE_RET, TWICE = 1, 2, 3, 4, 5
REASONS = {
    BEFORE: "thread active before it was created (and after its previous life ended)",
    AFTER_EXIT: "syscall by a thread after it exited",
    AFTER_FREE: "activity of a thread whose task was already freed",
    CLONE_RET: "clone/fork returned a tid other than the child the fork event created",
    TWICE: "thread created again while its previous life never exited",
}


def _markers(view: TraceView):
    return view.memo("life-markers", lambda: _compute_markers(view))


def _compute_markers(view: TraceView):
    rows, tids, kinds = [], [], []
    c_rows, c_tids = creation_markers(view)
    rows.append(c_rows), tids.append(c_tids), kinds.append(np.full(len(c_rows), CREATE))
    for event, kind in (("sched_process_exit", EXITED), ("sched_process_free", FREED)):
        values, ok = view.field(event, "tid")
        if event == "sched_process_exit":
            # The exiting thread emits its own exit event: without a payload, the row's tid.
            bare = (view.ev_code == view.code(event)) & ~ok & (view.tid >= 0)
            values = np.where(bare, view.tid, values)
            ok = ok | bare
        r = np.flatnonzero(ok)
        rows.append(r), tids.append(values[r]), kinds.append(np.full(len(r), kind))
    ending = view.syscall_rows(sc.THREAD_ENDING)
    ending = ending[(view.kind[ending] == ENTRY) & (view.tid[ending] >= 0)]
    rows.append(ending), tids.append(view.tid[ending]), kinds.append(np.full(len(ending), EXITED))
    return np.concatenate(rows), np.concatenate(tids), np.concatenate(kinds).astype(np.int8)


class ThreadLifecycle(Rule):
    name = "thread-lifecycle"
    explanation = "no activity before a thread's creation, no syscall after its exit, nothing after it is freed"
    channels = ("event", "tid")

    def unmet_precondition(self, view):
        m_rows, _, _ = _markers(view)
        if not len(m_rows):
            return "trace shows no thread creation, exit or free"
        return None

    def analyse(self, view: TraceView):
        def compute():
            m_rows, m_tids, m_kinds = _markers(view)
            act_rows = np.flatnonzero(view.tid >= 0)
            act_tids = view.tid[act_rows]
            switch_in, ok = view.field("sched_switch", "next_tid")
            sw = np.flatnonzero(ok & (switch_in > 0))
            act_rows = np.concatenate([act_rows, sw])
            act_tids = np.concatenate([act_tids, switch_in[sw]])
            act_switch = np.concatenate([np.zeros(len(act_rows) - len(sw), bool), np.ones(len(sw), bool)])
            keep = act_tids > 0  # the idle task (tid 0) lives forever on every CPU
            act_rows, act_tids, act_switch = act_rows[keep], act_tids[keep], act_switch[keep]
            stride = view.n + 1
            both = thread_keys(np.concatenate([act_tids, m_tids]),
                               np.concatenate([act_rows, m_rows]), stride)
            a_keys, m_keys = both[: len(act_tids)], both[len(act_tids):]
            order = np.argsort(m_keys, kind="stable")
            m_keys, m_kinds, m_rows = m_keys[order], m_kinds[order], m_rows[order]
            m_rank = m_keys // stride
            a_rank = a_keys // stride
            # Effective state after each marker: a free while the tid is alive in a newer
            # life belongs to the previous incarnation and changes nothing.
            state = m_kinds.copy()
            last_rank, current = -1, NONE
            for i, (rank, kind) in enumerate(zip(m_rank.tolist(), m_kinds.tolist())):
                if rank != last_rank:
                    last_rank, current = rank, NONE
                if kind == FREED and current == CREATE:
                    state[i] = CREATE
                else:
                    current = kind
                    state[i] = kind
            idx = np.searchsorted(m_keys, a_keys, "left") - 1
            has_last = (idx >= 0) & (m_rank[np.maximum(idx, 0)] == a_rank)
            last = np.where(has_last, state[np.maximum(idx, 0)], NONE)
            nxt = idx + 1
            has_next = (nxt < len(m_keys)) & (m_rank[np.minimum(nxt, len(m_keys) - 1)] == a_rank)
            next_kind = np.where(has_next, m_kinds[np.minimum(nxt, len(m_keys) - 1)], NONE)
            prev_state = np.full(len(state), NONE, np.int8)
            same = np.zeros(len(state), bool)
            same[1:] = m_rank[1:] == m_rank[:-1]
            prev_state[1:][same[1:]] = state[:-1][same[1:]]
            twice = m_rows[(m_kinds == CREATE) & (prev_state == CREATE)]
            marker = np.where(has_last, m_rows[np.maximum(idx, 0)], -1)
            return dict(rows=act_rows, switch=act_switch, last=last, next=next_kind, twice=twice,
                        marker=marker)

        return view.memo("lifecycle", compute)

    def find(self, view: TraceView) -> Findings:
        a = self.analyse(view)
        rows, last, nxt = a["rows"], a["last"], a["next"]
        parts = []
        if view.has_event("sched_process_exit"):
            parts.append((rows[(nxt == CREATE) & (last == NONE)], BEFORE))
            parts.append((a["twice"], TWICE))
        # exit/exit_group's own exit without a return value is strace's "did not return"
        # (`exit_group(0) = ?`), not activity.
        entry = pairing(view)["entry_of"][rows]
        ending_ids = [i for i, name in enumerate(view.syscall_names) if name in sc.THREAD_ENDING]
        not_returned = ((view.kind[rows] == EXIT) & ~view.ret_valid[rows] & (entry >= 0)
                        & np.isin(view.scid[np.maximum(entry, 0)], ending_ids))
        is_syscall = (view.kind[rows] > 0) & ~a["switch"] & ~not_returned
        parts.append((rows[(last == EXITED) & is_syscall], AFTER_EXIT))
        parts.append((rows[last == FREED], AFTER_FREE))
        parts.append((self._clone_mismatch(view)[0], CLONE_RET))
        return Findings.of(parts, REASONS)

    def _clone_mismatch(self, view: TraceView) -> tuple[np.ndarray, np.ndarray]:
        """Parent clone/fork exits whose ret differs from the child of the fork event
        recorded during the call (rows, expected child tids)."""
        child, ok = view.field("sched_process_fork", "child_tid")
        forks = np.flatnonzero(ok & (view.tid >= 0))
        if not len(forks) or not view.has_ret:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        exits = view.syscall_rows(sc.CHILD_RETURNING)
        exits = exits[(view.kind[exits] == EXIT) & view.ret_valid[exits] & (view.ret[exits] > 0)]
        entry = pairing(view)["entry_of"][exits]
        exits, entry = exits[entry >= 0], entry[entry >= 0]
        stride = view.n + 1
        f_keys = np.sort(thread_keys(view.tid[forks], forks, stride))
        forks = f_keys % stride
        idx = np.searchsorted(f_keys, thread_keys(view.tid[exits], exits, stride)) - 1
        fork = forks[np.maximum(idx, 0)]
        same = (idx >= 0) & (view.tid[fork] == view.tid[exits]) & (fork > entry)
        bad = same & (child[fork] != view.ret[exits])
        return exits[bad], child[fork][bad]

    def fix(self, view: TraceView, found: Findings) -> list[Edit]:
        rows, expected = self._clone_mismatch(view)
        want = dict(zip(rows.tolist(), expected.tolist()))
        premature = self._premature_exits(view, found)
        edits = [Edit("drop", m, self.name, view.row_info(m)) for m in sorted(set(premature.values()))]
        for row, code in zip(found.rows.tolist(), found.codes.tolist()):
            if code == CLONE_RET and row in want:
                edits.append(Edit("set", row, self.name, {"ret": int(view.ret[row])}, {"ret": want[row]}))
            elif not (code == AFTER_EXIT and row in premature):
                edits.append(Edit("drop", row, self.name, view.row_info(row)))
        return edits

    def _premature_exits(self, view: TraceView, found: Findings) -> dict[int, int]:
        """{syscall row after exit: the exit row to drop instead} for exits followed by two or
        more syscalls of their thread: dropping the one exit (a generator's premature
        sched_process_exit or exit_group) is fewer edits than dropping all that follows it."""
        a = self.analyse(view)
        marker_of = dict(zip(a["rows"].tolist(), a["marker"].tolist()))
        after = [r for r, c in zip(found.rows.tolist(), found.codes.tolist()) if c == AFTER_EXIT]
        by_marker: dict[int, list[int]] = {}
        for row in after:
            m = marker_of.get(row, -1)
            if m >= 0:
                by_marker.setdefault(m, []).append(row)
        return {row: m for m, rows in by_marker.items() if len(rows) >= 2 for row in rows}


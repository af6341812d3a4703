"""CPU exclusivity: a CPU runs one thread at a time and a thread runs on one CPU at a time.

Two rules, for what a trace can show:
- ``cpu-switch`` (needs sched_switch payloads): on each CPU, `prev_tid` of a switch is the
  thread the previous switch put there; between two switches only the switched-in thread has
  events on that CPU; a thread is not switched in while it still runs elsewhere, nor
  switched out twice.
- ``thread-migration`` (needs only event, tid, cpu): a thread's events move to another CPU
  only after it was switched out (its last event on the old CPU is its sched_switch).

Threads seen only through switches and wakeups (SCOPE_NEUTRAL events) may run unseen: a
recording scoped to a process tree drops the events between outside threads. The rules judge
only threads the trace shows acting (`observed_threads`) and treat a CPU as running an unknown
thread after it switched to another one.

Before a CPU's first switch the running thread is unknown, which is not a violation. The
idle task (tid 0) runs on every CPU at once and is skipped where that matters. An exec by a
non-leader thread makes it take the leader's tid (sched_process_exec old_tid → tid), which
counts as a switch on that CPU.
"""

from __future__ import annotations

import json
from collections import Counter

import numpy as np

from tracesynth.constraints.rules.base import Edit, Findings, Rule
from tracesynth.constraints.view import TraceView, cpu_order, thread_keys

PREV_MISMATCH, FOREIGN, DOUBLE_IN, DOUBLE_OUT = 1, 2, 3, 4
REASONS = {
    PREV_MISMATCH: "sched_switch prev_tid is not the thread the CPU was running",
    FOREIGN: "event of a thread that is not the one running on this CPU",
    DOUBLE_IN: "thread switched in while still running on another CPU",
    DOUBLE_OUT: "thread switched out although it was not running",
}
MIGRATED = 1


def switch_state(view: TraceView):
    """Per row: the thread running on the row's CPU before the row (-1 unknown), and the
    switch rows with their prev/next tids (including exec tid takeovers)."""

    def compute():
        prev, ok_p = view.field("sched_switch", "prev_tid")
        nxt, ok_n = view.field("sched_switch", "next_tid")
        sw = np.flatnonzero(ok_p & ok_n & (view.cpu >= 0))
        ex, new_tid, old_tid = view.exec_tids()
        takeover = (new_tid != old_tid) & (view.cpu[ex] >= 0)
        ex, new_tid, old_tid = ex[takeover], new_tid[takeover], old_tid[takeover]
        srows = np.concatenate([sw, ex])
        s_prev = np.concatenate([prev[sw], old_tid])
        s_next = np.concatenate([nxt[sw], new_tid])
        is_exec = np.concatenate([np.zeros(len(sw), bool), np.ones(len(ex), bool)])
        o = np.argsort(srows, kind="stable")
        srows, s_prev, s_next, is_exec = srows[o], s_prev[o], s_next[o], is_exec[o]
        # Order all rows with a known CPU by (cpu, row); the running thread before each row is
        # the next_tid of the last switch strictly before it on that CPU.
        order = cpu_order(view.cpu, np.flatnonzero(view.cpu >= 0))
        is_switch = np.zeros(view.n, bool)
        is_switch[srows] = True
        # A thread that never shows an event of its own (besides switches) may run unseen:
        # recordings scoped to a process tree drop the switches between outside threads. After
        # a switch to such a thread the CPU's running thread is unknown, not assumed.
        seen = observed_threads(view)
        next_at = np.full(view.n, -1, np.int64)
        next_at[srows] = np.where(np.isin(s_next, seen), s_next, -1)
        pos = np.arange(len(order))
        last_sw = np.where(is_switch[order], pos, -1)
        last_sw = np.maximum.accumulate(last_sw) if len(order) else last_sw
        cpu_sorted = view.cpu[order]
        first_of_cpu = np.searchsorted(cpu_sorted, cpu_sorted, "left")
        before = np.full(len(order), -1, np.int64)
        before[1:] = last_sw[:-1]
        before = np.where(before >= first_of_cpu, before, -1)
        running = np.full(view.n, -1, np.int64)
        has = before >= 0
        running[order[has]] = next_at[order[before[has]]]
        return dict(running=running, srows=srows, prev=s_prev, next=s_next, is_exec=is_exec)

    return view.memo("switch-state", compute)


#: Events a recording scoped to a process tree keeps because of the *other* thread they
#: name (switched in, woken...), so their acting thread may be outside the tree.
SCOPE_NEUTRAL = ("sched_switch", "sched_wakeup", "sched_waking", "sched_wakeup_new",
                 "sched_migrate_task", "sched_process_free")


def observed_threads(view: TraceView) -> np.ndarray:
    """Tids that act in at least one event other than the SCOPE_NEUTRAL ones (sorted): the
    threads whose whole life the trace shows."""

    def compute():
        codes = [c for c in (view.code(e) for e in SCOPE_NEUTRAL) if c >= 0]
        own = (view.tid >= 0) & ~np.isin(view.ev_code, codes)
        return np.unique(view.tid[own])

    return view.memo("observed-threads", compute)


def _double(view: TraceView, st) -> tuple[np.ndarray, np.ndarray]:
    """Switch rows that switch a thread in twice, or out twice, in a row (tid 0 and threads
    never observed outside switches excepted)."""
    srows, sprev, snext = st["srows"], st["prev"], st["next"]
    rows = np.concatenate([srows, srows])
    tids = np.concatenate([sprev, snext])
    into = np.concatenate([np.zeros(len(srows), bool), np.ones(len(srows), bool)])
    keep = (tids > 0) & np.isin(tids, observed_threads(view))
    rows, tids, into = rows[keep], tids[keep], into[keep]
    # At one row the switch-out (prev) comes before the switch-in (next).
    order = np.lexsort((into, rows, tids))
    rows, tids, into = rows[order], tids[order], into[order]
    same = np.zeros(len(rows), bool)
    same[1:] = tids[1:] == tids[:-1]
    again = same.copy()
    again[1:] &= into[1:] == into[:-1]
    return rows[again & into], rows[again & ~into]


def _previous_out(view: TraceView, st) -> dict[int, int]:
    """For each switch row that switches a thread out twice: the row of the first switch-out."""
    srows, sprev, snext = st["srows"], st["prev"], st["next"]
    rows = np.concatenate([srows, srows])
    tids = np.concatenate([sprev, snext])
    into = np.concatenate([np.zeros(len(srows), bool), np.ones(len(srows), bool)])
    order = np.lexsort((into, rows, tids))
    rows, tids, into = rows[order], tids[order], into[order]
    twice = np.flatnonzero((tids[1:] == tids[:-1]) & ~into[1:] & ~into[:-1]) + 1
    return dict(zip(rows[twice].tolist(), rows[twice - 1].tolist()))


class CpuSwitch(Rule):
    name = "cpu-switch"
    explanation = "per CPU, sched_switch prev_tid is the running thread and only it has events there"
    channels = ("event", "cpu", "payload")
    needs_events = ("sched_switch",)

    def unmet_precondition(self, view):
        if not view.field("sched_switch", "next_tid")[1].any():
            return "sched_switch events carry no prev_tid/next_tid"
        return None

    def find(self, view: TraceView) -> Findings:
        st = switch_state(view)
        running = st["running"]
        srows = st["srows"]
        r_sw = running[srows]
        prev_bad = srows[(r_sw >= 0) & (st["prev"] != r_sw) & ~st["is_exec"]]
        is_switch = np.zeros(view.n, bool)
        is_switch[srows] = True
        foreign = np.flatnonzero((running >= 0) & (view.tid >= 0) & (view.tid != running) & ~is_switch)
        double_in, double_out = _double(view, st)
        return Findings.of([(prev_bad, PREV_MISMATCH), (foreign, FOREIGN), (double_in, DOUBLE_IN),
                            (double_out, DOUBLE_OUT)], REASONS)

    def fix(self, view: TraceView, found: Findings) -> list[Edit]:
        st = switch_state(view)
        running = st["running"]
        where_on: dict[int, int] = {}  # tid -> cpu it runs on, replayed in row order
        srow_set = dict(zip(st["srows"].tolist(), zip(st["prev"].tolist(), st["next"].tolist())))
        bad = dict(zip(found.rows.tolist(), found.codes.tolist()))
        pid_of = _pid_of(view)
        first_out = _previous_out(view, st)
        st_prev_of = dict(zip(st["srows"].tolist(), st["prev"].tolist()))
        stride = view.n + 1
        own = np.flatnonzero(view.tid > 0)
        thread_rows_keys = np.sort(thread_keys(view.tid[own], own, stride))
        thread_rows = thread_rows_keys % stride
        edits = []
        for row in sorted(set(bad) | set(srow_set)):
            code = bad.get(row)
            if code == DOUBLE_OUT and row in first_out:
                # The switch that put the thread back on a CPU was lost: insert it before the
                # thread's first event after its previous switch-out (or before this switch).
                tid = int(st_prev_of[row])
                lo = np.searchsorted(thread_rows_keys, tid * stride + first_out[row] + 1)
                at = int(thread_rows[lo]) if lo < len(thread_rows) and thread_rows_keys[lo] < tid * stride + row else row
                edits.append(Edit("insert", at, self.name, None, _switch_row(view, running, at, tid)))
            elif code in (PREV_MISMATCH, DOUBLE_OUT, DOUBLE_IN):
                payload = json.loads(view.table.column("payload")[row].as_py() or "{}")
                old = json.dumps(payload, separators=(",", ":"), sort_keys=True)
                if code == DOUBLE_IN:
                    payload["next_tid"] = 0
                    payload["next_comm"] = f"swapper/{int(view.cpu[row])}"
                else:
                    payload["prev_tid"] = int(running[row]) if running[row] >= 0 else 0
                new = json.dumps(payload, separators=(",", ":"), sort_keys=True)
                edits.append(Edit("set", row, self.name, {"payload": old}, {"payload": new}))
            elif code == FOREIGN:
                tid = int(view.tid[row])
                if tid in where_on and where_on[tid] != int(view.cpu[row]):
                    edits.append(Edit("set", row, self.name, {"cpu": int(view.cpu[row])},
                                      {"cpu": where_on[tid]}))
                else:
                    cur = int(running[row])
                    edits.append(Edit("set", row, self.name, {"tid": tid, "pid": pid_of.get(tid)},
                                      {"tid": cur, "pid": pid_of.get(cur)}))
            if row in srow_set:
                prev, nxt = srow_set[row]
                if where_on.get(prev) == int(view.cpu[row]):
                    del where_on[prev]
                where_on[nxt] = int(view.cpu[row])
        return edits


def _switch_row(view: TraceView, running: np.ndarray, at: int, tid: int) -> dict:
    """A sched_switch onto `tid`, on the CPU of row `at`, just before it (halfway in time)."""
    prev = int(running[at]) if running[at] >= 0 else 0
    cpu = int(view.cpu[at])
    name = view.proc_names[view.proc_code[at]] if view.tid[at] == tid and view.proc_code[at] >= 0 else None
    payload = {"prev_tid": prev, "next_tid": tid, "prev_state": 0,
               "prev_comm": f"swapper/{cpu}" if prev == 0 else None, "next_comm": name}
    return {"ts": view.ts_before(at), "cpu": cpu, "tid": prev, "pid": None, "procname": None,
            "event": "sched_switch", "ret": None,
            "payload": json.dumps({k: v for k, v in payload.items() if v is not None},
                                  separators=(",", ":"), sort_keys=True)}


def _pid_of(view: TraceView) -> dict[int, int | None]:
    known = (view.tid >= 0) & (view.pid >= 0)
    tids, first = np.unique(view.tid[known], return_index=True)
    return dict(zip(tids.tolist(), view.pid[known][first].tolist()))


class ThreadMigration(Rule):
    name = "thread-migration"
    explanation = "a thread's events move to another CPU only after the thread was switched out"
    channels = ("event", "tid", "cpu")
    needs_events = ("sched_switch",)

    def segments(self, view: TraceView):
        """Rows of each thread (tid > 0, CPU known) in order, cut into stints at the points
        where the thread is switched out."""

        def compute():
            rows = np.flatnonzero((view.tid > 0) & (view.cpu >= 0)
                                  & np.isin(view.tid, observed_threads(view)))
            prev, ok = view.field("sched_switch", "prev_tid")
            if ok.any():
                outs = np.flatnonzero(ok & (prev > 0))
                out_tids = prev[outs]
            else:
                outs = view.rows_of("sched_switch")
                outs = outs[view.tid[outs] > 0]
                out_tids = view.tid[outs]
            stride = 2 * (view.n + 1)
            keys = thread_keys(np.concatenate([view.tid[rows], out_tids]),
                               np.concatenate([2 * rows, 2 * outs + 1]), stride)
            is_out = np.concatenate([np.zeros(len(rows), bool), np.ones(len(outs), bool)])
            order = np.argsort(keys)
            keys, is_out = keys[order], is_out[order]
            thread = keys // stride
            new = np.ones(len(keys), bool)
            new[1:] = (thread[1:] != thread[:-1]) | is_out[:-1]
            stint = np.cumsum(new)
            ev_rows = (keys[~is_out] % stride) // 2
            return ev_rows, stint[~is_out]

        return view.memo("migration-stints", compute)

    def find(self, view: TraceView) -> Findings:
        rows, stint = self.segments(view)
        cpu = view.cpu[rows]
        moved = np.zeros(len(rows), bool)
        moved[1:] = (stint[1:] == stint[:-1]) & (cpu[1:] != cpu[:-1])
        return Findings.of([(rows[moved], MIGRATED)],
                           {MIGRATED: "thread changed CPU without being switched out"})

    def fix(self, view: TraceView, found: Findings) -> list[Edit]:
        """Move the events of each stint to the stint's most common CPU (fewest moves)."""
        rows, stint = self.segments(view)
        position = np.empty(view.n, np.int64)
        position[rows] = np.arange(len(rows))
        edits = []
        for s in np.unique(stint[position[found.rows]]).tolist():
            members = np.arange(np.searchsorted(stint, s, "left"), np.searchsorted(stint, s, "right"))
            cpus = view.cpu[rows[members]]
            counts = Counter(cpus.tolist())
            best = max(counts, key=lambda c: (counts[c], -c))
            for i in members[cpus != best].tolist():
                r = int(rows[i])
                edits.append(Edit("set", r, self.name, {"cpu": int(view.cpu[r])}, {"cpu": best}))
        return edits

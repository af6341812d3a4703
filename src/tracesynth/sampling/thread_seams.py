"""Whole rows walked through training, kept consistent across the walk's jumps (`resample --channels full`).

A walk (`span_splice.resample`) jumps from one place in training to another where the last events
match. With event types and times only that is the whole story; with whole rows it is not: the
place jumped to has other threads running on the CPUs, other thread ids, other syscalls pending,
and copying its rows as they are broke 464-533 rules per 1,000 events on build (a CPU's events
from a thread no switch put there, threads acting that were never created in the output...).

Two things keep the rows consistent:

- `machine_states`: per training event, a label of the machine after it: on every CPU, the process
  name of the thread running there, the last event that CPU showed, that thread's last syscall
  event (an entry: it is inside that call, and for a read or write the count it asked for, since
  the call returns at most that -- gzip returned 5,549 from a 4,061-byte `write` where a jump
  landed inside the call; an exit: whether the call failed, since what a program does after an
  `openat` that failed is try the next path and after one that succeeded read the file) and
  whether it has exited (a dying thread still runs until its last switch); which processes are
  between a fork and its return; and which calls the threads on no CPU wait in, by process name
  (pybench's harness sleeps in `vfork` while its child runs). A jump is allowed only between
  places with the same label (`Training(states=...)`), so the far side's threads do what the
  output's did, by name and by syscall.
- `ThreadMap`: thread ids renamed across each jump: the far side's thread running on each CPU takes
  the id of the output's thread on that CPU, and each far thread waiting in a call the id of an
  output thread waiting in the same call, so switches, wakeups and syscall pairs continue on the
  same thread; a thread the far side has that the output has not met keeps its own id where the
  output has not used it, else a fresh one. Ids in the row (tid, pid), in the payload
  (sched_switch prev/next, fork parent/child, wakeup, exit, exec, wait4's upid, prlimit64's pid)
  and in clone/fork's return value are renamed alike; that return names the child the output's
  fork event created.

Left as they are: what the training recordings themselves break (a lost `sched_switch` leaves a
thread acting on a CPU no switch put it on: every bundled workload has a few, sqlite 13-16 per
run, one fileio run 181; the walk copies them with their rows). `benchmarks/full_walk_rules.py`
prints the walk's breaks beside the training runs' own.

Written by hand: no tracing library renames threads across a splice of two recordings.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

# Payload fields that hold a thread (or thread-group) id; 0 and negative values are not threads
# (the idle task, "any child", "this process").
TID_FIELDS = ("prev_tid", "next_tid", "child_tid", "parent_tid", "tid", "old_tid", "upid", "pid")
CHILD_RETURNS = frozenset({"syscall_exit_clone", "syscall_exit_clone3", "syscall_exit_fork", "syscall_exit_vfork"})
UNKNOWN = -1


def _runs_on(current: np.ndarray, column: int, tid: int) -> None:
    """`tid` now runs on CPU `column` and on no other (a thread that moved leaves its old CPU)."""
    if tid > 0:
        current[current == tid] = UNKNOWN
    if tid >= 0:
        current[column] = tid


def _now_running(event: str, tid: int, payload: str | None) -> int:
    """The thread on the row's CPU after the row: a sched_switch's next_tid, else the row's own."""
    if event == "sched_switch" and payload:
        return int(json.loads(payload).get("next_tid", tid))
    return tid


@dataclass
class Machine:
    """What `machine_states` reads off the training rows (row i: after training row i)."""

    labels: np.ndarray  # the state label: rows that share one may be jumped between
    running: np.ndarray  # (rows, CPUs): the thread on each CPU
    cpus: np.ndarray  # the CPU ids, the columns of `running`
    waiting: list[tuple[tuple[int, str, str], ...]]  # distinct sets of threads inside a syscall and on
    # no CPU, each (tid, process name, entry event), sorted by name and entry
    waiting_at: np.ndarray  # per row, its set in `waiting`


def _call(event: str, payload: str | None) -> str:
    """A syscall event as the state label holds it: an entry with the count it asked for where it
    has one (`read`, `write`...: its return is bounded by it, and a jump from inside a 4,061-byte
    write to inside a 5,549-byte one returned more than was asked, gzip)."""
    if payload and '"count":' in payload and event.startswith("syscall_entry_"):
        return f"{event}#{json.loads(payload).get('count')}"
    return event


def machine_states(tables: list[pa.Table]) -> Machine:
    """The machine after each row of training runs `tables` (concatenated in this order). Two rows
    share a label when every CPU runs a thread of the same process name, in the same syscall (or
    none; a read or write asking the same count; where it returned, alike failed or not) and alike
    exited or not, and last showed the same
    event type; the same processes are between a fork and its return; and the threads on no CPU
    wait in the same calls (by process name)."""
    cpus = np.unique(np.concatenate([t.column("cpu").drop_null().to_numpy().astype(np.int64) for t in tables]))
    running, labels, waiting_at = [], [], []
    vocabulary: dict[tuple, int] = {}
    waiting: dict[tuple, int] = {}
    for table in tables:
        cpu = table.column("cpu").fill_null(-1).to_numpy().astype(np.int64)
        events = table.column("event").to_numpy(zero_copy_only=False)
        tids = table.column("tid").fill_null(-1).to_numpy()
        names = table.column("procname").fill_null("").to_pylist()
        payload = table.column("payload").to_pylist()
        failed = table.column("ret").fill_null(0).to_numpy() < 0
        name_of: dict[int, str] = {}  # each thread's process name so far (exec changes it)
        last = [""] * len(cpus)
        syscall: dict[int, str] = {}  # each thread's last syscall event (an entry: it is inside that
        # call; an exit marked "!" where the call failed: what a program does next depends on it)
        inside: dict[int, str] = {}  # threads inside a syscall: its entry
        exited: set[int] = set()
        forking: dict[int, str] = {}  # parents whose fork event came and whose clone/fork has not returned
        column = np.searchsorted(cpus, cpu)
        run_labels = np.empty(len(cpu), dtype=np.int64)
        run_waiting = np.empty(len(cpu), dtype=np.int64)
        after = np.full((len(cpu), len(cpus)), UNKNOWN, dtype=np.int64)  # who runs on each CPU after each row
        current = np.full(len(cpus), UNKNOWN, dtype=np.int64)
        asleep = None  # the waiting set after the row, where unchanged since it was last worked out
        for i in range(len(cpu)):
            event, tid = events[i], int(tids[i])
            if cpu[i] >= 0:
                last[column[i]] = event
                now = _now_running(event, tid, payload[i])
                if current[column[i]] != now:
                    asleep = None
                _runs_on(current, column[i], now)
            after[i] = current
            if tid >= 0 and names[i]:
                name_of[tid] = names[i]
            if event.startswith("syscall_"):
                call = _call(event, payload[i])
                syscall[tid] = call + "!" if failed[i] else call
                if event.startswith("syscall_entry_"):
                    inside[tid] = call
                elif inside.pop(tid, None) is not None and tid not in current:
                    asleep = None
            elif event == "sched_process_exit":
                exited.add(tid)
                inside.pop(tid, None)
                asleep = None
            elif event == "sched_process_fork" and payload[i]:
                fields = json.loads(payload[i])
                child = int(fields.get("child_tid", -1))
                exited.discard(child)
                syscall.pop(child, None)
                inside.pop(child, None)
                forking[int(fields.get("parent_tid", tid))] = name_of.get(int(fields.get("parent_tid", tid)), "?")
            if event in CHILD_RETURNS:
                forking.pop(tid, None)
            if asleep is None:
                on_cpu = set(current.tolist())
                asleep = tuple(sorted(((t, name_of.get(t, "?"), e) for t, e in inside.items() if t not in on_cpu),
                                      key=lambda w: (w[1], w[2], w[0])))
                asleep_id = waiting.setdefault(asleep, len(waiting))
                asleep_key = tuple((n, e) for _, n, e in asleep)  # the label's part: calls by name, not ids
            run_waiting[i] = asleep_id
            cpus_now = tuple((name_of.get(int(t), "?"), e, syscall.get(int(t), ""), int(t) in exited)
                             if t > 0 else (int(t), e) for t, e in zip(after[i], last))
            key = (cpus_now, tuple(sorted(forking.values())), asleep_key)
            run_labels[i] = vocabulary.setdefault(key, len(vocabulary))
        running.append(after)
        labels.append(run_labels)
        waiting_at.append(run_waiting)
    return Machine(np.concatenate(labels), np.concatenate(running), cpus, list(waiting), np.concatenate(waiting_at))


class ThreadMap:
    """Renames a walked sequence of training rows' thread ids so that they stay one consistent set
    of threads across the walk's jumps (see module)."""

    def __init__(self, machine: Machine, run_of):
        self.machine, self.running, self.cpus, self.run_of = machine, machine.running, machine.cpus, run_of
        self.to_out: dict[tuple[int, int], int] = {}  # (training run, tid) -> output tid
        self.from_out: dict[int, tuple[int, int]] = {}
        self.used: set[int] = set()
        self.next_fresh = int(max(self.running.max(initial=0), 0)) + 1

    def _bind(self, source: tuple[int, int], out: int) -> None:
        old = self.from_out.get(out)
        if old is not None and old != source:
            del self.to_out[old]
        previous = self.to_out.get(source)
        if previous is not None and previous != out:
            self.from_out.pop(previous, None)
        self.to_out[source] = out
        self.from_out[out] = source
        self.used.add(out)

    def tid(self, run: int, tid: int) -> int:
        if tid <= 0:
            return tid
        source = (run, tid)
        if source not in self.to_out:
            out = tid if tid not in self.used else self._fresh()
            self._bind(source, out)
        return self.to_out[source]

    def forget(self, run: int, tid: int) -> None:
        """Training thread (`run`, `tid`) has no output id any more (the next use draws one)."""
        out = self.to_out.pop((run, tid), None)
        if out is not None:
            del self.from_out[out]

    def release(self, out: int) -> None:
        """Output thread `out` is gone (switched out for the last time after its exit, or freed): the
        training thread it stood for, met again after a jump back to before its end, becomes a new
        thread, not the dead one."""
        source = self.from_out.pop(out, None)
        if source is not None:
            del self.to_out[source]

    def _child(self, run: int, child: int, forked: int | None) -> int:
        """The output id clone/fork returns for training child (`run`, `child`): the child the
        parent's fork event created in the output (`forked`), which a jump between the fork and
        its return may have given another training thread's id (build: a walk that loops through
        a compiler run meets its parent's fork once, its return many times). The id is not bound
        to the far child: the output's child may be running under it, or already gone."""
        return self.tid(run, child) if forked is None else forked

    def _fresh(self) -> int:
        while self.next_fresh in self.used:
            self.next_fresh += 1
        return self.next_fresh

    def jump(self, position: int, out_running: np.ndarray, out_waiting: dict[int, tuple[str, str]]) -> None:
        """The walk goes on at training row `position` (after a jump): the thread running on each
        CPU there takes the id of the output's thread on that CPU, and each thread waiting in a
        syscall there the id of an output thread waiting in the same call (`out_waiting`: output
        tid -> (process name, entry), threads on no CPU; the jump's label says the two sides wait
        alike), so that the calls return on the threads that made them."""
        run = int(self.run_of(position))
        if position == 0 or int(self.run_of(position - 1)) != run:
            return  # a run's start: its threads are new to the output
        for source, out in zip(self.running[position - 1], out_running):
            if source > 0 and out > 0:
                self._bind((run, int(source)), int(out))
        outs: dict[tuple[str, str], list[int]] = {}
        for out, call in sorted(out_waiting.items()):
            if out not in out_running:
                outs.setdefault(call, []).append(out)
        for source, name, entry in self.machine.waiting[self.machine.waiting_at[position - 1]]:
            free = outs.get((name, entry))
            if free:
                self._bind((run, source), free.pop(0))

    def rename(self, table: pa.Table, rows: np.ndarray) -> pa.Table:
        """`table` (the training rows `rows`, in walk order) with its threads renamed."""
        tid = table.column("tid").fill_null(-1).to_numpy().astype(np.int64).copy()
        pid = table.column("pid").fill_null(-1).to_numpy().astype(np.int64).copy()
        ret = table.column("ret").to_pylist()
        cpu = table.column("cpu").fill_null(-1).to_numpy().astype(np.int64)
        events = table.column("event").to_numpy(zero_copy_only=False)
        payload = table.column("payload").to_pylist()
        column = np.searchsorted(self.cpus, cpu)
        runs = self.run_of(rows)
        out_running = np.full(len(self.cpus), UNKNOWN, dtype=np.int64)
        exited: set[int] = set()  # output threads that exited and still run until their last switch
        children: dict[int, int] = {}  # output parent -> the child its last fork event created
        inside: dict[int, tuple[str, str]] = {}  # output threads inside a syscall: (process name, entry)
        names = table.column("procname").fill_null("").to_pylist()
        for i in range(len(rows)):
            if i and rows[i] != rows[i - 1] + 1:
                self.jump(int(rows[i]), out_running, inside)
            run = int(runs[i])
            tid[i], pid[i] = self.tid(run, int(tid[i])), self.tid(run, int(pid[i]))
            event, renamed = events[i], {}
            if payload[i] and "id" in payload[i]:
                fields = json.loads(payload[i])
                if event == "sched_process_fork":  # a creation starts a new life: a jump back to
                    # before it may have met the child already, under an id that is not its now
                    self.forget(run, int(fields.get("child_tid", -1)))
                renamed = {k: self.tid(run, int(v)) if k in TID_FIELDS and isinstance(v, int) else v
                           for k, v in fields.items()}
                if renamed != fields:
                    payload[i] = json.dumps(renamed, separators=(",", ":"))
            if event == "sched_process_fork" and "child_tid" in renamed:
                children[int(tid[i])] = int(renamed["child_tid"])
            if event in CHILD_RETURNS and ret[i] is not None and ret[i] > 0:
                ret[i] = self._child(run, int(ret[i]), children.pop(int(tid[i]), None))
            if event.startswith("syscall_entry_"):
                inside[int(tid[i])] = (names[i], _call(event, payload[i]))
            elif event.startswith("syscall_exit_"):
                inside.pop(int(tid[i]), None)
            if event == "sched_process_exit" and payload[i]:
                exited.add(int(renamed.get("tid", tid[i])))
                inside.pop(int(renamed.get("tid", tid[i])), None)
            elif event == "sched_process_free" and "tid" in renamed or \
                    event == "sched_switch" and int(renamed.get("prev_tid", -1)) in exited:
                gone = int(renamed["tid" if event == "sched_process_free" else "prev_tid"])
                exited.discard(gone)
                self.release(gone)  # its last switch (or its freeing): the thread is gone
            if cpu[i] >= 0:
                running = int(renamed.get("next_tid", tid[i])) if event == "sched_switch" else int(tid[i])
                _runs_on(out_running, column[i], running)
        nulls = {name: table.column(name).is_null().to_numpy(zero_copy_only=False) for name in ("tid", "pid")}
        for name, values in (("tid", tid), ("pid", pid)):
            array = pa.array(values, pa.int64(), mask=nulls[name])
            table = table.set_column(table.schema.get_field_index(name), name, array)
        table = table.set_column(table.schema.get_field_index("ret"), "ret", pa.array(ret, pa.int64()))
        return table.set_column(table.schema.get_field_index("payload"), "payload", pa.array(payload, pa.string()))

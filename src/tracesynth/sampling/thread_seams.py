"""Whole rows walked through training, kept consistent across the walk's jumps (`resample --channels full`).

A walk (`span_splice.resample`) jumps from one place in training to another where the last events
match. With event types and times only that is the whole story; with whole rows it is not: the
place jumped to has other threads running on the CPUs, other thread ids, other syscalls pending,
and copying its rows as they are broke 464-533 rules per 1,000 events on build (a CPU's events
from a thread no switch put there, threads acting that were never created in the output...).

Two things keep the rows consistent:

- `machine_states`: per training event, a label of the machine after it: on every CPU, the process
  name of the thread running there, the last event that CPU showed, that thread's last syscall
  event (an entry: it is inside that call) and whether it has exited (a dying thread still runs
  until its last switch), and which processes are between a fork and its return (the parent's
  clone returns the child the fork event named). A jump is allowed only between places with the same label
  (`Training(states=...)`), so the thread running on each CPU on the far side does what the
  output's did, by name and by syscall.
- `ThreadMap`: thread ids renamed across each jump: the far side's thread running on each CPU takes
  the id of the output's thread on that CPU, so switches, wakeups and syscall pairs continue on
  the same thread; a thread the far side has that the output has not met keeps its own id where
  the output has not used it, else a fresh one. Ids in the row (tid, pid), in the payload
  (sched_switch prev/next, fork parent/child, wakeup, exit, exec, wait4's upid, prlimit64's pid)
  and in clone/fork's return value (the child) are renamed alike.

Written by hand: no tracing library renames threads across a splice of two recordings.
"""

from __future__ import annotations

import json

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


def machine_states(tables: list[pa.Table]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For training runs `tables` (concatenated in this order): (state label after each row,
    thread running on each CPU after each row, the CPU ids). Two rows share a label when every CPU
    runs a thread of the same process name, in the same syscall (or none) and alike exited or not,
    and last showed the same event type."""
    cpus = np.unique(np.concatenate([t.column("cpu").drop_null().to_numpy().astype(np.int64) for t in tables]))
    running, labels = [], []
    vocabulary: dict[tuple, int] = {}
    for table in tables:
        cpu = table.column("cpu").fill_null(-1).to_numpy().astype(np.int64)
        events = table.column("event").to_numpy(zero_copy_only=False)
        tids = table.column("tid").fill_null(-1).to_numpy()
        names = table.column("procname").fill_null("").to_pylist()
        payload = table.column("payload").to_pylist()
        name_of: dict[int, str] = {}  # each thread's process name so far (exec changes it)
        last = [""] * len(cpus)
        syscall: dict[int, str] = {}  # each thread's last syscall event (an entry: it is inside that call)
        exited: set[int] = set()
        forking: dict[int, str] = {}  # parents whose fork event came and whose clone/fork has not returned
        column = np.searchsorted(cpus, cpu)
        run_labels = np.empty(len(cpu), dtype=np.int64)
        after = np.full((len(cpu), len(cpus)), UNKNOWN, dtype=np.int64)  # who runs on each CPU after each row
        current = np.full(len(cpus), UNKNOWN, dtype=np.int64)
        for i in range(len(cpu)):
            event, tid = events[i], int(tids[i])
            if cpu[i] >= 0:
                last[column[i]] = event
                _runs_on(current, column[i], _now_running(event, tid, payload[i]))
            after[i] = current
            if tid >= 0 and names[i]:
                name_of[tid] = names[i]
            if event.startswith("syscall_"):
                syscall[tid] = event
            elif event == "sched_process_exit":
                exited.add(tid)
            elif event == "sched_process_fork" and payload[i]:
                fields = json.loads(payload[i])
                child = int(fields.get("child_tid", -1))
                exited.discard(child)
                syscall.pop(child, None)
                forking[int(fields.get("parent_tid", tid))] = name_of.get(int(fields.get("parent_tid", tid)), "?")
            if event in CHILD_RETURNS:
                forking.pop(tid, None)
            cpus_now = tuple((name_of.get(int(t), "?"), e, syscall.get(int(t), ""), int(t) in exited)
                             if t > 0 else (int(t), e) for t, e in zip(after[i], last))
            key = (cpus_now, tuple(sorted(forking.values())))
            run_labels[i] = vocabulary.setdefault(key, len(vocabulary))
        running.append(after)
        labels.append(run_labels)
    return np.concatenate(labels), np.concatenate(running), cpus


class ThreadMap:
    """Renames a walked sequence of training rows' thread ids so that they stay one consistent set
    of threads across the walk's jumps (see module)."""

    def __init__(self, running: np.ndarray, cpus: np.ndarray, run_of):
        self.running, self.cpus, self.run_of = running, cpus, run_of
        self.to_out: dict[tuple[int, int], int] = {}  # (training run, tid) -> output tid
        self.from_out: dict[int, tuple[int, int]] = {}
        self.used: set[int] = set()
        self.next_fresh = int(max(running.max(initial=0), 0)) + 1

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

    def _fresh(self) -> int:
        while self.next_fresh in self.used:
            self.next_fresh += 1
        return self.next_fresh

    def jump(self, position: int, out_running: np.ndarray) -> None:
        """The walk goes on at training row `position` (after a jump): the thread running on each
        CPU there takes the id of the output's thread on that CPU."""
        run = int(self.run_of(position))
        if position == 0 or int(self.run_of(position - 1)) != run:
            return  # a run's start: its threads are new to the output
        for source, out in zip(self.running[position - 1], out_running):
            if source > 0 and out > 0:
                self._bind((run, int(source)), int(out))

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
        for i in range(len(rows)):
            if i and rows[i] != rows[i - 1] + 1:
                self.jump(int(rows[i]), out_running)
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
            if event in CHILD_RETURNS and ret[i] is not None and ret[i] > 0:
                ret[i] = self.tid(run, int(ret[i]))
            if event == "sched_process_exit" and payload[i]:
                exited.add(int(renamed.get("tid", tid[i])))
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

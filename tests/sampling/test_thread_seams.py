"""Whole rows walked through training stay one consistent machine across the walk's jumps
(sampling/thread_seams.py): jumps only between places whose CPUs run alike, threads renamed."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

import tracesynth.datasets as ds
from tracesynth.constraints import check
from tracesynth.generators.resample import Resample
from tracesynth.sampling.span_splice import Training
from tracesynth.sampling.thread_seams import ThreadMap, machine_states
from tracesynth.schema import SCHEMA


def _table(rows):
    """rows: (cpu, tid, procname, event, payload dict or None)."""
    cols = {f.name: [] for f in SCHEMA}
    for i, (cpu, tid, name, event, payload) in enumerate(rows):
        values = {"ts": 1000 + i, "cpu": cpu, "tid": tid, "pid": tid, "procname": name, "event": event, "ret": None,
                  "payload": json.dumps(payload, separators=(",", ":")) if payload else None}
        for k, v in values.items():
            cols[k].append(v)
    return pa.table(cols, schema=SCHEMA)


def _switch(cpu, prev, prev_name, nxt, nxt_name):
    return (cpu, prev, prev_name, "sched_switch",
            {"next_comm": nxt_name, "next_tid": nxt, "prev_comm": prev_name, "prev_state": 0, "prev_tid": prev})


def test_states_label_what_every_cpu_runs_and_the_threads_syscall():
    a = _table([(0, 10, "sh", "syscall_entry_read", None), (1, 20, "cc1", "syscall_entry_mmap", None),
                (0, 10, "sh", "syscall_exit_read", None)])
    b = _table([(0, 77, "sh", "syscall_entry_read", None), (1, 88, "cc1", "syscall_entry_mmap", None),
                (1, 88, "cc1", "syscall_exit_mmap", None)])
    labels, running, cpus = machine_states([a, b])
    assert cpus.tolist() == [0, 1]
    assert running[1].tolist() == [10, 20] and running[4].tolist() == [77, 88]
    # after the second row both runs have an sh in read on CPU 0 and a cc1 in mmap on CPU 1: one label,
    # whatever the thread ids; after the third they differ (sh left read / cc1 left mmap)
    assert labels[1] == labels[4] and labels[2] != labels[5] and labels[0] != labels[1]


def test_a_thread_that_moves_leaves_its_old_cpu():
    t = _table([(0, 10, "sh", "syscall_entry_read", None), (1, 10, "sh", "syscall_exit_read", None)])
    _, running, _ = machine_states([t])
    assert running[1].tolist() == [-1, 10]


def test_the_far_sides_threads_take_the_outputs_ids_at_a_jump():
    a = _table([(0, 10, "sh", "syscall_entry_read", None), (0, 10, "sh", "syscall_exit_read", None)])
    b = _table([(0, 77, "sh", "syscall_entry_read", None), (0, 77, "sh", "syscall_exit_read", None),
                _switch(0, 77, "sh", 78, "cc1"), (0, 78, "cc1", "sched_process_fork",
                                                   {"child_tid": 10, "parent_tid": 78, "child_comm": "cc1"})])
    _, running, cpus = machine_states([a, b])
    training = Training([(np.zeros(2, np.int64), np.ones(2, np.int64)), (np.zeros(4, np.int64), np.ones(4, np.int64))])
    rows = np.array([0, 3, 4, 5])  # a's first row, then b from its second on
    table = pa.concat_tables([a, b]).take(pa.array(rows))
    out = ThreadMap(running, cpus, training.run_of).rename(table, rows)
    tids = out.column("tid").to_pylist()
    assert tids[:2] == [10, 10]  # b's 77 goes on as the output's 10: its read returns on the same thread
    assert out.column("pid").to_pylist()[:2] == [10, 10]
    switch = json.loads(out.column("payload")[2].as_py())
    assert switch["prev_tid"] == 10 and switch["next_tid"] == 78
    # b's child 10 is not the output's 10 (a thread already in use): it gets a fresh id
    fork = json.loads(out.column("payload")[3].as_py())
    assert fork["parent_tid"] == 78 and fork["child_tid"] not in (10, 77, 78)


@pytest.fixture(scope="module")
def build():
    train = [ds.load("build", r) for r in (1, 2)]
    return train, Resample(channels="full", random_state=0).fit(train)


@pytest.mark.parametrize("seed", [0, 1])
def test_full_walk_on_build_breaks_almost_no_rule(build, seed):
    """Rows copied as they were broke 464-533 rules per 1,000 events here (a CPU's events from a
    thread no switch put there, threads never created); renamed, a handful per trace remain (an
    fd or a fork a sleeping thread holds across a jump)."""
    train, generator = build
    trace = generator.sample(32768, seed=seed)
    assert check(trace).per_1000 < 2.0
    # apart from thread ids (row, payload, a clone's return), every row is a training row
    def key(r):
        payload = {k: v for k, v in json.loads(r["payload"]).items() if "tid" not in k and "pid" not in k} \
            if r["payload"] else None
        ret = None if r["event"].startswith("syscall_exit_clone") or r["event"].endswith("fork") else r["ret"]
        return (r["cpu"], r["procname"], r["event"], ret, json.dumps(payload, sort_keys=True))
    rows = {key(r) for t in train for r in t.events.to_pylist()}
    assert all(key(r) in rows for r in trace.events.to_pylist())
    # the walk still leaves its run: more than one training run's threads, or jumps within one
    assert trace.meta.extra["copy_share_256_one_run"] < 0.9


def test_a_fork_met_again_after_a_jump_back_creates_a_new_thread():
    """A walk that met a child thread and then jumps back to before its fork: the fork creates a
    new thread, not the one already acting (else: active before it was created; build with run 1
    held out broke 22 rules per 1,000 events so)."""
    t = _table([(0, 5, "sh", "syscall_entry_clone", None),
                (0, 5, "sh", "sched_process_fork", {"child_tid": 9, "parent_tid": 5, "child_comm": "sh"}),
                (0, 9, "sh", "syscall_entry_read", None)])
    _, running, cpus = machine_states([t])
    training = Training([(np.zeros(3, np.int64), np.ones(3, np.int64))])
    rows = np.array([2, 0, 1])  # the child acting, then back to its parent's fork
    out = ThreadMap(running, cpus, training.run_of).rename(t.take(pa.array(rows)), rows)
    first = out.column("tid")[0].as_py()
    child = json.loads(out.column("payload")[2].as_py())["child_tid"]
    assert first == 9 and child not in (9, 5)

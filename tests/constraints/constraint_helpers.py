"""Helpers for the constraint tests: real traces (shared LTTng, bundled dataset) and small
constructed traces written as readable row lists."""

from __future__ import annotations

import json

import pytest

from conftest import shared_trace


def build(rows, **meta):
    """A Trace from rows given as dicts (missing columns are null; payload dicts → JSON).
    `ts` defaults to 1000 * (index + 1)."""
    from tracesynth import Trace, TraceMeta

    cols = {c: [] for c in ("ts", "cpu", "tid", "pid", "procname", "event", "ret", "payload")}
    for i, row in enumerate(rows):
        for c in cols:
            value = row.get(c)
            if c == "ts" and value is None:
                value = 1000 * (i + 1)
            if c == "payload" and isinstance(value, dict):
                value = json.dumps(value, separators=(",", ":"), sort_keys=True)
            cols[c].append(value)
    return Trace.from_pydict(cols, TraceMeta(source_format="test", **meta))


def sc(name, kind, tid=1, cpu=0, ret=None, pid=None, procname="app", **payload):
    """A syscall entry (kind='entry') or exit (kind='exit') row."""
    prefix = "syscall_entry_" if kind == "entry" else "syscall_exit_"
    return {"event": prefix + name, "tid": tid, "pid": pid if pid is not None else tid,
            "cpu": cpu, "procname": procname, "ret": ret, "payload": payload or None}


def call(name, ret, tid=1, cpu=0, pid=None, procname="app", **payload):
    """An entry/exit pair."""
    return [sc(name, "entry", tid, cpu, None, pid, procname, **payload),
            sc(name, "exit", tid, cpu, ret, pid, procname)]


def switch(prev, nxt, cpu=0, prev_comm="a", next_comm="b"):
    return {"event": "sched_switch", "tid": prev, "cpu": cpu, "procname": prev_comm,
            "payload": {"prev_tid": prev, "next_tid": nxt, "prev_comm": prev_comm,
                        "next_comm": next_comm, "prev_state": 0}}


@pytest.fixture(scope="session")
def many_threads():
    return shared_trace("many-threads")


@pytest.fixture(scope="session")
def bug446190():
    return shared_trace("bug446190")


@pytest.fixture(scope="session")
def gzip_run():
    import tracesynth.datasets as ds

    if "gzip" not in ds.workloads():
        pytest.skip("bundled dataset gzip not present")
    return ds.load("gzip", run=1)


@pytest.fixture(scope="session")
def dataset_runs():
    """One run of every bundled workload."""
    import tracesynth.datasets as ds

    names = ds.workloads()
    if not names:
        pytest.skip("bundled dataset not present")
    return {w: ds.load(w, run=ds.runs(w)[0]) for w in names}

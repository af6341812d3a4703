"""Every bundled run loads and looks like a real, complete kernel trace of its workload."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import tracesynth.datasets as ds
from tracesynth.cli import main
from tracesynth.errors import ConfigError

REQUIRED_WORKLOADS = {"gzip", "tar", "scimark", "stream", "fileio", "pybench"}


def _all_runs():
    return [(w, r) for w in ds.workloads() for r in ds.runs(w)]


def test_catalogue_is_complete():
    assert REQUIRED_WORKLOADS <= set(ds.workloads())
    for workload in ds.workloads():
        assert len(ds.runs(workload)) >= 3, workload
    total = sum(p.stat().st_size for p in ds.datasets_dir().rglob("*") if p.is_file())
    assert total < 20e6


def pairing_rate(frame: pd.DataFrame) -> float:
    """Share of syscall entries followed, on their thread, by the exit of the same syscall."""
    sys_rows = frame[frame.event.str.startswith("syscall_")]
    paired = total = 0
    for _, rows in sys_rows.groupby("tid", sort=False):
        names = rows.event.tolist()
        for here, after in zip(names, names[1:] + [None]):
            if here.startswith("syscall_entry_"):
                total += 1
                paired += after == "syscall_exit_" + here[len("syscall_entry_"):]
    return paired / total if total else 0.0


@pytest.mark.parametrize("workload,run", _all_runs())
def test_run_is_sane(workload, run):
    trace = ds.load(workload, run)
    meta = trace.meta
    assert meta.workload == workload and meta.run == str(run)
    assert meta.tracer == "ftrace" and meta.lost_events == 0 and meta.command
    assert meta.extra["exit_code"] == 0
    frame = trace.events.select(["ts", "tid", "event", "payload"]).to_pandas()
    assert 50_000 <= len(frame) <= 300_000
    assert frame.ts.is_monotonic_increasing
    assert frame.event.iloc[0] == "syscall_entry_execve"
    assert pairing_rate(frame) >= 0.95
    kinds = set(frame.event)
    assert {"sched_switch", "sched_process_exit"} <= kinds
    # The workload's own program really ran: its exec is in the trace.
    execs = frame.payload[frame.event == "sched_process_exec"].map(lambda p: json.loads(p)["filename"])
    program = meta.command.split()[0].rsplit("/", 1)[-1]
    assert any(f.rsplit("/", 1)[-1] == program for f in execs)


def test_lookup_errors_name_what_exists():
    with pytest.raises(ConfigError, match="gzip"):
        ds.load("no-such-workload")
    with pytest.raises(ConfigError, match="runs: 1"):
        ds.path("gzip", run=99)


def test_datasets_list_command(capsys):
    assert main(["datasets", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {(r["workload"], r["run"]) for r in listed} == set(_all_runs())
    assert all(r["lost_events"] == 0 and r["events"] >= 50_000 for r in listed)

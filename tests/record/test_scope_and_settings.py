"""The pure parts of the recorder: which events belong to the tree, buffer sizing, presets,
tracefs text parsing. No tracefs needed."""

from __future__ import annotations

import json

import pytest

from tracesynth import Trace
from tracesynth.errors import ConfigError, RecordError
from tracesynth.record import PRESETS, RecordOptions, preset_events
from tracesynth.record.recorder import size_buffer_kb
from tracesynth.record.scope import fill_pids, keep_process_tree
from tracesynth.record.tracefs import parse_cpu_stats, selected

ROOT, CHILD, BUSY, KWORKER = 100, 101, 555, 7


def _table(rows):
    cols = {k: [] for k in ("ts", "cpu", "tid", "pid", "procname", "event", "ret", "payload")}
    for ts, (tid, event, fields) in enumerate(rows):
        cols["ts"].append(ts)
        cols["cpu"].append(0)
        cols["tid"].append(tid)
        cols["pid"].append(None)
        cols["procname"].append(None)
        cols["event"].append(event)
        cols["ret"].append(None)
        cols["payload"].append(json.dumps(fields) if fields else None)
    return Trace.from_pydict(cols).events


def _switch(prev, nxt):
    return {"prev_tid": prev, "next_tid": nxt}


def test_keep_process_tree_rules():
    events = _table([
        (ROOT, "syscall_exit_read", None),                      # the gated fork: before start
        (ROOT, "syscall_entry_execve", {"filename": 1}),        # start
        (ROOT, "sched_process_exec", {"tid": ROOT}),
        (ROOT, "sched_process_fork", {"parent_tid": ROOT, "child_tid": CHILD}),
        (CHILD, "syscall_entry_openat", {"dfd": -100}),
        (ROOT, "sched_wakeup", {"tid": KWORKER}),              # IRQ during our thread: dropped
        (0, "sched_wakeup", {"tid": CHILD}),                   # idle CPU wakes our thread: kept
        (BUSY, "sched_switch", _switch(BUSY, CHILD)),          # switch into our thread: kept
        (CHILD, "sched_switch", _switch(CHILD, BUSY)),         # switch out of it: kept
        (BUSY, "sched_switch", _switch(BUSY, KWORKER)),        # unrelated: dropped
        (BUSY, "syscall_entry_getpid", None),                  # unrelated: dropped
        (CHILD, "sched_process_exit", {"tid": CHILD}),
    ])
    kept, stats = keep_process_tree(events, ROOT)
    assert kept.column("ts").to_pylist() == [1, 2, 3, 4, 6, 7, 8, 11]
    assert (stats.before_start, stats.outside_tree, stats.kept, stats.threads) == (1, 3, 8, 2)


def test_keep_process_tree_without_exec_is_empty():
    kept, stats = keep_process_tree(_table([(ROOT, "syscall_exit_read", None)]), ROOT)
    assert kept.num_rows == 0 and stats.before_start == 1


def test_fill_pids_only_fills_nulls():
    events = _table([(ROOT, "syscall_entry_execve", None), (CHILD, "syscall_entry_read", None)])
    filled = fill_pids(events, {ROOT: ROOT, CHILD: ROOT})
    assert filled.column("pid").to_pylist() == [ROOT, ROOT]


def test_buffer_sizing():
    free_kb = 8 * 1024 * 1024  # 8 GiB
    assert size_buffer_kb(None, 2, free_kb) == 128 * 1024
    assert size_buffer_kb(None, 64, free_kb) == 32 * 1024  # bounded by free memory
    assert size_buffer_kb(16, 2, free_kb) == 16 * 1024
    with pytest.raises(RecordError, match="available memory"):
        size_buffer_kb(4096, 2, free_kb)
    with pytest.raises(ConfigError):
        size_buffer_kb(0, 2, free_kb)


def test_presets():
    assert set(PRESETS) >= {"minimal", "default", "sched", "full"}
    default = preset_events("default")
    assert "syscalls:*" in default and "sched:sched_switch" in default
    assert "sched:sched_switch" not in preset_events("minimal")
    assert set(default) < set(preset_events("sched")) < set(preset_events("full"))
    with pytest.raises(ConfigError, match="minimal"):
        preset_events("everything")


def test_options_round_trip_json():
    options = RecordOptions(workload="gzip", buffer_mb=64, strict=True)
    assert RecordOptions.from_json(options.to_json()) == options


def test_tracefs_text_helpers():
    stats = ("entries: 163\noverrun: 4\ncommit overrun: 1\nbytes: 6212\n"
             "oldest event ts:   427.586472\ndropped events: 7\nread events: 0\n")
    assert parse_cpu_stats(stats) == {"overrun": 4, "commit overrun": 1, "dropped events": 7}
    assert selected("[local] global counter mono\n") == "local"
    assert selected("mono\n") == "mono"

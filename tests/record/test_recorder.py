"""Real ftrace recordings of real commands: what was recorded, and that tracefs is given back.

Skipped only where recording is impossible (not root, no tracefs, no trace-cmd). Each test
waits up to 60 s for the shared tracefs lock, since other engineers' tests also use ftrace.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import tracesynth
from tracesynth.errors import ConfigError, RecordError
from tracesynth.record import LostEventsError, RecordOptions, record
from tracesynth.record.tracefs import (
    INSTANCE_PREFIX,
    LOCK_PATH,
    TOP_LEVEL_FILES,
    TracefsLock,
    find_tracefs,
)

pytestmark = pytest.mark.tracefs
WAIT = 60.0


def _tracefs_root() -> Path:
    if os.geteuid() != 0:
        pytest.skip("recording needs root")
    try:
        root = find_tracefs(mount=True)     # what `record` does: mount it when absent
    except RecordError as exc:
        pytest.skip(str(exc))
    if shutil.which("trace-cmd") is None:
        pytest.skip("trace-cmd is not installed")
    _expand_global_buffer(root)
    return root


def _expand_global_buffer(root: Path) -> None:
    """Make the kernel's one-way first-use change before any test takes a snapshot.

    Until an event is first enabled after boot, the global ring buffer is allocated small and
    `buffer_size_kb` reads ``7 (expanded: 1408)``; the first enable expands it for good
    (reading ``1410`` after page rounding), which no recorder can undo. On a freshly booted
    machine the first recording's before/after snapshots would differ by that alone.
    """
    with TracefsLock(wait_s=WAIT):
        match = re.fullmatch(r"\d+ \(expanded: (\d+)\)\s*", (root / "buffer_size_kb").read_text())
        if match:
            (root / "buffer_size_kb").write_text(match.group(1))


@pytest.fixture(scope="module")
def tracefs_root() -> Path:
    return _tracefs_root()


def tracefs_state(root: Path) -> dict:
    """Everything a recording could change: top-level files and our instances."""
    with TracefsLock(wait_s=WAIT):
        state = {name: (root / name).read_text() for name in TOP_LEVEL_FILES}
        state["instances"] = sorted(p.name for p in (root / "instances").iterdir()
                                    if p.name.startswith(INSTANCE_PREFIX))
    return state


def opts(**kw) -> RecordOptions:
    return RecordOptions(wait_lock_s=WAIT, **kw)


def payload(text) -> dict:
    return json.loads(text) if isinstance(text, str) else {}


@pytest.fixture(scope="module")
def recorded(tracefs_root, tmp_path_factory):
    """`sh -c 'cat /etc/hostname; true'` recorded while an unrelated busy shell loop runs."""
    out = tmp_path_factory.mktemp("rec") / "sh_cat.parquet"
    busy = subprocess.Popen(["sh", "-c", "while :; do echo x > /dev/null; done"])
    try:
        before = tracefs_state(tracefs_root)
        result = record(["sh", "-c", "cat /etc/hostname; true"], out, opts(workload="unit"))
        after = tracefs_state(tracefs_root)
    finally:
        busy.kill()
        busy.wait()
    return result, tracesynth.load(out), busy.pid, before, after


def test_result_and_metadata(recorded):
    result, trace, _, _, _ = recorded
    assert result.exit_code == 0 and result.lost_events == 0
    assert result.events == len(trace) > 100
    meta = trace.meta
    assert meta.tracer == "ftrace" and meta.workload == "unit"
    assert meta.command == "sh -c 'cat /etc/hostname; true'"
    assert meta.kernel_version == os.uname().release and meta.hostname
    assert meta.clock_name == "monotonic" and meta.lost_events == 0
    assert meta.extra["exit_code"] == 0 and meta.extra["tracefs_session"] == "instance"
    assert meta.extra["tool_versions"]["trace-cmd"][0].isdigit()


def test_openat_pairs_of_cat_on_one_tid(recorded):
    _, trace, _, _, _ = recorded
    df = trace.to_pandas()
    cat = df[df.procname == "cat"]
    assert not cat.empty
    opens = cat[cat.event.str.endswith("_openat")]
    entries = opens[opens.event == "syscall_entry_openat"]
    exits = opens[opens.event == "syscall_exit_openat"]
    assert len(entries) == len(exits) >= 3
    # Each entry is followed by its exit on the same thread, before that thread's next syscall
    # (a sched_switch may come between: the thread can be preempted inside the call).
    for tid, rows in cat[cat.event.str.startswith("syscall_")].groupby("tid"):
        names = rows.event.tolist()
        for i, name in enumerate(names):
            if name == "syscall_entry_openat":
                assert names[i + 1] == "syscall_exit_openat"
    assert (exits.ret >= 0).any()
    fds = set(exits.ret[exits.ret >= 0].astype(int))
    reads = cat[cat.event == "syscall_entry_read"].payload.map(payload)
    assert any(p.get("fd") in fds for p in reads)  # cat read the file it opened


def test_timestamps_are_monotonic_nanoseconds(recorded):
    _, trace, _, _, _ = recorded
    ts = trace.to_pandas().ts
    assert ts.is_monotonic_increasing
    assert (ts % 1000 != 0).mean() > 0.9  # not µs text rounded to ns
    assert trace.to_pandas().event.iloc[0] == "syscall_entry_execve"


def test_fork_exec_exit_of_child(recorded):
    _, trace, _, _, _ = recorded
    df = trace.to_pandas()
    root = int(df.tid.iloc[0])
    forks = df[df.event == "sched_process_fork"].payload.map(payload).tolist()
    assert len(forks) == 1 and forks[0]["parent_tid"] == root
    child = forks[0]["child_tid"]
    execs = df[df.event == "sched_process_exec"]
    assert {(int(t), payload(p)["filename"].rsplit("/", 1)[-1]) for t, p in
            zip(execs.tid, execs.payload)} == {(root, "sh"), (child, "cat")}
    exits = df[df.event == "sched_process_exit"]
    assert set(exits.tid.astype(int)) == {root, child}
    assert df.pid[df.tid == child].eq(child).all()
    assert df.ts[df.event == "sched_process_exit"].max() >= df.ts[df.tid == child].max()


def test_nothing_from_other_processes(recorded):
    _, trace, busy_pid, _, _ = recorded
    df = trace.to_pandas()
    root = int(df.tid.iloc[0])
    tree = {root} | {payload(p)["child_tid"] for p in df.payload[df.event == "sched_process_fork"]}
    foreign = df[~df.tid.isin(tree)]
    for name, text in zip(foreign.event, foreign.payload):
        fields = payload(text)
        if name == "sched_switch":
            assert fields["next_tid"] in tree  # switching into our thread
        else:
            assert name in ("sched_wakeup", "sched_waking") and fields["tid"] in tree
    assert not df.event[df.tid == busy_pid].str.startswith("syscall_").any()
    # The recorder itself shows up at most as the task a CPU switched away from into ours.
    assert set(df.event[df.tid == os.getpid()]) <= {"sched_switch"}


def test_state_restored_after_success(recorded):
    _, _, _, before, after = recorded
    assert after == before


def test_failing_command_exit_code_and_cleanup(tracefs_root, tmp_path):
    before = tracefs_state(tracefs_root)
    out = tmp_path / "fail.parquet"
    result = record(["sh", "-c", "ls /nonexistent-dir; exit 3"], out, opts())
    assert result.exit_code == 3 and out.exists()
    df = tracesynth.load(out).to_pandas()
    assert (df.ret[df.event == "syscall_exit_newfstatat"] < 0).any() or \
        (df.ret[df.event.str.startswith("syscall_exit_")] == -2).any()  # ENOENT seen
    assert tracefs_state(tracefs_root) == before


def test_cli_returns_command_exit_code(tracefs_root, tmp_path):
    out = tmp_path / "cli.parquet"
    code = subprocess.run(
        [sys.executable, "-m", "tracesynth", "record", "-o", str(out), "--wait", str(WAIT),
         "-w", "cli", "--", "sh", "-c", "exit 7"], capture_output=True, text=True)
    assert code.returncode == 7, code.stderr
    assert "exit code 7" in code.stderr and tracesynth.load(out).meta.workload == "cli"


def test_refuses_while_lock_held(tracefs_root, tmp_path):
    before = tracefs_state(tracefs_root)
    with TracefsLock(LOCK_PATH, wait_s=WAIT):
        with pytest.raises(RecordError, match="in progress"):
            record(["true"], tmp_path / "x.parquet", RecordOptions())
    assert not (tmp_path / "x.parquet").exists()
    assert tracefs_state(tracefs_root) == before


def test_refuses_while_shell_flock_holds_the_lock(tracefs_root, tmp_path):
    """Other ftrace users take the same lock with flock(1)."""
    if shutil.which("flock") is None:
        pytest.skip("flock(1) not installed")
    holder = subprocess.Popen(
        ["flock", "-w", str(WAIT), str(LOCK_PATH), "-c", "echo held; exec sleep 30"],
        stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RecordError, match="in progress"):
            record(["true"], tmp_path / "x.parquet", RecordOptions(wait_lock_s=0.3))
    finally:
        os.killpg(holder.pid, signal.SIGKILL)  # flock and the sleep that inherited the lock
        holder.wait()


def test_refuses_while_another_instance_is_alive(tracefs_root, tmp_path):
    sleeper = subprocess.Popen(["sleep", "30"])
    foreign = tracefs_root / "instances" / f"{INSTANCE_PREFIX}{sleeper.pid}"
    try:
        with TracefsLock(wait_s=WAIT):
            foreign.mkdir()
        with pytest.raises(RecordError, match=str(sleeper.pid)):
            record(["true"], tmp_path / "x.parquet", opts())
    finally:
        sleeper.kill()
        sleeper.wait()
    # Its owner is dead now: the next recording removes the stale instance and proceeds.
    assert record(["true"], tmp_path / "y.parquet", opts()).exit_code == 0
    assert not foreign.exists()


def test_lost_events_counted_and_strict(tracefs_root, tmp_path):
    out = tmp_path / "lossy.parquet"
    with pytest.raises(LostEventsError, match="lost"):
        record(["dd", "if=/dev/zero", "of=/dev/null", "bs=1", "count=60000"], out,
               opts(buffer_mb=1, strict=True))
    meta = tracesynth.load(out).meta
    assert meta.lost_events > 0
    assert sum(sum(c.values()) for c in meta.extra["lost_by_cpu"].values()) > 0


def test_top_level_fallback_restores_state(tracefs_root, tmp_path):
    before = tracefs_state(tracefs_root)
    out = tmp_path / "top.parquet"
    result = record(["cat", "/etc/hostname"], out, opts(prefer_instance=False, buffer_mb=8))
    assert result.exit_code == 0
    trace = tracesynth.load(out)
    assert trace.meta.extra["tracefs_session"] == "top-level"
    assert (trace.to_pandas().event == "syscall_exit_openat").any()
    assert tracefs_state(tracefs_root) == before


def test_sigint_restores_and_writes_nothing(tracefs_root, tmp_path):
    before = tracefs_state(tracefs_root)
    out = tmp_path / "int.parquet"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tracesynth", "record", "-o", str(out), "--wait", str(WAIT),
         "--", "sleep", "30"], stderr=subprocess.PIPE, text=True)
    instance = tracefs_root / "instances" / f"{INSTANCE_PREFIX}{proc.pid}"
    deadline = time.monotonic() + WAIT + 20
    while time.monotonic() < deadline:
        try:
            if (instance / "tracing_on").read_text().strip() == "1":
                break
        except OSError:
            pass
        time.sleep(0.05)
    else:
        proc.kill()
        pytest.fail("the recorder never armed tracing")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert not out.exists() and not instance.exists()
    assert tracefs_state(tracefs_root) == before


def test_refusals_before_touching_tracefs(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="not found"):
        record(["no-such-command-xyz"], tmp_path / "x.parquet")
    with pytest.raises(ConfigError, match="preset"):
        record(["true"], tmp_path / "x.parquet", RecordOptions(events="nope"))
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(RecordError, match="root"):
        record(["true"], tmp_path / "x.parquet")

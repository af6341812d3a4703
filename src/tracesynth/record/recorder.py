"""The recording procedure: COMMAND's process tree → ftrace → canonical Parquet.

    result = record(["gzip", "-k", "big.txt"], "gzip.parquet", RecordOptions(workload="gzip"))
    result.exit_code, result.events, result.lost_events

Order matters, and every step that touches tracefs is undone in a `finally`:

1. Checks that change nothing: root, tracefs, trace-cmd, the executable, the buffer size.
2. Take the shared lock; refuse if another TraceSynth instance is alive.
3. Create a private tracefs instance (or snapshot the top level), size its buffer with
   overwrite off, select the clock, turn on ``event-fork``.
4. Fork COMMAND held at a gate; put its pid in ``set_event_pid`` *before* enabling events (an
   empty pid list means every task); enable the preset's events; tracing on; open the gate.
5. Wait for COMMAND (signals to the recorder are forwarded to it); tracing off; read the
   per-CPU loss counters; ``trace-cmd extract`` the instance; remove it; release the lock.
6. Without the lock: ``trace-cmd report -t`` (full-nanosecond timestamps) → the ftrace reader
   → keep COMMAND's process tree (see `scope`) → Parquet with metadata, renamed into place.

The buffer is read after the run, not during it: reading ``trace_pipe`` concurrently halved the
speed of the workload being measured on a 2-core machine, while a 128 MiB per-CPU buffer with
overwrite off held every event of minute-long workloads. Whatever does not fit is counted by
the kernel and reported as lost (an error with ``strict``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import shlex
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from tracesynth.errors import ConfigError, RecordError
from tracesynth.fileio import atomic_path
from tracesynth.record.child import GatedChild, SignalGuard
from tracesynth.record.presets import preset_events
from tracesynth.record.scope import fill_pids, keep_process_tree
from tracesynth.record.tracefs import (
    SessionSettings,
    TracefsLock,
    claim_instances,
    find_tracefs,
    open_session,
    require_root,
)
from tracesynth.schema import SCHEMA, TraceMeta, write_parquet_batches

#: Largest default per-CPU buffer; ample for the bundled workloads (≤ ~300k events).
DEFAULT_BUFFER_MB = 128
#: The buffers may take at most this share of the memory available now.
MAX_MEMORY_SHARE = 0.5


@dataclass
class RecordOptions:
    """How to record. Plain data; round-trips through JSON."""

    workload: str | None = None
    events: str = "default"
    buffer_mb: int | None = None  # per CPU; None → min(128, a quarter of free memory / CPUs)
    strict: bool = False  # lost events are an error instead of a warning
    clock: str = "mono"  # CLOCK_MONOTONIC, the clock LTTng kernel traces use
    wait_lock_s: float = 0.0  # wait this long for another ftrace user to finish
    prefer_instance: bool = True  # False forces the top-level fallback (tests use it)
    run: str | None = None  # run label stored in the metadata (datasets: "1", "2", ...)
    extra: dict = field(default_factory=dict)  # merged into TraceMeta.extra (tool versions...)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> RecordOptions:
        return cls(**json.loads(text))


@dataclass
class RecordResult:
    out: Path
    exit_code: int
    events: int
    lost_events: int
    duration_s: float
    meta: TraceMeta = field(repr=False, default_factory=TraceMeta)


class LostEventsError(RecordError):
    """``strict`` was asked for and the kernel dropped events (the output is still written)."""


# --- checks that change nothing ---------------------------------------------------------------
def resolve_executable(command: list[str], env: dict[str, str] | None = None,
                       cwd: str | Path | None = None) -> str:
    """The absolute path COMMAND will execute: a name is looked up in PATH (of `env`), a path
    with a slash is taken relative to `cwd`, like a shell started there would."""
    if not command:
        raise ConfigError("no command to record: pass it after `--`")
    name = command[0]
    if "/" in name:
        exe = os.path.join(cwd or os.getcwd(), name)
        exe = exe if os.path.isfile(exe) and os.access(exe, os.X_OK) else None
    else:
        exe = shutil.which(name, path=(env or os.environ).get("PATH", os.defpath))
    if exe is None:
        raise ConfigError(f"command not found: {name!r}")
    return os.path.abspath(exe)


def available_memory_kb() -> int:
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1])
    return 0


def size_buffer_kb(buffer_mb: int | None, n_cpus: int, available_kb: int) -> int:
    """Per-CPU buffer in KiB: the request, or the default bounded by free memory."""
    if buffer_mb is not None:
        if buffer_mb < 1:
            raise ConfigError(f"--buffer-mb must be ≥ 1, got {buffer_mb}")
        wanted = buffer_mb * 1024
        if wanted * n_cpus > available_kb * MAX_MEMORY_SHARE:
            raise RecordError(
                f"{buffer_mb} MiB × {n_cpus} CPUs of trace buffer exceeds half of the "
                f"{available_kb // 1024} MiB of available memory; pass a smaller --buffer-mb")
        return wanted
    share = int(available_kb * MAX_MEMORY_SHARE / 2 / max(n_cpus, 1))
    return max(4096, min(DEFAULT_BUFFER_MB * 1024, share))


def trace_cmd_version() -> str:
    if shutil.which("trace-cmd") is None:
        raise RecordError("trace-cmd is not installed (it copies the ring buffer out with full-ns "
                          "timestamps): apt-get install trace-cmd")
    done = subprocess.run(["trace-cmd", "--version"], capture_output=True, text=True, check=False)
    for token in (done.stdout + done.stderr).split():
        if token[:1].isdigit():
            return token
    return "unknown"


def _n_cpus(root: Path) -> int:
    return len(list((root / "per_cpu").glob("cpu*"))) or (os.cpu_count() or 1)


def read_tgids(root: Path) -> dict[int, int]:
    """The kernel's tid → tgid map (``saved_tgids``, filled while ``record-tgid`` is on)."""
    out = {}
    try:
        text = (root / "saved_tgids").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
            out[int(parts[0])] = int(parts[1])
    return out


# --- the procedure -------------------------------------------------------------------------------
@dataclass
class _Capture:
    """What the tracefs phase hands to the conversion phase."""

    dat: Path
    root_tid: int
    load_before: float
    exit_code: int
    duration_s: float
    lost_by_cpu: dict[int, dict[str, int]]
    tgids: dict[int, int]
    session_kind: str
    buffer_kb: int
    n_cpus: int


def record(
    command: list[str],
    out: str | Path,
    options: RecordOptions | None = None,
    on_stage: Callable[[str], None] | None = None,
    *,
    env: dict[str, str] | None = None,
    cwd: str | Path | None = None,
    stdio: tuple[int | None, int | None, int | None] = (None, None, None),
) -> RecordResult:
    """Record `command`'s process tree into the canonical Parquet file `out`.

    Returns when the command has exited and the output is in place; `RecordResult.exit_code`
    is the command's. `env`, `cwd` and `stdio` (descriptors for COMMAND's stdin, stdout,
    stderr) default to the recorder's own. Raises `RecordError` when recording is impossible
    (not root, no tracefs, busy), `RecordInterrupted` on a signal, `LostEventsError` for lost
    events with ``strict`` (after writing the output).
    """
    options = options or RecordOptions()
    stage = on_stage or (lambda text: None)
    out = Path(out)
    events = preset_events(options.events)
    exe = resolve_executable(command, env, cwd)
    require_root()
    root = find_tracefs()
    tool_version = trace_cmd_version()
    n_cpus = _n_cpus(root)
    buffer_kb = size_buffer_kb(options.buffer_mb, n_cpus, available_memory_kb())

    with tempfile.TemporaryDirectory(prefix="tracesynth-record-") as work:
        work = Path(work)
        child_setup = {"env": env, "cwd": None if cwd is None else str(cwd), "stdio": stdio}
        capture = _capture(root, exe, command, events, options, buffer_kb, n_cpus, work, stage,
                           child_setup)
        stage("converting the trace")
        report = _report(capture.dat, work / "report.txt")
        table, reader_meta = _read_report(report)
        table, scope_stats = keep_process_tree(table, capture.root_tid)
        table = fill_pids(table, capture.tgids)

    lost = sum(sum(c.values()) for c in capture.lost_by_cpu.values())
    lost = max(lost, reader_meta.lost_events)
    uname = platform.uname()
    meta = TraceMeta(
        source_format="ftrace",
        tracer="ftrace",
        tracer_version=uname.release,
        kernel_version=uname.release,
        hostname=socket.gethostname(),
        workload=options.workload,
        run=options.run,
        clock_name={"mono": "monotonic"}.get(options.clock, options.clock),
        command=shlex.join(command),
        n_cpus=n_cpus,
        lost_events=lost,
        skipped_records=reader_meta.skipped_records,
        extra={
            "exit_code": capture.exit_code,
            "duration_s": round(capture.duration_s, 6),
            "loadavg_1min_before": round(capture.load_before, 2),  # other work on the machine
            "event_preset": options.events,
            "tracefs_events": list(events),
            "tracefs_session": capture.session_kind,
            "buffer_kb_per_cpu": capture.buffer_kb,
            "lost_by_cpu": {str(k): v for k, v in capture.lost_by_cpu.items()},
            "timestamp_resolution_ns": 1,
            "scope": dataclasses.asdict(scope_stats),
            "tool_versions": {
                "trace-cmd": tool_version,
                "tracesynth": _tracesynth_version(),
                "python": platform.python_version(),
                "kernel": uname.release,
            },
        },
    )
    for key, value in options.extra.items():
        if isinstance(value, dict) and isinstance(meta.extra.get(key), dict):
            meta.extra[key] = {**meta.extra[key], **value}
        else:
            meta.extra[key] = value
    stage(f"writing {out}")
    with atomic_path(out) as tmp:
        rows = write_parquet_batches(table.to_batches(), meta, tmp)
    result = RecordResult(out, capture.exit_code, rows, lost, capture.duration_s, meta)
    if lost and options.strict:
        raise LostEventsError(f"{lost:,} events were lost by the ftrace buffer ({out} written "
                              "anyway); pass a larger --buffer-mb")
    return result


def _capture(root, exe, command, events, options, buffer_kb, n_cpus, work, stage,
             child_setup) -> _Capture:
    """The tracefs phase: everything that must be undone happens inside this function."""
    with TracefsLock(wait_s=options.wait_lock_s), SignalGuard() as guard:
        claim_instances(root)
        session = open_session(root, options.prefer_instance)
        child = None
        try:
            stage(f"arming ftrace ({session.kind}, {buffer_kb // 1024} MiB/CPU × {n_cpus})")
            session.configure(SessionSettings(buffer_kb, options.clock, events))
            guard.check()
            child = GatedChild(exe, list(command), **child_setup)
            guard.child_pid = child.pid
            session.follow(child.pid)
            session.enable(events)
            session.on()
            guard.check()
            stage(f"running {shlex.join(command)}")
            load_before = os.getloadavg()[0]
            start = time.monotonic()
            child.release()
            if guard.received is not None:  # arrived between the last check and the release
                guard.forward_again()
            exit_code = child.wait()
            duration = time.monotonic() - start
            session.off()
            lost_by_cpu = session.lost_events()
            tgids = read_tgids(root)
            guard.check()
            stage("extracting the ring buffer")
            dat = session.extract(work / "trace.dat")
        finally:
            if child is not None:
                child.abort()
            session.close()
    return _Capture(dat, child.pid, load_before, exit_code, duration, lost_by_cpu, tgids,
                    session.kind, buffer_kb, n_cpus)


def _report(dat: Path, out: Path) -> Path:
    """``trace-cmd report -t``: text with full-nanosecond timestamps (no 6-digit rounding)."""
    with open(out, "w") as fh:
        done = subprocess.run(["trace-cmd", "report", "-t", "-i", str(dat)], stdout=fh,
                              stderr=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or ["no output"]
        raise RecordError(f"trace-cmd report failed ({done.returncode}): {tail[0]}")
    return out


def _read_report(report: Path) -> tuple[pa.Table, TraceMeta]:
    from tracesynth.sources.ftrace import FtraceReader

    reader = FtraceReader(report)
    table = pa.Table.from_batches(list(reader.batches()), schema=SCHEMA)
    return table, reader.meta


def _tracesynth_version() -> str:
    from tracesynth import __version__

    return __version__


def exit_status_text(code: int) -> str:
    if code > 128:
        import signal

        try:
            return f"killed by {signal.Signals(code - 128).name}"
        except ValueError:
            pass
    return f"exit code {code}"


__all__ = ["LostEventsError", "RecordOptions", "RecordResult", "record", "size_buffer_kb",
           "exit_status_text"]

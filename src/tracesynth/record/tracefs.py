"""tracefs control: find and mount it, take the shared lock, and own a tracing buffer.

ftrace is one shared kernel facility, and other people (and other TraceSynth engineers) use it
too, so a recording must never leave it different from how it found it. Two mechanisms:

- `InstanceSession` (preferred): a private instance ``instances/tracesynth-<pid>`` has its own
  ring buffer, ``set_event``, ``set_event_pid``, clock and options. Removing the directory at
  the end removes every setting we made, and the top-level state is never touched.
- `TopLevelSession` (fallback when the kernel has no instances): snapshot every file we write,
  and write the snapshot back at the end. The top-level buffer's old contents are cleared.

`TracefsLock` serialises ftrace users: ``flock`` on /tmp/tracesynth-tracefs.lock, the same
path that shell users take with ``flock(1)``.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import subprocess
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path

from tracesynth.errors import RecordError

TRACEFS_CANDIDATES = (Path("/sys/kernel/tracing"), Path("/sys/kernel/debug/tracing"))
LOCK_PATH = Path("/tmp/tracesynth-tracefs.lock")
INSTANCE_PREFIX = "tracesynth-"


# --- where tracefs is, and may we use it ------------------------------------------------------
def require_root() -> None:
    if os.geteuid() != 0:
        raise RecordError("recording with ftrace needs root (tracefs is writable by root only); "
                          "run with sudo")


def find_tracefs(mount: bool = True) -> Path:
    """The tracefs mount point; mounts it at /sys/kernel/tracing when absent and possible."""
    for root in TRACEFS_CANDIDATES:
        if (root / "set_event").exists():
            return root
    if mount and TRACEFS_CANDIDATES[0].is_dir():
        subprocess.run(["mount", "-t", "tracefs", "nodev", str(TRACEFS_CANDIDATES[0])],
                       capture_output=True, check=False)
        if (TRACEFS_CANDIDATES[0] / "set_event").exists():
            return TRACEFS_CANDIDATES[0]
    raise RecordError("tracefs is not available (no set_event under /sys/kernel/tracing or "
                      "/sys/kernel/debug/tracing, and mounting it failed): is ftrace "
                      "(CONFIG_FTRACE) enabled in this kernel?")


# --- one ftrace user at a time -----------------------------------------------------------------
class TracefsLock:
    """Exclusive ``flock`` on the shared lock file, waiting up to `wait_s` seconds for it."""

    def __init__(self, path: Path = LOCK_PATH, wait_s: float = 0.0):
        self.path = Path(path)
        self.wait_s = wait_s
        self._fd: int | None = None

    def __enter__(self) -> TracefsLock:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        deadline = time.monotonic() + self.wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise RecordError(
                        f"another ftrace recording is in progress (lock {self.path} is held); "
                        "wait for it to finish") from None
                time.sleep(0.1)
        self._fd = fd
        return self

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def claim_instances(root: Path) -> None:
    """Refuse when a live TraceSynth instance exists; remove ones whose owner died (SIGKILL)."""
    instances = root / "instances"
    if not instances.is_dir():
        return
    for entry in sorted(instances.iterdir()):
        match = re.fullmatch(re.escape(INSTANCE_PREFIX) + r"(\d+)", entry.name)
        if not match:
            continue
        owner = int(match.group(1))
        if owner != os.getpid() and _pid_alive(owner):
            raise RecordError(f"another recording is in progress: tracefs instance {entry} "
                              f"belongs to running process {owner}")
        _remove_instance(entry)


def _remove_instance(path: Path) -> None:
    """Disable everything in an instance and remove it (retrying while a reader lets go)."""
    if not path.exists():
        return
    for name, value in (("tracing_on", "0"), ("set_event", ""), ("set_event_pid", "")):
        try:
            write_file(path / name, value)
        except (OSError, RecordError):
            pass
    for _ in range(50):
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY:
                raise RecordError(f"cannot remove tracefs instance {path}: {exc}") from None
            time.sleep(0.1)
    raise RecordError(f"cannot remove tracefs instance {path}: still busy")


# --- file access ---------------------------------------------------------------------------------
def write_file(path: Path, value: str, append: bool = False) -> None:
    """Write one tracefs control file. Appending uses O_APPEND without a seek: tracefs files
    reject the seek-to-end that Python's ``open(..., "a")`` performs."""
    flags = os.O_WRONLY | (os.O_APPEND if append else os.O_TRUNC)
    try:
        fd = os.open(path, flags)
        try:
            os.write(fd, value.encode() if value else b"")
        finally:
            os.close(fd)
    except OSError as exc:
        raise RecordError(f"tracefs refused {value.strip()!r} → {path}: {exc.strerror}") from None


def read_file(path: Path) -> str:
    return Path(path).read_text()


def selected(text: str) -> str:
    """The bracketed choice of a tracefs selector file (``[local] global mono`` → ``local``)."""
    match = re.search(r"\[([^\]]+)\]", text)
    return match.group(1) if match else text.strip()


_STAT_KEYS = ("overrun", "commit overrun", "dropped events")


def parse_cpu_stats(text: str) -> dict[str, int]:
    """The loss counters of a ``per_cpu/cpuN/stats`` file."""
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in _STAT_KEYS:
            out[key.strip()] = int(value.split()[0])
    return out


# --- a tracing buffer we own ---------------------------------------------------------------------
@dataclass
class SessionSettings:
    """What a recording asks of its buffer."""

    buffer_kb_per_cpu: int
    clock: str = "mono"
    events: tuple[str, ...] = ()


class TracefsSession(ABC):
    """A buffer and its controls at `dir`; subclasses decide how the state is given back."""

    kind = "abstract"

    def __init__(self, root: Path, dir: Path):
        self.root = root
        self.dir = dir

    # control
    def write(self, name: str, value: str, append: bool = False) -> None:
        write_file(self.dir / name, value, append)

    def read(self, name: str) -> str:
        return read_file(self.dir / name)

    def configure(self, settings: SessionSettings) -> None:
        """Tracing off, buffer sized with overwrite off (a full buffer drops and counts new
        events instead of silently overwriting old ones), clock chosen, children followed."""
        self.write("tracing_on", "0")
        self.write("set_event", "")
        self.write("set_event_pid", "")
        self.write("buffer_size_kb", str(settings.buffer_kb_per_cpu))
        self.write("options/overwrite", "0")
        clocks = self.read("trace_clock")
        if settings.clock not in clocks.replace("[", " ").replace("]", " ").split():
            raise RecordError(f"trace clock {settings.clock!r} not offered by this kernel "
                              f"({clocks.strip()})")
        self.write("trace_clock", settings.clock)
        self.write("options/event-fork", "1")
        self.write("options/record-tgid", "1")  # fills saved_tgids: the text names threads only
        self.write("trace", "")  # clears the buffer

    def follow(self, pid: int) -> None:
        """Trace `pid` and (event-fork) its descendants. Must come before any event is
        enabled: an empty set_event_pid means every task on the machine."""
        self.write("set_event_pid", str(pid))
        if str(pid) not in self.read("set_event_pid").split():
            raise RecordError(f"tracefs did not accept pid {pid} in {self.dir / 'set_event_pid'}")

    def enable(self, events: tuple[str, ...]) -> None:
        if not self.read("set_event_pid").strip():
            raise RecordError("refusing to enable events without a pid filter")
        for spec in events:
            self.write("set_event", spec + "\n", append=True)

    def on(self) -> None:
        self.write("tracing_on", "1")

    def off(self) -> None:
        self.write("tracing_on", "0")

    def lost_events(self) -> dict[int, dict[str, int]]:
        """Per-CPU loss counters (overrun, commit overrun, dropped events)."""
        out = {}
        per_cpu = self.dir / "per_cpu"
        for cpu_dir in sorted(per_cpu.glob("cpu*"), key=lambda p: int(p.name[3:])):
            out[int(cpu_dir.name[3:])] = parse_cpu_stats(read_file(cpu_dir / "stats"))
        return out

    def extract(self, dat_path: Path) -> Path:
        """Copy the buffer into a trace.dat with ``trace-cmd extract`` (binary pages: full-ns
        timestamps, unlike the µs text in ``trace``)."""
        cmd = ["trace-cmd", "extract", *self._extract_args(), "-o", str(dat_path)]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0 or not dat_path.exists():
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            raise RecordError(f"trace-cmd extract failed ({done.returncode}): {tail[0]}")
        return dat_path

    def _extract_args(self) -> list[str]:
        return []

    @abstractmethod
    def close(self) -> None:
        """Give tracefs back exactly as it was found."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class InstanceSession(TracefsSession):
    """A private instance: created here, removed at close, top-level state never touched."""

    kind = "instance"

    def __init__(self, root: Path, name: str | None = None):
        name = name or f"{INSTANCE_PREFIX}{os.getpid()}"
        super().__init__(root, root / "instances" / name)
        self.name = name
        try:
            self.dir.mkdir()
        except FileExistsError:
            raise RecordError(f"tracefs instance {self.dir} already exists") from None
        except OSError as exc:
            raise RecordError(f"cannot create tracefs instance {self.dir}: {exc.strerror}") from None

    def _extract_args(self) -> list[str]:
        return ["-B", self.name]

    def close(self) -> None:
        # trace-cmd extract removes the instance itself; removing twice is fine.
        _remove_instance(self.dir)


#: Top-level files a recording changes, snapshotted and restored by `TopLevelSession`.
TOP_LEVEL_FILES = (
    "tracing_on",
    "buffer_size_kb",
    "trace_clock",
    "options/overwrite",
    "options/event-fork",
    "options/record-tgid",
    "set_event_pid",
    "set_event",
)


@dataclass
class TopLevelSnapshot:
    values: dict[str, str] = field(default_factory=dict)

    @classmethod
    def take(cls, root: Path) -> TopLevelSnapshot:
        return cls({name: read_file(root / name) for name in TOP_LEVEL_FILES})


class TopLevelSession(TracefsSession):
    """The global buffer, for kernels without instances: every changed file is restored."""

    kind = "top-level"

    def __init__(self, root: Path):
        super().__init__(root, root)
        self.snapshot = TopLevelSnapshot.take(root)

    def close(self) -> None:
        restore_top_level(self.root, self.snapshot)


def restore_top_level(root: Path, snapshot: TopLevelSnapshot) -> None:
    """Write a snapshot back: tracing off while events, pids, options, clock and size return."""
    values = snapshot.values
    write_file(root / "tracing_on", "0")
    write_file(root / "set_event", "")
    write_file(root / "set_event_pid", "")
    buffer_kb = values["buffer_size_kb"].split()[0]
    if read_file(root / "buffer_size_kb").split()[0] != buffer_kb:
        write_file(root / "buffer_size_kb", buffer_kb)
    write_file(root / "trace_clock", selected(values["trace_clock"]))
    write_file(root / "options/overwrite", values["options/overwrite"].strip())
    write_file(root / "options/event-fork", values["options/event-fork"].strip())
    write_file(root / "options/record-tgid", values["options/record-tgid"].strip())
    pids = values["set_event_pid"].split()
    if pids:
        write_file(root / "set_event_pid", " ".join(pids))
    events = [line.strip() for line in values["set_event"].splitlines() if line.strip()]
    if events:
        fd = os.open(root / "set_event", os.O_WRONLY | os.O_APPEND)
        try:
            for spec in events:
                os.write(fd, (spec + "\n").encode())
        finally:
            os.close(fd)
    write_file(root / "tracing_on", values["tracing_on"].strip())


def open_session(root: Path, prefer_instance: bool = True) -> TracefsSession:
    """A private instance when the kernel offers instances, else the snapshotted top level."""
    if prefer_instance and (root / "instances").is_dir():
        return InstanceSession(root)
    return TopLevelSession(root)

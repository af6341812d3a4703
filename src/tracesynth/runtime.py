"""Process-wide settings that make PyTorch fast on a small shared CPU machine.

Two settings, applied by the command line before torch is imported (`tune_cpu_process`), and
available to Python API users who want the same figures in their own process, plus the
sampler's thread count per window (`SamplingThreads`). None of them changes what is computed,
only how threads wait, how many there are and where memory comes from:

- How OpenMP threads wait depends on the work. Threads that spin while waiting (libgomp's
  default: ~3 ms, then sleep) make PyTorch several times slower as soon as another process
  wants one of the cores (a thread spinning for its partner holds the core the partner needs):
  the guided sampler 2.4-2.8x, training 1.7x beside one busy process on 2 cores. Passive
  threads (OMP_WAIT_POLICY=PASSIVE) sleep at once, and waking them costs: on idle cores the
  sampler, whose network calls last a few milliseconds, takes 0.68-0.76x the time with
  spinning threads (training 0.91x). The sampler can follow the load, since its traces do not
  depend on the thread count (`SamplingThreads`: one thread fewer per core someone else uses,
  decided per window); training cannot (its float sums do). So the CLI's sampling command
  (`generate`) keeps libgomp's default and every other command gets passive threads
  (`benchmarks/bench_threads.py`, `benchmarks/results/support/bench_threads_policy.txt`).
  Only effective before torch is first imported.
- glibc's malloc keeps freed memory for reuse (`mallopt`, the C library's own knob for this,
  the same settings as the MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_ environment
  variables, which glibc reads only when a process starts). By default a block of more than
  128 KiB (the threshold adapts upwards to what has been freed, up to 32 MiB) is mapped from
  the kernel when allocated and handed back when freed, and the heap's free top is returned
  once it exceeds twice that threshold: one sampling network call over a 4,096-event window
  allocates a few dozen 1-2 MiB tensors, and every one of them then comes back as fresh pages
  that the kernel must zero and fault in one by one. Keeping them in the heap makes that call
  ~0.7x the time (`benchmarks/bench_threads.py`, setting `heap`). The cost: a process keeps
  up to `trim` bytes of freed memory mapped instead of returning it. PyTorch's performance
  guide recommends the same cure by another route (preloading jemalloc or tcmalloc), which
  needs the allocator installed and set before the process starts.
"""

from __future__ import annotations

import ctypes
import math
import os
import time

_M_TRIM_THRESHOLD = -1  # <malloc.h>
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 * 1024 * 1024  # the top of glibc's own adaptive range (DEFAULT_MMAP_THRESHOLD_MAX)
TRIM_THRESHOLD = 256 * 1024 * 1024


#: Whether `passive_openmp_threads` set OMP_WAIT_POLICY (the user had not): then a child process
#: may be started without it (`experiments.sampling_process`).
_PASSIVE_SET_HERE = False


def passive_openmp_threads() -> None:
    """OMP_WAIT_POLICY=PASSIVE unless the user set a policy (no effect once torch is loaded)."""
    global _PASSIVE_SET_HERE
    if "OMP_WAIT_POLICY" not in os.environ:
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
        _PASSIVE_SET_HERE = True


def passive_set_here() -> bool:
    """True when this process's passive OpenMP threads are TraceSynth's choice, not the user's."""
    return _PASSIVE_SET_HERE and os.environ.get("OMP_WAIT_POLICY") == "PASSIVE"


def keep_freed_memory(mmap_threshold: int = MMAP_THRESHOLD, trim: int = TRIM_THRESHOLD) -> bool:
    """Ask glibc's malloc to serve blocks up to `mmap_threshold` bytes from its heap and to keep
    up to `trim` bytes of free heap top. False (nothing changed) where the C library is not
    glibc or the user already chose through glibc's environment variables or tunables."""
    if ("MALLOC_MMAP_THRESHOLD_" in os.environ or "MALLOC_TRIM_THRESHOLD_" in os.environ
            or "glibc.malloc." in os.environ.get("GLIBC_TUNABLES", "")):
        return False
    try:  # the process's own symbols, the C library's among them (no library search)
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
        libc.gnu_get_libc_version  # glibc only: musl's mallopt does nothing  # noqa: B018
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, mmap_threshold)) and bool(mallopt(_M_TRIM_THRESHOLD, trim))


def tune_cpu_process(sampling: bool = False) -> None:
    """Both settings above, before torch is imported: freed memory kept, and OpenMP threads
    passive unless the process is for `sampling` (libgomp's default then: spin, then sleep;
    the sampler's `SamplingThreads` keeps spinning threads off cores others use). What the
    command line does once it knows its command; a user's own OMP_WAIT_POLICY wins."""
    if not sampling:
        passive_openmp_threads()
    keep_freed_memory()


#: Cores of CPU that other processes may use without this process giving a thread up: the
#: kernel's tick counts are coarse and daemons wake now and then.
OTHERS_SLACK = 0.2
#: The shortest stretch `SamplingThreads` measures over: /proc/stat counts in 10 ms ticks.
MIN_INTERVAL_S = 0.2


def _busy_ticks(stat_path: str, cpus: set[int]) -> int | None:
    """Ticks the CPUs in `cpus` spent busy (everything but idle and iowait; guest time is
    already inside user time), from the kernel's per-CPU lines; None where unreadable."""
    try:
        with open(stat_path) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    total = 0
    for line in lines:
        name, _, rest = line.partition(" ")
        if not (name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus):
            continue
        fields = [int(v) for v in rest.split()]
        total += sum(fields[:8]) - fields[3] - fields[4]  # user..steal less idle, iowait
    return total


class SamplingThreads:
    """PyTorch's thread count for each window a sampler draws: this process's cores less the
    ones other processes kept busy while the previous window was drawn.

    Spinning OpenMP threads (libgomp's default) are fast on idle cores and 2.4-2.8x slower as
    soon as another process wants one of the two, since a thread spinning for its partner
    holds a core the partner needs; a single thread never waits for another. With this, the
    CLI's `generate` (spinning) took 0.68-0.76x the time of passive threads idle and 0.88-0.94x
    beside a busy process (`benchmarks/results/support/bench_threads_policy.txt`). Sampling gives the
    same trace at any thread count (`tests/test_runtime.py`), so this moves only speed.
    Training is left alone: its float sums do depend on the thread count.

    Others' load is the CPUs' busy time in /proc/stat (restricted to the CPUs this process
    may run on) less this process's own CPU time, over the wall time since the last look.
    The first window has no stretch to measure yet: it goes by the threads of other processes
    runnable when this is made (`running_elsewhere`), since one window on a contended core with
    spinning threads costs what several windows gain. Off (`update` does nothing) when not
    `active` (a model on a GPU), where the user fixed the count with OMP_NUM_THREADS, where
    /proc/stat cannot be read, and at one allowed CPU or thread. Use as a context manager,
    which puts the thread count back as it found it."""

    def __init__(self, active: bool = True, stat_path: str = "/proc/stat",
                 min_interval_s: float = MIN_INTERVAL_S, loadavg_path: str = "/proc/loadavg"):
        import torch

        self._torch = torch
        self.stat_path = stat_path
        self.min_interval_s = min_interval_s
        self.cpus = set(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else set(range(os.cpu_count() or 1))
        self.max_threads = torch.get_num_threads()
        self.hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        wanted = active and "OMP_NUM_THREADS" not in os.environ and len(self.cpus) > 1 and self.max_threads > 1
        self._last = self._sample() if wanted else None
        self.enabled = self._last is not None
        self.history: list[tuple[float, int]] = []  # (others' cores, threads chosen) per measurement
        running = running_elsewhere(loadavg_path) if self.enabled else None
        if running is not None:  # the first window's count
            self._set(choose_threads(len(self.cpus), self.max_threads, float(running)))

    def _sample(self) -> tuple[float, int, float] | None:
        busy = _busy_ticks(self.stat_path, self.cpus)
        if busy is None:
            return None
        own = os.times()
        return time.monotonic(), busy, own.user + own.system

    def others(self) -> float | None:
        """Cores other processes kept busy since the last call (None: too soon to tell)."""
        if not self.enabled:
            return None
        now = self._sample()
        if now is None or now[0] - self._last[0] < self.min_interval_s:
            return None
        wall = now[0] - self._last[0]
        busy_s = (now[1] - self._last[1]) / self.hz
        own_s = now[2] - self._last[2]
        self._last = now
        return max(0.0, busy_s - own_s) / wall

    def update(self) -> int:
        """Set and return the thread count for what comes next (unchanged until a stretch of
        at least `min_interval_s` has been measured)."""
        load = self.others()
        if load is None:
            return self._torch.get_num_threads()
        threads = choose_threads(len(self.cpus), self.max_threads, load)
        self._set(threads)
        self.history.append((load, threads))
        return threads

    def _set(self, threads: int) -> None:
        if threads != self._torch.get_num_threads():
            self._torch.set_num_threads(threads)

    def __enter__(self) -> SamplingThreads:
        return self

    def __exit__(self, *exc) -> None:
        self._set(self.max_threads)


def _running_threads(text: str) -> int:
    """Threads of this process in state R (running or runnable) from /proc/self/task/*/stat."""
    state = text[text.rindex(")") + 2:].split(" ", 1)[0]
    return 1 if state == "R" else 0


def running_elsewhere(loadavg_path: str = "/proc/loadavg", looks: int = 5) -> int | None:
    """Threads of other processes runnable right now: the kernel's count of runnable threads
    (/proc/loadavg's fourth field) less this process's own, the fewest of `looks` looks a
    millisecond apart (a daemon waking for an instant is not a neighbour; a busy process is
    runnable at every look). None where the files cannot be read. Counts every CPU, not only
    the ones this process may use."""
    best = None
    for i in range(looks):
        if i:
            time.sleep(0.001)
        try:
            with open(loadavg_path) as f:
                running = int(f.read().split()[3].split("/")[0])
            own = 0
            for task in os.listdir("/proc/self/task"):
                try:
                    with open(f"/proc/self/task/{task}/stat") as f:
                        own += _running_threads(f.read())
                except OSError:  # the thread ended between the listing and the read
                    continue
        except (OSError, ValueError, IndexError):
            return None
        value = max(0, running - max(own, 1))
        best = value if best is None else min(best, value)
    return best


def choose_threads(n_cpus: int, max_threads: int, others: float) -> int:
    """Threads for a process allowed `n_cpus` CPUs and at most `max_threads` threads, while
    other processes keep `others` cores busy: one core fewer for each started core beyond
    `OTHERS_SLACK`, at least one thread."""
    taken = max(0, math.ceil(others - OTHERS_SLACK))
    return max(1, min(max_threads, n_cpus - taken))

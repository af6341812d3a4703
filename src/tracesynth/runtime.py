"""Process-wide settings that make PyTorch fast on a small shared CPU machine.

Two settings, applied by the command line before torch is imported (`tune_cpu_process`), and
available to Python API users who want the same figures in their own process. Neither changes
what is computed, only how threads wait and where memory comes from:

- OpenMP threads wait passively. Threads that spin while waiting make PyTorch several times
  slower as soon as another process shares the cores (measured: 7-9x on a busy 2-core machine;
  `benchmarks/bench_threads.py`); passive waiting costs nothing when the machine is idle. Only
  effective before torch is first imported.
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
import os

_M_TRIM_THRESHOLD = -1  # <malloc.h>
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 * 1024 * 1024  # the top of glibc's own adaptive range (DEFAULT_MMAP_THRESHOLD_MAX)
TRIM_THRESHOLD = 256 * 1024 * 1024


def passive_openmp_threads() -> None:
    """OMP_WAIT_POLICY=PASSIVE unless the user set a policy (no effect once torch is loaded)."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


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


def tune_cpu_process() -> None:
    """Both settings above; what the command line does at start."""
    passive_openmp_threads()
    keep_freed_memory()

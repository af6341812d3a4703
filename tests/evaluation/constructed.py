"""Traces built in code whose properties are known exactly, for the evaluation and generator tests.

Import from any test folder as ``from evaluation.constructed import chain_trace`` (tests/ is on
sys.path through its conftest).
"""

from __future__ import annotations

import json

import numpy as np

from tracesynth import Trace, TraceMeta

NAMES = [
    "syscall_entry_read", "syscall_exit_read", "syscall_entry_write", "syscall_exit_write",
    "sched_switch", "irq_handler_entry", "irq_handler_exit", "syscall_entry_openat", "syscall_exit_openat",
    "timer_hrtimer_expire_entry",
]


def build(events: list[str] | np.ndarray, seed: int = 0, workload: str = "unit", tids=(100, 101, 102),
          switch_rate: float = 0.2) -> Trace:
    """A canonical trace with the given event names; ts gaps log-uniform in 10 ns..100 µs (a
    syscall's exit comes 100-1,000 ns after its entry when it follows it directly), tids from
    `tids` switching with probability `switch_rate`, cpus 0/1, ret on exits, small payloads."""
    rng = np.random.default_rng(seed)
    events = [str(e) for e in events]
    n = len(events)
    gaps = np.round(10 ** rng.uniform(1, 5, n)).astype(np.int64)
    for i in range(1, n):
        if events[i].startswith("syscall_exit_") and events[i - 1].startswith("syscall_entry_"):
            gaps[i] = rng.integers(100, 1000)
    switch = rng.random(n) < switch_rate
    switch[0] = True
    tid_draw = np.asarray(tids)[rng.integers(0, len(tids), n)]
    tid = tid_draw[np.maximum.accumulate(np.where(switch, np.arange(n), 0))]
    return Trace.from_pydict(
        {
            "ts": (1_000_000 + np.cumsum(gaps)).tolist(),
            "cpu": (tid % 2).tolist(),
            "tid": tid.tolist(),
            "pid": tid.tolist(),
            "procname": [f"proc{t}" for t in tid],
            "event": events,
            "ret": [int(rng.integers(0, 4096)) if e.startswith("syscall_exit_") else None for e in events],
            "payload": [json.dumps({"fd": 3}) if e.startswith("syscall_entry_") else None for e in events],
        },
        TraceMeta(source_format="test", workload=workload),
    )


def chain_events(n: int, seed: int = 0, n_names: int = 8, concentration: float = 0.3,
                 matrix_seed: int = 7) -> np.ndarray:
    """n event names from a stationary first-order Markov chain whose transition matrix is fixed
    by `matrix_seed` (so two calls with different `seed` are two samples of one process)."""
    matrix_rng = np.random.default_rng(matrix_seed)
    matrix = matrix_rng.dirichlet(np.full(n_names, concentration), size=n_names)
    cumulative = matrix.cumsum(1)
    rng = np.random.default_rng(seed)
    u = rng.random(n)
    state = 0
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        state = min(int(np.searchsorted(cumulative[state], u[i])), n_names - 1)
        out[i] = state
    return np.asarray(NAMES[:n_names], dtype=object)[out]


def chain_trace(n: int, seed: int = 0, workload: str = "unit", **kw) -> Trace:
    return build(chain_events(n, seed, **kw), seed=seed, workload=workload)


def cycle_trace(n: int, period: int = 6, seed: int = 0, workload: str = "cycle") -> Trace:
    """A strictly periodic event sequence (names cycling with the given period)."""
    names = np.asarray(NAMES[:period], dtype=object)
    return build(names[np.arange(n) % period], seed=seed, workload=workload)

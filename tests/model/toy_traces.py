"""Toy traces for model tests (a module of its own so tests can import it by name)."""

from __future__ import annotations

import numpy as np

from tracesynth import Trace, TraceMeta

CYCLE = ["syscall_entry_read", "syscall_exit_read", "sched_switch",
         "irq_handler_entry", "irq_handler_exit", "sched_switch"]
GAPS = [100, 2000, 50, 300_000, 700, 10]
TIDS = [10, 10, 10, 20, 20, 20]


def periodic_trace(n: int = 960, workload: str = "toy") -> Trace:
    return _cycle_trace(np.arange(n) % len(CYCLE), workload)


def drifting_trace(n: int = 960, workload: str = "toy") -> Trace:
    """The periodic trace with its last tenth (the validation tail) in random order: the better a
    model learns the cycle, the worse it predicts the tail. Overfitting in a few dozen steps."""
    idx = np.arange(n) % len(CYCLE)
    tail = n - n // 10
    idx[tail:] = np.random.default_rng(0).integers(0, len(CYCLE), n - tail)
    return _cycle_trace(idx, workload)


def _cycle_trace(idx: np.ndarray, workload: str) -> Trace:
    n = len(idx)
    events = [CYCLE[i] for i in idx]
    tids = [TIDS[i] for i in idx]
    return Trace.from_pydict(
        {"ts": (10**9 + np.cumsum([GAPS[i] for i in idx])).tolist(), "event": events, "tid": tids, "pid": tids,
         "cpu": [0] * n, "procname": ["reader" if t == 10 else "irq" for t in tids],
         "ret": [5 if e == "syscall_exit_read" else None for e in events]},
        TraceMeta(source_format="test", workload=workload))


def train_toy_model(steps: int = 1000, channels: str = "light"):
    """A tiny model trained on `periodic_trace()` until it reproduces it (a few seconds)."""
    import torch

    from tracesynth.model.config import SIZES, ModelConfig, TrainConfig
    from tracesynth.model.train import train

    torch.set_num_threads(1)
    return train([periodic_trace()], None, channels=channels, model_config=ModelConfig(context=32, **SIZES["tiny"]),
                 train_config=TrainConfig(steps=steps, batch_size=8, lr=5e-3, val_every=0, checkpoint_every=0))


STARTUP = ["sched_process_exec", "syscall_entry_openat", "syscall_exit_openat",
           "syscall_entry_mmap", "syscall_exit_mmap"]


def startup_trace(n: int = 480, workload: str = "toy") -> Trace:
    """`STARTUP` once, then the periodic cycle: events that occur only where a trace begins."""
    idx = np.arange(n - len(STARTUP)) % len(CYCLE)
    events = STARTUP + [CYCLE[i] for i in idx]
    gaps = [1000] * len(STARTUP) + [GAPS[i] for i in idx]
    tids = [10] * len(STARTUP) + [TIDS[i] for i in idx]
    rets = [3 if e == "syscall_exit_openat" else 5 if e == "syscall_exit_read" else None for e in events]
    return Trace.from_pydict(
        {"ts": (10**9 + np.cumsum(gaps)).tolist(), "event": events, "tid": tids, "pid": tids, "cpu": [0] * n,
         "procname": ["reader" if t == 10 else "irq" for t in tids], "ret": rets},
        TraceMeta(source_format="test", workload=workload))

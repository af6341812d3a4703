"""How each training run begins, per workload: the start-up anchor's table.

Real runs of one command begin alike. Leave out the scheduler events and the bundled runs of a
workload agree event for event through their first 3,000 events (fileio, scimark, tar, gzip) or
most of them (sqlite 2,145 events, pybench 1,240; build 473 and stream 124, where `make -j2` and
OpenMP threads interleave); with them, the first 256 events of two runs are 0-8 edits apart,
all of them scheduler events. A sampled trace that
drops or doubles a start-up call (fileio's loader `pread64` pairs, a second `execve`) loses
what each such call is to a next-event classifier: a whole macro-F1 class. At 32,768 events
that is one trace start among two training runs' worth of steady state; in a synthetic set of
one trace per training run, as much data as real (`evaluation.synthetic_events: train`), every
trace's start-up counts, and there the fileio model that dropped them scored 0.956 of real
against 0.981 anchored (dev probe, fold 1, three seeds).

The table keeps the first `STARTUP_EVENTS` events of every training run, as codes of every
channel the encoder has (thread ids as slots in order of first appearance, as a window holds
them), and the sampler's start-up anchor (`generate(start_anchor=K)`) clamps a trace's first K
events to one run's (picked by the sampling seed), as known events of its first window; the model
draws the rest of that window around them. The anchored events are decoded like drawn ones:
times within their gap bins, thread ids and return values drawn afresh, so only event types (and
the classes of the other channels) come from training. What it costs: the first K events of
every trace are a training run's, which the evaluation's copy share counts (one 256-event span
per trace at K = 256).

Kept with the model in `startups.safetensors` (safetensors, never pickle). A model saved before
this table existed has none: no anchor (`benchmarks/refit_startups.py` adds it from the
model's training runs without touching the weights).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

STARTUP_EVENTS = 1024  # events kept per training run: an anchor is at most a window's seam prefix


class StartupTable:
    """The first events of each training run, as channel codes, per workload."""

    def __init__(self, runs: dict[str, list[dict[str, np.ndarray]]] | None = None):
        self.runs: dict[str, list[dict[str, np.ndarray]]] = {w: list(r) for w, r in (runs or {}).items()}

    @classmethod
    def fit(cls, starts: Iterable[tuple[str, dict[str, np.ndarray]]], events: int = STARTUP_EVENTS) -> StartupTable:
        """`starts`: (workload, codes of one training trace per channel) pairs, in training order;
        each run's first `events` are kept."""
        runs: dict[str, list[dict[str, np.ndarray]]] = {}
        for workload, codes in starts:
            if not codes or not len(next(iter(codes.values()))):
                continue
            runs.setdefault(workload, []).append(
                {ch: np.asarray(v[:events], dtype=np.int64).copy() for ch, v in codes.items()})
        return cls(runs)

    def knows(self, workload: str) -> bool:
        return bool(self.runs.get(workload))

    def chosen(self, workload: str, seed: int) -> int:
        """Index (in training order) of the run that `seed` picks: `seed` modulo the number of
        runs, so consecutive seeds take the runs in turn."""
        runs = self.runs.get(workload)
        if not runs:
            raise KeyError(workload)
        return seed % len(runs)

    def pick(self, workload: str, seed: int, events: int) -> dict[str, np.ndarray]:
        """The first `events` (at most) of the training run that `seed` picks (`chosen`)."""
        run = self.runs[workload][self.chosen(workload, seed)]
        return {ch: v[:events].copy() for ch, v in run.items()}

    def to_arrays(self) -> dict[str, np.ndarray]:
        arrays = {f"{ch}/{w}/{i}": v for w, runs in self.runs.items() for i, run in enumerate(runs)
                  for ch, v in run.items()}
        arrays["version"] = np.array([1], dtype=np.int64)
        return arrays

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> StartupTable:
        runs: dict[str, dict[int, dict[str, np.ndarray]]] = {}
        for key, value in arrays.items():
            if key == "version":
                continue
            ch, _, rest = key.partition("/")
            w, _, i = rest.rpartition("/")
            if not ch or not w or not i.isdigit():
                raise ValueError(f"bad start-up entry {key!r}")
            value = np.asarray(value, dtype=np.int64)
            if value.ndim != 1:
                raise ValueError(f"start-up entry {key!r} must be one row of codes")
            runs.setdefault(w, {}).setdefault(int(i), {})[ch] = value
        out: dict[str, list[dict[str, np.ndarray]]] = {}
        for w, by_index in runs.items():
            if sorted(by_index) != list(range(len(by_index))):
                raise ValueError(f"start-up runs of {w!r} are not numbered 0..{len(by_index) - 1}")
            ordered = [by_index[i] for i in range(len(by_index))]
            for i, run in enumerate(ordered):
                if len({len(v) for v in run.values()}) != 1 or set(run) != set(ordered[0]):
                    raise ValueError(f"start-up run {i} of {w!r}: channels of different lengths or names")
            out[w] = ordered
        return cls(out)

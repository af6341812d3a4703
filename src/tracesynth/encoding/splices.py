"""The training runs' event sequences and gaps, per workload: the span splice's table.

Where real runs of a workload share most of their long spans (a training run's 256-grams found in
the other runs: sqlite 0.50, pybench 0.56, build 0.59, scimark 0.72, gzip 0.78, fileio 0.90), a
real run is mostly the same loop iterations as the others, and what tells a sampled trace's
windows from real ones is its slips: a loop iteration with a read too many, a branch taken out of
turn (docs/model.md, "What the window classifier reads"). The span splice
(`sampling.span_splice`) replaces each stretch of a sampled trace that no training 64-gram covers
with the training events between the same two 64-event anchors, so the model decides where the
trace goes and training supplies the iterations. It needs the runs themselves, not hashes: the
event codes and the gap (ns) before each event.

Kept with a light model (event types and gaps, the channels the splice replaces) in
`splices.safetensors` (safetensors, never pickle), only for the workloads the splice applies to (`SpanTable.natural` at least `SHARED_SPANS`: the copy guard's threshold,
from the other side). What that keeps: the training runs' event types and inter-event times, no
thread ids, arguments or return values; 16 bytes per training event (sqlite's two runs: 2.1 MB).
A model saved before this table existed has none: no splice (`benchmarks/refit_splices.py`
adds it from the model's training runs without touching the weights).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np


class RunTable:
    """Each training run's event codes and gaps, per workload (runs concatenated; `starts` says
    where each begins, so no span crosses two runs)."""

    def __init__(self, codes: dict[str, np.ndarray] | None = None, gaps: dict[str, np.ndarray] | None = None,
                 starts: dict[str, np.ndarray] | None = None):
        self.codes: dict[str, np.ndarray] = dict(codes or {})  # int64 event codes
        self.gaps: dict[str, np.ndarray] = dict(gaps or {})  # int64 ns since the event before (0 first)
        self.starts: dict[str, np.ndarray] = dict(starts or {})  # int64 offset of each run

    @classmethod
    def fit(cls, runs: Iterable[tuple[str, np.ndarray, np.ndarray]], workloads: Iterable[str] | None = None) -> RunTable:
        """`runs`: (workload, event codes, gaps in ns) of each training trace; `workloads`: keep
        only these (None: all)."""
        keep = None if workloads is None else set(workloads)
        parts: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
        for workload, codes, gaps in runs:
            if (keep is None or workload in keep) and len(codes):
                if len(codes) != len(gaps):
                    raise ValueError(f"{workload}: {len(codes)} event codes but {len(gaps)} gaps")
                parts.setdefault(workload, []).append((np.asarray(codes, dtype=np.int64),
                                                       np.asarray(gaps, dtype=np.int64)))
        codes, gaps, starts = {}, {}, {}
        for w, pairs in parts.items():
            codes[w] = np.concatenate([c for c, _ in pairs])
            gaps[w] = np.concatenate([g for _, g in pairs])
            starts[w] = np.cumsum([0] + [len(c) for c, _ in pairs[:-1]]).astype(np.int64)
        return cls(codes, gaps, starts)

    def knows(self, workload: str) -> bool:
        return workload in self.codes

    def runs(self, workload: str) -> list[tuple[np.ndarray, np.ndarray]]:
        """(codes, gaps) of each training run of `workload`."""
        codes, gaps, starts = self.codes[workload], self.gaps[workload], self.starts[workload]
        ends = [*starts[1:], len(codes)]
        return [(codes[a:b], gaps[a:b]) for a, b in zip(starts, ends)]

    # --- persistence: tensors for safetensors ---------------------------------------------
    def to_arrays(self) -> dict[str, np.ndarray]:
        arrays = {f"codes/{w}": v for w, v in self.codes.items()}
        arrays.update({f"gaps/{w}": v for w, v in self.gaps.items()})
        arrays.update({f"starts/{w}": v for w, v in self.starts.items()})
        return arrays

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> RunTable:
        def table(prefix: str) -> dict[str, np.ndarray]:
            return {key.split("/", 1)[1]: np.ascontiguousarray(v, dtype=np.int64)
                    for key, v in arrays.items() if key.startswith(prefix)}
        codes, gaps, starts = table("codes/"), table("gaps/"), table("starts/")
        for w in codes:
            if w not in gaps or len(gaps[w]) != len(codes[w]) or w not in starts:
                raise ValueError(f"splice table for {w!r} is incomplete (codes, gaps and starts must match)")
        return cls(codes, gaps, starts)

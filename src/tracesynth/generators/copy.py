"""`Copy`: random real training chunks, concatenated — the copying reference.

It is the upper reference for utility and fidelity (its chunks *are* real) and the lower one
for privacy: the privacy section must flag it. Each chunk is `chunk_length` consecutive training
events of one workload (a start drawn uniformly over all positions of all its traces); chunks are
concatenated until `n_events`, the last one cut. Timestamps are rebuilt so the output is
canonical: inside a chunk the real gaps are kept, between chunks the gap is the real gap that
preceded the chunk's first event (0 when it started a trace).
"""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa

from tracesynth.errors import ConfigError
from tracesynth.generators.base import Generator
from tracesynth.schema import Trace, TraceMeta


class Copy(Generator):
    """Concatenation of random real chunks of `chunk_length` events (see module)."""

    name = "copy"

    def __init__(self, chunk_length: int = 4096, random_state: int = 0):
        super().__init__(random_state=random_state)
        self.chunk_length = chunk_length

    def _fit(self, traces_by_workload: dict[str, list[Trace]]) -> None:
        length = self.chunk_length
        if not isinstance(length, int) or isinstance(length, bool) or length < 1:
            raise ConfigError(f"copy: chunk_length must be a positive integer, got {length!r}")
        self.tables_ = {w: [t.events for t in ts] for w, ts in traces_by_workload.items()}

    def _sample(self, n_events: int, workload: str, seed: int) -> Trace:
        started = time.perf_counter()
        rng = np.random.default_rng(seed)
        tables = self.tables_[workload]
        sizes = np.array([t.num_rows for t in tables], dtype=np.int64)
        pieces, gaps, total = [], [], 0
        while total < n_events:
            position = int(rng.integers(0, sizes.sum()))
            which = int(np.searchsorted(np.cumsum(sizes), position, side="right"))
            table = tables[which]
            start = min(position - int(sizes[:which].sum()), max(table.num_rows - self.chunk_length, 0))
            take = min(self.chunk_length, table.num_rows - start, n_events - total)
            chunk = table.slice(start, take)
            ts = chunk.column("ts").to_numpy().astype(np.int64)
            lead = int(ts[0] - table.column("ts")[start - 1].as_py()) if start > 0 else 0
            gaps.append(np.concatenate([[lead], np.diff(ts)]))
            pieces.append(chunk)
            total += take
        events = pa.concat_tables(pieces)
        gaps_ns = np.concatenate(gaps)
        gaps_ns[0] = 0
        start_ts = int(tables[0].column("ts")[0].as_py())
        events = events.set_column(0, "ts", pa.array(start_ts + np.cumsum(gaps_ns), pa.int64()))
        seconds = time.perf_counter() - started
        extra = {"generator": self.name, "chunk_length": self.chunk_length, "seed": seed,
                 "sample_seconds": round(seconds, 3),
                 "events_per_second": round(n_events / max(seconds, 1e-9), 1)}
        return Trace(events, TraceMeta(source_format="synthetic", workload=workload, extra=extra))

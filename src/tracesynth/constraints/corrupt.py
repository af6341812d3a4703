"""Break a real trace the ways a generator does, to exercise `check` and `repair`.

Used by the repair tests and `benchmarks/bench_constraints.py`; also handy for users who want to
see what `repair` does to their own traces.
"""

from __future__ import annotations

import numpy as np

from tracesynth.schema import Trace


def corrupt(trace: Trace, per_kind: int, seed: int = 0) -> Trace:
    """Lose `per_kind` syscall entries, corrupt as many return values, rename as many threads,
    move as many events to another CPU and step as many timestamps back (deterministic in
    `seed`)."""
    rng = np.random.default_rng(seed)
    frame = trace.events.to_pandas()
    threads = np.flatnonzero(frame.tid.fillna(0).to_numpy() > 0)
    entries = np.flatnonzero(frame.event.str.startswith("syscall_entry_").to_numpy())
    exits = np.flatnonzero(frame.event.str.startswith("syscall_exit_").to_numpy())
    frame.loc[rng.choice(exits, per_kind, replace=False), "ret"] = -99_999
    frame.loc[rng.choice(threads, per_kind, replace=False), "procname"] = "bogus"
    moved = rng.choice(threads, per_kind, replace=False)
    frame.loc[moved, "cpu"] = (frame.cpu.to_numpy()[moved] + 1) % max(int(frame.cpu.max()) + 1, 2)
    back = rng.choice(len(frame) - 2, per_kind, replace=False) + 1
    frame.loc[back, "ts"] = frame.ts.to_numpy()[back] - 5_000_000
    frame = frame.drop(index=rng.choice(entries, per_kind, replace=False)).reset_index(drop=True)
    return Trace.from_pandas(frame, trace.meta)

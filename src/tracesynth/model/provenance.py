"""What a model was trained on: a fingerprint of each training trace, kept in `state.json`.

A model directory travels: trained on a GPU machine and sampled here, or copied between
experiment runs. Its numbers mean something only against held-out data it never saw, so before
an experiment uses a model it did not train itself (`tracesynth experiment --models`), the
fingerprints are compared with the experiment's own training split: a model trained on the
test run would otherwise score as if it generalised. A resumed training checks them too.

A fingerprint is cheap and exact enough to tell runs apart: the trace's workload, its event
count, first and last timestamp, and a SHA-256 of its timestamps (8 bytes an event; 200,000
events hash in a few milliseconds). Models saved before fingerprints were kept have only the
encoder's first timestamp per workload, which identifies the first training trace.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from tracesynth.schema import Trace


def fingerprint(trace: Trace) -> dict:
    ts = np.ascontiguousarray(trace.column("ts").to_numpy(zero_copy_only=False), dtype=np.int64)
    return {"workload": trace.meta.workload or "default", "events": int(len(ts)),
            "first_ts": int(ts[0]) if len(ts) else None, "last_ts": int(ts[-1]) if len(ts) else None,
            "ts_sha256": hashlib.sha256(ts.tobytes()).hexdigest()[:16]}


def fingerprints(traces: Sequence[Trace]) -> list[dict]:
    return [fingerprint(t) for t in traces]


def data_mismatch(recorded: list[dict], traces: Sequence[Trace], what: str = "training") -> str | None:
    """Why `traces` are not the `what` (training or validation) traces `recorded` describes
    (None: they are, in that order)."""
    given = fingerprints(traces)
    if len(recorded) != len(given):
        return f"{'validated' if what == 'validation' else 'trained'} on {len(recorded)} traces, here {len(given)}"
    for i, (was, now) in enumerate(zip(recorded, given)):
        for key in ("workload", "events", "first_ts", "last_ts", "ts_sha256"):
            if was.get(key) != now[key]:
                return (f"{what} trace {i + 1} differs in {key.replace('_', ' ')}: "
                        f"{was.get(key)} there, {now[key]} here")
    return None


def start_mismatch(start_ts: dict[str, int], traces: Sequence[Trace]) -> str | None:
    """The check left for models saved before fingerprints: each workload's first training
    trace begins at the timestamp the encoder kept for it."""
    firsts: dict[str, int] = {}
    for trace in traces:
        if len(trace):
            firsts.setdefault(trace.meta.workload or "default", int(trace.column("ts")[0].as_py()))
    for workload, ts in start_ts.items():
        if firsts.get(workload) != int(ts):
            return (f"its first {workload} training trace began at {ts}, "
                    f"this split's at {firsts.get(workload)}")
    return None

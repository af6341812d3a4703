"""Cost: what the evaluation itself cost, and what the generator reported about its own cost.

Peak memory is the process's peak resident set (`resource.getrusage`), which includes numpy and
torch buffers that tracemalloc would miss. Generator figures come from the synthetic traces'
`meta.extra` when the generator wrote them: `train_seconds`, `sample_seconds`,
`events_per_second`.
"""

from __future__ import annotations

import resource
import sys
import time
from collections.abc import Sequence
from contextlib import contextmanager

from tracesynth.schema import Trace


def peak_rss_mb() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024  # bytes on macOS, KiB on Linux


class Stopwatch:
    """Named wall-clock sections: `with watch.section("fidelity"): ...`."""

    def __init__(self):
        self.started = time.perf_counter()
        self.sections: dict[str, float] = {}

    @contextmanager
    def section(self, name: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.sections[name] = self.sections.get(name, 0.0) + time.perf_counter() - start

    def total(self) -> float:
        return time.perf_counter() - self.started


@contextmanager
def single_threaded():
    """Run numeric libraries on one thread. On a shared 2-core machine, OpenMP (gradient
    boosting) and torch threads contending with other processes were 10-20x slower than one
    thread; one thread also keeps results bit-identical across machines."""
    import torch
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(limits=1):
            yield
    finally:
        torch.set_num_threads(before)


def generator_cost(synthetic: Sequence[Trace]) -> dict:
    keys = ("generator", "train_seconds", "sample_seconds", "events_per_second")
    found = [{k: t.meta.extra[k] for k in keys if k in t.meta.extra} for t in synthetic]
    found = [f for f in found if f]
    return {"reported": bool(found), "per_trace": found}

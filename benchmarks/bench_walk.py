"""Sampling speed of the no-model walk (`resample`), with a frequent k-gram's places kept per state.

The walk draws among every place in training where the last 64 events occur, at nearly every event
on loop-heavy workloads (fileio's loop 64-gram occurs 17,991 times in its training runs).
`Training.places_after` keeps such a gram's places, per machine state for whole rows, instead of
finding and filtering them at each draw. This prints, per workload and channel set, the walk's
events/s with places kept (the default) and with none kept (`OFTEN` set past any gram's count),
measured in the same run on the same fitted walk (its indexes built by a first short walk), their
ratio, and whether both gave the same trace (they must: keeping places changes no draw). The
fast walks (300,000+ events/s) take tens of milliseconds: their ratios are noise-bound.

    .venv/bin/python benchmarks/bench_walk.py [--events 16384] [--channels light full] [--workloads ...]
"""

from __future__ import annotations

import argparse
import time

import tracesynth.datasets as ds
from tracesynth.generators.resample import Resample
from tracesynth.sampling import span_splice


def _timed(generator: Resample, workload: str, n_events: int, often: int):
    span_splice.OFTEN = often
    generator.training_[workload]._after.clear()
    started = time.perf_counter()
    trace = generator.sample(n_events, workload=workload, seed=0)
    return n_events / (time.perf_counter() - started), trace.events


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=16384)
    parser.add_argument("--channels", nargs="+", default=["light", "full"])
    parser.add_argument("--workloads", nargs="+", default=ds.workloads())
    args = parser.parse_args(argv)
    kept = span_splice.OFTEN
    print("| workload | channels | events/s, places kept | events/s, none kept | ratio | same trace |")
    print("|---|---|---|---|---|---|")
    ratios = []
    try:
        for workload in args.workloads:
            train = [ds.load(workload, r) for r in (1, 2)]
            for channels in args.channels:
                generator = Resample(channels=channels).fit(train)
                generator.sample(1024, workload=workload, seed=1)  # builds the indexes both timings use
                fast, a = _timed(generator, workload, args.events, kept)
                slow, b = _timed(generator, workload, args.events, 10**12)
                ratios.append(fast / slow)
                print(f"| {workload} | {channels} | {fast:,.0f} | {slow:,.0f} | {fast / slow:.2f} | "
                      f"{'yes' if a.equals(b) else 'NO'} |", flush=True)
    finally:
        span_splice.OFTEN = kept
    print(f"\ngeometric mean ratio {_geomean(ratios):.2f} ({len(ratios)} walks of {args.events:,} events, "
          "trained on runs 1-2, seed 0)")
    return 0


def _geomean(values: list[float]) -> float:
    product = 1.0
    for v in values:
        product *= v
    return product ** (1 / len(values)) if values else float("nan")


if __name__ == "__main__":
    raise SystemExit(main())

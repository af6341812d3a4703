"""How long `evaluate` takes on 1M synthetic vs 1M real events (target: < 10 min on 2 cores).

Real data: the shared LTTng trace many-threads (240,644 events), its first half tiled to 1M
events as the training side and its second half tiled to 1M as the test side (timestamps
shifted so each side stays canonical). Synthetic: `Markov(order=8)` fitted on the training
side, 1M events. The same evaluation is timed on 100k-event sides in the same run, and the
ratio says how the cost scales (10 would be linear; caps per metric keep it below).

    .venv/bin/python benchmarks/bench_evaluate.py [--events 1000000] [--seeds 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import pyarrow as pa

import tracesynth
from tracesynth.evaluation.runner import evaluate
from tracesynth.generators.markov import Markov

SHARED_CTF = Path(os.environ.get("TRACESYNTH_SHARED_CTF", Path(__file__).resolve().parents[2] / "shared/data/ctf"))


def tiled(trace: tracesynth.Trace, n_events: int, workload: str) -> tracesynth.Trace:
    """`trace` repeated end to end (timestamps shifted) and cut at `n_events`."""
    parts, total, shift = [], 0, 0
    ts = trace.column("ts").to_numpy()
    span = int(ts[-1] - ts[0]) + 1000
    while total < n_events:
        table = trace.events.slice(0, n_events - total)
        table = table.set_column(0, "ts", pa.array(table.column("ts").to_numpy() + shift, pa.int64()))
        parts.append(table)
        total += table.num_rows
        shift += span
    return tracesynth.Trace(pa.concat_tables(parts), trace.meta).with_meta(workload=workload)


def run(n_events: int, seeds: int, source: tracesynth.Trace) -> tuple[float, dict]:
    half = len(source) // 2
    train = tiled(source.slice(0, half), n_events, "many-threads")
    test = tiled(source.slice(half), n_events, "many-threads")
    started = time.perf_counter()
    synthetic = Markov(order=8, random_state=0).fit([train]).sample(n_events)
    generate_s = time.perf_counter() - started
    started = time.perf_counter()
    report = evaluate([train], [test], [synthetic], seeds=seeds)
    return time.perf_counter() - started, {"generate_s": generate_s, "report": report}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    source_path = SHARED_CTF / "many-threads"
    if not (source_path / "metadata").exists():
        print(f"shared trace not found at {source_path}", file=sys.stderr)
        return 1
    source = tracesynth.load(source_path)
    small = max(args.events // 10, 20_000)
    small_s, _ = run(small, args.seeds, source)
    big_s, info = run(args.events, args.seeds, source)
    report = info["report"]
    print(f"evaluate {args.events:,} synthetic vs {args.events:,} real test (+{args.events:,} train) events, "
          f"{args.seeds} seeds, {os.cpu_count()} CPUs visible:")
    print(f"  wall time      {big_s:8.1f} s   ({'within' if big_s < 600 else 'OVER'} the 600 s budget)")
    print(f"  throughput     {3 * args.events / big_s:8,.0f} events/s (train + test + synthetic)")
    print(f"  {small:,}-event run {small_s:.1f} s; scaling ratio {big_s / small_s:.2f} for "
          f"{args.events / small:.0f}x the events")
    print(f"  peak memory    {report['cost']['peak_rss_mb']:8.0f} MB")
    print("  sections (s)   " + ", ".join(f"{k} {v:.1f}" for k, v in report["cost"]["section_seconds"].items()))
    print(f"  (Markov order-8 generation of {args.events:,} events: {info['generate_s']:.1f} s, not counted)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

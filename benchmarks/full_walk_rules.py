"""Rule breaks of the whole-row walk (`resample --channels full`) on every bundled workload.

The walk copies each event's thread, CPU, return value and payload from training; it jumps only
between places whose CPUs run alike and renames threads across jumps (sampling/thread_seams.py).
This prints, per workload and held-out run, the kernel-rule breaks per 1,000 events of a few
sampled traces (`tracesynth check`'s rules), the rules broken, the training runs' own rate (real
recordings lose a `sched_switch` now and then: cpu-switch breaks the walk copies with their rows),
and the same walk with threads not renamed and jumps not restricted (rows copied as they were)
for the baseline:

    .venv/bin/python benchmarks/full_walk_rules.py [--events 32768] [--seeds 0 1] [--held-out 3 1]
"""

from __future__ import annotations

import argparse
from collections import Counter

import numpy as np
import pyarrow as pa

import tracesynth.datasets as ds
from tracesynth.constraints import check
from tracesynth.generators.resample import Resample
from tracesynth.sampling.span_splice import Training, resample
from tracesynth.schema import Trace, TraceMeta


def _as_they_were(generator: Resample, workload: str, n_events: int, seed: int) -> Trace:
    """The baseline: a walk that jumps on event types alone, its rows copied whole, threads as
    they were in training (what `resample --channels full` did before thread_seams)."""
    plain = Training(generator.training_[workload].runs)  # no machine states
    walked = resample(plain, n_events, generator.piece, np.random.default_rng([seed, generator.piece]))
    rows = np.concatenate([np.arange(a, b) for a, b in walked.steps])[:n_events]
    return Trace(generator.tables_[workload].take(pa.array(rows)), TraceMeta(workload=workload))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=32768)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--held-out", type=int, nargs="+", default=[3, 1])
    args = parser.parse_args(argv)
    print("| workload | held out | rule breaks per 1,000, renamed (seeds) | rules broken | training runs' own "
          "| rows as they were |")
    print("|---|---|---|---|---|---|")
    means, reals = [], []
    for workload in ds.workloads():
        for held in args.held_out:
            train = [ds.load(workload, r) for r in ds.runs(workload) if r != held]
            generator = Resample(channels="full").fit(train)
            own = [check(t) for t in train]
            real = 1000 * sum(r.violations for r in own) / sum(r.events for r in own)
            rates, rules, before = [], Counter(), []
            for seed in args.seeds:
                report = check(generator.sample(args.events, workload=workload, seed=seed))
                rates.append(report.per_1000)
                rules.update({k: v for k, v in report.per_rule.items() if v})
                before.append(check(_as_they_were(generator, workload, args.events, seed)).per_1000)
            means.append(np.mean(rates))
            reals.append(real)
            print(f"| {workload} | {held} | {' / '.join(f'{r:.2f}' for r in rates)} | "
                  f"{', '.join(f'{k} {v}' for k, v in rules.most_common()) or '-'} | {real:.2f} | "
                  f"{' / '.join(f'{r:.0f}' for r in before)} |", flush=True)
    print(f"\nmean rule breaks per 1,000 events, renamed: {np.mean(means):.3f} "
          f"({len(means)} workload-folds x {len(args.seeds)} seeds, {args.events:,} events each); "
          f"the training runs' own: {np.mean(reals):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

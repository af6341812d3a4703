"""What the support corrector costs and buys, in one run on this machine: for each trained model,
generate the same trace (same seed, guided) with `support_rounds` 0 and with the default, in
alternating order, and print events/s, the ratio, and the share of the trace's event 8-grams
that no training run contains (what the corrector removes), beside a training run's own share.

    .venv/bin/python benchmarks/bench_support.py --models out/light4096-3000-support/models \\
        [--workloads gzip,stream] [--events 32768] [--repeats 2]

Models must carry their 8-gram table (`support.safetensors`: every model trained since the
corrector exists; older ones: see benchmarks/results/experiments-light4096-3000-support/
COMMAND.md). The machine is noisy: read the ratio, measured in the same run, not the rates.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=Path, required=True, help="directory of tracesynth__W__... model dirs")
    parser.add_argument("--workloads", default=None, help="comma-separated subset (default: every model found)")
    parser.add_argument("--events", type=int, default=32768)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    from tracesynth.generators.diffusion import SUPPORT_ROUNDS, TraceSynth

    if not args.models.is_dir():
        print(f"{args.models}: not a directory of model directories", file=sys.stderr)
        return 2
    wanted = set(args.workloads.split(",")) if args.workloads else None
    dirs = sorted(d for d in args.models.iterdir() if d.is_dir() and d.name.startswith("tracesynth__"))
    if wanted:
        dirs = [d for d in dirs if d.name.split("__")[1] in wanted]
    if not dirs:
        print(f"{args.models}: no tracesynth__* model directories" + (f" for {args.workloads}" if wanted else ""),
              file=sys.stderr)
        return 2
    print(f"{'workload':10s} {'rounds':>6s} {'events/s':>10s} {'unseen 8-grams':>15s}   ratio (on/off time)")
    for d in dirs:
        workload = d.name.split("__")[1]
        gen = TraceSynth.load(d, device="cpu")
        support = gen.encoder_.support
        if support is None or workload not in support.grams:
            print(f"{workload:10s} skipped: the model has no 8-gram table", file=sys.stderr)
            continue
        times: dict[int, list[float]] = {0: [], SUPPORT_ROUNDS: []}
        unseen: dict[int, float] = {}
        for _ in range(args.repeats):
            for rounds in (0, SUPPORT_ROUNDS):
                gen.support_rounds = rounds
                start = time.perf_counter()
                trace = gen.generate(args.events, workload, args.seed, constraints="guided")
                times[rounds].append(time.perf_counter() - start)
                unseen[rounds] = support.novel_share(gen.encoder_.encode(trace)["event"], workload)
        note = "" if support.applies(workload) else "  (open grammar: corrector off)"
        for rounds in (0, SUPPORT_ROUNDS):
            rate = args.events / statistics.median(times[rounds])
            print(f"{workload:10s} {rounds:6d} {rate:10,.0f} {unseen[rounds]:15.2%}")
        ratio = statistics.median(times[SUPPORT_ROUNDS]) / statistics.median(times[0])
        print(f"{'':10s} {'':6s} {'':10s} {'':15s}   {ratio:.2f}x time; a training run's own unseen share "
              f"{support.natural.get(workload, 0.0):.2%}{note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

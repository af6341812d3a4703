"""What the sampler's table-driven passes cost and buy, in one run on this machine: for each
trained model, generate the same trace (same seed, guided) with the pass off and at its default
rounds, in alternating order, and print events/s, the ratio, and what the pass changes:

- `--corrector support` (default): the support corrector; the share of the trace's event 8-grams
  that no training run contains, beside a training run's own share;
- `--corrector copy`: the copy guard; the share of the trace's event 256-grams that occur
  verbatim in a training run, in the whole trace and in its first window (the start-up);
- `--corrector guide`: the guide's rounds after each window's last step; the rule breaks per
  1,000 events the sampler leaves before repair (serial syscalls out of one-at-a-time order for
  a light model of a multi-threaded workload, else `check`'s violations);
- `--corrector ngram`: the n-gram prior at draw time (weight 0 against the default, or 1 where
  the default is off; `--ngram-rounds R` sets its parts per step); the share of unseen 8-grams,
  as for the support corrector;
- `--corrector cadence`: the cadence scaffold (off against on); for each steady rhythm of the
  workload's training runs, the share of the trace's gaps between its anchor events that lie in
  training's steady range (workloads without one are skipped);
- `--corrector start`: the denoising steps of the trace's first window (`start_steps`, 16 = as
  every window, against 64); the event types among the trace's first 512 events (a start-up
  that drops a one-off loader call has fewer).

    .venv/bin/python benchmarks/bench_support.py --models out/light4096-3000-support/models \\
        [--corrector support|copy|guide|ngram|cadence|start] [--workloads gzip,stream] [--events 32768] [--repeats 2] \\
        [--levels 1,4]

`--levels A,B,...` compares those settings of the pass (rounds, or the prior's weight) instead of
off against the default; the ratio is each one's time over the first one's.

Models must carry their tables (`support.safetensors`, and `copies.safetensors` for the copy
guard: every model trained since they exist; older ones: see benchmarks/results/
experiments-light4096-3000-copyguard/COMMAND.md). The machine is noisy: read the ratio, measured
in the same run, not the rates.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from model_dirs import model_dirs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=Path, required=True, help="directory of tracesynth__W__... model dirs")
    parser.add_argument("--workloads", default=None, help="comma-separated subset (default: every model found)")
    parser.add_argument("--events", type=int, default=32768)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--corrector", choices=("support", "copy", "guide", "ngram", "cadence", "start"),
                        default="support")
    parser.add_argument("--ngram-rounds", type=int, default=None,
                        help="with --corrector ngram: parts a step (default: the sampler's)")
    parser.add_argument("--levels", default=None,
                        help="comma-separated settings to compare, the first as the baseline (default: off, then the default)")
    args = parser.parse_args(argv)
    if args.ngram_rounds is not None and args.ngram_rounds < 1:
        parser.error(f"--ngram-rounds must be >= 1, got {args.ngram_rounds}")
    levels = None  # None: off, then the pass's default (known once the defaults are imported)
    if args.levels is not None:
        try:
            levels = [float(v) if args.corrector == "ngram" else int(v) for v in args.levels.split(",")]
        except ValueError:
            parser.error(f"--levels takes comma-separated {'numbers' if args.corrector == 'ngram' else 'integers'}, got {args.levels!r}")
        if len(levels) < 2 or len(set(levels)) != len(levels) or min(levels) < 0:
            parser.error(f"--levels needs two or more distinct non-negative settings, got {args.levels!r}")

    from tracesynth.constraints import check
    from tracesynth.encoding.serial import overlaps
    from tracesynth.generators.diffusion import (COPY_ROUNDS, GUIDE_ROUNDS, NGRAM_ROUNDS, NGRAM_WEIGHT,
                                                 SUPPORT_ROUNDS, TraceSynth)

    dirs = model_dirs(args.models, args.workloads)
    if dirs is None:
        return 2
    copy, guide = args.corrector == "copy", args.corrector == "guide"
    setting, default, measured = {
        "support": ("support_rounds", SUPPORT_ROUNDS, "unseen 8-grams"),
        "copy": ("copy_rounds", COPY_ROUNDS, "copied 256-grams (first window)"),
        "guide": ("guide_rounds", GUIDE_ROUNDS, "rule breaks per 1k before repair"),
        "ngram": ("ngram_weight", NGRAM_WEIGHT or 1.0, "unseen 8-grams"),
        "cadence": ("cadence", 1, "anchor gaps in training's range"),
        "start": ("start_steps", 64, "event types in the first 512"),
    }[args.corrector]
    levels = levels or ([16, default] if args.corrector == "start" else [0, default])
    if args.corrector == "start" and min(levels) < 1:
        parser.error("--corrector start: steps must be at least 1")
    print(f"{'workload':10s} {dict(ngram='weight', start='steps').get(args.corrector, 'rounds'):>6s} {'events/s':>10s} {measured:>32s}   ratio (time / the first row's)")
    for d in dirs:
        workload = d.name.split("__")[1]
        gen = TraceSynth.load(d, device="cpu")
        support, copies = gen.encoder_.support, gen.encoder_.copies
        if support is None or workload not in support.grams or (copy and (copies is None or workload not in copies.spans)):
            print(f"{workload:10s} skipped: the model has no {'span' if copy else '8-gram'} table", file=sys.stderr)
            continue
        if args.corrector == "ngram" and (gen.encoder_.ngrams is None or not gen.encoder_.ngrams.knows(workload)):
            print(f"{workload:10s} skipped: the model has no n-gram counts", file=sys.stderr)
            continue
        rhythms = gen.encoder_.cadence.of(workload) if gen.encoder_.cadence is not None else []
        if args.corrector == "cadence" and not rhythms:
            print(f"{workload:10s} skipped: no steady rhythm in its training runs (or no table)", file=sys.stderr)
            continue
        gen.copy_rounds, gen.support_rounds, gen.guide_rounds = COPY_ROUNDS, SUPPORT_ROUNDS, GUIDE_ROUNDS
        gen.ngram_weight = NGRAM_WEIGHT
        gen.ngram_rounds = NGRAM_ROUNDS if args.ngram_rounds is None else args.ngram_rounds
        serial = gen.serial_syscalls(workload)
        times: dict[float, list[float]] = {level: [] for level in levels}
        effect: dict[float, str] = {}
        for _ in range(args.repeats):
            for level in levels:
                setattr(gen, setting, level)
                start = time.perf_counter()
                if guide:  # what the sampler leaves, before repair
                    trace = gen.draw(args.events, workload, args.seed, constraints="guided")[0]
                else:
                    trace = gen.generate(args.events, workload, args.seed, constraints="guided")
                times[level].append(time.perf_counter() - start)
                codes = gen.encoder_.encode(trace)["event"]
                if guide:
                    broken = (overlaps(trace.events.column("event").to_numpy(zero_copy_only=False), serial)[0]
                              if serial else sum(r.count for r in check(trace).rules))
                    effect[level] = f"{1000 * broken / len(trace):.1f}"
                elif copy:
                    first = codes[:gen.model_.config.context]
                    effect[level] = f"{copies.copy_share(codes, workload):.2%} ({copies.copy_share(first, workload):.2%})"
                elif args.corrector == "cadence":
                    parts = []
                    for r in rhythms:
                        gaps = np.diff(np.flatnonzero(codes == r.event))
                        parts.append(f"{int(((gaps >= r.low) & (gaps <= r.high)).sum())}/{len(gaps)}")
                    effect[level] = ", ".join(parts)
                elif args.corrector == "start":
                    effect[level] = str(len(np.unique(codes[:512])))
                else:
                    effect[level] = f"{support.novel_share(codes, workload):.2%}"
        for level in levels:
            rate = args.events / statistics.median(times[level])
            print(f"{workload:10s} {level:6g} {rate:10,.0f} {effect[level]:>32s}")
        ratio = " / ".join(f"{statistics.median(times[level]) / statistics.median(times[levels[0]]):.2f}x"
                           for level in levels[1:])
        if guide:
            note = f"; {len(serial)} serial syscalls" if serial else ""
        elif copy:
            note = f"; a training run from the others: {copies.natural.get(workload, 0.0):.2%}"
            note += "" if copies.applies(workload) else "  (real runs share most long spans: guard off)"
        elif args.corrector == "cadence":
            names = gen.encoder_.event.decode(np.array([r.event for r in rhythms]))
            note = "; " + ", ".join(f"{n} every {r.low:,}-{r.high:,}" for n, r in zip(names, rhythms))
        elif args.corrector == "start":
            note = f"; sample_steps {gen.sample_steps} in every later window"
        else:
            note = f"; a training run's own unseen share {support.natural.get(workload, 0.0):.2%}"
            note += "" if support.applies(workload) else "  (open grammar: corrector off)"
        print(f"{'':10s} {'':6s} {'':10s} {'':32s}   {ratio} time{note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

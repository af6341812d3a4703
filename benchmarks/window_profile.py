"""Where a generated trace stops looking real: per generation window, how many of its events sit
in an exactly repeated span, and how many of its 64-event spans occur in a training run.

    .venv/bin/python benchmarks/window_profile.py TRACE... --workload sqlite \\
        [--train-runs 1,2] [--test-run 3] [--context 4096] [--prefix 1024] [--span 64]

The pipeline draws a trace window by window: window 0 is the first `--context` events, every
later window adds `--context - --prefix` new events after a known prefix (the defaults are the
generator's: context 4096, a quarter of it known). For each such stretch of each TRACE, and of
the bundled held-out run (cut to the longest TRACE) split the same way, it prints
`repeats` (the evaluation's `longrange.repeat_share`: events whose 33 surrounding events occur
again within 512) and the share of `--span`-event spans found verbatim in the training runs. On
the default sqlite model (docs/model.md, "After the first window") window 0 comes close to the
real run and every later window falls far below it. No timing: the figures are shares, not speeds.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import tracesynth.datasets as ds
from tracesynth.evaluation import longrange
from tracesynth.evaluation.windows import Encoded, Vocabulary, encode, hashes_of_many, in_sorted, kgram_hashes
from tracesynth.errors import TraceSynthError
from tracesynth.sources import read_trace


def stretches(n: int, context: int, prefix: int) -> list[tuple[int, int]]:
    """[start, end) of window 0 and of each later window's new events, up to n events."""
    bounds = [0, min(context, n)]
    while bounds[-1] < n:
        bounds.append(min(bounds[-1] + context - prefix, n))
    return list(zip(bounds, bounds[1:]))


def profile(trace: Encoded, training: np.ndarray, context: int, prefix: int, span: int) -> list[tuple[float, float]]:
    """(repeats, share of `span`-grams in training) of each stretch (None where too short)."""
    rows = []
    for a, b in stretches(len(trace), context, prefix):
        part = trace.slice(a, b)
        grams = kgram_hashes(part.tokens, span)
        rows.append((longrange.repeat_share([part]), float(in_sorted(grams, training).mean()) if len(grams) else None))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("traces", nargs="+")
    parser.add_argument("--workload", required=True)
    parser.add_argument("--train-runs", default="1,2")
    parser.add_argument("--test-run", type=int, default=3)
    parser.add_argument("--context", type=int, default=4096)
    parser.add_argument("--prefix", type=int, default=1024)
    parser.add_argument("--span", type=int, default=64)
    args = parser.parse_args()
    if not 0 <= args.prefix < args.context:
        parser.error("--prefix must be in [0, --context)")
    train = [ds.load(args.workload, int(r)) for r in args.train_runs.split(",")]
    test = ds.load(args.workload, args.test_run)
    vocab = Vocabulary.from_traces([*train, test])
    training = np.sort(hashes_of_many([encode(t, vocab).tokens for t in train], args.span))
    generated = [(path, encode(read_trace(path), vocab)) for path in args.traces]
    real = encode(test, vocab)
    n = min(len(real), max(len(t) for _, t in generated))  # the real run cut to the longest trace
    real = real.slice(0, n)
    candidates = [(f"real run {args.test_run} (first {n} events)", real), *generated]
    print(f"# {args.workload}: per window (0 = first {args.context} events, then {args.context - args.prefix} "
          f"new each): repeats / {args.span}-grams found in training runs {args.train_runs}")
    for name, trace in candidates:
        rows = profile(trace, training, args.context, args.prefix, args.span)
        cells = [f"{_f(r)}/{_f(g)}" for r, g in rows]
        print(f"{name}: overall repeats {_f(longrange.repeat_share([trace]))}")
        print("  " + "  ".join(f"w{i} {c}" for i, c in enumerate(cells)))


def _f(value) -> str:
    return "n/a" if value is None else f"{value:.2f}"


if __name__ == "__main__":
    try:
        main()
    except TraceSynthError as exc:  # a bad trace or workload: one line, no traceback
        sys.exit(f"window_profile.py: {exc}")

"""Whether a workload's phases sit at fixed places in its runs: what the trace-phase embedding
(one learned vector per 1,024 events of a trace, `ModelConfig.trace_phases`) can learn from.

    .venv/bin/python benchmarks/phase_alignment.py [--workloads fileio,build] [--block 1024] \\
        [--skip 4] [--blocks 64]

For each pair of bundled runs of a workload, the event-type histogram of every block of `--block`
events (from block `--skip`, past the start-up, to block `--blocks`, the embedding's reach) is
compared with the other run's same block and with its blocks 2, 4 and 8 further on
(Jensen-Shannon divergence in bits, `evaluation.fidelity.jsd`, as in the fidelity reports). The ratio same / shifted is under 1 where position says
what a run is doing (fio reads its file back from ~20,500 events in, in every run: 0.28) and
about 1 where the runs drift apart (build's compile units last 3,600-7,200 events each, so the
runs' units fall at different places after the first few). A model sees the block index of every
window, so on a workload with a ratio near 1 it learns what its training runs happened to do
there. No timing: the figures are divergences, not speeds.
"""

from __future__ import annotations

import argparse
import itertools
import sys

import numpy as np

import tracesynth.datasets as ds
from tracesynth.errors import TraceSynthError
from tracesynth.evaluation.fidelity import jsd

SHIFTS = (2, 4, 8)


def histograms(events: np.ndarray, vocab: dict[str, int], block: int, blocks: int) -> np.ndarray:
    """Event-type counts per block of `block` events (int [n_blocks, vocab])."""
    n = min(len(events) // block, blocks)
    codes = np.fromiter((vocab[e] for e in events[:n * block]), dtype=np.int64, count=n * block)
    out = np.zeros((n, len(vocab)), dtype=np.int64)
    np.add.at(out, (np.repeat(np.arange(n), block), codes), 1)
    return out


def alignment(runs: list[np.ndarray], block: int, skip: int, blocks: int) -> tuple[float, float]:
    """(mean JSD of the same block across runs, mean JSD of blocks SHIFTS apart across runs)."""
    vocab = {e: i for i, e in enumerate(sorted(set(np.concatenate(runs).tolist())))}
    hist = [histograms(r, vocab, block, blocks) for r in runs]
    same, shifted = [], []
    for a, b in itertools.combinations(range(len(runs)), 2):
        n = min(len(hist[a]), len(hist[b]))
        for i in range(skip, n):
            same.append(jsd(hist[a][i], hist[b][i]))
            shifted.extend(jsd(hist[a][i], hist[b][i + k]) for k in SHIFTS if i + k < n)
    if not same or not shifted:
        raise TraceSynthError(f"runs too short for blocks {skip}-{blocks} of {block} events")
    return float(np.mean(same)), float(np.mean(shifted))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default=None, help="comma-separated (default: every bundled one)")
    parser.add_argument("--block", type=int, default=1024)
    parser.add_argument("--skip", type=int, default=4, help="blocks of the start-up left out")
    parser.add_argument("--blocks", type=int, default=64)
    args = parser.parse_args(argv)
    try:
        workloads = args.workloads.split(",") if args.workloads else ds.workloads()
        print(f"{'workload':10s} {'same block':>10s} {'shifted':>8s} {'ratio':>6s}   (JSD of event types, "
              f"blocks {args.skip}-{args.blocks} of {args.block} events, every pair of runs)")
        for w in workloads:
            runs = [np.asarray(ds.load(w, r).events.column("event").to_pylist()) for r in ds.runs(w)]
            same, shifted = alignment(runs, args.block, args.skip, args.blocks)
            print(f"{w:10s} {same:10.3f} {shifted:8.3f} {same / shifted:6.2f}")
    except TraceSynthError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How many slips the discriminative score notices: real runs with a share of their events
replaced by a plausible slip, scored against the held-out run as the headline scores a
generator. Prints, per workload and slip rate, disc@512 (event types, three classifier seeds),
the strongest single tell and the share of 8-grams unseen in the untouched runs.

    .venv/bin/python benchmarks/bench_disc_sensitivity.py [--workloads sqlite,tar] \\
        [--rates 0,0.0025,0.005,0.01,0.02,0.05] [--test-events 32768]

The candidate is training runs 1-2 themselves, so rate 0 is the real-vs-real floor of the
headline (runs 1-2 against the first `--test-events` of run 3, the same split and features). A
slip replaces one event by an event that the runs do have right after the event before it (a
plausible bigram, drawn with the runs' odds), the kind of mistake a sampler makes when it draws
neighbours independently: locally fine, wrong for the longer context. Read it as the slip rate
a generator has to stay under for its windows to score near the floor; compare a generator's
`unseen_8gram_share` with the column here. No timing: the figures are accuracies, not speeds.
"""

from __future__ import annotations

import argparse
import dataclasses

import numpy as np

import tracesynth.datasets as ds
from tracesynth.evaluation import longrange
from tracesynth.evaluation.windows import Encoded, Vocabulary, encode, hashes_of_many, in_sorted


def followers(runs: list[Encoded]) -> dict[int, np.ndarray]:
    """Every event that follows each event in the runs (with repeats: drawing from it keeps the odds)."""
    pairs = np.concatenate([np.column_stack([r.tokens[:-1], r.tokens[1:]]) for r in runs])
    order = np.argsort(pairs[:, 0], kind="stable")
    pairs = pairs[order]
    firsts, starts = np.unique(pairs[:, 0], return_index=True)
    return {int(a): b for a, b in zip(firsts, np.split(pairs[:, 1], starts[1:]))}


def slipped(run: Encoded, rate: float, after: dict[int, np.ndarray], rng: np.random.Generator) -> Encoded:
    tokens = run.tokens.copy()
    for p in np.flatnonzero(rng.random(len(tokens)) < rate):
        if p == 0:
            continue
        choices = after.get(int(tokens[p - 1]))
        if choices is not None:
            tokens[p] = choices[rng.integers(len(choices))]
    return dataclasses.replace(run, tokens=tokens)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", default=",".join(ds.workloads()))
    parser.add_argument("--rates", default="0,0.0025,0.005,0.01,0.02,0.05")
    parser.add_argument("--test-events", type=int, default=32_768)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rates = [float(r) for r in args.rates.split(",")]
    print("workload  slip rate  changed  unseen 8-grams  disc@512 (3 seeds)  strongest tell (alone; slipped / real)")
    for workload in args.workloads.split(","):
        train = [ds.load(workload, run=r) for r in (1, 2)]
        test = ds.load(workload, run=3).slice(0, args.test_events)
        vocab = Vocabulary.from_traces([*train, test])
        real_train, real_test = [encode(t, vocab) for t in train], [encode(test, vocab)]
        after = followers(real_train)
        seen = np.unique(hashes_of_many([r.tokens for r in real_train], 8))
        for rate in rates:
            # each rate its own stream: a row does not depend on which other rates were asked for
            rng = np.random.default_rng([args.seed, round(rate * 1_000_000)])
            candidate = [slipped(r, rate, after, rng) for r in real_train]
            changed = sum(int((c.tokens != r.tokens).sum()) for c, r in zip(candidate, real_train))
            unseen = 1.0 - float(in_sorted(hashes_of_many([c.tokens for c in candidate], 8), seen).mean())
            score = longrange.discriminative(candidate, real_test, seeds=[0, 1, 2], lengths=[512],
                                             channels=(), explain=True)["512"]
            top = score["tells"][0]
            means = "" if "mean_a" not in top else f"; {top['mean_a']:.3f} / {top['mean_b']:.3f}"
            print(f"{workload:9s} {rate:9.4f} {changed / sum(len(r) for r in real_train):8.4f} "
                  f"{unseen:15.4f} {score['accuracy_mean']:10.3f} ± {score['accuracy_std']:.3f}   "
                  f"{top['feature']} ({top['accuracy_alone']:.2f}{means})", flush=True)


if __name__ == "__main__":
    main()

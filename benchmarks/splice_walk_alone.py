"""The span splice's walk with no model: how much of a spliced trace's score is the model's.

    .venv/bin/python benchmarks/splice_walk_alone.py experiments/splice-walk-run3.yaml out/splice-walk-run3 \
        --workloads pybench,build --seeds 0,1,2

With the walk (docs/model.md, "Span splice", "The walk") most of a pybench or build trace is
training's events, so the question a reader should ask is what the model still decides. This
script answers it on the experiment's own split: for each workload and seed it walks one stretch
the length of the test slice from training run 1's first 64 events (the left anchor; nothing of
the model's: no sampled events, no covered stretches, no right anchors), with the same walk
(`span_splice.splice(walk=...)`, pieces of the config's `splice_walk`, the training runs indexed
as `TraceSynth` indexes them), evaluates it as `tracesynth experiment` evaluates a cell, and prints
its figures beside the mean of the experiment's cells for the same workload (the model with the
splice and walk, RESULTS_DIR/results.csv). The model directory only lends its encoder (event
vocabulary) and the table of training runs; its weights are not used.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from pathlib import Path

METRICS = ("disc_512", "disc_2048", "tstr_trtr", "copy_rate_256")


def walk_alone(generator, workload: str, n_events: int, seed: int, piece: int):
    """(trace, share of one training run's 256-grams): `n_events` walked from run 1's start;
    (None, 0) where every try made a verbatim training run over `MAX_COPY` events."""
    import numpy as np
    import pyarrow as pa

    from tracesynth.sampling.span_splice import splice
    from tracesynth.schema import SCHEMA, Trace, TraceMeta

    training = generator._splice_training(workload)
    anchor_codes, anchor_gaps = training.runs[0][0][:64], training.runs[0][1][:64]
    rng = np.random.default_rng(seed)
    placeholder = rng.integers(0, 3, n_events + 4096) + 2**40  # codes no training run holds: all uncovered
    codes = np.concatenate([anchor_codes, placeholder])
    gaps = np.concatenate([anchor_gaps, np.ones(len(placeholder), dtype=np.int64)])
    result = splice(codes, gaps, training, np.random.default_rng([seed, 0x5911CE]), walk=piece)
    out, out_gaps = result.codes[:n_events], result.gaps[:n_events]
    if len(out) < n_events or (out >= 2**40).any():  # three walks each made a verbatim copy over MAX_COPY
        return None, 0.0
    names = generator.encoder_.event.decode(out)
    columns = {field.name: pa.nulls(n_events, type=field.type) for field in SCHEMA}
    columns["ts"] = pa.array(np.cumsum(out_gaps) - int(out_gaps[0]), type=pa.int64())
    columns["event"] = pa.array([str(x) for x in names], type=pa.string())
    trace = Trace(pa.table(columns), TraceMeta(workload=workload, source_format="synthetic"))
    return trace, training.most_copied(out, 256)


def experiment_means(results: Path, workload: str) -> dict:
    rows = [r for r in csv.DictReader(results.open()) if r["generator"] == "tracesynth" and r["workload"] == workload]
    return {m: statistics.mean(float(r[m]) for r in rows) for m in METRICS} if rows else {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", type=Path, help="the experiment's YAML (split, splice_walk)")
    parser.add_argument("results", type=Path, help="its results directory (models/ and results.csv)")
    parser.add_argument("--workloads", default="pybench,build")
    parser.add_argument("--seeds", default="0,1,2")
    args = parser.parse_args(argv)

    from tracesynth.evaluation.runner import evaluate
    from tracesynth.experiments.config import load_config
    from tracesynth.experiments.runner import cell_metrics, load_split
    from tracesynth.generators.diffusion import SPLICE_WALK, TraceSynth

    config = load_config(args.config)
    piece = config.tracesynth.splice_walk if config.tracesynth.splice_walk is not None else SPLICE_WALK
    print(f"walk alone (pieces of ~{piece}, from training run 1's first 64 events) against the model with the "
          f"splice and walk ({args.results.name}), held-out run {config.data.test_runs}")
    print(f"{'workload':10s} {'seed':>4s} " + " ".join(f"{m:>13s}" for m in METRICS) + "  one-run share")
    for workload in args.workloads.split(","):
        split = load_split(config, workload, "")
        model = next((args.results / "models").glob(f"tracesynth__{workload}__*"), None)
        if model is None:
            print(f"{workload}: no model under {args.results / 'models'}", file=sys.stderr)
            return 1
        generator = TraceSynth.load(model)
        rows = []
        for seed in (int(s) for s in args.seeds.split(",")):
            trace, share = walk_alone(generator, workload, split.n_test_events, seed, piece)
            if trace is None:
                print(f"{workload:10s} {seed:4d}  no walk: each of its tries made a verbatim training run over "
                      "1,023 events", flush=True)
                continue
            metrics = cell_metrics(evaluate(split.train, split.test, [trace], seeds=1, quick=True), workload,
                                   config.evaluation.predictor)
            rows.append(metrics)
            print(f"{workload:10s} {seed:4d} " + " ".join(f"{metrics[m]:13.3f}" for m in METRICS) + f"  {share:.3f}",
                  flush=True)
        if not rows:
            continue
        alone = {m: statistics.mean(r[m] for r in rows) for m in METRICS}
        print(f"{workload:10s} mean " + " ".join(f"{alone[m]:13.3f}" for m in METRICS))
        model_means = experiment_means(args.results / "results.csv", workload)
        if model_means:
            print(f"{workload:10s} model+walk " + " ".join(f"{model_means[m]:8.3f}" for m in METRICS)
                  + f"   (disc floor {rows[0]['disc_floor_512']:.3f} / {rows[0]['disc_floor_2048']:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

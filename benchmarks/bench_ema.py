"""The moving average of the weights against the last weights, from one training run.

A training with `--ema` keeps both: `model.safetensors` holds the average (decay `--ema`, here
0.99 unless told) and, while the run can resume, `training.safetensors` the weights the optimizer ended
on. So the two are sampled and scored on the same split with nothing else changed: same data,
same steps, same sampler, same seeds.

    .venv/bin/python benchmarks/bench_ema.py [--workloads sqlite,scimark] [--seeds 0,1,2] \\
        [--steps 1000] [--ema 0.99] [--models DIR]

Per workload: the validation loss of each weight set (nats/event on the training runs'
held-out tails: 32 windows, four noise draws), then per sampling seed a guided trace of 32,768
events scored as the headline's quick evaluation scores it (experiments/guide-rounds-ngram.yaml:
runs 1-2 train, run 3 held out; TSTR/TRTR with the n-gram predictor, disc@512 and @2048, copy
rate of 256-event spans, unseen 8-grams), and the mean of each over the seeds, average minus
last. One training per workload: the differences between sampling seeds say how much a single
trace moves, not how much another training would. No timing: the figures are not speeds.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import numpy as np

from tracesynth.evaluation.runner import evaluate
from tracesynth.experiments.config import load_config
from tracesynth.experiments.runner import cell_metrics, load_split
from tracesynth.generators.diffusion import TraceSynth
from tracesynth.model.checkpoint import load_training_weights
from tracesynth.model.config import EMA_TYPICAL, TrainConfig
from tracesynth.model.train import WindowSource, train, validation_loss

CONFIG = Path(__file__).resolve().parent.parent / "experiments" / "guide-rounds-ngram.yaml"
EVENTS = 32_768
METRICS = ("tstr_trtr", "disc_512", "disc_2048", "copy_rate_256", "unseen_8gram")


def validation(model, encoder, traces, cfg: TrainConfig) -> float:
    """Mean validation loss over four noise draws of 32 held-out windows (lower noise than
    training's 8 windows, one draw)."""
    source = WindowSource(encoder, traces, model.config.context, cfg.val_fraction, cfg.seed, 0.0)
    return float(np.mean([validation_loss(model, source, dataclasses.replace(cfg, val_windows=32, seed=s), "cpu")
                          for s in range(4)]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", default="sqlite,scimark")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--steps", type=int, default=TrainConfig.steps)
    parser.add_argument("--ema", type=float, default=EMA_TYPICAL)
    parser.add_argument("--models", type=Path, default=Path("/tmp/bench_ema"),
                        help="where the trained model directories go (reused when present)")
    args = parser.parse_args()
    config = load_config(CONFIG)
    seeds = [int(s) for s in args.seeds.split(",")]
    print(f"{args.steps} training steps, EMA decay {args.ema}; guided traces of {EVENTS:,} events against run 3")
    print("workload  weights   validation  seed  TSTR/TRTR  disc@512  disc@2048  copy  unseen 8-grams")
    for workload in args.workloads.split(","):
        split = load_split(config, workload)
        directory = args.models / workload
        cfg = TrainConfig(steps=args.steps, ema=args.ema)
        if not (directory / "training.safetensors").exists():
            train(split.train, directory, channels="light", train_config=cfg)
        average = TraceSynth.load(directory, device="cpu")
        last = TraceSynth.load(directory, device="cpu")
        load_training_weights(directory, last.model_)
        rows = {}
        for name, gen in (("average", average), ("last", last)):
            val = validation(gen.model_, gen.encoder_, split.train, cfg)
            for seed in seeds:
                trace = gen.generate(EVENTS, workload, seed, constraints="guided")
                trace.meta.workload = workload
                report = evaluate(split.train, split.test, [trace], seeds=1, quick=True)
                m = cell_metrics(report, workload, "ngram")
                rows.setdefault(name, []).append([m[k] for k in METRICS])
                print(f"{workload:9} {name:8} {val:10.4f}  {seed:4}  {m['tstr_trtr']:9.3f}  {m['disc_512']:8.3f}  "
                      f"{m['disc_2048']:9.3f}  {m['copy_rate_256']:4.2f}  {m['unseen_8gram']:.3f}", flush=True)
            rows[name + "_val"] = val
        diff = np.mean(rows["average"], axis=0) - np.mean(rows["last"], axis=0)
        print(f"{workload:9} average - last: validation {rows['average_val'] - rows['last_val']:+.4f}, "
              + ", ".join(f"{k} {d:+.3f}" for k, d in zip(METRICS, diff)), flush=True)


if __name__ == "__main__":
    main()

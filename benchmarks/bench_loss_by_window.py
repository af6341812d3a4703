"""Where a model's loss is low and where it is high: start windows, mid-run windows and tails of
its training runs and of a run it never saw.

A default training reports a training loss far under its validation loss. This script says why,
with the validation measure (masked-diffusion ELBO in nats/event at fixed noise levels, four
noise draws) on windows of six kinds: the training runs' first windows (which `start_rate` makes
60% of training), windows evenly spaced through their middles, their held-out tails (what
validation and `--keep-best` read), and the same three of the held-out run.

    .venv/bin/python benchmarks/bench_loss_by_window.py [--workloads sqlite,tar] [--models DIR] \\
        [--windows 16]

Split as the headline's (experiments/guide-rounds-ngram.yaml: runs 1-2 train, run 3 held out);
`--models DIR` holds one model directory per workload (DIR/<workload>, bench_ema.py's layout),
trained here with the defaults where missing. No timing: the figures are not speeds.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from tracesynth import datasets
from tracesynth.experiments.config import load_config
from tracesynth.experiments.runner import load_split
from tracesynth.model.checkpoint import load_model
from tracesynth.model.train import WindowSource, train, window_loss

CONFIG = Path(__file__).resolve().parent.parent / "experiments" / "guide-rounds-ngram.yaml"
KINDS = ("start", "mid-run", "tail")


def windows(source: WindowSource, n: int) -> dict[str, list[tuple[int, int]]]:
    """n windows of each kind, spread over the source's traces: event 0, evenly through the
    trained span (after the first window), evenly through the held-out tail."""
    ctx, traces = source.context, len(source.encoded)
    per = max(1, n // traces)
    picks = {kind: [] for kind in KINDS}
    for i in range(traces):
        train_end, tail_start, end = int(source.train_end[i]), int(source.val_start[i]), int(source.val_end[i])
        for k in range(per):
            frac = (k + 0.5) / per
            picks["start"].append((i, 0))
            picks["mid-run"].append((i, ctx + int(frac * max(0, train_end - 2 * ctx))))
            picks["tail"].append((i, tail_start + int(frac * max(0, end - tail_start - ctx))))
    return picks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", default="sqlite,tar")
    parser.add_argument("--models", type=Path, default=Path("/tmp/bench_ema"),
                        help="one model directory per workload (trained here with the defaults if missing)")
    parser.add_argument("--windows", type=int, default=16, help="windows of each kind per run set")
    args = parser.parse_args()
    torch.set_num_threads(1)
    config = load_config(CONFIG)
    print("nats/event (masked-diffusion ELBO at fixed noise levels, 4 draws);"
          f" {args.windows} windows of each kind")
    print(f"{'workload':9}  {'training runs: start':>20}  {'mid-run':>8}  {'tail':>6}  "
          f"{'held-out run: start':>19}  {'mid-run':>8}  {'tail':>6}")
    for workload in args.workloads.split(","):
        split = load_split(config, workload)
        directory = args.models / workload
        if not (directory / "model.safetensors").exists():
            train(split.train, directory, channels="light")
        model, encoder, cfg, _ = load_model(directory)
        figures = []
        held_out = []  # whole runs (the split's test traces are cut to their first events)
        for run in config.data.test_runs:
            trace = datasets.load(workload, run)
            trace.meta.workload = workload
            held_out.append(trace)
        for traces in (split.train, held_out):
            source = WindowSource(encoder, traces, model.config.context, cfg.val_fraction, cfg.seed)
            picks = windows(source, args.windows)
            figures += [window_loss(model, *source.windows_at(picks[kind]), seed=0, draws=4) for kind in KINDS]
        print(f"{workload:9}  {figures[0]:20.3f}  {figures[1]:8.3f}  {figures[2]:6.3f}  "
              f"{figures[3]:19.3f}  {figures[4]:8.3f}  {figures[5]:6.3f}", flush=True)


if __name__ == "__main__":
    main()

"""fp32 against bf16 autocast on this machine, in one run: a training step, a sampling network
call, and (with --models) the whole guided sampling pipeline.

    .venv/bin/python benchmarks/bench_precision.py                      # ~3 min on 2 cores
    .venv/bin/python benchmarks/bench_precision.py --workload sqlite --steps 25 --repeats 3
    .venv/bin/python benchmarks/bench_precision.py --models out/guide-rounds-ngram/models

Training: the default light model (context 4096, 8 windows a step) on the bundled workload's
training runs, `--steps` steps per run, fp32 and bf16 runs alternating; the first 5 steps of
each run are warm-up and not timed. Sampling: one network call over a 4,096-event window (what
the sampler makes 16+ of per window). Pipeline: `TraceSynth.generate` of `--events` guided events
with each saved model, both precisions alternating, in this process. Prints medians and the
bf16/fp32 time ratio; the machine is noisy, so read the ratio, measured in the same run.
`auto` (training's default) picks bf16 on CUDA only (model/precision.py); this script measures
bf16 on the CPU whatever it has, and says whether its bf16 is native.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

# As the CLI does: spinning OpenMP threads collapse under any other load (see cli/model.py).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from model_dirs import model_dirs  # noqa: E402

PRECISIONS = ("fp32", "bf16")


def train_step_seconds(traces: list, steps: int, precision: str) -> float:
    """Median seconds per step (after 5 warm-up steps) of the default light training config."""
    from tracesynth.model.config import ModelConfig, TrainConfig, size_config
    from tracesynth.model.train import TrainCallbacks, train

    ticks: list[float] = []
    callbacks = TrainCallbacks(on_step=lambda *_: ticks.append(time.perf_counter()))
    train(traces, None, channels="light",
          model_config=ModelConfig(context=4096, **size_config("auto", ["event", "dt"])),
          train_config=TrainConfig(steps=steps, batch_size=8, val_every=0, checkpoint_every=0, precision=precision),
          callbacks=callbacks)
    return statistics.median(b - a for a, b in zip(ticks[5:], ticks[6:]))


def network_call_seconds(precision: str, calls: int = 30) -> float:
    """Median seconds of one sampling network call over a 4,096-event light window."""
    import torch

    from tracesynth.model.config import ModelConfig, size_config
    from tracesynth.model.denoiser import Denoiser
    from tracesynth.model.precision import autocast

    torch.manual_seed(0)
    model = Denoiser(ModelConfig(context=4096, vocab_sizes={"event": 120, "dt": 202},
                                 **size_config("auto", ["event", "dt"]))).eval()
    codes = {ch: torch.randint(0, v, (1, 4096)) for ch, v in model.config.vocab_sizes.items()}
    times = []
    with torch.inference_mode():
        for i in range(calls + 3):
            start = time.perf_counter()
            with autocast(precision, "cpu"):
                model.hidden(codes, torch.tensor([0.5]), torch.tensor([0])).float()
            if i >= 3:
                times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="gzip", help="bundled workload to train on (runs 1-2)")
    parser.add_argument("--steps", type=int, default=20, help="training steps per run (5 of them warm-up)")
    parser.add_argument("--repeats", type=int, default=2, help="runs per precision, alternating")
    parser.add_argument("--models", type=Path, default=None, help="also time the guided pipeline on these models")
    parser.add_argument("--events", type=int, default=16384)
    args = parser.parse_args()
    if args.steps < 7 or args.repeats < 1 or args.events < 1:
        parser.error("--steps must be >= 7, --repeats and --events positive")
    import torch

    from tracesynth.model.precision import cpu_has_native_bf16

    dirs = model_dirs(args.models, None) if args.models else []
    if dirs is None:
        return 2
    print(f"{torch.get_num_threads()} threads, native bf16: {'yes' if cpu_has_native_bf16() else 'no (emulated)'}, "
          f"load average {os.getloadavg()[0]:.1f}")
    import tracesynth.datasets as ds

    traces = [ds.load(args.workload, run=r).with_meta(workload=args.workload) for r in (1, 2)]
    rows = []
    train = {p: [] for p in PRECISIONS}
    for _ in range(args.repeats):
        for p in PRECISIONS:
            train[p].append(train_step_seconds(traces, args.steps, p))
    rows.append((f"training step ({args.workload}, 8 x 4096)", train))
    calls = {p: [] for p in PRECISIONS}
    for _ in range(args.repeats):
        for p in PRECISIONS:
            calls[p].append(network_call_seconds(p))
    rows.append(("sampling network call (1 x 4096)", calls))
    if dirs:
        from tracesynth.generators.diffusion import TraceSynth

        for d in dirs:
            workload = d.name.split("__")[1]
            gen = TraceSynth.load(d, device="cpu")
            gen.generate(2048, workload, 1, constraints="guided")  # warm-up
            spent = {p: [] for p in PRECISIONS}
            for _ in range(args.repeats):
                for p in PRECISIONS:
                    gen.precision = p
                    start = time.perf_counter()
                    gen.generate(args.events, workload, 0, constraints="guided")
                    spent[p].append(time.perf_counter() - start)
            rows.append((f"guided pipeline, {workload} ({args.events:,} events)", spent))
    print(f"{'what':44s} {'fp32':>10s} {'bf16':>10s}   bf16/fp32 time")
    for name, values in rows:
        a, b = statistics.median(values["fp32"]), statistics.median(values["bf16"])
        print(f"{name:44s} {a * 1000:8.1f}ms {b * 1000:8.1f}ms   {b / a:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())

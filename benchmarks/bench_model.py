"""Speed of the diffusion model vs an autoregressive transformer of the same size.

    .venv/bin/python benchmarks/bench_model.py            # ~5-10 min on 2 cores
    .venv/bin/python benchmarks/bench_model.py --quick    # fewer repetitions
    .venv/bin/python benchmarks/bench_model.py --device cuda --threads 8
    .venv/bin/python benchmarks/bench_model.py --precision bf16   # default auto: bf16 on CUDA only
    .venv/bin/python benchmarks/bench_model.py --self-condition --contexts 4096   # + self-conditioned rows

Prints, for `light` and `full` at contexts 256, 1024, 4096 and 16384: training events/s,
generation events/s and peak memory, the same for the AR reference (model/ar_reference.py,
parameter count matched), and the ratios the issue sets targets for (diffusion ≥ 2× AR at
generation; light ≤ ½ the cost of full). Each measurement runs in its own process, so peak
memory (max RSS on CPU, max allocated on CUDA) belongs to that configuration alone.

Vocabulary sizes are those of a real multi-threaded LTTng trace (many-threads: 181 event
names, 8 CPUs, ~100 process names); generation is measured as the pipeline runs it: one
window continuing a known 25% prefix, 16 denoising steps, spread reveals as `TraceSynth`
samples by default, new events per second (the network and the sampler: decoding events and
writing them is not in it; the experiment grids' `gen_events_per_s` is the whole pipeline).
Both models train and sample at the same `--precision` (model/precision.py; `auto`, training's
default: bf16 autocast on CUDA, fp32 on CPU). `--self-condition` adds the self-conditioned
diffusion model (`train --self-condition`) beside each diffusion row, with its cost ratios.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import subprocess
import sys
import time

# As the CLI does: spinning OpenMP threads collapse under any other load (see cli/model.py).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

VOCAB = {"event": 183, "dt": 202, "tid": 66, "cpu": 10, "ret": 308, "procname": 102}
CHANNELS = {"light": ["event", "dt"], "full": list(VOCAB)}
CONTEXTS = [256, 1024, 4096, 16384]


def _vocab(preset):
    return {c: VOCAB[c] for c in CHANNELS[preset]}


def _peak_mib(device) -> float:
    import torch

    if device == "cuda":
        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _sync(device):
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def measure(kind: str, preset: str, context: int, device: str, threads: int, reps: int, steps: int,
            precision: str = "auto") -> dict:
    import torch

    from tracesynth.generators.diffusion import SPREAD
    from tracesynth.model.ar_reference import matched_reference
    from tracesynth.model.config import ModelConfig, size_config
    from tracesynth.model.denoiser import Denoiser, parameter_count
    from tracesynth.model.precision import autocast as network_autocast
    from tracesynth.model.precision import resolve_precision
    from tracesynth.sampling.sampler import sample_window

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    vocab = _vocab(preset)
    size = size_config("auto", CHANNELS[preset])
    denoiser = Denoiser(ModelConfig(vocab_sizes=vocab, context=context, self_condition=kind == "diffusion+sc", **size))
    batch = max(1, 16384 // context)
    codes = {c: torch.randint(0, v, (batch, context), device=device) for c, v in vocab.items()}
    precision = resolve_precision(precision, device)
    autocast = network_autocast(precision, device)
    gen = torch.Generator().manual_seed(0)
    if kind.startswith("diffusion"):
        model = denoiser.to(device)
        from tracesynth.model.noise import MaskingSchedule
        from tracesynth.model.train import self_cond_windows, training_loss

        step = itertools.count()

        def train_step():  # as training runs it, self-conditioning's first pass included
            t = torch.rand(batch, generator=gen).clamp(min=0.05).to(device)
            noisy, masked = MaskingSchedule().mask({c: v.cpu() for c, v in codes.items()}, t.cpu(), model.mask_ids, gen)
            noisy = {c: v.to(device) for c, v in noisy.items()}
            masked = {c: v.to(device) for c, v in masked.items()}
            labels = torch.zeros(batch, dtype=torch.long, device=device)
            with autocast:
                loss = training_loss(model, codes, noisy, masked, t, labels, None, "elbo",
                                     self_cond_windows(0, next(step), batch).to(device)).mean()
            loss.backward()
    else:
        model = matched_reference(vocab, parameter_count(denoiser), width=size["d_global"], heads=size["heads"]).to(device)

        def train_step():
            with autocast:
                loss = model.loss(codes)
            loss.backward()
    params = parameter_count(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)

    def timed(fn, n):
        fn()
        _sync(device)
        start = time.perf_counter()
        for _ in range(n):
            fn()
        _sync(device)
        return (time.perf_counter() - start) / n

    def full_train_step():
        opt.zero_grad(set_to_none=True)
        train_step()
        opt.step()

    model.train()
    train_s = timed(full_train_step, reps)
    train_eps = batch * context / train_s
    model.eval()
    import numpy as np

    if kind.startswith("diffusion"):
        window = {c: np.random.default_rng(0).integers(0, v, context) for c, v in vocab.items()}
        prefix = {c: np.arange(context) < context // 4 for c in vocab}
        new = context - context // 4

        def gen_window():
            sample_window(model, window, prefix, 0, steps=steps, generator=torch.Generator().manual_seed(1),
                          spread=SPREAD, precision=precision)  # the default sampler's settings
    else:
        new = 256 if context >= 1024 else 128
        prompt = {c: v[:1, : context - new] for c, v in codes.items()}

        def gen_window():
            with network_autocast(precision, device):
                model.generate(prompt, new, context, torch.Generator().manual_seed(1))
    gen_s = timed(gen_window, 1)
    if kind == "ar":  # take the prompt's prefill out: per-event cost at a full cache
        with torch.inference_mode():
            with network_autocast(precision, device):
                prefill = timed(lambda: model.forward(prompt, [{"size": context} for _ in model.blocks]), 1)
        gen_s = max(gen_s - prefill, 1e-9)
    return {"kind": kind, "channels": preset, "context": context, "params": params,
            "train_events_per_s": train_eps, "generate_events_per_s": new / gen_s,
            "peak_mib": _peak_mib(device), "device": device, "threads": threads, "steps": steps,
            "precision": precision}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one timed repetition per figure")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=16, help="denoising steps per window")
    parser.add_argument("--contexts", default=",".join(map(str, CONTEXTS)))
    parser.add_argument("--precision", default="auto", choices=["auto", "fp32", "bf16"],
                        help="what both models run in (auto: bf16 on CUDA, fp32 on CPU)")
    parser.add_argument("--self-condition", action="store_true",
                        help="also measure the self-conditioned diffusion model, with its cost ratios")
    parser.add_argument("--json", help="also write the figures to this JSON file")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    reps = 1 if args.quick else 2
    if args.one:
        kind, preset, context = args.one.split(":")
        print(json.dumps(measure(kind, preset, int(context), args.device, args.threads, reps, args.steps,
                                 args.precision)))
        return 0
    rows = []
    load = os.getloadavg()[0]
    from tracesynth.model.precision import resolve_precision

    precision = resolve_precision(args.precision, args.device)
    print(f"device {args.device}, {args.threads} threads, {args.steps} denoising steps, precision {precision} "
          f"({args.precision}), load average {load:.1f}")
    header = f"{'model':12} {'channels':8} {'context':>7} {'params':>9} {'train ev/s':>11} {'gen ev/s':>10} {'peak MiB':>9}"
    print(header)
    for context in [int(c) for c in args.contexts.split(",")]:
        for preset in ("light", "full"):
            for kind in ("diffusion", *(("diffusion+sc",) if args.self_condition else ()), "ar"):
                cmd = [sys.executable, __file__, "--one", f"{kind}:{preset}:{context}", "--device", args.device,
                       "--threads", str(args.threads), "--steps", str(args.steps), "--precision", precision,
                       ] + (["--quick"] if args.quick else [])
                done = subprocess.run(cmd, capture_output=True, text=True)
                if done.returncode:
                    print(done.stderr[-2000:], file=sys.stderr)
                    return 1
                row = json.loads(done.stdout.strip().splitlines()[-1])
                rows.append(row)
                print(f"{kind:12} {preset:8} {context:7d} {row['params']:9,d} {row['train_events_per_s']:11,.0f} "
                      f"{row['generate_events_per_s']:10,.0f} {row['peak_mib']:9,.0f}", flush=True)
    print("\nratios (same run)")
    by = {(r["kind"], r["channels"], r["context"]): r for r in rows}
    for context in sorted({r["context"] for r in rows}):
        for preset in ("light", "full"):
            d, a = by[("diffusion", preset, context)], by[("ar", preset, context)]
            print(f"  {preset:5} {context:6d}: diffusion/AR generation {d['generate_events_per_s'] / a['generate_events_per_s']:6.1f}x, "
                  f"training {d['train_events_per_s'] / a['train_events_per_s']:5.1f}x")
            if args.self_condition:
                s = by[("diffusion+sc", preset, context)]
                print(f"  {preset:5} {context:6d}: self-conditioned/plain time, training "
                      f"{d['train_events_per_s'] / s['train_events_per_s']:.2f}x, generation "
                      f"{d['generate_events_per_s'] / s['generate_events_per_s']:.2f}x")
        light, full = by[("diffusion", "light", context)], by[("diffusion", "full", context)]
        print(f"  light/full cost {context:6d}: training {full['train_events_per_s'] / light['train_events_per_s']:.2f}, "
              f"generation {full['generate_events_per_s'] / light['generate_events_per_s']:.2f} (≤ 0.5 is the target)")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"load_average": load, "precision": precision, "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

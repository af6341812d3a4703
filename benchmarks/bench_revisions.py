"""Sampling (or training) speed of this checkout against another git revision, in one run on this
machine: for each trained model, generate the same trace (same seed, guided, the model's saved
settings) with the code of each revision, in alternating order, and print events/s, the time
ratio, and whether the two traces are identical (event names and timestamps).

    .venv/bin/python benchmarks/bench_revisions.py --models out/guide-rounds-ngram/models \\
        --baseline 472bcdb [--workloads sqlite,tar,stream] [--events 32768] [--repeats 2] \\
        [--precision fp32] [--ngram-rounds 256]
    .venv/bin/python benchmarks/bench_revisions.py --train 200 --workloads sqlite,tar \\
        --baseline 472bcdb [--repeats 2]

`--train STEPS` times training instead: each revision's own `tracesynth train W:1,2 --steps
STEPS --seed S` (the default model, the bundled runs 1-2, one validation and one checkpoint at
the end), wall clock of the whole command, and prints the final validation loss of each and
whether the trained weights are identical (a change of kernels may move them by float rounding:
then compare the losses; "each repeatable" says each revision gave the same weights in every
repeat, as a seeded CPU run must).

The baseline's source is checked out with `git worktree` into a temporary directory and put
first on PYTHONPATH of a child process; this checkout runs from its own `src/`. Each run is a
fresh process (model load excluded from the timing), set up as that revision's CLI sets
itself up (`tracesynth.runtime`: passive OpenMP threads, glibc's malloc keeping freed memory;
before that module existed, passive threads only; runs before 2026-12-04 set neither). For changes meant to be faster without
changing output, "identical" must say yes on every row. The machine is noisy: read the ratio,
measured in the same run, not the rates. `--precision` sets the sampling precision of this
checkout's runs (model/precision.py; default: the model's, fp32); a revision from before the
setting existed samples in fp32 whatever it says, so `--precision fp32` checks that this
checkout's fp32 path still gives the baseline's traces, and `bf16` measures what bf16 buys.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from model_dirs import model_dirs

REPO = Path(__file__).resolve().parent.parent

# Runs in a child process under one revision's source: load, generate, time, fingerprint.
CHILD = r"""
import hashlib, json, os, sys, time
try:  # the process as the revision's own CLI sets it up, before torch is loaded
    from tracesynth.runtime import tune_cpu_process
except ImportError:  # before tracesynth.runtime: the CLI set passive OpenMP threads only
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
else:
    tune_cpu_process()
import numpy as np
from tracesynth.generators.diffusion import TraceSynth
model_dir, workload, events, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
gen = TraceSynth.load(model_dir, device="cpu")
if sys.argv[5] != "-":
    gen.precision = sys.argv[5]
if sys.argv[6] != "-":
    gen.ngram_rounds = int(sys.argv[6])
start = time.perf_counter()
trace = gen.generate(events, workload, seed, constraints="guided")
seconds = time.perf_counter() - start
digest = hashlib.sha256()
digest.update("\n".join(trace.column("event").to_pylist()).encode())
digest.update(np.asarray(trace.column("ts").to_numpy()).tobytes())
print(json.dumps({"seconds": seconds, "digest": digest.hexdigest()}))
"""


def _run(src: Path, model_dir: Path, workload: str, events: int, seed: int, precision: str | None = None,
         ngram_rounds: int | None = None) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run([sys.executable, "-c", CHILD, str(model_dir), workload, str(events), str(seed),
                          precision or "-", "-" if ngram_rounds is None else str(ngram_rounds)],
                         env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"{src}: generation failed for {model_dir.name}:\n{out.stderr.strip().splitlines()[-1]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _train(src: Path, workload: str, steps: int, seed: int) -> dict:
    """One revision's `tracesynth train` in a child process: seconds, validation loss, weights' digest."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    with tempfile.TemporaryDirectory(prefix="tracesynth-train-") as tmp:
        out_dir = Path(tmp) / "model"
        command = [sys.executable, "-m", "tracesynth", "train", f"{workload}:1,2", "-o", str(out_dir),
                   "--steps", str(steps), "--seed", str(seed), "--val-every", str(steps),
                   "--checkpoint-every", str(steps)]
        start = time.perf_counter()
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"{src}: training failed for {workload}:\n{done.stderr.strip().splitlines()[-1]}")
        state = json.loads((out_dir / "state.json").read_text())
        weights = hashlib.sha256((out_dir / "model.safetensors").read_bytes()).hexdigest()
    return {"seconds": seconds, "val": state["val_loss"][-1][1], "digest": weights}


def _compare_training(sources: dict[str, Path], workloads: list[str], steps: int, repeats: int, seed: int) -> None:
    print(f"{'workload':10s} {'code':34s} {'seconds':>9s}   ratio (time / the baseline's)   "
          f"validation loss   identical weights")
    for workload in workloads:
        runs: dict[str, list[dict]] = {name: [] for name in sources}
        for _ in range(repeats):
            for name, src in sources.items():
                runs[name].append(_train(src, workload, steps, seed))
        base = statistics.median(r["seconds"] for r in next(iter(runs.values())))
        if len({r["digest"] for rs in runs.values() for r in rs}) == 1:
            same = "yes"
        elif all(len({r["digest"] for r in rs}) == 1 for rs in runs.values()):
            same = "no (each repeatable)"
        else:
            same = "NO: not repeatable"
        for name, rs in runs.items():
            t = statistics.median(r["seconds"] for r in rs)
            vals = sorted({r["val"] for r in rs})
            print(f"{workload:10s} {name:34s} {t:9.1f}   {t / base:.2f}x{'':24s}"
                  f"{' / '.join(f'{v:.4f}' for v in vals):>15s}   {same}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=Path, default=None,
                        help="directory of tracesynth__W__... model dirs (sampling; not with --train)")
    parser.add_argument("--baseline", required=True, help="git revision to compare against (e.g. a commit)")
    parser.add_argument("--workloads", default=None, help="comma-separated subset (default: every model found)")
    parser.add_argument("--events", type=int, default=32768)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--precision", choices=["auto", "fp32", "bf16"], default=None,
                        help="this checkout's sampling precision (default: the model's)")
    parser.add_argument("--ngram-rounds", type=int, default=None,
                        help="parts per denoising step, for both revisions (default: the generator's; "
                             "256 measures sequential draws, docs/model.md)")
    parser.add_argument("--train", type=int, default=None, metavar="STEPS",
                        help="time `tracesynth train W:1,2 --steps STEPS` of each revision instead "
                             "(needs --workloads: bundled workloads)")
    args = parser.parse_args(argv)
    if args.events < 1 or args.repeats < 1:
        parser.error("--events and --repeats must be positive")
    if args.train is not None:
        if args.train < 1 or not args.workloads or args.models is not None:
            parser.error("--train needs a positive step count and --workloads, and no --models")
    elif args.models is None:
        parser.error("--models is required (or --train STEPS --workloads W,...)")
    if args.ngram_rounds is not None and args.ngram_rounds < 1:
        parser.error("--ngram-rounds must be positive")
    dirs = [] if args.train else model_dirs(args.models, args.workloads)
    if dirs is None:
        return 2
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="tracesynth-baseline-") as tmp:
        worktree = Path(tmp) / "baseline"
        made = subprocess.run(["git", "worktree", "add", "--detach", "-q", str(worktree), args.baseline],
                              cwd=REPO, capture_output=True, text=True)
        if made.returncode != 0:
            print(f"--baseline {args.baseline}: {made.stderr.strip()}", file=sys.stderr)
            return 2
        try:
            sources = {f"baseline {args.baseline}": worktree / "src", f"this checkout ({head}{'' if args.train else ', ' + (args.precision or 'saved')})": REPO / "src"}
            if args.train:
                _compare_training(sources, args.workloads.split(","), args.train, args.repeats, args.seed)
                return 0
            print(f"{'workload':10s} {'code':34s} {'events/s':>10s}   ratio (time / the baseline's)   identical")
            for d in dirs:
                workload = d.name.split("__")[1]
                times: dict[str, list[float]] = {name: [] for name in sources}
                digests: dict[str, set[str]] = {name: set() for name in sources}
                for _ in range(args.repeats):
                    for name, src in sources.items():
                        result = _run(src, d, workload, args.events, args.seed,
                                      args.precision if src == REPO / "src" else None, args.ngram_rounds)
                        times[name].append(result["seconds"])
                        digests[name].add(result["digest"])
                base = statistics.median(next(iter(times.values())))
                same = len(set().union(*digests.values())) == 1
                for name in sources:
                    t = statistics.median(times[name])
                    print(f"{workload:10s} {name:34s} {args.events / t:10,.0f}   {t / base:.2f}x"
                          f"{'':24s}{'yes' if same else 'NO'}")
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(worktree)], cwd=REPO, capture_output=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

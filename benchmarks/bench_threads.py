"""How PyTorch's OpenMP threads wait between operations and where glibc's malloc takes memory,
measured on the sampler: a network call over a 4,096-event window and the whole guided pipeline
of each trained model, under each setting, on an idle machine and with other processes busy on
the cores, in one run.

    .venv/bin/python benchmarks/bench_threads.py --models out/guide-rounds-ngram/models \\
        [--workloads sqlite,tar,stream] [--events 16384] [--repeats 3] [--load 0,1,2] \\
        [--settings passive,spin10k,default,passive+heap] [--train-steps 20]

    # what `tracesynth generate` runs with (heap: spinning threads, SamplingThreads on) against
    # the passive CLI it replaced, and spinning at a fixed count (OMP_NUM_THREADS turns
    # SamplingThreads off):
    .venv/bin/python benchmarks/bench_threads.py --models DIR --load 0,1 \
        --settings passive+heap+threads2,heap,passive+heap,heap+threads2

The settings are environment variables of GNU OpenMP (libgomp, which PyTorch's Linux wheels
ship): `passive` is OMP_WAIT_POLICY=PASSIVE (a thread with no work sleeps at once), `active` is
OMP_WAIT_POLICY=ACTIVE (it spins for as long as it waits), `spinN` is
GOMP_SPINCOUNT=N (it spins N times, ~N/100 µs, then sleeps), `default` sets neither (libgomp
spins 300,000 times, ~3 ms), `threadsN` is OMP_NUM_THREADS=N (PyTorch runs N threads, one:
no thread ever waits for another). `--load K` runs K busy processes (pure-Python loops) while the
settings take turns: a training run, a second sampler or a test suite on the same 2 cores is
what the CLI must stay fast under. `heap` (combined with a wait setting by `+`) sets glibc's
MALLOC_MMAP_THRESHOLD_ and MALLOC_TRIM_THRESHOLD_ to the values `tracesynth.runtime` gives
mallopt at the CLI's start: blocks up to 32 MiB come from the heap and freed memory stays there,
instead of being mapped from the kernel (fresh zeroed pages) each time. Every measurement is a fresh child process (model load not
timed); settings alternate within a repeat. Prints medians and each setting's time ratio to
`passive` under the same load; the machine is noisy, so read the ratios. The settings change
only how threads wait and where memory comes from, never what is computed: traces are identical (checked: "same").
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
from pathlib import Path

from model_dirs import model_dirs

from tracesynth.runtime import MMAP_THRESHOLD, TRIM_THRESHOLD

REPO = Path(__file__).resolve().parent.parent

SETTINGS = {"passive": {"OMP_WAIT_POLICY": "PASSIVE"}, "active": {"OMP_WAIT_POLICY": "ACTIVE"}, "default": {},
            "heap": {"MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD), "MALLOC_TRIM_THRESHOLD_": str(TRIM_THRESHOLD)}}
CLEARED = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_NUM_THREADS", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")

CHILD = r"""
import hashlib, json, sys, time
import numpy as np, torch
from tracesynth.generators.diffusion import TraceSynth
model_dir, workload, events, train_steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
train_s = None
if train_steps:  # the default model's training steps on the workload's first run, from scratch
    import tracesynth.datasets as ds
    learner = TraceSynth(channels="light", context=4096, train_steps=train_steps, random_state=0)
    start = time.perf_counter()
    learner.fit([ds.load(workload, 1)])
    train_s = time.perf_counter() - start
gen = TraceSynth.load(model_dir, device="cpu")
model = gen.model_
codes = {ch: torch.randint(0, v, (1, 4096), generator=torch.Generator().manual_seed(0))
         for ch, v in model.config.vocab_sizes.items()}
with torch.inference_mode():
    for _ in range(3):
        model.hidden(codes, torch.tensor([0.5]), torch.tensor([0]))
    start = time.perf_counter()
    for _ in range(20):
        model.hidden(codes, torch.tensor([0.5]), torch.tensor([0]))
    network = (time.perf_counter() - start) / 20
gen.generate(1024, workload, 1, constraints="guided")  # warm-up
start = time.perf_counter()
trace = gen.generate(events, workload, 0, constraints="guided")
seconds = time.perf_counter() - start
digest = hashlib.sha256("\n".join(trace.column("event").to_pylist()).encode())
digest.update(np.asarray(trace.column("ts").to_numpy()).tobytes())
print(json.dumps({"network_ms": network * 1000, "events_per_s": events / seconds, "train_s": train_s,
                  "digest": digest.hexdigest()}))
"""


def setting_env(name: str) -> dict[str, str]:
    """The environment of a setting: parts joined by `+`, e.g. `passive+heap`."""
    env: dict[str, str] = {}
    for part in name.split("+"):
        if part in SETTINGS:
            env.update(SETTINGS[part])
        elif part.startswith("spin") and part[4:].replace("k", "000").isdigit():
            env["GOMP_SPINCOUNT"] = part[4:].replace("k", "000")
        elif part.startswith("threads") and part[7:].isdigit() and int(part[7:]) > 0:
            env["OMP_NUM_THREADS"] = part[7:]
        else:
            raise SystemExit(f"unknown setting {part!r}: passive, active, default, spinN (e.g. spin10k), "
                             f"threadsN or heap, joined by +")
    return env


def _busy() -> None:
    while True:
        pass


def _run(setting: str, model_dir: Path, workload: str, events: int, train_steps: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in CLEARED}
    env.update(setting_env(setting))
    env["PYTHONPATH"] = str(REPO / "src")
    out = subprocess.run([sys.executable, "-c", CHILD, str(model_dir), workload, str(events), str(train_steps)],
                         env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"{model_dir.name} ({setting}): {out.stderr.strip().splitlines()[-1]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=Path, required=True, help="directory of tracesynth__W__... model dirs")
    parser.add_argument("--workloads", default=None, help="comma-separated subset (default: every model found)")
    parser.add_argument("--events", type=int, default=16384)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--load", default="0,2", help="comma-separated numbers of busy processes")
    parser.add_argument("--settings", default="passive,spin10k,default")
    parser.add_argument("--train-steps", type=int, default=0,
                        help="also time this many steps of the default training (light, context 4096)")
    args = parser.parse_args(argv)
    settings = args.settings.split(",")
    for name in settings:
        setting_env(name)
    loads = [int(k) for k in args.load.split(",")]
    if args.events < 1 or args.repeats < 1 or any(k < 0 for k in loads):
        parser.error("--events and --repeats must be positive, --load non-negative")
    dirs = model_dirs(args.models, args.workloads)
    if dirs is None:
        return 2
    print(f"# {os.cpu_count()} CPUs; {args.events} guided events per pipeline run; {args.repeats} repeats; "
          f"medians; ratio = time / passive's under the same load")
    print(f"{'workload':10s} {'load':>4s} {'setting':22s} {'net ms':>7s} {'ratio':>6s} {'events/s':>9s} "
          f"{'ratio':>6s} same" + (f" {'train s':>8s} {'ratio':>6s}" if args.train_steps else ""))
    for model_dir in dirs:
        workload = model_dir.name.split("__")[1]
        for load in loads:
            hogs = [multiprocessing.Process(target=_busy, daemon=True) for _ in range(load)]
            for hog in hogs:
                hog.start()
            try:
                runs: dict[str, list[dict]] = {s: [] for s in settings}
                for _ in range(args.repeats):
                    for s in settings:
                        runs[s].append(_run(s, model_dir, workload, args.events, args.train_steps))
            finally:
                for hog in hogs:
                    hog.terminate()
                    hog.join()
            net = {s: statistics.median(r["network_ms"] for r in rs) for s, rs in runs.items()}
            rate = {s: statistics.median(r["events_per_s"] for r in rs) for s, rs in runs.items()}
            digests = {r["digest"] for rs in runs.values() for r in rs}
            base = settings[0]
            train = {s: statistics.median(r["train_s"] for r in rs) if args.train_steps else None
                     for s, rs in runs.items()}
            for s in settings:
                tail = f" {train[s]:8.1f} {train[s] / train[base]:5.2f}x" if args.train_steps else ""
                print(f"{workload:10s} {load:4d} {s:22s} {net[s]:7.2f} {net[s] / net[base]:5.2f}x "
                      f"{rate[s]:9,.0f} {rate[base] / rate[s]:5.2f}x {'yes' if len(digests) == 1 else 'NO'}{tail}",
                      flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

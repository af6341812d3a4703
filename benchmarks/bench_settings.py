"""Sampling time of two settings side by side, in one run on this machine: for each workload,
generate the same trace length with the same seed (guided) under setting A and setting B, in
alternating fresh processes, and print events/s and B's time over A's.

    .venv/bin/python benchmarks/bench_settings.py \\
        --a out/guide-rounds-ngram/models --b out/sequential-draws/models:ngram_rounds=16 \\
        [--workloads sqlite,tar,stream] [--events 16384] [--repeats 2]

A setting is a directory of `tracesynth__W__...` model directories (what `tracesynth experiment`
writes), optionally followed by `:attr=value,...` generator attributes to set after loading
(`ngram_rounds`, `ngram_weight`, `support_rounds`, `spread`, `sample_steps`, ...). A workload
is timed only if both directories have a model for it. Where `bench_revisions.py` compares two
versions of the code on one model, this compares two settings (or two models, e.g. the same
network with n-gram tables of another order) under this checkout's code. The machine is noisy:
read the ratio, measured in the same run, not the rates.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from model_dirs import model_dirs

REPO = Path(__file__).resolve().parent.parent

# Runs in a child process: load, apply the attributes, generate, time (model load excluded).
CHILD = r"""
import json, sys, time
from tracesynth.generators.diffusion import TraceSynth
model_dir, workload, events, seed, attrs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), json.loads(sys.argv[5])
gen = TraceSynth.load(model_dir, device="cpu")
for key, value in attrs.items():
    if not hasattr(gen, key):
        raise SystemExit(f"the generator has no setting {key!r}")
    old = getattr(gen, key)
    words = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}
    # bool("0") is True: a switch is read as a word, also where a switch may be "auto" (cadence)
    if isinstance(old, bool) or (old == "auto" and value.lower() in words):
        if value.lower() not in words:
            raise SystemExit(f"{key}={value!r}: use 1/0, true/false, yes/no or on/off")
        value = words[value.lower()]
    setattr(gen, key, value if old is None or isinstance(old, (str, bool)) else type(old)(value))
start = time.perf_counter()
gen.generate(events, workload, seed, constraints="guided")
print(json.dumps({"seconds": time.perf_counter() - start}))
"""


def parse_setting(text: str) -> tuple[Path, dict[str, str]]:
    """`DIR[:attr=value,...]` → (DIR, {attr: value})."""
    path, _, rest = text.partition(":")
    attrs = {}
    for item in filter(None, rest.split(",")):
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise ValueError(f"{text!r}: settings are attr=value, comma-separated")
        attrs[key] = value
    return Path(path), attrs


def _run(model_dir: Path, workload: str, events: int, seed: int, attrs: dict) -> float:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}
    out = subprocess.run([sys.executable, "-c", CHILD, str(model_dir), workload, str(events), str(seed),
                          json.dumps(attrs)], env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"{model_dir.name}: generation failed: {out.stderr.strip().splitlines()[-1]}")
    return json.loads(out.stdout.strip().splitlines()[-1])["seconds"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", required=True, help="setting A: DIR[:attr=value,...] (the reference)")
    parser.add_argument("--b", required=True, help="setting B: DIR[:attr=value,...]")
    parser.add_argument("--workloads", default=None, help="comma-separated subset (default: every model in both)")
    parser.add_argument("--events", type=int, default=16384)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.events < 1 or args.repeats < 1:
        parser.error("--events and --repeats must be positive")
    try:
        settings = {"A": parse_setting(args.a), "B": parse_setting(args.b)}
    except ValueError as err:
        parser.error(str(err))
    found = {}
    for name, (path, _) in settings.items():
        dirs = model_dirs(path, args.workloads)
        if dirs is None:
            return 2
        found[name] = {d.name.split("__")[1]: d for d in dirs}
    workloads = sorted(set(found["A"]) & set(found["B"]))
    if not workloads:
        print("no workload has a model in both settings", file=sys.stderr)
        return 2
    print(f"A = {args.a}\nB = {args.b}")
    print(f"{'workload':10s} {'A events/s':>11s} {'B events/s':>11s}   B's time / A's")
    for workload in workloads:
        times: dict[str, list[float]] = {"A": [], "B": []}
        for _ in range(args.repeats):
            for name, (_, attrs) in settings.items():
                times[name].append(_run(found[name][workload], workload, args.events, args.seed, attrs))
        a, b = statistics.median(times["A"]), statistics.median(times["B"])
        print(f"{workload:10s} {args.events / a:11,.0f} {args.events / b:11,.0f}   {b / a:.2f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

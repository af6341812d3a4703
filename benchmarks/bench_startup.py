"""How closely a generated trace begins like a real run: the edit distance between its first
events and the nearest training run's first events, beside the held-out run's own distance.

    .venv/bin/python benchmarks/bench_startup.py MODEL_DIR... [--events 128] [--seeds 4] \\
        [--train-runs 1,2] [--test-run 3] [--settings default,prior-from-512]

Real runs of one command begin alike: the shell's execve, the dynamic loader's brk/mmap/access/
openat sequence, libc's set-up, the program's own start. They differ by a scheduler event pair
here and there (a `sched_switch` in and out) and, in multi-process workloads, by where a child
starts. A generated start-up should differ from the training runs' about as much as a held-out
run does, and in the same way. This script generates one window per seed for each model (the
trace's first `--events` events, guided, as `tracesynth generate` does) under each setting and
prints, per setting, the edit distance to the nearer training run (mean and range over seeds;
the evaluation reports the same figure as `fidelity.startup`),
the 8-grams of those events that no training run contains (slips: a held-out run has none or
almost none), and the first differing stretch of seed 0 against its nearer training run.

Settings: `default` (the generator's defaults: the n-gram prior on every event),
`prior-from-128` / `prior-from-512` (`generate --prior-from N`: no prior among a trace's first N
events, where the network's trace-position embedding places the start-up), `no-prior`
(`--ngram-weight 0`), `start-steps-64` (`generate --start-steps 64`: the first window in 64
denoising steps instead of 16). No timing: these are counts, not speeds. Results:
`benchmarks/results/support/bench_startup.txt`; docs/model.md, "Start-up without the prior".
"""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path

import numpy as np

import tracesynth.datasets as ds
from tracesynth.evaluation import fidelity
from tracesynth.errors import TraceSynthError
from tracesynth.evaluation.windows import Vocabulary, encode

SETTINGS = {"default": {}, "prior-from-128": {"prior_from": 128}, "prior-from-512": {"prior_from": 512},
            "no-prior": {"ngram_weight": 0.0}, "start-steps-64": {"start_steps": 64}}


def first_difference(events: list[str], reference: list[str]) -> str:
    """The first stretch where `events` departs from `reference`, with two events of context."""
    short = [e.replace("syscall_entry_", ">").replace("syscall_exit_", "<") for e in events]
    ref = [e.replace("syscall_entry_", ">").replace("syscall_exit_", "<") for e in reference]
    for op, a0, a1, b0, b1 in difflib.SequenceMatcher(None, ref, short, autojunk=False).get_opcodes():
        if op != "equal":
            return (f"at {a0}: {' '.join(ref[max(a0 - 2, 0):a1 + 1])} -> "
                    f"{' '.join(short[max(b0 - 2, 0):b1 + 1])}")
    return "none"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="+", help="model directories (one workload each)")
    parser.add_argument("--events", type=int, default=128)
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--train-runs", default="1,2")
    parser.add_argument("--test-run", type=int, default=3)
    parser.add_argument("--settings", default="default,prior-from-512")
    args = parser.parse_args()
    settings = args.settings.split(",")
    unknown = [s for s in settings if s not in SETTINGS]
    if unknown:
        parser.error(f"unknown setting(s) {', '.join(unknown)}; choose from {', '.join(SETTINGS)}")
    if args.events < 16 or args.seeds < 1:
        parser.error("--events must be at least 16 and --seeds at least 1")
    try:
        run(args, settings)
    except TraceSynthError as exc:
        sys.exit(f"error: {exc}")


def run(args, settings: list[str]) -> None:
    from tracesynth.generators.diffusion import TraceSynth

    train_runs = [int(r) for r in args.train_runs.split(",")]
    n = args.events
    print(f"first {n} events, {args.seeds} seeds per setting, guided; distance = edit distance to the "
          f"nearer training run's first {n} (runs {args.train_runs}); unseen = 8-grams no training run has")
    for directory in args.models:
        gen = TraceSynth.load(directory, device="cpu")
        workload = gen.workloads_[0]
        runs = {r: ds.load(workload, r) for r in [*train_runs, args.test_run]}
        vocab = Vocabulary.from_traces(list(runs.values()))
        training = [encode(runs[r], vocab) for r in train_runs]
        names = {r: runs[r].column("event").to_pylist()[:n] for r in train_runs}

        def measure(trace):
            """(edits to the nearer training run, unseen 8-grams, that run), as `fidelity.startup`
            counts them."""
            enc = encode(trace, vocab)
            by_run = {r: fidelity.edit_distance(enc.tokens[:n], t.tokens[:n]) for r, t in zip(train_runs, training)}
            nearest = min(by_run, key=by_run.get)
            return by_run[nearest], fidelity.startup([enc], training, n)["unseen_8grams"]["mean"], nearest

        d, u, r = measure(runs[args.test_run])
        first, last = training[0].tokens[:n], training[-1].tokens[:n]
        print(f"\n{workload} ({Path(directory).name})\n  held-out run {args.test_run}: distance {d:.0f} (to run {r}), "
              f"unseen {u:.0f}; training runs from each other: {fidelity.edit_distance(first, last)}")
        for setting in settings:
            saved = {key: getattr(gen, key) for key in SETTINGS[setting]}
            for key, value in SETTINGS[setting].items():
                setattr(gen, key, value)
            distances, unseen, example = [], [], ""
            for seed in range(args.seeds):
                trace = gen.generate(n, workload, seed, constraints="guided")
                d, u, r = measure(trace)
                distances.append(d)
                unseen.append(u)
                if seed == 0:
                    example = first_difference(trace.column("event").to_pylist()[:n], names[r])
            for key, value in saved.items():  # back to the model's own settings
                setattr(gen, key, value)
            print(f"  {setting:14s} distance {np.mean(distances):5.2f} ({min(distances):.0f}-{max(distances):.0f}), "
                  f"unseen {np.mean(unseen):5.2f} ({min(unseen):.0f}-{max(unseen):.0f}); seed 0 {example}")


if __name__ == "__main__":
    main()

"""The measured effect of constraints on generation (issue 6, section 4): for one trained
model and each bundled workload, generate with `--constraints none`, `repair` and `guided`
and report, per mode:

- violations per 1,000 events before repair (the generator's raw output) and after,
- edits per 1,000 events that repair needed,
- TSTR macro-F1 (next-event and syscall-latency tasks) and the discriminative accuracy, from
  `tracesynth.evaluation.evaluate` against held-out real runs.

    .venv/bin/python benchmarks/constraint_effect.py --model models/tracesynth \\
        [--workloads gzip,tar] [--events 20000] [--seeds 3] [--quick]
    .venv/bin/python benchmarks/constraint_effect.py --train-steps 300 ...   # train one here

The model is trained on every run but the last of each workload; the last run is the real
test set. Results go to benchmarks/results/constraints/effect.json and effect.md (atomic).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "benchmarks" / "results" / "constraints"
MODES = ("none", "repair", "guided")


def generate_raw(gen, n_events: int, workload: str, seed: int, mode: str, threads: int | None):
    """The generator's output before repair (with the sampling guide in `guided` mode). A
    model without thread ids (`light`) whose training traces made syscalls from one thread is
    guided and checked as one thread (`TraceSynth.single_thread`), as `generate` does."""
    from tracesynth.constraints import ConstraintGuide
    from tracesynth.sampling import generate

    guide = ConstraintGuide(single_thread=threads == 1) if mode == "guided" else None
    trace = generate(gen.model_, gen.encoder_, n_events, workload, steps=gen.sample_steps,
                     guidance_scale=gen.guidance_scale, temperature=gen.temperature,
                     prefix_fraction=gen.prefix_fraction, seed=seed, guide=guide)
    if threads is not None:
        trace.meta.extra["threads"] = threads
    return trace


def run_mode(gen, workload: str, mode: str, n_events: int, seed: int, train, test, args) -> dict:
    from tracesynth.constraints import check, repair
    from tracesynth.evaluation.runner import evaluate

    threads = 1 if gen.single_thread() else None
    start = time.perf_counter()
    margin = 0 if mode == "none" else max(64, n_events // 20)
    raw = generate_raw(gen, n_events + margin, workload, seed, mode, threads)
    t_generate = time.perf_counter() - start
    before = check(raw)
    result = {"mode": mode, "events": n_events, "generate_s": round(t_generate, 2),
              "single_thread": threads == 1,
              "rules_checked": [r.name for r in before.rules if r.status != "n/a"],
              "violations_per_1k_before_repair": before.per_1000,
              "violations_before_repair": before.per_rule}
    final = raw
    if mode != "none":
        start = time.perf_counter()
        fixed, edits = repair(raw)
        result["repair_s"] = round(time.perf_counter() - start, 3)
        result["edits_per_1k"] = 1000.0 * len(edits) / len(raw)
        final = fixed
    final = final.slice(0, n_events).with_meta(workload=workload)
    after = check(final)
    result["violations_per_1k_after"] = after.per_1000
    report = evaluate(train, test, [final], seeds=args.seeds, quick=args.quick, workload=workload)
    head = report["workloads"][workload]["headline"] if "workloads" in report else report["overall"]
    result["tstr_macro_f1"] = head.get("tstr")
    result["discriminative"] = head.get("discriminative")
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="A saved TraceSynth model directory.")
    parser.add_argument("--train-steps", type=int, default=0,
                        help="Train a light model here for this many steps (when no --model).")
    parser.add_argument("--workloads", default=None, help="Comma-separated (default: all the model knows).")
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--sample-seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="Quick evaluation (n-gram predictor only).")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)

    import tracesynth.datasets as ds
    from tracesynth.errors import ConfigError
    from tracesynth.fileio import atomic_path
    from tracesynth.generators.diffusion import TraceSynth

    names = args.workloads.split(",") if args.workloads else ds.workloads()
    split = {w: ds.runs(w) for w in names}
    for w, runs in split.items():
        if len(runs) < 2:
            raise ConfigError(f"{w}: needs at least two runs (train and test), has {runs}")
    train = {w: [ds.load(w, run=r) for r in runs[:-1]] for w, runs in split.items()}
    test = {w: [ds.load(w, run=runs[-1])] for w, runs in split.items()}
    if args.model:
        gen = TraceSynth.load(args.model)
    elif args.train_steps:
        gen = TraceSynth(channels="light", train_steps=args.train_steps, device="cpu").fit(
            [t.with_meta(workload=w) for w, ts in train.items() for t in ts])
    else:
        raise ConfigError("pass --model DIR (a trained TraceSynth) or --train-steps N")
    missing = [w for w in names if w not in gen.workloads_]
    if missing:
        raise ConfigError(f"the model does not know workload(s) {', '.join(missing)}")

    results = {"model": str(args.model) if args.model else f"trained here, {args.train_steps} steps",
               "events": args.events, "seeds": args.seeds, "quick": args.quick, "workloads": {}}
    for w in names:
        results["workloads"][w] = {}
        for mode in MODES:
            print(f"{w}: {mode} ...", file=sys.stderr, flush=True)
            results["workloads"][w][mode] = run_mode(gen, w, mode, args.events, args.sample_seed,
                                                     train[w], test[w], args)
    args.out.mkdir(parents=True, exist_ok=True)
    with atomic_path(args.out / "effect.json") as tmp:
        tmp.write_text(json.dumps(results, indent=2, sort_keys=True, default=str))
    lines = ["| workload | mode | violations/1k before repair | edits/1k | violations/1k after | "
             "TSTR macro-F1 (next event) | discriminative |", "|---|---|---|---|---|---|---|"]
    for w, modes in results["workloads"].items():
        for mode, r in modes.items():
            tstr = {k: v for k, v in (r["tstr_macro_f1"] or {}).items() if k.startswith("next_event")}
            disc = r["discriminative"] or {}
            lines.append(f"| {w} | {mode} | {r['violations_per_1k_before_repair']:.2f} | "
                         f"{r.get('edits_per_1k', 0.0):.2f} | {r['violations_per_1k_after']:.2f} | "
                         f"{', '.join(f'{v:.3f}' for v in tstr.values() if v is not None) or '-'} | "
                         f"{', '.join(f'{k}: {v:.3f}' for k, v in disc.items() if v is not None) or '-'} |")
    with atomic_path(args.out / "effect.md") as tmp:
        tmp.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())

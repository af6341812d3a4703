"""The measured effect of constraints on generation (issue 6, section 4): for the same trained
model, generate each workload with `--constraints none`, `repair` and `guided` from several
sampling seeds and report, per workload and mode:

- violations per 1,000 events in the sampler's raw output (before repair) and after repair,
- edits per 1,000 events that repair made,
- TSTR next-event macro-F1 (n-gram predictor) and the discriminative accuracy at 512 events,
  from `tracesynth.evaluation.evaluate` against the held-out real run (as `tracesynth
  experiment` computes them),
- mean and standard deviation over the sampling seeds, and the paired difference
  guided - repair and guided - none (same seed) with a 95% t-interval.

One generated trace's macro-F1 moves by about ±0.1 between sampling seeds (it hangs on one
start-up sequence), so a single seed cannot tell the modes apart; the paired interval can.

    # per-workload models as `tracesynth experiment experiments/light4096.yaml` saves them
    .venv/bin/python benchmarks/constraint_effect.py --models out/experiments-light4096/models \\
        [--workloads gzip,tar] [--sample-seeds 6]
    # one model that knows several workloads
    .venv/bin/python benchmarks/constraint_effect.py --model models/tracesynth

Training runs are every run but the last of each workload; the last run, cut to its first
`--test-events` events, is the real test set (the light4096 experiment's split). Results go to
benchmarks/results/constraints/effect.json and effect.md (atomic writes).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "benchmarks" / "results" / "constraints"
MODES = ("none", "repair", "guided")
METRICS = ("violations_before", "edits_per_1k", "violations_after", "tstr", "disc_512")


def run_mode(gen, workload: str, mode: str, n_events: int, seed: int, train, test, eval_seeds: int) -> dict:
    """One sampling seed of one mode: raw output checked, repaired (unless `none`), evaluated."""
    from tracesynth.constraints import check
    from tracesynth.evaluation.runner import evaluate
    from tracesynth.experiments.runner import cell_metrics

    start = time.perf_counter()
    raw, repair = gen.draw(n_events, workload, seed, constraints=mode)
    seconds = time.perf_counter() - start
    before = check(raw)
    final, edits = raw, []
    if repair is not None:
        final, edits = repair(raw)
    final = final.slice(0, n_events).with_meta(workload=workload)
    after = check(final)
    report = evaluate(train, test, [final], seeds=eval_seeds, quick=True, workload=workload)
    metrics = cell_metrics(report, workload, "ngram")
    return {"seed": seed, "generate_s": round(seconds, 2),
            "rules_checked": [r.name for r in before.rules if r.status != "n/a"],
            "violations_before": before.per_1000, "violations_before_per_rule": before.per_rule,
            "edits_per_1k": 1000.0 * len(edits) / len(raw), "violations_after": after.per_1000,
            "tstr": metrics["tstr"], "trtr": metrics["trtr"], "disc_512": metrics["disc_512"],
            "disc_floor_512": metrics["disc_floor_512"]}


def summary(values: list[float]) -> dict:
    values = [v for v in values if v is not None]
    if not values:
        return {"n": 0}
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return {"n": len(values), "mean": statistics.fmean(values), "sd": sd}


def paired(a: list[float], b: list[float]) -> dict:
    """Mean of a - b over paired seeds with a two-sided 95% t-interval."""
    from scipy import stats

    diffs = [x - y for x, y in zip(a, b) if x is not None and y is not None]
    if len(diffs) < 2:
        return {"n": len(diffs), "mean": diffs[0] if diffs else None}
    mean, sd = statistics.fmean(diffs), statistics.stdev(diffs)
    half = stats.t.ppf(0.975, len(diffs) - 1) * sd / math.sqrt(len(diffs))
    return {"n": len(diffs), "mean": mean, "low": mean - half, "high": mean + half}


def verdict(diff: dict) -> str:
    if diff.get("low") is None:
        return "one seed"
    if diff["low"] > 0:
        return "higher"
    if diff["high"] < 0:
        return "lower"
    return "tie"


def find_models(folder: Path, workload: str) -> Path:
    """The model `tracesynth experiment` saved for a workload (`tracesynth__<workload>__...`)."""
    from tracesynth.errors import ConfigError

    found = sorted(p for p in folder.glob(f"tracesynth__{workload}__*") if (p / "config.json").exists())
    if not found:
        raise ConfigError(f"{folder}: no saved model named tracesynth__{workload}__*")
    return found[0]


def markdown(results: dict) -> str:
    seeds = results["sample_seeds"]
    lines = [f"Sampling seeds 0..{seeds - 1} per mode; mean (sd). Model: {results['model']}. "
             f"{results['events']:,} generated events vs the held-out run's first {results['test_events']:,}.",
             "",
             "| workload | mode | raw violations/1k | edits/1k | violations/1k after | TSTR macro-F1 | disc@512 |",
             "|---|---|---|---|---|---|---|"]

    def cell(s: dict, digits: int) -> str:
        if not s.get("n"):
            return "-"
        return f"{s['mean']:.{digits}f} ({s['sd']:.{digits}f})"

    for w, per in results["workloads"].items():
        for mode in MODES:
            s = per["summary"][mode]
            lines.append(f"| {w} | {mode} | {cell(s['violations_before'], 1)} | {cell(s['edits_per_1k'], 1)} | "
                         f"{cell(s['violations_after'], 2)} | {cell(s['tstr'], 3)} | {cell(s['disc_512'], 3)} |")
    lines += ["", "Paired differences in TSTR macro-F1 (same seed), mean [95% t-interval]:", "",
              "| workload | guided - repair | | guided - none | |", "|---|---|---|---|---|"]
    for w, per in results["workloads"].items():
        row = [w]
        for key in ("guided_minus_repair", "guided_minus_none"):
            d = per["paired_tstr"][key]
            if d.get("low") is None:
                row += [f"{d['mean']:+.3f}" if d.get("mean") is not None else "-", verdict(d)]
            else:
                row += [f"{d['mean']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]", verdict(d)]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", type=Path, help="One saved TraceSynth model for every workload.")
    source.add_argument("--models", type=Path,
                        help="A folder of per-workload models as `tracesynth experiment` saves them.")
    parser.add_argument("--workloads", default=None, help="Comma-separated (default: all bundled).")
    parser.add_argument("--events", type=int, default=32_768, help="Events generated per trace.")
    parser.add_argument("--test-events", type=int, default=32_768,
                        help="Cut the held-out run to its first N events (0: whole run).")
    parser.add_argument("--sample-seeds", type=int, default=6, help="Sampling seeds 0..N-1 per mode.")
    parser.add_argument("--eval-seeds", type=int, default=1, help="Classifier seeds per evaluation.")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)

    import tracesynth.datasets as ds
    from tracesynth.errors import ConfigError
    from tracesynth.fileio import atomic_path
    from tracesynth.generators.diffusion import TraceSynth

    names = args.workloads.split(",") if args.workloads else ds.workloads()
    results = {"model": str(args.model or args.models), "events": args.events,
               "test_events": args.test_events, "sample_seeds": args.sample_seeds,
               "eval_seeds": args.eval_seeds, "workloads": {}}
    shared = TraceSynth.load(args.model, device="cpu") if args.model else None
    for w in names:
        runs = ds.runs(w)
        if len(runs) < 2:
            raise ConfigError(f"{w}: needs at least two runs (train and test), has {runs}")
        gen = shared or TraceSynth.load(find_models(args.models, w), device="cpu")
        if w not in gen.workloads_:
            raise ConfigError(f"the model does not know workload {w}")
        train = [ds.load(w, run=r) for r in runs[:-1]]
        test = ds.load(w, run=runs[-1])
        test = [test.slice(0, args.test_events) if args.test_events else test]
        per_mode = {}
        for mode in MODES:
            per_mode[mode] = []
            for seed in range(args.sample_seeds):
                print(f"{w}: {mode} seed {seed} ...", file=sys.stderr, flush=True)
                per_mode[mode].append(run_mode(gen, w, mode, args.events, seed, train, test, args.eval_seeds))
        tstr = {m: [r["tstr"] for r in rs] for m, rs in per_mode.items()}
        results["workloads"][w] = {
            "single_thread": gen.single_thread(),
            "runs": per_mode,
            "summary": {m: {k: summary([r[k] for r in rs]) for k in METRICS} for m, rs in per_mode.items()},
            "paired_tstr": {"guided_minus_repair": paired(tstr["guided"], tstr["repair"]),
                            "guided_minus_none": paired(tstr["guided"], tstr["none"])},
        }
        args.out.mkdir(parents=True, exist_ok=True)  # written after each workload: a long run shows progress
        with atomic_path(args.out / "effect.json") as tmp:
            tmp.write_text(json.dumps(results, indent=2, sort_keys=True, default=str))
        with atomic_path(args.out / "effect.md") as tmp:
            tmp.write_text(markdown(results))
    print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The headline figures with each recorded run held out in turn, side by side.

    .venv/bin/python benchmarks/holdout_rotation.py RUN_DIR... [--generator tracesynth] [--peer markov]

Every bundled workload has three recorded runs; an experiment trains on some and tests on the
others (`data.train_runs`, `data.test_runs` in its config). One held-out run is one draw: a
workload's macro-F1 moves by 0.01-0.02 with the layout its deterministic start-up happens to take.
Given the `tracesynth experiment` output folders of runs that differ in the held-out run (e.g.
experiments/guide-rounds-ngram.yaml, holdout-run1.yaml, holdout-run2.yaml), this prints per
workload each held-out run's mean over sampling seeds, the mean over held-out runs and their
spread (largest minus smallest), for TSTR/TRTR, disc@512 and disc@2048 (each beside its real-vs-real
floor; on event types alone, the features every generator's trace has), the copy rate of 256-event spans (beside the held-out run's) and the start-up edits, and
the same figures for a peer (`--peer`, default the order-8 Markov chain) where the folders have it.
Where several folders hold the same generator, workload and held-out run, the first one given is
used (so a folder with the peer alone can complete a fold, and a run of one workload under a new
default can stand in for that workload's cells of an older run). Figures are quality, not speed: no
timing is read. The published output is benchmarks/results/support/holdout_rotation.txt.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import pandas as pd

from tracesynth.errors import TraceSynthError
from tracesynth.experiments.compare import load_results, load_run_config

# (column, its real reference column or None, digits, what the line says)
METRICS = [
    ("tstr_trtr", None, 3, "TSTR/TRTR (next-event macro-F1, synthetic over real)"),
    ("types_512", "types_floor_512", 2, "disc@512 on event types (real-vs-real floor in brackets)"),
    ("types_2048", "types_floor_2048", 2, "disc@2048 on event types (floor in brackets)"),
    ("copy_rate_256", "copy_rate_256_holdout", 2, "copy rate of 256-event spans (held-out run's in brackets)"),
    ("startup_edits", "startup_edits_real", 1, "start-up edits, first 256 events (held-out run's in brackets)"),
    ("cadence_octaves", "cadence_octaves_real", 2, "cadence: recurring events' gaps off the held-out run's, "
     "octaves (a training run's in brackets)"),
]


def load(folders: list[str]) -> pd.DataFrame:
    """Every folder's finished cells with a `holdout` column (the held-out runs, e.g. "3");
    a (generator, holdout, workload) is taken from the first folder that has it."""
    parts, seen = [], set()
    for folder in folders:
        config = load_run_config(folder)
        if config is None:
            raise TraceSynthError(f"{folder}: no run.json with the run's config beside results.csv")
        holdout = ",".join(str(r) for r in config["data"]["test_runs"])
        frame = load_results(folder)
        frame = frame[frame["status"] == "ok"].copy()
        frame["holdout"] = holdout
        for n in (512, 2048):  # event types alone: the features every generator's trace has
            for ours, events, full in ((f"types_{n}", f"disc_events_{n}", f"disc_{n}"),
                                       (f"types_floor_{n}", f"disc_events_floor_{n}", f"disc_floor_{n}")):
                # a light trace's disc is on event types already; runs written before the
                # events-only columns have only that one
                frame[ours] = frame[events].fillna(frame[full]) if events in frame else frame[full]
        frame["source"] = folder
        keys = list(zip(frame["generator"], frame["workload"]))
        parts.append(frame[[(g, holdout, w) not in seen for g, w in keys]])
        seen.update((g, holdout, w) for g, w in set(keys))
    return pd.concat(parts, ignore_index=True)


def _mean(values: pd.Series) -> float | None:
    arr = pd.to_numeric(values, errors="coerce").dropna().to_numpy(dtype=float)
    return float(arr.mean()) if len(arr) else None


def _fmt(value: float | None, digits: int) -> str:
    return "—" if value is None or not np.isfinite(value) else f"{value:.{digits}f}"


def metric_table(frame: pd.DataFrame, generator: str, column: str, reference: str | None, digits: int,
                 holdouts: list[str], workloads: list[str]) -> list[str]:
    """Rows: workload | each held-out run's mean (reference) | mean over runs | spread."""
    part = frame[frame["generator"] == generator]
    if column not in part or part[column].isna().all():
        return []
    lines = ["| workload | " + " | ".join(f"held out {h}" for h in holdouts) + " | mean | spread |",
             "|---" * (len(holdouts) + 3) + "|"]
    fold_means: dict[str, list[float]] = {h: [] for h in holdouts}
    for workload in workloads + ["mean"]:
        cells, values = [], []
        for h in holdouts:
            if workload == "mean":
                value = float(np.mean(fold_means[h])) if fold_means[h] else None
                ref = None
            else:
                rows = part[(part["workload"] == workload) & (part["holdout"] == h)]
                value = _mean(rows[column]) if len(rows) else None
                ref = _mean(rows[reference]) if reference and reference in rows and len(rows) else None
                if value is not None:
                    fold_means[h].append(value)
            text = _fmt(value, digits) + (f" ({_fmt(ref, digits)})" if ref is not None else "")
            cells.append(text)
            if value is not None:
                values.append(value)
        complete = len(values) == len(holdouts)
        mean = _fmt(float(np.mean(values)), digits) if complete else "—"
        spread = _fmt(max(values) - min(values), digits) if complete and len(values) > 1 else "—"
        lines.append(f"| {workload} | " + " | ".join(cells) + f" | {mean} | {spread} |")
    return lines


def bars(frame: pd.DataFrame, generator: str, peer: str, holdouts: list[str], workloads: list[str]) -> list[str]:
    """Issue 7's TSTR/TRTR bars and the peer comparison, per held-out run."""
    lines = []
    for h in holdouts:
        ours = frame[(frame["generator"] == generator) & (frame["holdout"] == h)]
        theirs = frame[(frame["generator"] == peer) & (frame["holdout"] == h)]
        per = {w: _mean(ours[ours["workload"] == w]["tstr_trtr"]) for w in workloads}
        per = {w: v for w, v in per.items() if v is not None}
        if not per:
            continue
        low = min(per, key=per.get)
        text = (f"held out {h}: TSTR/TRTR mean {np.mean(list(per.values())):.3f} over {len(per)} workloads "
                f"(bar 0.98), lowest {low} {per[low]:.3f} (bar 0.95 on every workload)")
        peer_per = {w: _mean(theirs[theirs["workload"] == w]["tstr_trtr"]) for w in per}
        peer_per = {w: v for w, v in peer_per.items() if v is not None}
        if peer_per:
            ahead = sum(per[w] >= v for w, v in peer_per.items())
            text += (f"; {peer} mean {np.mean(list(peer_per.values())):.3f}, "
                     f"{generator} at or above it on {ahead} of {len(peer_per)}")
        lines.append(text)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="`tracesynth experiment` output folders")
    parser.add_argument("--generator", default="tracesynth")
    parser.add_argument("--peer", default="markov")
    args = parser.parse_args(argv)
    try:
        frame = load(args.runs)
    except TraceSynthError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    holdouts = sorted(frame["holdout"].unique())
    workloads = sorted(frame[frame["generator"] == args.generator]["workload"].unique())
    if not workloads:
        print(f"error: no {args.generator} cells in {', '.join(args.runs)}", file=sys.stderr)
        return 2
    print("runs:")
    for (generator, h), part in frame[frame["generator"].isin([args.generator, args.peer])].groupby(
            ["generator", "holdout"]):
        sources = []
        for source, cells in part.groupby("source", sort=False):
            only = "" if cells["workload"].nunique() == part["workload"].nunique() else \
                ": " + ", ".join(sorted(cells["workload"].unique()))
            sources.append(f"{source} ({len(cells)} cells, {cells['seed'].nunique()} seeds{only})")
        print(f"  {generator}, held out {h}: " + "; ".join(sources))
    for generator in [args.generator, args.peer]:
        for column, reference, digits, title in METRICS:
            lines = metric_table(frame, generator, column, reference, digits, holdouts, workloads)
            if lines:
                print(f"\n{generator}: {title}")
                print("\n".join(lines))
    print()
    print("\n".join(bars(frame, args.generator, args.peer, holdouts, workloads)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

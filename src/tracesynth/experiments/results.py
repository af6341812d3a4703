"""Results of an experiment: results.csv (one row per cell), results.md (tables and the
published-findings checks, 95% confidence intervals over seeds) and plots (PNG).

Everything here reads the cell JSONs (or a results.csv), so the tables can be re-rendered at
any time, also from a partial run. A cell that failed appears with its error message; no
figure is ever filled in for it.

Confidence intervals: mean ± t(0.975, n−1)·s/√n over seeds (n = number of seeds that
finished); with one seed the interval is not defined and the table says so ("n=1").
Ratios (light/full, repair/none) are paired by seed before averaging.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from tracesynth.fileio import atomic_path

#: `fold`: the held-out runs of the cell's split ("3", "1+2"): a config's folds, or its one split
KEY_COLUMNS = ["generator", "workload", "channels", "context", "constraints", "fold", "seed"]
METRIC_COLUMNS = [
    "tstr", "trtr", "tstr_trtr", "tstr_latency", "trtr_latency", "tstr_matched", "tstr_trtr_matched", "disc_512", "disc_2048", "disc_floor_512",
    "disc_floor_2048", "disc_events_512", "disc_events_2048", "disc_events_floor_512", "disc_events_floor_2048",
    "violations_per_1k", "violations_per_1k_real", "rules_checked", "serial_breaks_per_1k",
    "serial_breaks_per_1k_real", "edits_per_1k", "copy_rate_256", "copy_rate_256_holdout", "unseen_8gram",
    "unseen_8gram_holdout", "repeats", "repeats_real", "startup_edits", "startup_edits_real",
    "startup_unseen_8gram", "startup_unseen_8gram_real", "cadence_octaves", "cadence_octaves_real",
    "privacy_flagged", "splice_from_training", "event_jsd", "event_jsd_floor",
    "train_seconds", "sample_seconds", "gen_events_per_s", "eval_seconds", "events_train", "events_test",
    "events_synthetic", "events_matched", "matched_events_per_s", "train_steps", "params",
    "best_step",
]
TEXT_COLUMNS = ["disc_tell_512"]  # per-cell words, not numbers: kept as text
COLUMNS = [*KEY_COLUMNS, "status", "error", *METRIC_COLUMNS, *TEXT_COLUMNS]

#: The deterministic vs chaotic split of the published method, on our workloads.
COMPUTE_BOUND = ("scimark", "stream", "pybench")
IO_BOUND = ("fileio", "sqlite", "tar", "gzip")

TARGET_RATIO_MEAN = 0.98
TARGET_RATIO_EACH = 0.95
TARGET_DISC_GAP = 0.05


# --- collecting ----------------------------------------------------------------------------------
def collect(out_dir: str | Path) -> pd.DataFrame:
    """One row per cell JSON under out_dir/cells."""
    rows = []
    for path in sorted((Path(out_dir) / "cells").glob("*.json")):
        result = json.loads(path.read_text())
        row = {k: result["cell"].get(k) for k in KEY_COLUMNS}
        row["status"] = result["status"]
        error = result.get("error")
        row["error"] = f"{error['phase']}: {error['type']}: {error['message']}" if error else ""
        row.update({k: result.get("metrics", {}).get(k) for k in (*METRIC_COLUMNS, *TEXT_COLUMNS)})
        rows.append(row)
    return fill_fold(_typed(pd.DataFrame(rows, columns=COLUMNS)), load_run_config(out_dir))


def load_run_config(path: str | Path) -> dict | None:
    """The config a run was made with (run.json in its folder, or beside its results.csv), or
    None without one."""
    path = Path(path)
    run = (path if path.is_dir() else path.parent) / "run.json"
    try:
        return json.loads(run.read_text()).get("config")
    except (OSError, ValueError, AttributeError):
        return None


def split_label(config: dict | None) -> str:
    """The fold label of a config without folds: its held-out runs ("" when not known, or
    when the config has folds: those cells name their own)."""
    from tracesynth.experiments.config import runs_label

    data = (config or {}).get("data") or {}
    if data.get("folds") or not data.get("test_runs"):
        return ""
    return runs_label(data["test_runs"])


def fill_fold(frame: pd.DataFrame, config: dict | None) -> pd.DataFrame:
    """Cells of a config without folds (or a results.csv written before the `fold` column):
    their fold from the run's config, its held-out runs."""
    label = split_label(config)
    if label and (frame["fold"] == "").all():
        frame = frame.assign(fold=label)
    return frame


def _fold_text(value) -> str:
    """A fold label as text: pandas reads "3" back as 3, or 3.0 beside a missing one."""
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _typed(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.copy()
    for col in COLUMNS:  # a results.csv from an older version may lack newer columns
        if col not in frame.columns:
            frame[col] = None
    frame = frame[COLUMNS]
    for col in METRIC_COLUMNS:
        if col == "privacy_flagged":
            continue
        frame[col] = pd.to_numeric(frame[col], errors="coerce")
    frame["context"] = pd.to_numeric(frame["context"], errors="coerce").astype("Int64")
    frame["seed"] = pd.to_numeric(frame["seed"], errors="coerce").astype("Int64")
    for col in ("channels", "constraints", "error", *TEXT_COLUMNS):
        frame[col] = frame[col].astype(object).fillna("").astype(str)
    frame["fold"] = frame["fold"].map(_fold_text).astype(object)
    return frame


def read_csv(path: str | Path) -> pd.DataFrame:
    return _typed(pd.read_csv(path, keep_default_na=True))


def write_results(out_dir: str | Path) -> dict[str, Path]:
    """Write results.csv, results.md and plots/*.png from the cell JSONs; returns the paths."""
    out_dir = Path(out_dir)
    frame = collect(out_dir)
    run = json.loads((out_dir / "run.json").read_text()) if (out_dir / "run.json").exists() else {}
    paths = {"csv": out_dir / "results.csv", "md": out_dir / "results.md"}
    with atomic_path(paths["csv"]) as tmp:
        frame.sort_values(KEY_COLUMNS, na_position="first").to_csv(tmp, index=False)
    plots = write_plots(frame, out_dir / "plots")
    run = dict(run, expected_cells=_expected_cells(run))
    with atomic_path(paths["md"]) as tmp:
        tmp.write_text(render_markdown(frame, run, plots=[p.relative_to(out_dir) for p in plots]))
    paths.update({p.stem: p for p in plots})
    return paths


def _expected_cells(run: dict) -> int | None:
    """How many cells the run's config enumerates (None when it cannot be told)."""
    from tracesynth.errors import TraceSynthError
    from tracesynth.experiments.config import ExperimentConfig
    from tracesynth.experiments.grid import enumerate_cells
    from tracesynth.experiments.runner import resolve_workloads

    try:
        config = ExperimentConfig.from_dict(run["config"])
        return len(enumerate_cells(config, resolve_workloads(config)))
    except (KeyError, TypeError, TraceSynthError):
        return None


# --- statistics -----------------------------------------------------------------------------------
def ci95(values) -> tuple[float | None, float | None, int]:
    """(mean, half-width of the 95% t interval or None, n) of the finite values."""
    arr = np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=float)
    n = len(arr)
    if n == 0:
        return None, None, 0
    if n == 1:
        return float(arr[0]), None, 1
    from scipy.stats import t

    return float(arr.mean()), float(t.ppf(0.975, n - 1) * arr.std(ddof=1) / math.sqrt(n)), n


def fmt(values, digits: int = 3) -> str:
    mean, half, n = ci95(values)
    if mean is None:
        return "—"
    text = f"{mean:.{digits}f}"
    if half is not None:
        text += f" ± {half:.{digits}f}"
    return text


def _fmt_num(value, digits=3) -> str:
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return "—"
    return f"{value:.{digits}f}"


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _paired_ratio(frame: pd.DataFrame, column: str, key: str, numerator, denominator, match: list[str]):
    """Per-seed ratio numerator/denominator of `column` between rows where frame[key] differs."""
    a = frame[frame[key] == numerator].set_index(match)[column]
    b = frame[frame[key] == denominator].set_index(match)[column]
    joined = pd.concat([a.rename("a"), b.rename("b")], axis=1, join="inner").dropna()
    joined = joined[joined["b"] != 0]
    return (joined["a"] / joined["b"]).tolist()


def _paired_diff(frame, column, key, first, second, match):
    a = frame[frame[key] == first].set_index(match)[column]
    b = frame[frame[key] == second].set_index(match)[column]
    joined = pd.concat([a.rename("a"), b.rename("b")], axis=1, join="inner").dropna()
    return (joined["a"] - joined["b"]).tolist()


# --- markdown -------------------------------------------------------------------------------------
def render_markdown(frame: pd.DataFrame, run: dict | None = None, plots: list | None = None) -> str:
    run = run or {}
    config = run.get("config", {})
    ok = frame[frame["status"] == "ok"]
    ts = ok[ok["generator"] == "tracesynth"]
    seeds = sorted(int(s) for s in frame["seed"].dropna().unique())
    out = [f"# Experiment results: {config.get('name', '?')}", ""]
    expected = run.get("expected_cells")
    partial = (f" **Partial run: {len(frame)} of the {expected} cells of the grid have a result.**"
               if expected and expected > len(frame) else "")
    out.append(f"Cells: {len(frame)} ({int((frame['status'] == 'ok').sum())} finished, "
               f"{int((frame['status'] == 'error').sum())} failed).{partial} Seeds: {', '.join(map(str, seeds)) or '—'}. "
               + (f"Budget: {run.get('budget', '?')} (TraceSynth train steps per model: {run.get('train_steps', '?')})."
                  if (frame["generator"] == "tracesynth").any() or frame.empty
                  else "Peers only: no TraceSynth cell, so no training budget."))
    env = run.get("environment")
    if env:
        out.append(f"Environment: Python {env.get('python')}, torch {env.get('torch')}, "
                   f"{'GPU ' + env['gpu'] if env.get('gpu') else 'CPU'}, {env.get('torch_threads')} torch threads"
                   + (f" (OpenMP wait policy: {env['omp_wait_policy']})" if env.get("omp_wait_policy") else "")
                   + (f"; sampling: {env['sampling_wait_policy']}"
                      if env.get("sampling_wait_policy", env.get("omp_wait_policy")) != env.get("omp_wait_policy")
                      else "")
                   + f", {env.get('platform')}.")
    data = config.get("data", {})
    sampled = ("each cell generates one trace as long as its held-out runs, which every figure reads, and a "
               "training-size set beside (one trace per training run, as long as that run), which \"TSTR at training "
               "size\" trains on"
               if config.get("evaluation", {}).get("synthetic_events") == "train"
               else "each cell generates as many events as its held-out runs hold")
    limits = (f"(first {data.get('max_train_events') or 'all'} / {data.get('max_test_events') or 'all'} events "
              f"per run); {sampled}.")
    if data.get("folds"):
        runs = sorted(set(data.get("train_runs") or []) | set(data.get("test_runs") or []))
        out.append(f"Folds: {data['folds']} over runs {runs}: each fold holds one run out and trains its own "
                   f"models on the others {limits} Tables pool the folds' cells (a ± is over fold × seed); "
                   "\"Folds\" shows each fold.")
    elif data:
        out.append(f"Split: train on runs {data.get('train_runs')}, test on runs {data.get('test_runs')} {limits}")
    over = ("seeds: every seed trains its own model and samples one trace with it, so the intervals "
            "cover training and sampling variation together")
    if not config.get("grid", {}).get("retrain_per_seed", True):
        over = ("sampling seeds: every seed samples from one model per cell, trained with the first seed, "
                "so the intervals show sampling variation, not training variation")
    out += ["", f"Values are mean ± 95% CI half-width over {over} (no ± when only one seed finished). "
            "TSTR = next-event macro-F1 of the fixed predictor trained on synthetic, tested on the real held-out run; "
            "TRTR = the same trained on the real training runs. disc = real-vs-synthetic window classifier accuracy "
            "(0.5 = indistinguishable; floor = real run vs real run), on the thread/CPU columns too where both sides "
            "have them; \"event types\" = on event types alone, the score every generator shares. "
            "Column definitions: docs/experiments.md.", ""]
    out += _findings(ts, ok)
    out += _matched_section(ok)
    out += _folds_section(ok)
    out += _peers_section(ok, frame)
    out += _tracesynth_tables(ts)
    out += _failures(frame)
    if plots:
        out += ["## Plots", ""] + [f"![{Path(p).stem}]({p})" for p in plots] + [""]
    return "\n".join(out) + "\n"


def _findings(ts: pd.DataFrame, ok: pd.DataFrame) -> list[str]:
    out = ["## Published findings, checked on our data", ""]
    if ts.empty:
        return out + ["No TraceSynth cell finished, so none of the findings can be checked.", ""]
    match = ["workload", "context", "fold", "seed"]
    # light vs full and the context gain compare `none` cells, or the only mode a grid sampled
    modes = sorted(set(ts["constraints"]))
    ref = modes[0] if len(modes) == 1 else "none"
    out += [f"### Light vs full (constraints {ref})", ""]
    base = ts[ts["constraints"] == ref]
    if {"light", "full"} <= set(base["channels"]):
        rows, all_q, all_train, all_gen = [], [], [], []
        for (workload, context), part in base.groupby(["workload", "context"]):
            q = _paired_ratio(part, "tstr", "channels", "light", "full", match)
            tr = _paired_ratio(part, "train_seconds", "channels", "light", "full", match)
            gen = _paired_ratio(part, "gen_events_per_s", "channels", "full", "light", match)  # light's sampling cost
            all_q += q
            all_train += tr
            all_gen += gen
            rows.append([workload, context, fmt(q), fmt(tr, 2), fmt(gen, 2)])
        rows.append(["**all** (± over workload × context × seed pairs)", "", fmt(all_q), fmt(all_train, 2),
                     fmt(all_gen, 2)])
        out += [_table(["workload", "context", "TSTR light/full", "train time light/full",
                        "sampling time light/full"], rows), ""]
        mean_q, _, _ = ci95(all_q)
        mean_t, _, _ = ci95(all_train)
        if mean_q is not None and mean_t is not None:
            verdict = "met" if mean_q >= 0.98 and mean_t <= 0.5 else "NOT met"
            full_tstr = base[base["channels"] == "full"]["tstr"].mean()
            out += [f"Target (light within 2% of full at half the cost or less): **{verdict}** "
                    f"(TSTR ratio {mean_q:.3f}, training cost ratio {mean_t:.2f}; full's own TSTR averages "
                    f"{full_tstr:.3f}, so the ratio only means something when that is close to TRTR).", ""]
    else:
        out += ["Not in this grid (needs both `light` and `full`).", ""]
    # context gain
    out += [f"### Context gain (constraints {ref})", ""]
    contexts = sorted(int(c) for c in base["context"].dropna().unique())
    if 256 in contexts and 4096 in contexts:
        rows = []
        for (workload, channels), part in base.groupby(["workload", "channels"]):
            m = ["workload", "channels", "fold", "seed"]
            g4 = [v - 1 for v in _paired_ratio(part, "tstr", "context", 4096, 256, m)]
            g16 = [v - 1 for v in _paired_ratio(part, "tstr", "context", 16384, 4096, m)] if 16384 in contexts else []
            rows.append([workload, channels, fmt(part[part["context"] == 256]["tstr"]),
                         fmt(part[part["context"] == 4096]["tstr"]), fmt(g4),
                         fmt(part[part["context"] == 16384]["tstr"]) if 16384 in contexts else "not run",
                         fmt(g16) if 16384 in contexts else "not run"])
        out += [_table(["workload", "channels", "TSTR@256", "TSTR@4096", "gain 4096 vs 256 (rel.)", "TSTR@16384",
                        "gain 16384 vs 4096 (rel.)"], rows), ""]
    else:
        out += [f"Not in this grid (needs contexts 256 and 4096; ran {contexts}).", ""]
    # constraints
    out += ["### Constraint effect (repair, guided vs none)", ""]
    modes = set(ts["constraints"])
    if "none" in modes and modes - {"none"}:
        rows = []
        for (workload, channels, context), part in ts.groupby(["workload", "channels", "context"]):
            m = ["workload", "channels", "context", "fold", "seed"]
            rules = part["rules_checked"].dropna()
            row = [workload, channels, context, f"{int(rules.max())}" if len(rules) else "—",
                   fmt(part[part["constraints"] == "none"]["violations_per_1k"], 1)]
            for mode in ("repair", "guided"):
                if mode in modes:
                    row += [fmt(part[part["constraints"] == mode]["violations_per_1k"], 1),
                            fmt(_paired_diff(part, "tstr", "constraints", mode, "none", m))]
                else:
                    row += ["not run", "not run"]
            row.append(fmt(part[part["constraints"] == "repair"]["edits_per_1k"], 1) if "repair" in modes else "not run")
            rows.append(row)
        out += [_table(["workload", "channels", "context", "rules checked", "violations/1k none", "violations/1k repair",
                        "ΔTSTR repair−none", "violations/1k guided", "ΔTSTR guided−none", "repair edits/1k"],
                       rows), ""]
        out += ["Rules checked: how many kernel rules applied to the synthetic trace (a `light` trace has no "
                "thread, CPU or return value, so most rules do not apply and its 0 violations mean little). "
                "`guided` samples with the constraint guide and then repairs what is left; its residual "
                "repair edits are in the TraceSynth table's edits/1k column.", ""]
    else:
        out += ["Not in this grid (needs `none` and `repair` or `guided`).", ""]
    # deterministic vs chaotic
    out += ["### Deterministic vs chaotic workloads: TSTR/TRTR", "",
            f"Compute-bound: {', '.join(COMPUTE_BOUND)}; I/O-bound: {', '.join(IO_BOUND)} "
            "(other workloads count in 'all' only). Targets: ≥ 0.98 on average, ≥ 0.95 on every workload.", ""]
    rows = []
    groups = [("tracesynth", ch, ctx, mode, part) for (ch, ctx, mode), part in
              ts.groupby(["channels", "context", "constraints"])]
    for gen, part in ok[ok["generator"] != "tracesynth"].groupby("generator"):
        groups.append((gen, "", "", "", part))
    for gen, ch, ctx, mode, part in groups:
        per_w = part.groupby("workload")["tstr_trtr"].mean()
        comp = per_w[per_w.index.isin(COMPUTE_BOUND)]
        io = per_w[per_w.index.isin(IO_BOUND)]
        worst = per_w.idxmin() if per_w.notna().any() else None
        met = (per_w.mean() >= TARGET_RATIO_MEAN and per_w.min() >= TARGET_RATIO_EACH) if per_w.notna().all() and len(per_w) else None
        rows.append([gen, ch, ctx, mode, _fmt_num(comp.mean() if len(comp) else None),
                     _fmt_num(io.mean() if len(io) else None), _fmt_num(per_w.mean() if len(per_w) else None),
                     f"{worst} {per_w.min():.3f}" if worst is not None else "—",
                     {True: "met", False: "NOT met", None: "—"}[met]])
    out += [_table(["generator", "channels", "context", "constraints", "compute-bound", "I/O-bound", "all",
                    "worst workload", "target"], rows), ""]
    # discriminative
    out += ["### Discriminative accuracy vs the real-vs-real floor", "",
            f"Target: within {TARGET_DISC_GAP} of the floor (lower is better; 0.5 = indistinguishable). "
            "Repeated spans: the share of events whose 33 surrounding events recur exactly within 512 "
            "events, synthetic and the real held-out run (fewer than real: too varied; more: too regular).", ""]
    rows = []
    for gen, ch, ctx, mode, part in groups:
        gap512 = (part["disc_512"] - part["disc_floor_512"]).dropna()
        gap2048 = (part["disc_2048"] - part["disc_floor_2048"]).dropna()
        rows.append([gen, ch, ctx, mode, fmt(part["disc_512"]), fmt(part["disc_floor_512"]), fmt(gap512),
                     fmt(part["disc_2048"]), fmt(part["disc_floor_2048"]), fmt(gap2048),
                     fmt(part["repeats"]), fmt(part["repeats_real"]), _tells_text(part)])
    out += [_table(["generator", "channels", "context", "constraints", "disc 512", "floor 512", "gap 512",
                    "disc 2048", "floor 2048", "gap 2048", "repeated spans", "  real",
                    "strongest tell at 512 (cells)"], rows), ""]
    return out


def _setting(row) -> str:
    """A row's generator, with TraceSynth's channels, context and constraints."""
    if row["generator"] != "tracesynth":
        return row["generator"]
    return f"tracesynth ({row['channels']}, {row['context']}, {row['constraints']})"


def _matched_section(ok: pd.DataFrame) -> list[str]:
    """TSTR on a synthetic set of the training set's shape (`evaluation.synthetic_events:
    train`) beside TSTR on as many events as the held-out runs hold: the same predictor, test
    examples and TRTR; only how much synthetic data it learns from differs."""
    part = ok[ok["tstr_trtr_matched"].notna()]
    if part.empty:
        return []
    out = ["## TSTR at training size", "",
           "The next-event predictor trained on a synthetic set of the training set's shape (one trace per "
           "training run, as long as that run: as much data as TRTR's predictor has) against the same predictor "
           "trained on a trace as long as the held-out runs (the TSTR of the other tables); tested on the same real "
           "held-out events. \"gain\" is the paired difference per cell.", ""]
    rows = []
    frame = part.assign(setting=part.apply(_setting, axis=1),
                        gain=part["tstr_trtr_matched"] - part["tstr_trtr"])
    for (workload, setting), cells in frame.groupby(["workload", "setting"]):
        rows.append([workload, setting, _fmt_num(cells["events_synthetic"].mean(), 0),
                     _fmt_num(cells["events_matched"].mean(), 0),
                     fmt(cells["tstr_trtr"]), fmt(cells["tstr_trtr_matched"]), fmt(cells["gain"]),
                     fmt(cells["tstr_matched"]), fmt(cells["trtr"])])
    out += [_table(["workload", "generator", "events (held-out size)", "events (training size)",
                    "TSTR/TRTR, held-out size", "TSTR/TRTR, training size", "gain", "TSTR, training size", "TRTR"],
                   rows), ""]
    return out


def _folds_section(ok: pd.DataFrame) -> list[str]:
    """Per workload and setting, each fold's TSTR/TRTR and disc 2048 gap to its floor (mean ± CI
    over its seeds), their mean and the worst fold: where a pooled figure hides one weak split."""
    labels = sorted(set(ok["fold"]) - {""}, key=lambda f: (len(f), f))
    if len(labels) < 2:
        return []
    out = ["## Folds", "",
           "Each fold holds one run out and trains on the others; a fold's figure is the mean ± 95% CI over its "
           "seeds. \"mean\" is the mean of the folds' means, \"worst\" the lowest TSTR/TRTR (highest disc gap).", ""]
    settings = ok.apply(_setting, axis=1)
    # windows on event types where the cells have it: the score generators with and without
    # thread/CPU columns share (older results: the channel-matched score)
    events = "_events" if ok["disc_events_2048"].notna().any() else ""
    gap = ok[f"disc{events}_2048"] - ok[f"disc{events}_floor_2048"]
    disc_title = f"disc 2048{', event types' if events else ''} − floor"
    frame = ok.assign(setting=settings, disc_gap_2048=gap)
    tables = [("tstr_trtr", "TSTR/TRTR", min), ("disc_gap_2048", disc_title, max)]
    if ok["tstr_trtr_matched"].notna().any():
        tables.insert(1, ("tstr_trtr_matched", "TSTR/TRTR at training size", min))
    for column, title, worst in tables:
        rows = []
        for (workload, setting), part in frame.groupby(["workload", "setting"]):
            means = {f: part.loc[part["fold"] == f, column].mean() for f in labels}
            known = [v for v in means.values() if np.isfinite(v)]
            rows.append([workload, setting, *(fmt(part.loc[part["fold"] == f, column]) for f in labels),
                         _fmt_num(float(np.mean(known)) if known else None),
                         _fmt_num(worst(known) if known else None)])
        out += [f"{title}:", "", _table(["workload", "generator", *(f"run {f} held out" for f in labels), "mean",
                                         "worst"], rows), ""]
    return out


def _tells_text(part: pd.DataFrame) -> str:
    """The features that told a group's cells apart best at 512 events, most frequent first,
    with how many cells each ("distinct 16-grams per event (5), hashed 1-3-gram mix (3)")."""
    counts = part.loc[part["disc_tell_512"] != "", "disc_tell_512"].value_counts()
    return ", ".join(f"{name} ({n})" for name, n in counts.items()) or "—"


def reference_config(ts: pd.DataFrame) -> tuple[str, int, str] | None:
    """The TraceSynth setting peers are compared with: light (else the first channels), the
    largest context ≤ 4096 (else the smallest), constraints none (else the first mode)."""
    if ts.empty:
        return None
    channels = "light" if "light" in set(ts["channels"]) else sorted(set(ts["channels"]))[0]
    contexts = sorted(int(c) for c in ts["context"].dropna().unique())
    below = [c for c in contexts if c <= 4096]
    context = below[-1] if below else contexts[0]
    modes = set(ts["constraints"])
    mode = "none" if "none" in modes else sorted(modes)[0]
    return channels, context, mode


def _peers_section(ok: pd.DataFrame, frame: pd.DataFrame) -> list[str]:
    peers = sorted(set(frame["generator"]) - {"tracesynth"})
    out = ["## Peers, side by side", ""]
    if not peers:
        return out + ["No peers in this grid.", ""]
    ts = ok[ok["generator"] == "tracesynth"]
    ref = reference_config(ts)
    parts = []
    if ref:
        channels, context, mode = ref
        sel = ts[(ts["channels"] == channels) & (ts["context"] == context) & (ts["constraints"] == mode)]
        parts.append((f"tracesynth ({channels}, {context}, {mode})", sel))
    for peer in peers:
        parts.append((peer, ok[ok["generator"] == peer]))
    header = ["workload", "generator", "TSTR", "TSTR/TRTR", "disc 512", "disc 2048", "disc 512, event types (floor)",
              "violations/1k", "copy 256 (holdout)", "train s", "gen events/s"]
    rows = []
    for workload in sorted(set(frame["workload"])):
        for name, part in parts:
            p = part[part["workload"] == workload]
            failed = frame[(frame["generator"] == name) & (frame["workload"] == workload) & (frame["status"] == "error")]
            if p.empty and not failed.empty:
                rows.append([workload, name, f"failed: {failed['error'].iloc[0]}", *[""] * (len(header) - 3)])
                continue
            if p.empty:
                continue
            rows.append([workload, name, fmt(p["tstr"]), fmt(p["tstr_trtr"]), fmt(p["disc_512"]), fmt(p["disc_2048"]),
                         f"{fmt(p['disc_events_512'])} ({fmt(p['disc_events_floor_512'])})",
                         fmt(p["violations_per_1k"], 1),
                         f"{fmt(p['copy_rate_256'])} ({fmt(p['copy_rate_256_holdout'])})",
                         fmt(p["train_seconds"], 1), fmt(p["gen_events_per_s"], 0)])
    out += [_table(header, rows), ""]
    rows = []
    for name, part in parts:
        if part.empty:
            continue
        per_w = part.groupby("workload")[["tstr", "tstr_trtr", "disc_512", "disc_2048", "disc_events_512",
                                          "train_seconds", "gen_events_per_s"]].mean()
        rows.append([name, _fmt_num(per_w["tstr"].mean()), _fmt_num(per_w["tstr_trtr"].mean()),
                     _fmt_num(per_w["disc_512"].mean()), _fmt_num(per_w["disc_2048"].mean()),
                     _fmt_num(per_w["disc_events_512"].mean()),
                     _fmt_num(per_w["train_seconds"].mean(), 1), _fmt_num(per_w["gen_events_per_s"].mean(), 0)])
    out += ["Average over workloads:", "",
            _table(["generator", "TSTR", "TSTR/TRTR", "disc 512", "disc 2048", "disc 512, event types", "train s",
                    "gen events/s"], rows), ""]
    return out


def _tracesynth_tables(ts: pd.DataFrame) -> list[str]:
    out = ["## TraceSynth cells (per workload, and the average over workloads)", ""]
    if ts.empty:
        return out + ["No TraceSynth cell finished.", ""]
    header = ["workload", "channels", "context", "constraints", "TSTR", "TSTR/TRTR", "disc 512", "disc 2048",
              "violations/1k", "edits/1k", "copy 256", "start-up edits (held-out)", "cadence, octaves (real)",
              "train s", "gen events/s"]
    rows = []
    keys = ["workload", "channels", "context", "constraints"]
    for key, part in ts.groupby(keys):
        real = part["startup_edits_real"].dropna()  # the held-out run's: one figure per workload
        startup = fmt(part["startup_edits"], 1) + (f" ({real.mean():.0f})" if len(real) else "")
        real = part["cadence_octaves_real"].dropna()  # a training run's: one figure per workload
        cadence = fmt(part["cadence_octaves"], 2) + (f" ({real.mean():.2f})" if len(real) else "")
        rows.append([*key, fmt(part["tstr"]), fmt(part["tstr_trtr"]), fmt(part["disc_512"]), fmt(part["disc_2048"]),
                     fmt(part["violations_per_1k"], 1), fmt(part["edits_per_1k"], 1), fmt(part["copy_rate_256"]),
                     startup, cadence, fmt(part["train_seconds"], 1), fmt(part["gen_events_per_s"], 0)])
    out += ["Start-up edits: how far each trace's first 256 events are from the nearest training run's "
            "(edit distance; `fidelity.startup`), with the held-out run's in brackets. Cadence: how far "
            "recurring event types' gaps are from the held-out run's (W1 of log2 gaps, octaves; "
            "`longrange.compare_cadence`), with a training run's in brackets.", "",
            _table(header, rows), ""]
    # average over workloads, with the CI over seeds of the per-seed workload average
    rows = []
    for key, part in ts.groupby(["channels", "context", "constraints"]):
        per_seed = part.groupby(["fold", "seed"])[["tstr", "tstr_trtr", "disc_512", "disc_2048", "violations_per_1k",
                                                   "train_seconds", "gen_events_per_s"]].mean()
        rows.append([*key, part["workload"].nunique(), fmt(per_seed["tstr"]), fmt(per_seed["tstr_trtr"]),
                     fmt(per_seed["disc_512"]), fmt(per_seed["disc_2048"]), fmt(per_seed["violations_per_1k"], 1),
                     fmt(per_seed["train_seconds"], 1), fmt(per_seed["gen_events_per_s"], 0)])
    out += ["Average over workloads:", "",
            _table(["channels", "context", "constraints", "workloads", "TSTR", "TSTR/TRTR", "disc 512", "disc 2048",
                    "violations/1k", "train s", "gen events/s"], rows), ""]
    return out


def _failures(frame: pd.DataFrame) -> list[str]:
    failed = frame[frame["status"] == "error"]
    if failed.empty:
        return []
    out = ["## Cells that did not run", "", "Each with its error; no figure is reported for them.", ""]
    rows = []
    for (generator, error), part in failed.groupby(["generator", "error"]):
        cells = part.apply(lambda r: "/".join(str(r[k]) for k in KEY_COLUMNS[1:] if str(r[k]) not in ("", "<NA>")),
                           axis=1)
        shown = ", ".join(cells.head(4)) + (f" (+{len(cells) - 4} more)" if len(cells) > 4 else "")
        rows.append([generator, len(part), error.replace("|", "\\|"), shown])
    return out + [_table(["generator", "cells", "error", "which"], rows), ""]


# --- plots ----------------------------------------------------------------------------------------
def write_plots(frame: pd.DataFrame, folder: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = frame[frame["status"] == "ok"]
    ts = ok[ok["generator"] == "tracesynth"]
    written = []
    folder.mkdir(parents=True, exist_ok=True)

    def save(fig, name):
        path = folder / f"{name}.png"
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight")
        plt.close(fig)
        written.append(path)

    base = ts[ts["constraints"] == "none"] if "none" in set(ts["constraints"]) else ts
    if not base.empty and base["context"].nunique() >= 1:
        channels = sorted(set(base["channels"]))
        fig, axes = plt.subplots(1, len(channels), figsize=(5 * len(channels), 3.6), squeeze=False, sharey=True)
        for ax, ch in zip(axes[0], channels):
            part = base[base["channels"] == ch]
            for workload, wpart in part.groupby("workload"):
                means = wpart.groupby("context")["tstr"].mean()
                ax.plot(means.index.astype(int), means.values, marker="o", alpha=0.5, label=workload)
            stats = part.groupby(["context", "fold", "seed"])["tstr"].mean().groupby("context")
            ctx = np.array(sorted(stats.groups))
            mean = np.array([ci95(stats.get_group(c))[0] for c in ctx])
            half = np.array([ci95(stats.get_group(c))[1] or 0.0 for c in ctx])
            ax.errorbar(ctx, mean, yerr=half, color="black", linewidth=2.5, marker="s", capsize=4, label="average")
            ax.set_xscale("log", base=2)
            ax.set_title(f"{ch}: TSTR vs context")
            ax.set_xlabel("context (events)")
            ax.set_ylabel("TSTR next-event macro-F1")
        axes[0][-1].legend(fontsize=7, loc="best")
        save(fig, "context_vs_tstr")
    if {"light", "full"} <= set(base["channels"]):
        fig, ax = plt.subplots(figsize=(5.5, 4))
        for ch, marker in (("light", "o"), ("full", "^")):
            part = base[base["channels"] == ch].groupby(["workload", "context"])[["train_seconds", "tstr"]].mean()
            ax.scatter(part["train_seconds"], part["tstr"], marker=marker, label=ch, alpha=0.8)
        ax.set_xscale("log")
        ax.set_xlabel("training time per model (s)")
        ax.set_ylabel("TSTR next-event macro-F1")
        ax.set_title("light vs full: cost and quality (one point per workload × context)")
        ax.legend()
        save(fig, "light_vs_full")
    modes = [m for m in ("none", "repair", "guided") if m in set(ts["constraints"])]
    if len(modes) > 1:
        per = ts.groupby(["workload", "constraints"])[["violations_per_1k", "tstr"]].mean()
        workloads = sorted(set(ts["workload"]))
        fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
        width = 0.8 / len(modes)
        x = np.arange(len(workloads))
        for i, mode in enumerate(modes):
            vals = [per["violations_per_1k"].get((w, mode), np.nan) for w in workloads]
            tstr = [per["tstr"].get((w, mode), np.nan) for w in workloads]
            axes[0].bar(x + i * width, vals, width, label=mode)
            axes[1].bar(x + i * width, tstr, width, label=mode)
        for ax, title in zip(axes, ("violations per 1,000 events", "TSTR next-event macro-F1")):
            ax.set_xticks(x + width * (len(modes) - 1) / 2, workloads, rotation=30, ha="right")
            ax.set_title(title)
        axes[0].legend()
        save(fig, "repair_effect")
    peers = ok[ok["generator"] != "tracesynth"]
    ref = reference_config(ts)
    if not peers.empty:
        parts = {}
        if ref:
            ch, ctx, mode = ref
            parts[f"tracesynth\n{ch} {ctx}"] = ts[(ts["channels"] == ch) & (ts["context"] == ctx) & (ts["constraints"] == mode)]
        for name, part in peers.groupby("generator"):
            parts[name] = part
        names = list(parts)
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
        ratio = [parts[n].groupby("workload")["tstr_trtr"].mean().mean() for n in names]
        # on event types alone where the run has it: the one score peers with and without
        # thread/CPU columns share (older results: the channel-matched score)
        events_only = ok["disc_events_512"].notna().any()
        column, floor_column = ("disc_events_512", "disc_events_floor_512") if events_only else \
            ("disc_512", "disc_floor_512")
        disc = [parts[n].groupby("workload")[column].mean().mean() for n in names]
        axes[0].bar(names, ratio, color="tab:blue")
        axes[0].axhline(TARGET_RATIO_MEAN, color="gray", linestyle="--", linewidth=1)
        axes[0].set_title("TSTR/TRTR (average over workloads)")
        axes[1].bar(names, disc, color="tab:orange")
        floor = ok.groupby("workload")[floor_column].mean().mean()
        if np.isfinite(floor):
            axes[1].axhline(floor, color="gray", linestyle="--", linewidth=1, label="real-vs-real floor")
            axes[1].legend(loc="lower right")  # the bars reach the top
        axes[1].set_title("discriminative accuracy, 512-event windows" + (", event types" if events_only else ""))
        for ax in axes:
            ax.tick_params(axis="x", labelsize=8)
        save(fig, "peers")
    return written

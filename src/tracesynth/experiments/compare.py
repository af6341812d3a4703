"""Two experiment runs side by side, cell for cell: did a setting help, beyond the seed's noise?

Runs of `tracesynth experiment` that share workloads and sampling seeds but differ in one
setting (self-conditioning, guide rounds, the sampler's parts, a retrained model) pair up: the
same workload and seed on both sides. A generated trace's scores swing with its seed (one
start-up sequence can move next-event macro-F1 by 0.1), and a paired difference cancels what
the seed does to both sides, so it tells settings apart with fewer traces than two separate
means do.

Cells pair on the key columns of results.csv (`results.KEY_COLUMNS`). A key column whose
values do not overlap between the runs (context 256 in one, 4096 in the other) is what is
being compared and is left out of the pairing; the others must match. Only finished cells
count. `select` narrows a run to some of its cells first (`--where context=256`), so one run's
grid pairs with itself: context 256 against 4096 of the same run, guided against none.

Per workload and metric: the means of A and B over the pairs, and the mean paired difference
B − A with its 95% t interval over the pairs (none where every pair differs alike: a
figure of the trained model, such as its training time, repeated beside each trace). Over workloads: the mean of the workloads' means
and differences, the interval over the workloads' mean differences — the traces of one
workload come from one trained model, so they are not independent draws of what training
gives, and the workloads are the honest sample size of an overall claim.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from tracesynth.errors import ConfigError
from tracesynth.experiments.results import KEY_COLUMNS, METRIC_COLUMNS, ci95, fill_fold, load_run_config, read_csv

#: What `tracesynth compare` shows unless told: utility, the window classifier at two
#: lengths, copying, the long-range repeat share and sampling speed.
DEFAULT_METRICS = ("tstr_trtr", "disc_512", "disc_2048", "copy_rate_256", "repeats", "gen_events_per_s")


#: run.json keys that are not settings of a cell: the run's name and its peers (peer cells pair
#: only with the same peer's), and which cells a run holds (`grid.*`, `data.workloads`: the
#: pairing already says which cells the runs share).
NOT_SETTINGS = ("name", "peers")
CELL_SELECTION = ("grid.", "data.workloads")


@dataclass
class Comparison:
    """The paired cells of two runs and their per-workload and overall figures."""

    name_a: str
    name_b: str
    keys: list[str]                                   # the columns cells are paired on
    differing: dict[str, tuple[list, list]]           # key columns compared: (A's values, B's values)
    metrics: list[str]
    pairs: pd.DataFrame                               # one row per pair: keys, <metric>_a, <metric>_b
    rows: pd.DataFrame                                # workload, metric, n, a, b, diff, half
    settings: list[tuple[str, object, object]] = field(default_factory=list)  # run.json: key, A, B

    def row(self, workload: str, metric: str) -> dict:
        hit = self.rows[(self.rows["workload"] == workload) & (self.rows["metric"] == metric)]
        if len(hit) != 1:
            raise KeyError((workload, metric))
        return {k: None if isinstance(v, float) and np.isnan(v) else v for k, v in hit.iloc[0].to_dict().items()}


def load_results(path: str | Path) -> pd.DataFrame:
    """A run's results.csv, given the run's folder or the file itself; a results.csv written
    before the `fold` column gets it from the run's config (its held-out runs), so an older
    run pairs with the matching fold of a run with folds."""
    path = Path(path)
    csv = path / "results.csv" if path.is_dir() else path
    if not csv.exists():
        raise ConfigError(f"{csv}: no such results file (a `tracesynth experiment` output folder or its results.csv)")
    try:
        frame = read_csv(csv)
    except (ValueError, pd.errors.ParserError) as exc:
        raise ConfigError(f"{csv}: not an experiment results.csv ({str(exc).splitlines()[0]})") from None
    if frame.empty:
        raise ConfigError(f"{csv}: no cells")
    return fill_fold(frame, load_run_config(path))


def parse_conditions(texts: list[str] | None) -> dict[str, str]:
    """`KEY=VALUE` conditions on results.csv's key columns (several values of one key: `KEY=V1,V2`)."""
    conditions: dict[str, str] = {}
    for text in texts or []:
        key, sep, value = text.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key or not value:
            raise ConfigError(f"--where {text!r}: expected KEY=VALUE, e.g. context=4096")
        if key not in KEY_COLUMNS:
            raise ConfigError(f"--where {text!r}: {key!r} is not a key column; cells are told apart by "
                              f"{', '.join(KEY_COLUMNS)}")
        if key in conditions:
            raise ConfigError(f"--where {text!r}: {key} is given twice (several values: {key}=V1,V2)")
        conditions[key] = value
    return conditions


def select(frame: pd.DataFrame, conditions: dict[str, str], name: str = "run") -> pd.DataFrame:
    """The cells of `frame` whose key columns hold the given values (compared as text, so
    `context=4096` matches 4096); a condition no cell meets is an error naming what there is."""
    for key, value in conditions.items():
        wanted = {v.strip() for v in value.split(",")}
        column = frame[key].astype(str)
        kept = frame[column.isin(wanted)]
        if kept.empty:
            there = ", ".join(sorted(set(column), key=lambda v: (len(v), v)))
            raise ConfigError(f"{name}: no cell with {key}={value} (its cells have {key} {there})")
        frame = kept
    return frame


def setting_differences(config_a: dict | None, config_b: dict | None) -> list[tuple[str, object, object]]:
    """(dotted key, A's value, B's value) for every config setting that differs, the run's name
    aside: what the two runs changed, as their run.json files record it."""
    if not config_a or not config_b:
        return []

    def flat(d, prefix=""):
        out = {}
        for key, value in d.items():
            if isinstance(value, dict):
                out.update(flat(value, f"{prefix}{key}."))
            else:
                out[f"{prefix}{key}"] = value
        return out

    fa, fb = flat(config_a), flat(config_b)
    return [(k, fa.get(k), fb.get(k)) for k in sorted(set(fa) | set(fb))
            if fa.get(k) != fb.get(k) and k not in NOT_SETTINGS and not k.startswith(CELL_SELECTION)]


def compare(a: pd.DataFrame, b: pd.DataFrame, metrics=DEFAULT_METRICS, *, name_a: str = "A",
            name_b: str = "B", configs: tuple[dict | None, dict | None] = (None, None)) -> Comparison:
    """Pair the finished cells of `a` and `b` and summarise `metrics` per workload and overall;
    `configs` (the runs' configs, `load_run_config`) let the report say which settings differ."""
    metrics = list(metrics)
    unknown = [m for m in metrics if m not in METRIC_COLUMNS]
    if unknown:
        raise ConfigError(f"unknown metric {unknown[0]!r}; results.csv has: {', '.join(METRIC_COLUMNS)}")
    a, b = a[a["status"] == "ok"], b[b["status"] == "ok"]
    keys, differing = ["workload", "seed"], {}
    for col in KEY_COLUMNS:
        if col in keys:
            continue
        va, vb = set(a[col].dropna().tolist()), set(b[col].dropna().tolist())
        if not va and not vb:  # a column neither run fills (a frame without `fold`)
            continue
        if va & vb:
            keys.append(col)
        else:
            differing[col] = (sorted(va, key=str), sorted(vb, key=str))
    left = a[keys + metrics].rename(columns={m: f"{m}_a" for m in metrics})
    right = b[keys + metrics].rename(columns={m: f"{m}_b" for m in metrics})
    for col in keys:  # pair "4096" with 4096: both sides as text
        left[col], right[col] = left[col].astype(str), right[col].astype(str)
    for side, name, index in ((left, name_a, 0), (right, name_b, 1)):
        if side.duplicated(keys).any():
            dup = side[side.duplicated(keys, keep=False)].iloc[0]
            several = [f"{col} {', '.join(map(str, values[index]))}" for col, values in differing.items()
                       if len(values[index]) > 1]
            raise ConfigError(f"{name}: several cells pair with {', '.join(f'{k}={dup[k]}' for k in keys)}"
                              + (f" ({'; '.join(several)})" if several else "")
                              + "; compare runs whose cells differ in one setting")
    pairs = left.merge(right, on=keys, how="inner")
    if pairs.empty:
        raise ConfigError(f"no cell of {name_a} pairs with one of {name_b} on {', '.join(keys)} "
                          f"({name_a}: {len(a)} finished cells, {name_b}: {len(b)})")
    pairs = pairs.sort_values(keys).reset_index(drop=True)
    settings = setting_differences(*configs)
    if not ((a["generator"] == "tracesynth").any() and (b["generator"] == "tracesynth").any()):
        # a peer on one side (a peers-only run's defaults for a model it never trained): TraceSynth's
        # settings are not what differs between the traces
        settings = [s for s in settings if not s[0].startswith("tracesynth.")]
    return Comparison(name_a, name_b, keys, differing, metrics, pairs, _summarise(pairs, metrics),
                      settings=settings)


def _summarise(pairs: pd.DataFrame, metrics: list[str]) -> pd.DataFrame:
    rows = []
    for metric in metrics:
        per_workload = []
        for workload, part in pairs.groupby("workload", sort=True):
            both = part[[f"{metric}_a", f"{metric}_b"]].astype(float).dropna()
            if both.empty:
                rows.append(dict(workload=workload, metric=metric, n=0, a=None, b=None, diff=None, half=None))
                continue
            diff, half, n = ci95((both[f"{metric}_b"] - both[f"{metric}_a"]).tolist())
            if half == 0:  # every pair differs alike: one measurement repeated (a model's training
                half = None  # time beside each of its traces), not an interval
            row = dict(workload=workload, metric=metric, n=n, a=float(both[f"{metric}_a"].mean()),
                       b=float(both[f"{metric}_b"].mean()), diff=diff, half=half)
            rows.append(row)
            per_workload.append(row)
        if per_workload:
            diff, half, n = ci95([r["diff"] for r in per_workload])
            rows.append(dict(workload="mean", metric=metric, n=n,
                             a=float(np.mean([r["a"] for r in per_workload])),
                             b=float(np.mean([r["b"] for r in per_workload])), diff=diff, half=half))
        else:
            rows.append(dict(workload="mean", metric=metric, n=0, a=None, b=None, diff=None, half=None))
    return pd.DataFrame(rows, columns=["workload", "metric", "n", "a", "b", "diff", "half"])


def _setting(value) -> str:
    return "unset" if value is None else str(value)


def _digits(metric: str) -> int:
    return 0 if metric.endswith("_per_s") or metric.endswith("seconds") else 3


def _leaves_out_zero(row: dict, metric: str) -> bool:
    """Whether the difference's interval leaves out zero (and the difference shows as non-zero)."""
    half = row["half"]
    return (bool(row["n"]) and half is not None and bool(np.isfinite(half)) and abs(row["diff"]) > half
            and round(row["diff"], _digits(metric)) != 0)


def _cell(row: dict, metric: str) -> str:
    """"A → B (Δ ± h)", the difference bold when its interval leaves out zero."""
    if not row["n"]:
        return "—"
    d = _digits(metric)
    text = f"{row['a']:.{d}f} → {row['b']:.{d}f}"
    diff, half = row["diff"], row["half"]
    shown = diff if round(diff, d) else 0.0  # no "-0.000"
    delta = f"{shown:+.{d}f}" + (f" ± {half:.{d}f}" if half is not None and np.isfinite(half) else "")
    clear = _leaves_out_zero(row, metric)
    return f"{text} ({'**' + delta + '**' if clear else delta})"


def render_markdown(comparison: Comparison) -> str:
    """A Markdown report: what was compared, how cells paired, and one table of the metrics."""
    c = comparison
    lines = [f"# {c.name_a} → {c.name_b}", ""]
    what = [f"{col} {', '.join(map(str, va))} → {', '.join(map(str, vb))}" for col, (va, vb) in c.differing.items()]
    what += [f"`{key}` {_setting(va)} → {_setting(vb)}" for key, va, vb in c.settings]
    lines.append(f"Compared: {'; '.join(what)}." if what else
                 "Compared: the same cells of two runs whose recorded settings match (no run.json, or the same "
                 "config: a code or model change).")
    per = c.pairs.groupby("workload").size()
    lines += [
        f"Paired on {', '.join(c.keys)}: {len(c.pairs)} pairs over {len(per)} workloads "
        f"({', '.join(f'{w} {n}' for w, n in per.items())}).",
        "",
        f"Each cell: mean over the pairs of {c.name_a} → {c.name_b}, then the mean paired difference "
        "B − A ± the half-width of its 95% t interval over the pairs (bold: the interval leaves out "
        "zero). The mean row averages the workloads; its interval is over the workloads' mean "
        "differences.",
        "",
    ]
    header = ["workload", *c.metrics]
    table = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    workloads = [w for w in c.rows["workload"].unique() if w != "mean"] + ["mean"]
    for workload in workloads:
        cells = [_cell(c.row(workload, m), m) for m in c.metrics]
        name = f"**{workload}**" if workload == "mean" else workload
        table.append("| " + " | ".join([name, *cells]) + " |")
    lines += table
    missing = [m for m in c.metrics if not c.rows[c.rows["metric"] == m]["n"].any()]
    if missing:
        lines += ["", f"Not in both runs: {', '.join(missing)} (no value in one of them: a run from an older "
                      "version, or cells that do not measure it, such as a splice share where the splice is off)."]
    return "\n".join(lines) + "\n"


def write_plot(comparison: Comparison, path: str | Path) -> Path:
    """A forest plot (PNG): one panel per metric, a row per workload and the mean, the paired
    difference B − A as a dot with its 95% interval as a bar, zero as a line — which way each
    workload moved and whether its interval leaves out zero, at a glance."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from tracesynth.fileio import atomic_path

    c = comparison
    workloads = [w for w in c.rows["workload"].unique() if w != "mean"] + ["mean"]
    fig, axes = plt.subplots(1, len(c.metrics), figsize=(3.2 * len(c.metrics), 0.42 * len(workloads) + 1.4),
                             squeeze=False, sharey=True)
    y = np.arange(len(workloads))[::-1]
    for ax, metric in zip(axes[0], c.metrics):
        for yi, workload in zip(y, workloads):
            row = c.row(workload, metric)
            if not row["n"]:
                continue
            ax.errorbar(row["diff"], yi, xerr=row["half"] or 0.0, fmt="s" if workload == "mean" else "o",
                        capsize=3, color="black" if _leaves_out_zero(row, metric) else "grey")
        ax.axvline(0.0, color="tab:red", linewidth=0.8)
        ax.set_title(metric, fontsize=9)
        ax.set_xlabel("B − A", fontsize=8)
        ax.tick_params(labelsize=7)
    axes[0][0].set_yticks(y, workloads)
    fig.suptitle(f"{c.name_a} → {c.name_b}: paired differences, 95% intervals (black: leaves out zero)", fontsize=9)
    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path

"""Writing the evaluation: report.json (stable keys), report.html (self-contained), a terminal table.

The HTML has no external references: plots are matplotlib PNGs embedded as base64, styles are
inline, so the file can be mailed or attached to a pull request as is. Both files are written
atomically (a reader never sees half a report).
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
from pathlib import Path

from tracesynth.fileio import atomic_path


def _clean(value):
    """JSON-safe copy: NaN/inf → null, numpy scalars → Python numbers."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def write_json(report: dict, path: Path) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(_clean(report), indent=2, sort_keys=False) + "\n")
    return path


# --- plots -------------------------------------------------------------------------------------
def _png(fig) -> str:
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode()


def _figures(name: str, per: dict) -> list[tuple[str, str]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    figures = []
    series = per["series"]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    x = np.arange(len(series["top_events"]))
    for offset, side in zip((-0.27, 0, 0.27), ("real_train", "real_test", "synthetic")):
        axes[0].bar(x + offset, series["top_event_share"][side], width=0.27, label=side)
    axes[0].set_xticks(x, series["top_events"], rotation=75, fontsize=7)
    axes[0].set_title("event marginals (20 most frequent real events)")
    axes[0].legend()
    edges = np.array(series["log_dt_edges"])
    for side, counts in series["log_dt_hist"].items():
        counts = np.array(counts, dtype=float)
        axes[1].step(edges[:-1], counts / max(counts.sum(), 1), where="post", label=side)
    axes[1].set_xlabel("log10 inter-event time (ns)")
    axes[1].set_title("inter-event time")
    axes[1].legend()
    figures.append(("Marginals", _png(fig)))

    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    for side, label in (("synthetic_vs_real", "synthetic"), ("real_vs_real", "real train (floor)")):
        ngrams = per["fidelity"][side]["ngrams"]
        ns = [n for n in ngrams if ngrams[n]]
        axes[0].plot([int(n) for n in ns], [ngrams[n]["coverage"] for n in ns], "o-", label=f"{label}: coverage")
        axes[0].plot([int(n) for n in ns], [ngrams[n]["novel_share"] for n in ns], "x--", label=f"{label}: novel")
    axes[0].set_xlabel("n")
    axes[0].set_ylim(0, 1.05)
    axes[0].set_title("n-gram coverage of real test / share never in real")
    axes[0].legend(fontsize=7)
    lr = per["long_range"]
    acf = lr["synthetic_vs_real"]["acf"]
    axes[1].semilogx(acf["lags"], acf["reference"], label="real test")
    axes[1].semilogx(acf["lags"], acf["candidate"], label="synthetic")
    axes[1].semilogx(acf["lags"], lr["real_vs_real"]["acf"]["candidate"], ":", label="real train")
    axes[1].set_xlabel("lag (events)")
    axes[1].set_title("autocorrelation of event types")
    axes[1].legend()
    figures.append(("N-grams and autocorrelation", _png(fig)))

    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    disc = lr["discriminative"]
    for side, label in (("synthetic_vs_real", "synthetic vs real"), ("real_vs_real", "real vs real (floor)")):
        lengths = [int(k) for k, v in disc[side].items() if v["accuracy_mean"] is not None]
        means = [disc[side][str(k)]["accuracy_mean"] for k in lengths]
        stds = [disc[side][str(k)]["accuracy_std"] for k in lengths]
        axes[0].errorbar(lengths, means, yerr=stds, marker="o", capsize=3, label=label)
        timed = [disc[side][str(k)]["timed"]["accuracy_mean"] for k in lengths]
        axes[0].plot(lengths, timed, ":", marker=".", label=f"{label}, with timing")
    axes[0].axhline(0.5, color="grey", lw=0.8)
    sides = ("synthetic_vs_real", "real_vs_real")
    if not any(v["accuracy_mean"] is not None for side in sides for v in disc[side].values()):
        axes[0].text(0.5, 0.5, "not available: too few windows per side (see report.json reasons)",
                     ha="center", va="center", transform=axes[0].transAxes)
    else:
        axes[0].set_xscale("log", base=2)  # a log axis needs at least one plotted length
    axes[0].set_ylim(0.3, 1.05)
    axes[0].set_xlabel("window length (events)")
    compared = ", ".join(disc.get("channels", ["tid", "cpu"])) or "no thread/CPU"
    axes[0].set_title(f"discriminative accuracy (0.5 = indistinguishable; {compared} features)")
    axes[0].legend()
    priv = per["privacy"]
    ks = list(priv["synthetic"]["kgram_copy_share"])
    xk = np.arange(len(ks))
    axes[1].bar(xk - 0.2, [priv["synthetic"]["kgram_copy_share"][k] or 0 for k in ks], 0.4, label="synthetic")
    axes[1].bar(xk + 0.2, [priv["holdout"]["kgram_copy_share"][k] or 0 for k in ks], 0.4, label="real holdout")
    axes[1].set_xticks(xk, [f"k={k}" for k in ks])
    axes[1].set_ylim(0, 1.05)
    axes[1].set_title("share of k-grams found in training")
    axes[1].legend()
    figures.append(("Discriminative score and copying", _png(fig)))
    return figures


# --- html --------------------------------------------------------------------------------------
def _fmt(value, digits: int = 3) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return html.escape(str(value))


def _table(rows: list[list], header: list[str]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c if isinstance(c, str) else _fmt(c)}</td>" for c in r) + "</tr>"
                   for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def headline_rows(report: dict) -> list[list]:
    rows = []
    for name, per in [*report["workloads"].items(), ("overall", {"headline": report["overall"]})]:
        h = per["headline"]
        rows.append([
            name,
            h["tstr_trtr_ratio"].get("next_event_ngram"),
            h["tstr_trtr_ratio"].get("next_event_gru"),
            h["tstr_trtr_ratio"].get("syscall_latency_ngram"),
            h.get("tstr_accuracy", {}).get("next_event_ngram"), h.get("trtr_accuracy", {}).get("next_event_ngram"),
            h.get("tstr_weighted_f1", {}).get("next_event_ngram"),
            h.get("trtr_weighted_f1", {}).get("next_event_ngram"),
            h["discriminative"].get("512"), h["discriminative_real_floor"].get("512"),
            h["discriminative"].get("2048"), h["discriminative_real_floor"].get("2048"),
            h["discriminative_timed"].get("512"), h["discriminative_timed_real_floor"].get("512"),
            h.get("discriminative_events", {}).get("512"), h.get("discriminative_events_real_floor", {}).get("512"),
            h["copy_rate"].get("256"), h["copy_rate_holdout"].get("256"),
            h["privacy_flagged"],
            h.get("unseen_8gram_share"), h.get("unseen_8gram_share_holdout"),
        ])
    return rows


def tells(per: dict, length: str = "512") -> list[list]:
    """Rows of what tells a workload's synthetic windows of `length` events from real ones
    (`longrange._tells`, first seed): feature, its accuracy alone, its mean in synthetic and
    real windows, and its accuracy alone between the two real runs (the floor's). Empty for
    reports written before tells existed or lengths without a score."""
    disc = per["long_range"]["discriminative"]
    synthetic = disc["synthetic_vs_real"].get(length, {}).get("tells")
    if not synthetic:
        return []
    floor = {r["feature"]: r["accuracy_alone"]
             for r in disc["real_vs_real"].get(length, {}).get("tells") or []}
    return [[r["feature"], r["accuracy_alone"], r.get("mean_a"), r.get("mean_b"), floor.get(r["feature"])]
            for r in synthetic]


def tell_summary(name: str, per: dict, length: str = "512") -> str | None:
    """One line: how well windows are told apart, the strongest single feature, and how many events
    sit in an exactly repeated span on both sides (`longrange.repeat_share`); None without tells."""
    rows = tells(per, length)
    if not rows:
        return None
    disc = per["long_range"]["discriminative"]
    score = disc["synthetic_vs_real"][length]["accuracy_mean"]
    floor = (disc["real_vs_real"].get(length) or {}).get("accuracy_mean")
    feature, alone, mean_syn, mean_real, alone_floor = rows[0]
    means = "" if mean_syn is None else f"; synthetic {_fmt(mean_syn)}, real {_fmt(mean_real)}"
    line = (f"{name}: {length}-event windows told from real at {_fmt(score)} (real runs: {_fmt(floor)}); "
            f"strongest single tell: {feature}, {_fmt(alone)} alone (real runs: {_fmt(alone_floor)}{means})")
    repeats = per["long_range"]["synthetic_vs_real"].get("repeats")
    if repeats and repeats["candidate"] is not None:
        line += (f"; events in a repeated {repeats['span']}-event span: synthetic {_fmt(repeats['candidate'])}, "
                 f"real {_fmt(repeats['reference'])}{repeats_advice(repeats['candidate'], repeats['reference'])}")
    return line


def startup_summary(name: str, per: dict) -> str | None:
    """One line: how far the synthetic traces' first events are from the training runs' first
    events, beside the held-out run (`fidelity.startup`); None where the report has none."""
    start = per["fidelity"].get("startup")
    if not start or start["synthetic"]["edits"]["mean"] is None:
        return None
    syn, real = start["synthetic"], start["real_test"]
    anchored = [n for n in syn.get("anchored") or [] if n]  # reports written before the anchor: none
    taken = (f"; anchored: {len(anchored)} of {len(syn['anchored'])} synthetic traces begin with up to "
             f"{max(anchored):,} events of a training run's (`generate --start-anchor`)") if anchored else ""
    return (f"{name}: the first {syn['events']} events are {_fmt(syn['edits']['mean'], 1)} edits from the "
            f"nearest training run's (held-out run: {_fmt(real['edits']['mean'], 1)}), with "
            f"{_fmt(syn['unseen_8grams']['mean'], 1)} 8-grams no training run has (held-out run: "
            f"{_fmt(real['unseen_8grams']['mean'], 1)}){taken}")


def privacy_summary(name: str, per: dict) -> str | None:
    """One line where the synthetic traces copy more of the training runs than the held-out run
    shares with them (`privacy.flag`), with the setting that lowered copying on average in both
    folds measured, scimark's most, at level or better TSTR/TRTR (docs/tuning.md); None where
    nothing is flagged."""
    flag = (per.get("privacy") or {}).get("flag")
    if not flag or not flag["flagged"]:
        return None
    return (f"{name}: copies more of the training runs than the held-out run does ({'; '.join(flag['reasons'])}); "
            "for a TraceSynth model `generate --temperature 1.2` copies less (docs/tuning.md)")


def cadence_rows(per: dict) -> list[dict]:
    """The compared event types of `longrange.compare_cadence`, each with the real-vs-real
    figure beside it (`octaves_real`), furthest beyond real first; [] where the report has none."""
    syn = per["long_range"]["synthetic_vs_real"].get("cadence")
    real = per["long_range"]["real_vs_real"].get("cadence")
    if not syn or not syn["events"]:
        return []
    floor = {r["event"]: r for r in (real or {}).get("events", [])}
    rows = []
    for row in syn["events"]:
        other = floor.get(row["event"])
        rows.append(row | {"octaves_real": other["octaves"] if other else None,
                           "median_real": other["median"] if other else None})
    return sorted(rows, key=lambda r: -(r["octaves"] - (r["octaves_real"] or 0.0)))


def cadence_summary(name: str, per: dict) -> str | None:
    """One line: how far the recurring event types' gaps are from the held-out run's on average,
    beside a training run's, and the event type furthest beyond what real runs differ by (its
    median gap on each side); None where the report has none."""
    rows = cadence_rows(per)
    if not rows:
        return None
    syn = per["long_range"]["synthetic_vs_real"]["cadence"]["mean_octaves"]
    real = (per["long_range"]["real_vs_real"].get("cadence") or {}).get("mean_octaves")
    far = rows[0]
    every = "does not recur" if far["median"] is None else f"every {far['median']:,.0f} events (median)"
    train = "" if far["median_real"] is None else f", a training run's {far['median_real']:,.0f}"
    return (f"{name}: recurring events' gaps are {_fmt(syn, 2)} octaves from the held-out run's on average "
            f"(a training run: {_fmt(real, 2)}); furthest: {far['event']} {every}, held-out run's "
            f"{far['median_reference']:,.0f}{train}: {_fmt(far['octaves'], 2)} octaves "
            f"(a training run: {_fmt(far['octaves_real'], 2)})")


def repeats_advice(synthetic: float, real: float | None) -> str:
    """What the repeat shares say to do, measured on eight workloads (docs/model.md,
    "Self-conditioning"): where a plain model's sample repeats itself under half as much as real
    (sqlite 0.32 against 0.84, pybench 0.11 against 0.38) a self-conditioned model's windows were
    harder to tell from real; at four fifths of real's or more (stream, tar) it did not help, and
    over real's (scimark) it made the sample more regular still. docs/tuning.md has the other
    settings measured against each reading. "" where there is nothing to say."""
    if real is None or synthetic is None or real < 0.2:
        return ""
    if synthetic < 0.5 * real:
        return " (under half of real's: `train --self-condition` raises it; docs/tuning.md)"
    if synthetic > real + 0.1:
        return " (more than real's: the sample is too regular; --self-condition would make it more so; docs/tuning.md)"
    return ""


CADENCE_TOP = 12  # event types in the HTML cadence table
CADENCE_HEADER = ["event", "median gap, synthetic", "  real test", "  real train", "octaves, synthetic",
                  "  real train"]
TELL_HEADER = ["feature", "accuracy alone", "synthetic mean", "real mean", "accuracy alone, real runs"]


HEADLINE_HEADER = ["workload", "TSTR/TRTR next-event n-gram", "TSTR/TRTR next-event GRU",
                   "TSTR/TRTR syscall latency n-gram", "next-event n-gram TSTR accuracy", "  TRTR accuracy",
                   "next-event n-gram TSTR weighted-F1", "  TRTR weighted-F1", "discriminative 512", "  real floor 512",
                   "discriminative 2048", "  real floor 2048", "discriminative+timing 512",
                   "  real floor (timing) 512", "discriminative 512, event types only",
                   "  real floor (event types) 512", "copy share k=256", "  holdout k=256",
                   "copies more than holdout", "8-grams unseen in training", "  holdout 8-grams unseen"]

_STYLE = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1300px}
table{border-collapse:collapse;margin:1em 0;font-size:13px}td,th{border:1px solid #ccc;padding:3px 8px;
text-align:right}th{background:#eee}td:first-child{text-align:left}img{max-width:100%}
details{margin:1em 0}pre{background:#f6f6f6;padding:1em;overflow:auto;font-size:11px}"""


def render_html(report: dict, title: str = "TraceSynth evaluation") -> str:
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
             f"<style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1>",
             "<p>Utility is macro-F1 on the real test traces; TSTR/TRTR near 1 means synthetic data "
             "trains predictors as well as real data. Discriminative accuracy 0.5 means a fixed classifier "
             "cannot tell synthetic windows from real ones; the floor is the same score for two real runs. "
             "Copy shares are compared with a real holdout run. Keys: docs/evaluation.md.</p>",
             "<h2>Headline</h2>", _table(headline_rows(report), HEADLINE_HEADER)]
    wc = report.get("workload_classification", {})
    if wc.get("available"):
        rows = [[p, wc[p]["tstr"]["mean"], wc[p]["trtr"]["mean"], wc[p]["ratio"]]
                for p in report["config"]["predictors"]]
        parts += ["<h2>Workload classification</h2>", _table(rows, ["predictor", "TSTR", "TRTR", "ratio"])]
    for name, per in report["workloads"].items():
        parts.append(f"<h2>Workload {html.escape(name)}</h2>")
        ev = per["events"]
        parts.append(f"<p>events: train {ev['train']:,}, test {ev['test']:,}, synthetic {ev['synthetic']:,}; "
                     f"unknown synthetic event share {_fmt(per['vocabulary']['unknown_event_share'])}</p>")
        rows = []
        for task in ("next_event", "syscall_latency"):
            result = per["utility"][task]
            if not result.get("available"):
                rows.append([task, "n/a", "", "", "", result.get("reason", "")])
                continue
            for p in report["config"]["predictors"]:
                r = result[p]
                tstr, trtr = r["tstr"], r["trtr"]
                rows.append([f"{task} / {p}", f"{_fmt(tstr and tstr['mean'])} ± {_fmt(tstr and tstr['std'])}",
                             f"{_fmt(trtr and trtr['mean'])} ± {_fmt(trtr and trtr['std'])}", r["ratio"], "", ""])
        aug = per["utility"]["augmentation"]
        if aug.get("available"):
            for p in report["config"]["predictors"]:
                a = aug[p]
                rows.append([f"augmentation / {p}", f"small+syn {_fmt(a['small_real_plus_synthetic']['mean'])}",
                             f"small {_fmt(a['small_real']['mean'])}", None, a["gain"], "gain"])
        parts.append(_table(rows, ["utility task", "TSTR (mean ± std)", "TRTR", "ratio", "", "note"]))
        syn_m = per["fidelity"]["synthetic_vs_real"]["marginals"]
        real_m = per["fidelity"]["real_vs_real"]["marginals"]
        rows = [[k, syn_m[k], real_m[k]] for k in syn_m if not isinstance(syn_m[k], (dict, list))]
        rows.append(["transition_tv", per["fidelity"]["synthetic_vs_real"]["transition_tv"],
                     per["fidelity"]["real_vs_real"]["transition_tv"]])
        lr_s, lr_r = per["long_range"]["synthetic_vs_real"], per["long_range"]["real_vs_real"]
        rows.append(["acf_mean_abs_diff", lr_s["acf_mean_abs_diff"], lr_r["acf_mean_abs_diff"]])
        rows.append(["recurrence log-distance W1", lr_s["recurrence"]["log_distance_wasserstein"],
                     lr_r["recurrence"]["log_distance_wasserstein"]])
        if "repeats" in lr_s:  # reports written before it have none
            rep = lr_s["repeats"]
            rows.append([f"events in a {rep['span']}-event span repeated within {rep['reach']} "
                         f"(real test {_fmt(rep['reference'])})", rep["candidate"], lr_r["repeats"]["candidate"]])
        cadence = lr_s.get("cadence")
        if cadence and cadence["mean_octaves"] is not None:  # reports written before it have none
            rows.append([f"recurring events' gaps, W1 of log2 gaps (octaves; {len(cadence['events'])} event "
                         f"types recurring {cadence['min_gaps']}+ times)", cadence["mean_octaves"],
                         (lr_r.get("cadence") or {}).get("mean_octaves")])
        start = per["fidelity"].get("startup")
        if start and start["synthetic"]["edits"]["mean"] is not None:  # reports written before it have none
            rows.append([f"edits from a training run's first {start['synthetic']['events']} events (8-grams there no "
                         f"training run has: {_fmt(start['synthetic']['unseen_8grams']['mean'])}; real test "
                         f"{_fmt(start['real_test']['unseen_8grams']['mean'])})", start["synthetic"]["edits"]["mean"],
                         start["real_test"]["edits"]["mean"]])
        parts.append(_table(rows, ["fidelity (vs real test)", "synthetic", "real train (floor)"]))
        rows = [[r["event"], r["median"] if r["median"] is not None else "does not recur", r["median_reference"],
                 r["median_real"], r["octaves"], r["octaves_real"]] for r in cadence_rows(per)[:CADENCE_TOP]]
        if rows:
            parts.append("<h3>Cadence: gaps between a recurring event's occurrences</h3><p>Per event type "
                         "recurring in the real test trace, the median gap in events and the Wasserstein-1 "
                         "distance of log2 gaps from the real test trace's (octaves: 1 = twice or half as far "
                         "apart), synthetic and a real training run; furthest beyond the real runs' own "
                         "difference first.</p>")
            parts.append(_table(rows, CADENCE_HEADER))
        rows = tells(per)
        if rows:
            parts.append("<h3>What tells synthetic windows from real ones (512 events)</h3><p>The "
                         "discriminative classifier on its folds given one feature at a time (first seed; "
                         "0.5 = that feature alone tells nothing); the last column is the same for the "
                         "two real runs of the floor.</p>")
            parts.append(_table(rows, TELL_HEADER))
        priv = per["privacy"]
        rows = [["longest common substring", priv["synthetic"]["longest_common_substring"],
                 priv["holdout"]["longest_common_substring"]],
                ["DCR median", priv["synthetic"]["dcr"]["median"], priv["holdout"]["dcr"]["median"]],
                ["exact duplicate windows", priv["synthetic"]["dcr"]["exact_share"],
                 priv["holdout"]["dcr"]["exact_share"]]]
        rows += [[f"{k}-gram copy share", v, priv["holdout"]["kgram_copy_share"][k]]
                 for k, v in priv["synthetic"]["kgram_copy_share"].items()]
        rows += [[f"{k}-grams unseen in training", v, priv["holdout"]["unseen_kgram_share"][k]]
                 for k, v in priv["synthetic"]["unseen_kgram_share"].items()]
        parts.append(_table(rows, ["privacy (vs training)", "synthetic", "real holdout"]))
        if priv["flag"]["flagged"]:
            parts.append("<p><b>Flagged: copies more than the holdout</b>: "
                         + html.escape("; ".join(priv["flag"]["reasons"])) + "</p>")
        validity = per["validity"]["synthetic"]
        serial = per["validity"].get("serial")
        serial_text = ("" if not serial else
                       f"; syscalls the real runs make one at a time ({serial['synthetic']['syscalls']}) out of "
                       f"that order: {_fmt(serial['synthetic']['per_1k'])} per 1,000 events "
                       f"(real held-out run: {_fmt(serial['real_test']['per_1k'])})")
        parts.append("<p>validity: " + (f"{_fmt(validity['total'])} violations per 1,000 events"
                                        if validity.get("available") else html.escape(validity["reason"]))
                     + html.escape(serial_text) + "</p>")
        for caption, png in _figures(name, per):
            parts.append(f"<h3>{html.escape(caption)}</h3><img alt='{html.escape(caption)}' "
                         f"src='data:image/png;base64,{png}'>")
    c = report["cost"]
    parts.append(f"<h2>Cost</h2><p>wall time {c['wall_seconds']:.1f} s, peak memory {c['peak_rss_mb']:.0f} MB; "
                 f"sections: {html.escape(json.dumps({k: round(v, 1) for k, v in c['section_seconds'].items()}))}</p>")
    parts.append("<details><summary>report.json</summary><pre>"
                 + html.escape(json.dumps(_clean({k: v for k, v in report.items() if k != 'workloads'}), indent=1))
                 + "</pre></details></body></html>")
    return "\n".join(parts)


def write_html(report: dict, path: Path) -> Path:
    text = render_html(report)
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return path


def write_report(report: dict, out_dir: str | Path) -> tuple[Path, Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return write_json(report, out / "report.json"), write_html(report, out / "report.html")


def terminal_table(report: dict, per_table: int = 4):
    """Metrics down, workloads across, at most `per_table` workloads per table (plus overall on
    the last), so it stays readable in an 80-column terminal. Returns one rich renderable."""
    from rich.console import Group
    from rich.table import Table

    rows = headline_rows(report)
    workloads, overall = rows[:-1], rows[-1]
    chunks = [workloads[i:i + per_table] for i in range(0, len(workloads), per_table)] or [[]]
    chunks[-1] = [*chunks[-1], overall]
    tables = []
    for number, chunk in enumerate(chunks, start=1):
        title = "TraceSynth evaluation" + (f" ({number}/{len(chunks)})" if len(chunks) > 1 else "")
        table = Table(title=title, caption="ratios of macro-F1; accuracy/weighted-F1 raw; "
                      "discriminative 0.5 = indistinguishable"
                      if number == len(chunks) else None)
        table.add_column("metric", no_wrap=True)
        for row in chunk:
            table.add_column(str(row[0]), justify="right", no_wrap=True)
        for i, label in enumerate(HEADLINE_HEADER[1:], start=1):
            table.add_row(label, *[(_fmt(r[i]) if not isinstance(r[i], str) else r[i]) for r in chunk])
        tables.append(table)
    return Group(*tables)

"""`evaluate(train, test, synthetic)`: every metric of the evaluation, per workload and overall.

Inputs are canonical traces grouped by workload label (`meta.workload`, or `workload=` for a
single-workload evaluation). Real test traces must be other runs than the training ones.
Returns a plain dict (the content of report.json; keys documented in docs/evaluation.md).

Handling of awkward inputs (never a silent wrong number):
- an empty list or an empty trace → ConfigError;
- a trace (real or synthetic) with a null event name → TraceFormatError naming the trace
  (source_path, else meta.extra["generator"]) and the first such row;
- a trace without workload label (and no `workload=`) → ConfigError naming the file;
- a workload with synthetic traces but no real train/test ones, or the reverse → ConfigError;
- synthetic event names the real traces never had → mapped to one "<unknown>" class, counted
  in `vocabulary.unknown_event_share` and listed; all metrics then see them as wrong events;
- a metric that cannot be computed on the given data (no syscalls, too few windows, no thread
  ids) → `{"available": false, "reason": ...}` or null, never 0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
import pyarrow.compute as pc

from tracesynth.errors import ConfigError
from tracesynth.evaluation import cost, fidelity, longrange, privacy, utility, validity
from tracesynth.evaluation.windows import (UNKNOWN, Encoded, Vocabulary, encode, require_event_names,
                                           require_nonempty)
from tracesynth.schema import Trace

REPORT_VERSION = 1
FIDELITY_MAX_EVENTS = 1_000_000  # per side; beyond this the first events of each side are used


@dataclass
class EvalConfig:
    """What to run. `quick` keeps only the n-gram predictor and windows of 512 and 2048."""

    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    quick: bool = False

    @property
    def predictors(self) -> tuple[str, ...]:
        return ("ngram",) if self.quick else utility.PREDICTORS

    @property
    def discriminative_lengths(self) -> tuple[int, ...]:
        return longrange.DISCRIMINATIVE_LENGTHS[:2] if self.quick else longrange.DISCRIMINATIVE_LENGTHS


def group_by_workload(traces: Sequence[Trace], role: str, workload: str | None) -> dict[str, list[Trace]]:
    require_nonempty(traces, role)
    groups: dict[str, list[Trace]] = {}
    for t in traces:
        if not isinstance(t, Trace):
            raise ConfigError(f"evaluate: {role} inputs must be Trace objects, got {type(t).__name__}")
        require_event_names(t, role)
        label = workload or t.meta.workload
        if not label:
            raise ConfigError(f"evaluate: {role} trace {t.meta.source_path or '?'} has no workload label; "
                              "pass --workload (single workload) or ingest with --workload")
        groups.setdefault(label, []).append(t)
    return groups


def _truncate(traces: Sequence[Encoded], limit: int) -> list[Encoded]:
    out, left = [], limit
    for t in traces:
        if left <= 0:
            break
        n = min(len(t), left)
        out.append(t.slice(0, n))
        left -= n
    return out


def _total(traces) -> int:
    return sum(len(t) for t in traces)


def _equal(a: Sequence[Encoded], b: Sequence[Encoded]) -> tuple[list[Encoded], list[Encoded]]:
    """Both sides cut to the same number of events, so counts (coverage, LCS) compare fairly."""
    n = min(_total(a), _total(b), FIDELITY_MAX_EVENTS)
    return _truncate(a, n), _truncate(b, n)


def _side_channels(traces: Sequence[Trace], limit: int) -> tuple[np.ndarray, np.ndarray]:
    """(ret classes, procname codes as strings) of the first `limit` events."""
    rets, procs, left = [], [], limit
    for t in traces:
        if left <= 0:
            break
        part = t.events.slice(0, left)
        left -= part.num_rows
        ret = part.column("ret")
        rets.append(fidelity.ret_classes(pc.fill_null(ret, 0).to_numpy().astype(np.int64),
                                         ret.is_null().to_numpy(zero_copy_only=False)))
        procs.append(np.asarray(pc.fill_null(part.column("procname"), "<null>").to_numpy(zero_copy_only=False),
                                dtype=object).astype(str))
    return np.concatenate(rets), np.concatenate(procs)


def _vocabulary_report(vocab: Vocabulary, synthetic: Sequence[Trace], syn_encoded: Sequence[Encoded]) -> dict:
    tokens = np.concatenate([e.tokens for e in syn_encoded])
    unknown = set()
    for t in synthetic:
        names = set(pc.unique(t.column("event")).to_pylist())
        unknown |= names - set(vocab.names[1:])
    never = sorted(set(vocab.names[1:]) - {vocab.names[i] for i in np.unique(tokens) if i != UNKNOWN})
    decreasing = sum(int(np.count_nonzero(np.diff(e.ts) < 0)) for e in syn_encoded)
    return {
        # canonical traces never go back in time; gaps below 0 are read as 1 ns by the metrics
        "synthetic_decreasing_timestamps": decreasing,
        "real_event_types": len(vocab) - 1,
        "unknown_event_share": float(np.mean(tokens == UNKNOWN)) if len(tokens) else None,
        "unknown_events": sorted(unknown)[:50],
        "real_event_types_never_generated": len(never),
    }


def _fidelity(cand, ref, cand_traces, ref_traces, vocab_size) -> dict:
    cand, ref = _equal(cand, ref)
    n = _total(cand)
    ret_c, proc_c = _side_channels(cand_traces, n)
    ret_r, proc_r = _side_channels(ref_traces, n)
    return {
        "events_compared": n,
        "marginals": fidelity.marginals(cand, ref, ret_c, ret_r, proc_c, proc_r),
        "ngrams": fidelity.ngram_stats(cand, ref),
        "transition_tv": fidelity.transition_distance(cand, ref, vocab_size),
        "threads": fidelity.compare_threads(cand, ref),
    }


def _longrange(cand, ref, top, weights, names) -> dict:
    cand, ref = _equal(cand, ref)
    acf_c = longrange.autocorrelation(cand, top, weights)
    acf_r = longrange.autocorrelation(ref, top, weights)
    lags = longrange.ACF_PLOT_LAGS
    return {
        "acf_mean_abs_diff": float(np.mean(np.abs(acf_c[lags] - acf_r[lags]))),
        "acf": {"lags": lags.tolist(), "candidate": acf_c[lags].tolist(), "reference": acf_r[lags].tolist()},
        "periodicity": {"candidate": longrange.periodicity(acf_c), "reference": longrange.periodicity(acf_r)},
        "recurrence": longrange.compare_recurrence(cand, ref),
        "repeats": longrange.compare_repeats(cand, ref),
        "cadence": longrange.compare_cadence(cand, ref, names),
    }


def _plot_series(vocab, syn, test, train) -> dict:
    """Small arrays for the HTML plots: top-event shares and log10 gap histograms."""
    counts = {side: np.bincount(np.concatenate([e.tokens for e in enc]), minlength=len(vocab)).astype(float)
              for side, enc in (("synthetic", syn), ("real_test", test), ("real_train", train))}
    top = np.argsort(-counts["real_test"], kind="stable")[:20]
    edges = np.linspace(0, 10, 51)
    hist = {side: np.histogram(np.concatenate([e.log_dt[1:] for e in enc]), bins=edges)[0].tolist()
            for side, enc in (("synthetic", syn), ("real_test", test))}
    return {
        "top_events": [vocab.names[i] for i in top],
        "top_event_share": {side: (c[top] / max(c.sum(), 1)).tolist() for side, c in counts.items()},
        "log_dt_edges": edges.tolist(),
        "log_dt_hist": hist,
    }


def _ratio(a, b):
    return (a / b) if (a is not None and b) else None


def _secondary(side_result: dict | None, name: str):
    return side_result[name]["mean"] if side_result and name in side_result else None


def _headline(per: dict) -> dict:
    tstr, trtr, ratio = {}, {}, {}
    secondary: dict = {f"{side}_{name}": {} for side in ("tstr", "trtr") for name in utility.SECONDARY_SCORES}
    for task in ("next_event", "syscall_latency"):
        result = per["utility"][task]
        if not result.get("available"):
            continue
        for predictor in utility.PREDICTORS:
            if predictor in result:
                key = f"{task}_{predictor}"
                tstr[key] = result[predictor]["tstr"]["mean"] if result[predictor]["tstr"] else None
                trtr[key] = result[predictor]["trtr"]["mean"] if result[predictor]["trtr"] else None
                ratio[key] = _ratio(tstr[key], trtr[key])
                for side in ("tstr", "trtr"):
                    for name in utility.SECONDARY_SCORES:
                        secondary[f"{side}_{name}"][key] = _secondary(result[predictor][side], name)
    disc_all = per["long_range"]["discriminative"]
    disc = {k: v["accuracy_mean"] for k, v in disc_all["synthetic_vs_real"].items()}
    floor = {k: v["accuracy_mean"] for k, v in disc_all["real_vs_real"].items()}
    disc_timed = {k: v["timed"]["accuracy_mean"] for k, v in disc_all["synthetic_vs_real"].items()}
    floor_timed = {k: v["timed"]["accuracy_mean"] for k, v in disc_all["real_vs_real"].items()}
    events_only = disc_all.get("events_only", disc_all)  # reports written before it: same features
    disc_events = {k: v["accuracy_mean"] for k, v in events_only["synthetic_vs_real"].items()}
    floor_events = {k: v["accuracy_mean"] for k, v in events_only["real_vs_real"].items()}
    return {
        "tstr": tstr,
        "trtr": trtr,
        "tstr_trtr_ratio": ratio,
        **secondary,  # tstr_accuracy, tstr_weighted_f1, trtr_accuracy, trtr_weighted_f1
        "discriminative": disc,
        "discriminative_real_floor": floor,
        "discriminative_timed": disc_timed,
        "discriminative_timed_real_floor": floor_timed,
        "discriminative_events": disc_events,
        "discriminative_events_real_floor": floor_events,
        "copy_rate": per["privacy"]["synthetic"]["kgram_copy_share"],
        "copy_rate_holdout": per["privacy"]["holdout"]["kgram_copy_share"],
        "privacy_flagged": per["privacy"]["flag"]["flagged"],
        "unseen_8gram_share": per["privacy"]["synthetic"]["unseen_kgram_share"]["8"],
        "unseen_8gram_share_holdout": per["privacy"]["holdout"]["unseen_kgram_share"]["8"],
        "event_jsd": per["fidelity"]["synthetic_vs_real"]["marginals"]["event_jsd"],
        "event_jsd_real_floor": per["fidelity"]["real_vs_real"]["marginals"]["event_jsd"],
        "ngram4_coverage": (per["fidelity"]["synthetic_vs_real"]["ngrams"].get("4") or {}).get("coverage"),
        "ngram4_coverage_real_floor": (per["fidelity"]["real_vs_real"]["ngrams"].get("4") or {}).get("coverage"),
        # edits from the nearest training run's first events (reports written before it: none)
        "startup_edits": _startup(per, "synthetic"),
        "startup_edits_real": _startup(per, "real_test"),
        # how far recurring event types' gaps are from real's (`longrange.compare_cadence`)
        "cadence_octaves": _cadence(per, "synthetic_vs_real"),
        "cadence_octaves_real": _cadence(per, "real_vs_real"),
    }


def _cadence(per: dict, side: str):
    return (per["long_range"][side].get("cadence") or {}).get("mean_octaves")


def _startup(per: dict, side: str):
    return ((per["fidelity"].get("startup") or {}).get(side) or {}).get("edits", {}).get("mean")


def _overall(workloads: dict) -> dict:
    """Unweighted mean over workloads of every numeric headline figure (null if any is null)."""
    heads = [w["headline"] for w in workloads.values()]
    out: dict = {}
    for key, value in heads[0].items():
        if isinstance(value, dict):
            out[key] = {}
            for sub in value:
                vals = [h[key].get(sub) for h in heads]
                out[key][sub] = None if any(v is None for v in vals) else float(np.mean(vals))
        elif isinstance(value, bool):
            out[key] = any(h[key] for h in heads)
        else:
            vals = [h[key] for h in heads]
            out[key] = None if any(v is None for v in vals) else float(np.mean(vals))
    return out


def evaluate(train: Sequence[Trace], test: Sequence[Trace], synthetic: Sequence[Trace], *,
             seeds: int | Sequence[int] = 3, quick: bool = False, workload: str | None = None,
             on_step: Callable[[str], None] | None = None) -> dict:
    """Evaluate synthetic traces against real train/test traces; returns the report dict.

    `seeds`: a count (seeds 0..n-1) or the seeds themselves; every utility and discriminative
    figure is computed once per seed and reported as mean and std.
    """
    with cost.single_threaded():
        return _evaluate(train, test, synthetic, seeds=seeds, quick=quick, workload=workload, on_step=on_step)


def _evaluate(train, test, synthetic, *, seeds, quick, workload, on_step) -> dict:
    config = EvalConfig(seeds=list(range(seeds)) if isinstance(seeds, int) else list(seeds), quick=quick)
    if not config.seeds:
        raise ConfigError("evaluate: needs at least one seed")
    step = on_step or (lambda _name: None)
    watch = cost.Stopwatch()
    groups = {role: group_by_workload(traces, role, workload)
              for role, traces in (("train", train), ("test", test), ("synthetic", synthetic))}
    names = sorted(groups["test"])
    for role in ("train", "synthetic"):
        if sorted(groups[role]) != names:
            raise ConfigError(f"evaluate: workloads differ: test has {', '.join(names)}; "
                              f"{role} has {', '.join(sorted(groups[role]))}")

    report: dict = {"report_version": REPORT_VERSION, "config": asdict(config) | {
        "predictors": list(config.predictors), "discriminative_lengths": list(config.discriminative_lengths)},
        "workloads": {}}
    encoded: dict = {}
    for name in names:
        real_train, real_test, syn = groups["train"][name], groups["test"][name], groups["synthetic"][name]
        vocab = Vocabulary.from_traces([*real_train, *real_test])
        enc_train = [encode(t, vocab) for t in real_train]
        enc_test = [encode(t, vocab) for t in real_test]
        enc_syn = [encode(t, vocab) for t in syn]
        encoded[name] = (vocab, enc_train, enc_test, enc_syn)
        per: dict = {"events": {"train": _total(enc_train), "test": _total(enc_test), "synthetic": _total(enc_syn)},
                     "vocabulary": _vocabulary_report(vocab, syn, enc_syn)}
        hashes = privacy.training_hashes(enc_train)  # the training runs' k-gram hashes, for both below
        step(f"{name}: fidelity")
        with watch.section("fidelity"):
            known = hashes.get(fidelity.STARTUP_K)
            per["fidelity"] = {"synthetic_vs_real": _fidelity(enc_syn, enc_test, syn, real_test, len(vocab)),
                               "real_vs_real": _fidelity(enc_train, enc_test, real_train, real_test, len(vocab)),
                               # how the traces begin, against the training runs' beginnings
                               "startup": {side: fidelity.startup(enc, enc_train, training_8grams=known)
                                           for side, enc in (("synthetic", enc_syn), ("real_test", enc_test))}}
            # events a generator took from a training run's start on purpose (`generate --start-anchor`)
            per["fidelity"]["startup"]["synthetic"]["anchored"] = [
                int(t.meta.extra.get("start_anchor") or 0) for t in syn]
        step(f"{name}: long-range")
        with watch.section("long_range"):
            top, weights = longrange.top_events(enc_test)
            per["long_range"] = {
                "acf_events": [vocab.names[i] for i in top],
                "synthetic_vs_real": _longrange(enc_syn, enc_test, top, weights, vocab.names),
                "real_vs_real": _longrange(enc_train, enc_test, top, weights, vocab.names),
            }
        step(f"{name}: discriminative")
        with watch.section("discriminative"):
            # the floor on the same features: the channels the synthetic trace has
            channels = longrange.compared_channels(enc_syn, enc_test)

            def scored(on: tuple[str, ...]) -> dict:
                # with `tells`: which features give the windows away (first seed), beside the
                # floor's, so a reader sees whether that feature differs between real runs too
                return {"synthetic_vs_real": longrange.discriminative(enc_syn, enc_test, config.seeds,
                                                                      config.discriminative_lengths, on, explain=True),
                        "real_vs_real": longrange.discriminative(enc_train, enc_test, config.seeds,
                                                                 config.discriminative_lengths, on, explain=True)}
            disc = scored(channels)
            # and on event types alone: the one score every generator shares (a light trace has
            # no thread or CPU columns, a Markov or full one does)
            per["long_range"]["discriminative"] = {**disc, "channels": list(channels),
                                                   "events_only": scored(()) if channels else disc}
        step(f"{name}: privacy")
        with watch.section("privacy"):
            syn_eq, test_eq = _equal(enc_syn, enc_test)
            synthetic_priv = privacy.measure(syn_eq, enc_train, hashes)
            holdout_priv = privacy.measure(test_eq, enc_train, hashes)
            per["privacy"] = {"events_compared": _total(syn_eq), "synthetic": synthetic_priv,
                              "holdout": holdout_priv, "flag": privacy.flag(synthetic_priv, holdout_priv)}
        step(f"{name}: utility")
        with watch.section("utility"):
            per["utility"] = utility.evaluate_workload(enc_train, enc_test, enc_syn, vocab, config.seeds,
                                                       config.predictors)
        with watch.section("validity"):
            per["validity"] = {"synthetic": validity.violations_per_1000(syn),
                               "real_test": validity.violations_per_1000(real_test),
                               "serial": {"synthetic": validity.serial_breaks(real_train, syn),
                                          "real_test": validity.serial_breaks(real_train, real_test)}}
        per["series"] = _plot_series(vocab, enc_syn, enc_test, enc_train)
        per["headline"] = _headline(per)
        report["workloads"][name] = per

    step("workload classification")
    with watch.section("utility"):
        report["workload_classification"] = _workload_classification(encoded, config)
    report["overall"] = _overall(report["workloads"])
    wc = report["workload_classification"]
    if wc.get("available"):
        for predictor in config.predictors:
            report["overall"]["tstr"][f"workload_{predictor}"] = wc[predictor]["tstr"]["mean"]
            report["overall"]["trtr"][f"workload_{predictor}"] = wc[predictor]["trtr"]["mean"]
            report["overall"]["tstr_trtr_ratio"][f"workload_{predictor}"] = wc[predictor]["ratio"]
            for side in ("tstr", "trtr"):
                for name in utility.SECONDARY_SCORES:
                    report["overall"][f"{side}_{name}"][f"workload_{predictor}"] = wc[predictor][side][name]["mean"]
    report["cost"] = {
        "events_evaluated": {role: sum(len(t) for t in traces)
                             for role, traces in (("train", train), ("test", test), ("synthetic", synthetic))},
        "wall_seconds": watch.total(),
        "section_seconds": watch.sections,
        "peak_rss_mb": cost.peak_rss_mb(),
        "generator": cost.generator_cost(synthetic),
    }
    return report


def next_event_tstr(train: Sequence[Trace], test: Sequence[Trace], synthetic: Sequence[Trace], *,
                    seeds: int | Sequence[int] = 3, predictor: str = "ngram") -> dict | None:
    """TSTR of the next-event task alone, on one workload's traces: `predictor` trained on all
    of `synthetic`, scored on `test` (macro-F1 summary as in the report's utility section; None
    where the synthetic traces hold no example). `evaluate` cuts the synthetic side to the real
    test side's length wherever counts are compared; this is the figure of a synthetic set as
    large as the training set (what `tracesynth experiment` reports as `tstr_matched`). The
    vocabulary and test examples are `evaluate`'s, so the two scores compare."""
    seed_list = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    if not seed_list:
        raise ConfigError("next_event_tstr: needs at least one seed")
    if predictor not in utility.PREDICTORS:
        raise ConfigError(f"next_event_tstr: predictor must be one of {', '.join(utility.PREDICTORS)}")
    for role, traces in (("train", train), ("test", test), ("synthetic", synthetic)):
        require_nonempty(traces, role)
        for t in traces:
            require_event_names(t, role)
    vocab = Vocabulary.from_traces([*train, *test])
    test_examples = utility.next_event_examples([encode(t, vocab) for t in test])
    if len(test_examples) == 0:
        return None
    with cost.single_threaded():
        return utility.trained_on(predictor, utility.next_event_examples([encode(t, vocab) for t in synthetic]),
                                  test_examples, seed_list, len(vocab), len(vocab))


def _workload_classification(encoded: dict, config: EvalConfig) -> dict:
    if len(encoded) < 2:
        return {"available": False, "reason": "needs at least two workloads"}
    # one shared vocabulary across workloads: re-map each workload's ids through event names
    names = sorted({n for vocab, *_ in encoded.values() for n in vocab.names[1:]})
    shared = {n: i + 1 for i, n in enumerate(names)}

    def remap(vocab, traces):
        table = np.array([0] + [shared[n] for n in vocab.names[1:]], dtype=np.int32)
        return [Encoded(table[t.tokens], t.log_dt, t.tid, t.cpu, t.ts) for t in traces]

    sides = {side: {w: remap(v[0], v[i]) for w, v in encoded.items()}
             for side, i in (("train", 1), ("test", 2), ("synthetic", 3))}
    return utility.workload_classification(sides["train"], sides["test"], sides["synthetic"], len(names) + 1,
                                           config.seeds, config.predictors)

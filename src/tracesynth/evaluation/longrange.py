"""Long-range structure: where a generator's context length shows.

- `autocorrelation`: of event-type indicator series at lags 1..4096 (FFT), averaged over the
  most frequent real event types weighted by their frequency;
- `periodicity`: the lag (2..4096) of the highest autocorrelation peak and its height — the
  period and regularity of repeated blocks;
- `recurrence`: distances between consecutive occurrences of the same k-gram (k = 8);
- `cadence`: per event type that recurs (at least `CADENCE_MIN_GAPS` times in the reference),
  the gaps in events between its consecutive occurrences, candidate against reference as
  Wasserstein-1 on log2 gaps ("octaves": 1 = twice or half as far apart). Pooled k-gram
  recurrence is dominated by the frequent events; a workload's rhythm is in its rarer ones —
  fileio syncs every 256 writes (`fdatasync` every ~523 events in every real run) and opens a
  new file every 20 syncs, and a trace with the right event mix and local grammar can still
  sync at random intervals, which neither macro-F1 nor the window classifier weighs;
- `repeats`: the share of events whose surroundings (`REPEAT_RADIUS` events either side) occur
  again, exactly, within `REPEAT_REACH` events: what "too varied" (more distinct 16-grams per
  window) and "too regular" mean in events (real sqlite 0.84, its default sampled trace 0.30);
- `discriminative`: a fixed classifier trained to tell windows of two sides apart; its
  cross-validated accuracy is 0.5 when they are indistinguishable. Features per window:
  hashed 1..3-gram frequencies (128 buckets), distinct k-grams (k = 1, 2, 4, 8, 16) per event,
  unigram entropy, bigram conditional entropy, zlib compressibility, and thread/CPU
  interleaving (the headline, sequence-only score); the `timed` variant adds log inter-event
  time mean/std/quantiles. Timing is kept out of the headline because real runs recorded under
  different machine load differ mostly in timing (measured on the bundled gzip runs: 0.99 with
  timing, 0.84 without), which would hide the sequence structure the score is meant to judge. Classifier: scikit-learn
  HistGradientBoostingClassifier (60 iterations, 15 leaves), 5-fold StratifiedGroupKFold where
  overlapping windows share a group (no leakage between folds), classes balanced by
  subsampling. At most `DISCRIMINATIVE_MAX_WINDOWS` windows per side and length; with fewer
  than `DISCRIMINATIVE_MIN_WINDOWS` (or fewer groups than folds) the length is reported
  `available: false` with a reason, never a number.
  Thread and CPU features count only for the channels both sides have (`compared_channels`): a
  `light` trace has no thread ids or CPUs, and against a real trace its windows were told apart
  by that alone (measured: 0.98-0.99 for every light model, whatever its events looked like);
  the runner scores the real-vs-real floor on the same features.
  With `explain`, the first seed also reports its `tells`: the same classifier and folds on
  each feature group alone (`feature_groups`), with each single feature's mean on both sides,
  so a report says what gives the windows away, not only that something does.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np
from scipy.stats import wasserstein_distance

from tracesynth.evaluation.fidelity import distribution_distance
from tracesynth.evaluation.predictors import hashed_ngram_counts
from tracesynth.evaluation.windows import REPEAT_RADIUS, REPEAT_REACH, Encoded, kgram_hashes, repeat_counts

MAX_LAG = 4096
ACF_TOP_EVENTS = 8
ACF_PLOT_LAGS = np.unique(np.round(np.logspace(0, np.log10(MAX_LAG), 40)).astype(int))
RECURRENCE_K = 8
DISCRIMINATIVE_LENGTHS = (512, 2048, 4096)
DISCRIMINATIVE_MAX_WINDOWS = 200
# Below this many windows per side the score is not computed (`available: false`): the
# classifier's leaves need >= 20 windows (HistGradientBoosting's min_samples_leaf), so with fewer
# than 40 training windows per fold it cannot split at all and predicts the majority class: the
# "accuracy" is then a constant set by the fold sizes, the same for every generator and for the
# real floor (seen as 0.467 on 4k-event held-out sets). 30 per side leaves ~48 training windows
# per fold and keeps 4096-event windows of a 65k-event run. As a second guard, a seed whose
# models predicted one class for every test window in every fold is reported unavailable.
DISCRIMINATIVE_MIN_WINDOWS = 30
DISCRIMINATIVE_FOLDS = 5
FEATURE_BUCKETS = 128
DISTINCT_K = (1, 2, 4, 8, 16)
INTERLEAVING_CHANNELS = ("tid", "cpu")


def _acf_full(series: np.ndarray, max_lag: int) -> np.ndarray:
    """Autocorrelation at lags 0..max_lag of one real series (0 where undefined).

    Always exactly max_lag + 1 values, whatever the series length: lags at or beyond the series
    length are 0. (The FFT size must cover both the series and the lag range, padded to avoid
    circular wrap-around; sizing it from the series alone returned only 2·n values for a
    series shorter than the lag range, which crashed the weighted sum with a shape mismatch.)
    """
    out = np.zeros(max_lag + 1)
    x = series - series.mean()
    var = float(np.dot(x, x))
    n = len(x)
    if var == 0 or n < 2:
        return out
    size = 1 << int(2 * max(n, max_lag + 1) - 1).bit_length()  # power of two ≥ 2·max(n, max_lag+1)
    spectrum = np.fft.rfft(x, size)
    acf = np.fft.irfft(spectrum * np.conj(spectrum), size)
    defined = min(n, max_lag + 1)  # lags beyond the series are undefined: no contribution
    out[:defined] = acf[:defined] / var
    return out


def autocorrelation(traces: Sequence[Encoded], event_ids: np.ndarray, weights: np.ndarray,
                    max_lag: int = MAX_LAG) -> np.ndarray:
    """Frequency-weighted mean ACF (lags 0..max_lag) of the indicator series of `event_ids`."""
    total = np.zeros(max_lag + 1)
    norm = 0.0
    for t in traces:
        if len(t) < 2:
            continue
        for token, weight in zip(event_ids, weights):
            total += weight * len(t) * _acf_full((t.tokens == token).astype(np.float64), max_lag)
            norm += weight * len(t)
    return total / norm if norm else total


def top_events(traces: Sequence[Encoded], k: int = ACF_TOP_EVENTS) -> tuple[np.ndarray, np.ndarray]:
    tokens, counts = np.unique(np.concatenate([t.tokens for t in traces]), return_counts=True)
    order = np.argsort(-counts, kind="stable")[:k]
    return tokens[order], counts[order] / counts[order].sum()


def periodicity(acf: np.ndarray) -> dict:
    if len(acf) < 3:
        return {"period": None, "regularity": None}
    lag = int(np.argmax(acf[2:]) + 2)
    return {"period": lag, "regularity": float(acf[lag])}


def recurrence_log_distances(traces: Sequence[Encoded], k: int = RECURRENCE_K) -> tuple[np.ndarray, float]:
    """log10 distances between consecutive occurrences of each k-gram; share never recurring."""
    distances, singles, total = [], 0, 0
    for t in traces:
        h = kgram_hashes(t.tokens, k)
        if len(h) < 2:
            continue
        order = np.argsort(h, kind="stable")  # stable: positions ascend within one k-gram
        same = h[order][1:] == h[order][:-1]
        distances.append(np.log10(np.diff(order)[same].astype(np.float64)))
        n_unique = len(h) - int(same.sum())
        counts = np.diff(np.flatnonzero(np.concatenate([[True], ~same, [True]])))
        singles += int(np.sum(counts == 1))
        total += n_unique
    values = np.concatenate(distances) if distances else np.zeros(0)
    return values, (singles / total if total else float("nan"))


def compare_recurrence(candidate: Sequence[Encoded], reference: Sequence[Encoded]) -> dict:
    dc, sc = recurrence_log_distances(candidate)
    dr, sr = recurrence_log_distances(reference)
    return {
        "k": RECURRENCE_K,
        "log_distance_wasserstein": distribution_distance(dc, dr)["wasserstein"],
        "median_distance": {"candidate": float(10 ** np.median(dc)) if len(dc) else None,
                            "reference": float(10 ** np.median(dr)) if len(dr) else None},
        "never_recurring_share": {"candidate": sc, "reference": sr},
    }


def repeat_share(traces: Sequence[Encoded], radius: int = REPEAT_RADIUS, reach: int = REPEAT_REACH) -> float | None:
    """Share of events (those at least `radius` from a trace's ends) whose 2·radius + 1 events
    centred on them occur again, exactly, starting within `reach` events before or after (None:
    no trace long enough). Real runs of a loop repeat most of their spans at the loop's period; a
    generator that decides each iteration's branches afresh repeats few."""
    counts = [repeat_counts(t.tokens, radius, reach) for t in traces]
    total = sum(n for _, n in counts)
    return sum(c for c, _ in counts) / total if total else None


CADENCE_MIN_GAPS = 16  # an event type's gaps in the reference before its cadence is compared


def gaps_by_event(traces: Sequence[Encoded]) -> tuple[dict[int, np.ndarray], int]:
    """Per event id, the gaps (in events) between its consecutive occurrences within each trace,
    pooled over traces; and the longest trace's length."""
    pooled: dict[int, list[np.ndarray]] = {}
    longest = 0
    for t in traces:
        tokens = np.asarray(t.tokens)
        longest = max(longest, len(tokens))
        if len(tokens) < 2:
            continue
        order = np.argsort(tokens, kind="stable")  # stable: positions ascend within one event id
        ids = tokens[order]
        bounds = np.flatnonzero(np.diff(ids)) + 1
        for part in np.split(order, bounds):
            if len(part) > 1:
                pooled.setdefault(int(tokens[part[0]]), []).append(np.diff(part))
    return {k: np.concatenate(v) for k, v in pooled.items()}, longest


def compare_cadence(candidate: Sequence[Encoded], reference: Sequence[Encoded],
                    names: Sequence[str] | None = None, min_gaps: int = CADENCE_MIN_GAPS) -> dict:
    """How far apart each recurring event type's occurrences are, candidate against reference
    (see module docstring). An event type that does not recur in the candidate counts as one
    gap the length of its longest trace (it did not come back within it), so dropping a
    rhythm scores as badly as it is. `mean_octaves` weighs each compared event type alike,
    as macro-F1 weighs classes; `events` lists them furthest first."""
    ref_gaps, _ = gaps_by_event(reference)
    cand_gaps, cand_len = gaps_by_event(candidate)
    rows = []
    for event, ref in ref_gaps.items():
        if len(ref) < min_gaps:
            continue
        cand = cand_gaps.get(event)
        recurs = cand is not None and len(cand) > 0
        values = cand if recurs else np.asarray([max(cand_len, 1)])
        rows.append({
            "event": names[event] if names is not None else event,
            "gaps": int(len(ref)), "candidate_gaps": int(len(cand)) if recurs else 0,
            "median": float(np.median(cand)) if recurs else None, "median_reference": float(np.median(ref)),
            "octaves": float(wasserstein_distance(np.log2(values), np.log2(ref))),
        })
    rows.sort(key=lambda r: -r["octaves"])
    return {"min_gaps": min_gaps, "events": rows,
            "mean_octaves": float(np.mean([r["octaves"] for r in rows])) if rows else None}


def compare_repeats(candidate: Sequence[Encoded], reference: Sequence[Encoded]) -> dict:
    return {"span": 2 * REPEAT_RADIUS + 1, "reach": REPEAT_REACH,
            "candidate": repeat_share(candidate), "reference": repeat_share(reference)}


# --- discriminative score ---------------------------------------------------------------------
def _entropy_rows(counts: np.ndarray) -> np.ndarray:
    p = counts / np.maximum(counts.sum(1, keepdims=True), 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.nansum(np.where(p > 0, p * np.log2(p), 0), axis=1)


def window_features(windows: np.ndarray, log_dt: np.ndarray, tid: np.ndarray, cpu: np.ndarray) -> np.ndarray:
    """One feature row per window (see module docstring)."""
    n, length = windows.shape
    ngrams = hashed_ngram_counts(windows, FEATURE_BUCKETS) / length
    distinct = []
    for k in DISTINCT_K:
        rows = []
        for w in windows:
            rows.append(len(np.unique(kgram_hashes(w, k))) / length)
        distinct.append(rows)
    uni = hashed_ngram_counts(windows, FEATURE_BUCKETS, max_n=1)
    bi_rows = []
    for w in windows:
        pairs = w[:-1].astype(np.int64) * 65_536 + w[1:]
        _, c = np.unique(pairs, return_counts=True)
        p = c / c.sum()
        bi_rows.append(-(p * np.log2(p)).sum())
    h_uni = _entropy_rows(uni)
    h_cond = np.array(bi_rows) - h_uni
    compress = np.array([len(zlib.compress(w.astype(np.uint16).tobytes(), 6)) / (2 * length) for w in windows])
    dt_stats = np.column_stack([log_dt.mean(1), log_dt.std(1), *np.percentile(log_dt, [10, 50, 90], axis=1)])

    def switches(values):
        return np.count_nonzero(np.diff(values, axis=1), axis=1) / length

    def distinct_count(values):
        return (1 + np.count_nonzero(np.diff(np.sort(values, axis=1), axis=1), axis=1)) / length

    sequence = np.column_stack([np.array(distinct).T, h_uni, h_cond, compress,
                                switches(tid), distinct_count(tid), switches(cpu), distinct_count(cpu)])
    # timing columns last, so `TIME_FEATURES` columns can be dropped for the sequence-only score
    return np.hstack([ngrams, sequence, dt_stats]).astype(np.float32)


TIME_FEATURES = 5


def feature_groups(channels: Sequence[str] = INTERLEAVING_CHANNELS) -> list[tuple[str, list[int]]]:
    """The sequence features' columns of `window_features` by name, as `tells` reports them:
    the hashed n-gram buckets as one group (a bucket alone means nothing), every other feature
    on its own. Thread/CPU columns only for the interleaving channels compared."""
    b = FEATURE_BUCKETS
    groups = [("hashed 1-3-gram mix", list(range(b)))]
    groups += [(f"distinct {k}-grams per event", [b + i]) for i, k in enumerate(DISTINCT_K)]
    at = b + len(DISTINCT_K)
    groups += [("event entropy (bits)", [at]), ("next-event entropy (bits)", [at + 1]),
               ("zlib compressed share", [at + 2])]
    if "tid" in channels:
        groups += [("thread switches per event", [at + 3]), ("distinct threads per event", [at + 4])]
    if "cpu" in channels:
        groups += [("CPU switches per event", [at + 5]), ("distinct CPUs per event", [at + 6])]
    return groups


def _side_windows(traces: Sequence[Encoded], length: int, rng: np.random.Generator):
    """Windows at stride length/2 from each trace; group = 4 consecutive windows (so the
    overlapping neighbours of a window stay in its fold)."""
    tokens, dts, tids, cpus, groups = [], [], [], [], []
    group_base = 0
    for t in traces:
        if len(t) < length:
            continue
        starts = np.arange(0, len(t) - length + 1, length // 2)
        index = starts[:, None] + np.arange(length)[None, :]
        tokens.append(t.tokens[index])
        dts.append(t.log_dt[index])
        tids.append(t.tid[index])
        cpus.append(t.cpu[index])
        groups.append(group_base + np.arange(len(starts)) // 4)
        group_base = groups[-1][-1] + 1
    if not tokens:
        return None
    parts = [np.concatenate(p) for p in (tokens, dts, tids, cpus, groups)]
    if len(parts[0]) > DISCRIMINATIVE_MAX_WINDOWS:
        pick = np.sort(rng.choice(len(parts[0]), DISCRIMINATIVE_MAX_WINDOWS, replace=False))
        parts = [p[pick] for p in parts]
    return parts


def compared_channels(*sides: Sequence[Encoded]) -> tuple[str, ...]:
    """The interleaving channels (tid, cpu) that every given side has somewhere."""
    return tuple(ch for ch in INTERLEAVING_CHANNELS
                 if all(any((getattr(t, ch) >= 0).any() for t in side) for side in sides))


def discriminative(side_a: Sequence[Encoded], side_b: Sequence[Encoded], seeds: Sequence[int],
                   lengths: Sequence[int] = DISCRIMINATIVE_LENGTHS,
                   channels: Sequence[str] | None = None, explain: bool = False) -> dict:
    """Cross-validated accuracy of telling windows of `side_a` from `side_b`, per length.
    `channels`: the interleaving channels whose features count (default: those both sides
    have); the others are blanked on both sides. `explain`: each available length also gets
    `tells` from the first seed (`_tells`)."""
    from tracesynth.evaluation.cost import single_threaded

    channels = compared_channels(side_a, side_b) if channels is None else tuple(channels)
    unknown = set(channels) - set(INTERLEAVING_CHANNELS)
    if unknown:
        raise ValueError(f"unknown interleaving channel(s) {sorted(unknown)}")
    with single_threaded():
        return _discriminative(side_a, side_b, seeds, lengths, channels, explain)


def _classifier(seed: int):
    from sklearn.ensemble import HistGradientBoostingClassifier

    return HistGradientBoostingClassifier(max_iter=60, max_leaf_nodes=15, learning_rate=0.1, random_state=seed)


def _folds(features: np.ndarray, labels: np.ndarray, groups: np.ndarray, seed: int):
    from sklearn.model_selection import StratifiedGroupKFold

    splitter = StratifiedGroupKFold(n_splits=DISCRIMINATIVE_FOLDS, shuffle=True, random_state=seed)
    return splitter.split(features, labels, groups)


def _tells(features: np.ndarray, labels: np.ndarray, splits: list, seed: int,
           channels: Sequence[str]) -> list[dict]:
    """What gives the windows away: the score's classifier, on the score's folds (`splits`),
    given one feature group at a time (`accuracy_alone`, 0.5 = that feature alone tells
    nothing), with a single feature's mean on side a (`mean_a`) and side b (`mean_b`);
    strongest first. A group
    that tells the sides apart alone nearly as well as all features together is where the
    candidate differs; several can (they are correlated: a slip adds distinct 8-grams and
    distinct 16-grams at once)."""
    rows = []
    for name, columns in feature_groups(channels):
        part = features[:, columns]
        correct = 0
        for train_idx, test_idx in splits:
            model = _classifier(seed).fit(part[train_idx], labels[train_idx])
            correct += int((model.predict(part[test_idx]) == labels[test_idx]).sum())
        row = {"feature": name, "accuracy_alone": correct / len(labels)}
        if len(columns) == 1:
            row["mean_a"] = float(part[labels == 0, 0].mean())
            row["mean_b"] = float(part[labels == 1, 0].mean())
        rows.append(row)
    return sorted(rows, key=lambda r: -r["accuracy_alone"])


def _discriminative(side_a, side_b, seeds, lengths, channels, explain=False) -> dict:
    out = {}
    for length in lengths:
        scores, timed_scores, counts, degenerate, counts_tried, tells = [], [], None, False, 0, None
        for seed in seeds:
            rng = np.random.default_rng(seed)
            a, b = _side_windows(side_a, length, rng), _side_windows(side_b, length, rng)
            if a is None or b is None:
                break
            n = counts_tried = min(len(a[0]), len(b[0]))
            if n < DISCRIMINATIVE_MIN_WINDOWS:
                break
            # one pick per side, applied to every channel, so a window's tokens, gaps, tids
            # and cpus stay the same window
            pick_a = np.sort(rng.choice(len(a[0]), n, replace=False))
            pick_b = np.sort(rng.choice(len(b[0]), n, replace=False))
            a, b = [p[pick_a] for p in a], [p[pick_b] for p in b]
            for side in (a, b):  # a channel not compared reads "unknown" on both sides
                for ch, column in (("tid", 2), ("cpu", 3)):
                    if ch not in channels:
                        side[column] = np.full_like(side[column], -1)
            timed = np.vstack([window_features(*a[:4]), window_features(*b[:4])])
            labels = np.concatenate([np.zeros(n), np.ones(n)])
            groups = np.concatenate([a[4], b[4] + a[4].max() + 1])
            folds = DISCRIMINATIVE_FOLDS
            if min(len(np.unique(a[4])), len(np.unique(b[4]))) < folds:
                break  # fewer independent groups than folds: some test fold would lack a class
            correct = {"sequence": 0, "timed": 0}
            varied = {"sequence": False, "timed": False}  # did any fold predict both classes?
            splits = list(_folds(timed, labels, groups, seed))  # the score's folds, reused by `_tells`
            for train_idx, test_idx in splits:
                for variant, features in (("sequence", timed[:, :-TIME_FEATURES]), ("timed", timed)):
                    model = _classifier(seed).fit(features[train_idx], labels[train_idx])
                    predicted = model.predict(features[test_idx])
                    correct[variant] += int((predicted == labels[test_idx]).sum())
                    varied[variant] |= len(np.unique(predicted)) > 1
            if not varied["sequence"]:
                degenerate = True
                break
            scores.append(correct["sequence"] / len(labels))
            if explain and tells is None:
                tells = _tells(timed[:, :-TIME_FEATURES], labels, splits, seed, channels)
            timed_scores.append(correct["timed"] / len(labels))
            counts = n
        if scores and not degenerate:
            out[str(length)] = {"available": True, "accuracy_mean": float(np.mean(scores)),
                                "accuracy_std": float(np.std(scores)),
                                "per_seed": scores, "windows_per_side": counts,
                                "timed": {"accuracy_mean": float(np.mean(timed_scores)),
                                          "accuracy_std": float(np.std(timed_scores)), "per_seed": timed_scores}}
            if tells is not None:
                out[str(length)]["tells"] = tells
        else:
            reason = (f"fewer than {DISCRIMINATIVE_MIN_WINDOWS} windows of {length} events "
                      f"(stride {length // 2}) on one side, or fewer than {DISCRIMINATIVE_FOLDS} "
                      "independent groups of 4 windows: too few for the classifier to learn anything")
            if degenerate:
                reason = ("the classifier predicted one class for every test window in every fold "
                          f"({counts_tried} windows of {length} events per side): a constant, not a score")
            out[str(length)] = {"available": False, "accuracy_mean": None, "accuracy_std": None,
                                "timed": {"accuracy_mean": None}, "reason": reason}
    return out

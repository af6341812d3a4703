"""Fidelity: how close synthetic traces are to real ones, channel by channel and in short runs.

Every function compares two lists of `Encoded` traces (a "candidate" and a "reference") and
returns plain floats; the runner calls it twice — synthetic vs real test, and real train vs
real test (the floor: what an independent real run scores) — so each number comes with the
value a perfect generator could be expected to reach.

Conventions: Jensen–Shannon divergence in bits (0 = identical distributions, 1 = disjoint);
Wasserstein-1 and the Kolmogorov–Smirnov statistic on log10 inter-event time (ns).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.stats import ks_2samp, wasserstein_distance

from tracesynth.evaluation.windows import Encoded, hashes_of_many, in_sorted, kgram_hashes

NGRAM_ORDERS = (1, 2, 3, 4)
PER_EVENT_TOP = 20  # inter-event time per event type: the most frequent real event types
INTERLEAVING_WINDOW = 512
KS_SAMPLE_CAP = 200_000  # KS / Wasserstein on a seeded subsample beyond this many values


def jsd(p_counts: np.ndarray, q_counts: np.ndarray) -> float:
    """Jensen–Shannon divergence (bits) between two count vectors over the same categories."""
    p = p_counts / max(p_counts.sum(), 1e-300)
    q = q_counts / max(q_counts.sum(), 1e-300)
    if p_counts.sum() == 0 or q_counts.sum() == 0:
        return float("nan")
    m = 0.5 * (p + q)

    def kl(a):
        mask = a > 0
        return float(np.sum(a[mask] * np.log2(a[mask] / m[mask])))

    return max(0.0, 0.5 * kl(p) + 0.5 * kl(q))


def categorical_jsd(candidate: np.ndarray, reference: np.ndarray) -> float:
    values, inverse = np.unique(np.concatenate([candidate, reference]), return_inverse=True)
    counts_c = np.bincount(inverse[: len(candidate)], minlength=len(values))
    counts_r = np.bincount(inverse[len(candidate):], minlength=len(values))
    return jsd(counts_c.astype(float), counts_r.astype(float))


def _cap(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    if len(values) > KS_SAMPLE_CAP:
        return rng.choice(values, KS_SAMPLE_CAP, replace=False)
    return values


def distribution_distance(candidate: np.ndarray, reference: np.ndarray, seed: int = 0) -> dict:
    if len(candidate) == 0 or len(reference) == 0:
        return {"wasserstein": None, "ks": None}
    rng = np.random.default_rng(seed)
    c, r = _cap(candidate, rng), _cap(reference, rng)
    return {"wasserstein": float(wasserstein_distance(c, r)), "ks": float(ks_2samp(c, r, method="asymp").statistic)}


def _cat(traces: Sequence[Encoded], field: str) -> np.ndarray:
    return np.concatenate([getattr(t, field) for t in traces])


def _log_dt(traces: Sequence[Encoded]) -> tuple[np.ndarray, np.ndarray]:
    """(log10 gaps, token of the event after the gap), skipping each trace's first event."""
    return (np.concatenate([t.log_dt[1:] for t in traces]), np.concatenate([t.tokens[1:] for t in traces]))


def marginals(candidate: Sequence[Encoded], reference: Sequence[Encoded], ret_class_c: np.ndarray,
              ret_class_r: np.ndarray, procname_c: np.ndarray, procname_r: np.ndarray) -> dict:
    """JSD per categorical channel and W1/KS on log10 inter-event time (overall, per event)."""
    out = {
        "event_jsd": categorical_jsd(_cat(candidate, "tokens"), _cat(reference, "tokens")),
        "cpu_jsd": categorical_jsd(_cat(candidate, "cpu"), _cat(reference, "cpu")),
        "procname_jsd": categorical_jsd(procname_c, procname_r),
        "ret_class_jsd": categorical_jsd(ret_class_c, ret_class_r),
        "tid_count_jsd": categorical_jsd(_tids_per_window(candidate), _tids_per_window(reference)),
    }
    dt_c, next_c = _log_dt(candidate)
    dt_r, next_r = _log_dt(reference)
    overall = distribution_distance(dt_c, dt_r)
    out["log_dt_wasserstein"] = overall["wasserstein"]
    out["log_dt_ks"] = overall["ks"]
    tokens, counts = np.unique(next_r, return_counts=True)
    top = tokens[np.argsort(-counts, kind="stable")][:PER_EVENT_TOP]
    per_event, weights = [], []
    for token in top:
        d = distribution_distance(dt_c[next_c == token], dt_r[next_r == token])
        if d["wasserstein"] is not None:
            per_event.append((d["wasserstein"], d["ks"]))
            weights.append(np.sum(next_r == token))
    if per_event:
        arr = np.array(per_event)
        w = np.array(weights, dtype=float)
        out["log_dt_per_event_wasserstein"] = float(np.average(arr[:, 0], weights=w))
        out["log_dt_per_event_ks"] = float(np.average(arr[:, 1], weights=w))
    else:
        out["log_dt_per_event_wasserstein"] = out["log_dt_per_event_ks"] = None
    out["log_dt_per_event_types_compared"] = len(per_event)
    return out


def ret_classes(ret: np.ndarray, ret_null: np.ndarray) -> np.ndarray:
    """Return values as classes: -1 null, 0 error (<0), 1 zero, 2+ floor(log10(value))+2."""
    cls = np.where(ret < 0, 0, np.where(ret == 0, 1, 2 + np.floor(np.log10(np.maximum(ret, 1)))))
    return np.where(ret_null, -1, cls).astype(np.int64)


def _tids_per_window(traces: Sequence[Encoded]) -> np.ndarray:
    counts = []
    for t in traces:
        n = len(t) // INTERLEAVING_WINDOW * INTERLEAVING_WINDOW
        if n == 0:
            continue
        blocks = np.sort(t.tid[:n].reshape(-1, INTERLEAVING_WINDOW), axis=1)
        counts.append(1 + np.count_nonzero(np.diff(blocks, axis=1), axis=1))
    return np.concatenate(counts) if counts else np.zeros(0, np.int64)


def ngram_stats(candidate: Sequence[Encoded], reference: Sequence[Encoded]) -> dict:
    """Per n: JSD between n-gram distributions, and coverage both ways.

    - `coverage`: share of distinct real n-grams that synthetic reproduces;
    - `coverage_weighted`: the same weighted by real frequency;
    - `novel_share`: share of distinct synthetic n-grams never seen in real;
    - `novel_weighted`: share of synthetic n-gram occurrences that are novel.
    """
    out = {}
    for n in NGRAM_ORDERS:
        hc = hashes_of_many([t.tokens for t in candidate], n)
        hr = hashes_of_many([t.tokens for t in reference], n)
        uc, cc = np.unique(hc, return_counts=True)
        ur, cr = np.unique(hr, return_counts=True)
        if not len(uc) or not len(ur):
            out[str(n)] = None
            continue
        in_c = np.isin(ur, uc, assume_unique=True)
        in_r = np.isin(uc, ur, assume_unique=True)
        union, inverse = np.unique(np.concatenate([uc, ur]), return_inverse=True)
        counts_c = np.zeros(len(union))
        counts_r = np.zeros(len(union))
        counts_c[inverse[: len(uc)]] = cc
        counts_r[inverse[len(uc):]] = cr
        out[str(n)] = {
            "jsd": jsd(counts_c, counts_r),
            "coverage": float(in_c.mean()),
            "coverage_weighted": float(cr[in_c].sum() / cr.sum()),
            "novel_share": float((~in_r).mean()),
            "novel_weighted": float(cc[~in_r].sum() / cc.sum()),
            "distinct_candidate": int(len(uc)),
            "distinct_reference": int(len(ur)),
        }
    return out


def transition_distance(candidate: Sequence[Encoded], reference: Sequence[Encoded], vocab_size: int) -> float:
    """Mean total-variation distance between next-event distributions, weighted by how often
    real visits each event (a state synthetic never leaves counts as distance 1)."""

    def matrix(traces):
        flat = np.zeros(vocab_size * vocab_size)
        for t in traces:
            pairs = t.tokens[:-1].astype(np.int64) * vocab_size + t.tokens[1:]
            flat += np.bincount(pairs, minlength=vocab_size * vocab_size)
        return flat.reshape(vocab_size, vocab_size)

    mc, mr = matrix(candidate), matrix(reference)
    row_r = mr.sum(1)
    row_c = mc.sum(1)
    states = row_r > 0
    if not states.any():
        return float("nan")
    pr = mr[states] / row_r[states, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        pc_ = np.where(row_c[states, None] > 0, mc[states] / np.maximum(row_c[states, None], 1), 0)
    tv = 0.5 * np.abs(pr - pc_).sum(1)
    tv[row_c[states] == 0] = 1.0
    return float(np.average(tv, weights=row_r[states]))


def thread_stats(traces: Sequence[Encoded]) -> dict:
    """Per-thread sequence statistics of one side (None when the traces carry no thread ids)."""
    tids = _cat(traces, "tid")
    known = tids >= 0
    if not known.any():
        return {"available": False}
    run_lengths = []
    events_per_thread = []
    for t in traces:
        tid = t.tid[t.tid >= 0]
        if len(tid) == 0:
            continue
        change = np.flatnonzero(np.diff(tid)) + 1
        bounds = np.concatenate([[0], change, [len(tid)]])
        run_lengths.append(np.diff(bounds))
        events_per_thread.append(np.unique(tid, return_counts=True)[1])
    runs = np.concatenate(run_lengths)
    per_thread = np.concatenate(events_per_thread)
    share = per_thread / per_thread.sum()
    return {
        "available": True,
        "known_tid_share": float(known.mean()),
        "threads": int(len(np.unique(tids[known]))),
        "mean_run_length": float(runs.mean()),
        "log_run_lengths": np.log10(runs),
        "thread_share_entropy_bits": float(-(share * np.log2(share)).sum()),
    }


def interleaving(traces: Sequence[Encoded], window: int = INTERLEAVING_WINDOW) -> dict:
    """Per window of `window` events: distinct threads, thread switches, distinct CPUs, CPU switches."""
    out = {"distinct_tids": [], "tid_switches": [], "distinct_cpus": [], "cpu_switches": []}
    for t in traces:
        n = len(t) // window * window
        if n == 0:
            continue
        for name, field in (("tid", t.tid), ("cpu", t.cpu)):
            blocks = field[:n].reshape(-1, window)
            out[f"{name}_switches"].append(np.count_nonzero(np.diff(blocks, axis=1), axis=1))
            out[f"distinct_{name}s"].append(1 + np.count_nonzero(np.diff(np.sort(blocks, axis=1), axis=1), axis=1))
    return {k: (np.concatenate(v) if v else np.zeros(0)) for k, v in out.items()}


def compare_threads(candidate: Sequence[Encoded], reference: Sequence[Encoded]) -> dict:
    sc, sr = thread_stats(candidate), thread_stats(reference)
    if not (sc["available"] and sr["available"]):
        return {"available": False, "reason": "no thread ids in " + ("synthetic" if not sc["available"] else "real")}
    ic, ir = interleaving(candidate), interleaving(reference)
    out = {
        "available": True,
        "threads": {"candidate": sc["threads"], "reference": sr["threads"]},
        "mean_run_length": {"candidate": sc["mean_run_length"], "reference": sr["mean_run_length"]},
        "run_length_log_wasserstein": distribution_distance(sc["log_run_lengths"], sr["log_run_lengths"])["wasserstein"],
        "thread_share_entropy_bits": {"candidate": sc["thread_share_entropy_bits"],
                                      "reference": sr["thread_share_entropy_bits"]},
    }
    for key in ic:
        out[f"window_{key}"] = {
            "candidate_mean": float(ic[key].mean()) if len(ic[key]) else None,
            "reference_mean": float(ir[key].mean()) if len(ir[key]) else None,
            "wasserstein": distribution_distance(ic[key].astype(float), ir[key].astype(float))["wasserstein"],
        }
    return out


# --- the trace start ---------------------------------------------------------------------------
STARTUP_EVENTS = 256
STARTUP_K = 8  # the k-grams whose absence from training marks a slip (a real run has almost none)


def edit_distance(a: np.ndarray, b: np.ndarray) -> int:
    """Levenshtein distance between two token sequences (insertions, deletions, substitutions).
    One numpy pass per row of the table: within a row the insertion chain is a running minimum
    of (cell − column). Hand-written because the library that does this on integer sequences
    (rapidfuzz) would be a dependency for one 256 × 256 table per trace."""
    a, b = np.asarray(a), np.asarray(b)
    cols = np.arange(len(b) + 1)
    prev = cols.copy()
    for i, token in enumerate(a, 1):
        base = np.empty_like(prev)
        base[0] = i
        base[1:] = np.minimum(prev[1:] + 1, prev[:-1] + (b != token))
        prev = np.minimum.accumulate(base - cols) + cols
    return int(prev[-1])


def startup(candidate: Sequence[Encoded], training: Sequence[Encoded], events: int = STARTUP_EVENTS,
            training_8grams: np.ndarray | None = None) -> dict:
    """How each candidate trace begins against how the training traces begin: the edit distance
    of its first `events` event types to the nearest training trace's first `events`
    (`edits`, per trace and mean), and how many of its first `events` events' 8-grams occur in
    no training trace (`unseen_8grams`). Real runs of one command begin with the same execve and
    loader sequence, differing by a scheduler event pair here and there; a generated start-up
    that doubles or drops a call is further away and has unseen 8-grams. Meaningful when every
    trace begins at its process's start (as recorded and generated traces do).
    `training_8grams`: the training traces' sorted 8-gram hashes, where the caller has them."""
    starts = [t.tokens[:events] for t in training if len(t)]
    known = np.unique(hashes_of_many([t.tokens for t in training], STARTUP_K)) if training_8grams is None \
        else training_8grams
    edits, unseen = [], []
    for trace in candidate:
        head = trace.tokens[:events]
        if not len(head) or not starts:
            continue
        edits.append(min(edit_distance(head, s) for s in starts))
        grams = kgram_hashes(head, STARTUP_K)
        unseen.append(int((~in_sorted(grams, known)).sum()) if len(grams) else 0)
    return {"events": events,
            "edits": {"per_trace": edits, "mean": float(np.mean(edits)) if edits else None},
            "unseen_8grams": {"per_trace": unseen, "mean": float(np.mean(unseen)) if unseen else None}}

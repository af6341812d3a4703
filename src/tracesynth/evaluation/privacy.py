"""Privacy: does a generator copy its training traces verbatim?

Real traces repeat themselves (a loop's syscalls recur, run after run), so the numbers are only
meaningful next to the reference: a real holdout run measured against the same training runs.
Measures, on event-name sequences:

- `kgram_copy_share[k]`: share of synthetic k-grams (k = 64, 256, 1024) that occur somewhere in
  the training traces (64-bit rolling hashes);
- `longest_common_substring`: longest run of events that also occurs in training (binary search
  on the length with the same hashes: a run of L implies one of every shorter length);
- `unseen_kgram_share["8"]`: the other side of copying — share of synthetic 8-grams that no
  training trace contains. A real holdout run has almost none (bundled workloads: 0.03-4%,
  build the highest); a generator's slips (events drawn together that do not fit) show here
  first (docs/model.md, "Support corrector");
- `dcr`: distance to closest record — windows of `DCR_WINDOW` events as hashed 1..2-gram
  frequency vectors; for each synthetic window, the Euclidean distance to the nearest training
  window (stride `DCR_WINDOW // 8`, so a copied window lies within 4 events of one); its median,
  and the share of synthetic windows that occur verbatim in training (at any offset).

`flagged` is true when the candidate copies clearly more than the holdout: its 256- or
1024-gram copy share exceeds the holdout's by more than `FLAG_MARGIN` (absolute), or its
longest common run is at least 1,024 events and more than twice the holdout's. Shorter units
(64-grams, 64-event windows) are reported but do not flag: a short-memory generator stuck in a
loop reproduces them by chance (measured: an order-1 chain on the bundled scimark runs has 73 %
of its 64-grams in training, the real holdout 53 %, yet it copies no 1,024-gram).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tracesynth.evaluation.predictors import hashed_ngram_counts
from tracesynth.evaluation.windows import Encoded, hashes_of_many, in_sorted

COPY_KS = (64, 256, 1024)
DCR_WINDOW = 64  # must be one of COPY_KS (its training hashes are reused)
DCR_MAX_QUERIES = 500
DCR_MAX_TRAIN = 20_000
DCR_BUCKETS = 256
FLAG_MARGIN = 0.10
FLAG_KS = (256, 1024)  # 64-grams recur by chance in low-entropy runs (a loop's syscalls)
FLAG_MIN_LCS = 1024
FLAG_LCS_FACTOR = 2.0
UNSEEN_K = 8  # the order at which real runs repeat their training runs' grams almost entirely


def kgram_copy_share(candidate: Sequence[np.ndarray], training_hashes: dict[int, np.ndarray]) -> dict:
    """Share of the candidate's k-grams found in training; `training_hashes` as `training_hashes()`
    gives them (sorted, so membership is a binary search)."""
    out = {}
    for k in COPY_KS:
        hc = hashes_of_many(candidate, k)
        out[str(k)] = float(in_sorted(hc, training_hashes[k]).mean()) if len(hc) else None
    return out


def _has_common(candidate: Sequence[np.ndarray], training: Sequence[np.ndarray], length: int) -> bool:
    hc = hashes_of_many(candidate, length)
    ht = hashes_of_many(training, length)
    return bool(len(hc) and len(ht) and np.isin(hc, ht).any())


def longest_common_substring(candidate: Sequence[np.ndarray], training: Sequence[np.ndarray]) -> int:
    low, high = 0, min(max((len(c) for c in candidate), default=0), max((len(t) for t in training), default=0))
    while low < high:  # invariant: a common run of `low` exists; none longer than `high`
        mid = (low + high + 1) // 2
        if _has_common(candidate, training, mid):
            low = mid
        else:
            high = mid - 1
    return low


def _windows(tokens: Sequence[np.ndarray], stride: int) -> np.ndarray:
    rows = []
    for t in tokens:
        if len(t) >= DCR_WINDOW:
            starts = np.arange(0, len(t) - DCR_WINDOW + 1, stride)
            rows.append(t[starts[:, None] + np.arange(DCR_WINDOW)[None, :]])
    return np.concatenate(rows) if rows else np.zeros((0, DCR_WINDOW), np.int32)


def _vectors(windows: np.ndarray) -> np.ndarray:
    return hashed_ngram_counts(windows, DCR_BUCKETS, max_n=2) / DCR_WINDOW


def distance_to_closest_record(candidate: Sequence[np.ndarray], training: Sequence[np.ndarray],
                               training_windows_hashes: np.ndarray, seed: int = 0) -> dict:
    """`training_windows_hashes`: sorted (`training_hashes()[DCR_WINDOW]`)."""
    from sklearn.neighbors import NearestNeighbors

    rng = np.random.default_rng(seed)
    queries = _windows(candidate, DCR_WINDOW)
    train = _windows(training, DCR_WINDOW // 8)
    if not len(queries) or not len(train):
        return {"median": None, "exact_share": None}
    if len(queries) > DCR_MAX_QUERIES:
        queries = queries[np.sort(rng.choice(len(queries), DCR_MAX_QUERIES, replace=False))]
    if len(train) > DCR_MAX_TRAIN:
        train = train[np.sort(rng.choice(len(train), DCR_MAX_TRAIN, replace=False))]
    # exact duplicates are looked up among *all* training windows (every offset), by hash
    exact = in_sorted(hashes_of_many(list(queries), DCR_WINDOW), training_windows_hashes)
    index = NearestNeighbors(n_neighbors=1).fit(_vectors(train))
    distance = index.kneighbors(_vectors(queries))[0][:, 0]
    return {"median": float(np.median(distance)), "exact_share": float(exact.mean()),
            "windows": int(len(queries))}


def measure(candidate: Sequence[Encoded], training: Sequence[Encoded],
            training_hashes: dict[int, np.ndarray], seed: int = 0) -> dict:
    cand_tokens = [c.tokens for c in candidate]
    train_tokens = [t.tokens for t in training]
    unseen = hashes_of_many(cand_tokens, UNSEEN_K)
    return {
        "kgram_copy_share": kgram_copy_share(cand_tokens, training_hashes),
        "unseen_kgram_share": {str(UNSEEN_K): float((~in_sorted(unseen, training_hashes[UNSEEN_K])).mean())
                               if len(unseen) else None},
        "longest_common_substring": longest_common_substring(cand_tokens, train_tokens),
        "dcr": distance_to_closest_record(cand_tokens, train_tokens, training_hashes[DCR_WINDOW], seed),
    }


def training_hashes(training: Sequence[Encoded]) -> dict[int, np.ndarray]:
    return {k: np.unique(hashes_of_many([t.tokens for t in training], k)) for k in (*COPY_KS, UNSEEN_K)}


def flag(candidate: dict, holdout: dict) -> dict:
    reasons = []
    for k in FLAG_KS:
        c, h = candidate["kgram_copy_share"][str(k)], holdout["kgram_copy_share"][str(k)]
        if c is not None and h is not None and c - h > FLAG_MARGIN:
            reasons.append(f"{k}-gram copy share {c:.2f} vs holdout {h:.2f}")
    c_lcs, h_lcs = candidate["longest_common_substring"], holdout["longest_common_substring"]
    if c_lcs >= FLAG_MIN_LCS and c_lcs > FLAG_LCS_FACTOR * h_lcs:
        reasons.append(f"longest common run {c_lcs} events vs holdout {h_lcs}")
    return {"flagged": bool(reasons), "reasons": reasons}

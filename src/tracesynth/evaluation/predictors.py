"""The fixed downstream predictors of the utility tasks (TSTR / TRTR).

Their sizes, context lengths, epochs and seeds are constants in this file, on purpose: a score
is only comparable across generators and across runs if the yardstick never moves. Change them
only together with docs/evaluation.md and a note that older reports are not comparable.

- `NGramBackoff`: the most frequent target after the longest context (up to `ORDER` previous
  tokens) seen in training, backing off to shorter contexts, then to the overall majority.
- `WindowNaiveBayes`: multinomial naive Bayes on hashed 1..3-gram counts of a window (the
  n-gram predictor of window-level tasks such as workload classification).
- `GRUClassifier`: embedding 32 + log inter-event time → one GRU layer of 64 → linear head,
  trained with Adam for `GRU_EPOCHS` epochs over at most `GRU_MAX_TRAIN` examples. Small enough
  for 2 CPU cores.
"""

from __future__ import annotations

import numpy as np

NGRAM_ORDER = 4
GRU_EMBED = 32
GRU_HIDDEN = 64
GRU_CONTEXT = 32
GRU_EPOCHS = 2
GRU_BATCH = 256
GRU_LR = 3e-3
GRU_MAX_TRAIN = 8_000
NB_BUCKETS = 1024


def _row_keys(contexts: np.ndarray, k: int) -> np.ndarray:
    """One 64-bit key per row for its last `k` columns (k = 0 → the same key for all)."""
    if k == 0:
        return np.zeros(len(contexts), dtype=np.uint64)
    tail = contexts[:, -k:].astype(np.int64) + 2  # -1 padding → 1, never 0
    key = np.zeros(len(contexts), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for column in range(k):
            key = key * np.uint64(1_000_003) + tail[:, column].astype(np.uint64)
    return key


class NGramBackoff:
    """Majority target per context of the last ≤ ORDER tokens, with backoff (deterministic)."""

    def __init__(self, order: int = NGRAM_ORDER):
        self.order = order

    def fit(self, contexts: np.ndarray, targets: np.ndarray) -> NGramBackoff:
        self.tables_ = []
        for k in range(self.order + 1):
            keys = _row_keys(contexts, k)
            pairs = np.stack([keys, targets.astype(np.uint64)], axis=1)
            unique, counts = np.unique(pairs, axis=0, return_counts=True)
            # for each key, the target with the highest count (ties: smallest target id)
            order = np.lexsort((unique[:, 1], -counts, unique[:, 0]))
            unique = unique[order]
            first = np.ones(len(unique), dtype=bool)
            first[1:] = unique[1:, 0] != unique[:-1, 0]
            self.tables_.append((unique[first, 0], unique[first, 1].astype(np.int64)))
        return self

    def predict(self, contexts: np.ndarray) -> np.ndarray:
        result = np.full(len(contexts), -1, dtype=np.int64)
        for k in range(self.order, -1, -1):
            todo = np.flatnonzero(result < 0)
            if not len(todo):
                break
            table_keys, table_targets = self.tables_[k]
            keys = _row_keys(contexts[todo], k)
            where = np.searchsorted(table_keys, keys)
            where = np.minimum(where, len(table_keys) - 1)
            hit = table_keys[where] == keys
            result[todo[hit]] = table_targets[where[hit]]
        return result


def hashed_ngram_counts(windows: np.ndarray, buckets: int = NB_BUCKETS, max_n: int = 3) -> np.ndarray:
    """Counts of hashed 1..max_n-grams per window row (float32, windows × buckets)."""
    n_rows, length = windows.shape
    counts = np.zeros((n_rows, buckets), dtype=np.float32)
    for n in range(1, max_n + 1):
        if length < n:
            break
        hashes = np.zeros((n_rows, length - n + 1), dtype=np.uint64)
        with np.errstate(over="ignore"):
            for j in range(n):
                hashes = hashes * np.uint64(1_000_003) + (windows[:, j:length - n + 1 + j] + 2).astype(np.uint64)
        # mix in n so a 1-gram and a 2-gram do not share buckets systematically
        bucket = ((hashes ^ np.uint64(n * 0x51ED27)) % np.uint64(buckets)).astype(np.int64)
        flat = (np.arange(n_rows)[:, None] * buckets + bucket).ravel()
        counts += np.bincount(flat, minlength=n_rows * buckets).reshape(n_rows, buckets)
    return counts


class WindowNaiveBayes:
    """Multinomial naive Bayes on hashed 1..3-gram counts of whole windows."""

    def fit(self, windows: np.ndarray, labels: np.ndarray) -> WindowNaiveBayes:
        from sklearn.naive_bayes import MultinomialNB

        self.model_ = MultinomialNB(alpha=0.1).fit(hashed_ngram_counts(windows), labels)
        return self

    def predict(self, windows: np.ndarray) -> np.ndarray:
        return self.model_.predict(hashed_ngram_counts(windows))


class GRUClassifier:
    """A small GRU over (token, log dt) contexts → one class per context. Fixed size and seed."""

    def __init__(self, vocab_size: int, n_classes: int, seed: int):
        self.vocab_size = vocab_size
        self.n_classes = n_classes
        self.seed = seed

    def _network(self):
        import torch
        from torch import nn

        class Net(nn.Module):
            def __init__(self, vocab: int, classes: int):
                super().__init__()
                self.embed = nn.Embedding(vocab + 1, GRU_EMBED)  # +1: index 0 = padding
                self.gru = nn.GRU(GRU_EMBED + 1, GRU_HIDDEN, batch_first=True)
                self.head = nn.Linear(GRU_HIDDEN, classes)

            def forward(self, tokens, log_dt):
                x = torch.cat([self.embed(tokens), log_dt.unsqueeze(-1)], dim=-1)
                _, hidden = self.gru(x)
                return self.head(hidden[-1])

        return Net(self.vocab_size, self.n_classes)

    @staticmethod
    def _tensors(contexts: np.ndarray, log_dt: np.ndarray):
        import torch

        tokens = torch.from_numpy((contexts + 1).clip(min=0).astype(np.int64))  # -1 pad → 0
        times = torch.from_numpy((log_dt / 10.0).astype(np.float32))
        return tokens, times

    def fit(self, contexts: np.ndarray, log_dt: np.ndarray, targets: np.ndarray) -> GRUClassifier:
        import torch

        rng = np.random.default_rng(self.seed)
        if len(contexts) > GRU_MAX_TRAIN:
            pick = np.sort(rng.choice(len(contexts), GRU_MAX_TRAIN, replace=False))
            contexts, log_dt, targets = contexts[pick], log_dt[pick], targets[pick]
        torch.manual_seed(self.seed)
        self.net_ = self._network()
        optimiser = torch.optim.Adam(self.net_.parameters(), lr=GRU_LR)
        tokens, times = self._tensors(contexts, log_dt)
        labels = torch.from_numpy(targets.astype(np.int64))
        loss_fn = torch.nn.CrossEntropyLoss()
        self.net_.train()
        for _ in range(GRU_EPOCHS):
            order = torch.from_numpy(rng.permutation(len(labels)))
            for start in range(0, len(labels), GRU_BATCH):
                batch = order[start:start + GRU_BATCH]
                optimiser.zero_grad()
                loss = loss_fn(self.net_(tokens[batch], times[batch]), labels[batch])
                loss.backward()
                optimiser.step()
        return self

    def predict(self, contexts: np.ndarray, log_dt: np.ndarray) -> np.ndarray:
        import torch

        self.net_.eval()
        tokens, times = self._tensors(contexts, log_dt)
        out = []
        with torch.no_grad():
            for start in range(0, len(tokens), 2048):
                out.append(self.net_(tokens[start:start + 2048], times[start:start + 2048]).argmax(-1))
        return torch.cat(out).numpy() if out else np.zeros(0, dtype=np.int64)

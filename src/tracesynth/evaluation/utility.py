"""Downstream utility: train a fixed predictor on synthetic (TSTR) or real (TRTR) traces, test
it on the real held-out traces, compare.

Tasks (all scored by macro-F1 over the classes present in the real test examples, so a class
the predictor never predicts costs as much as any other; accuracy and support-weighted F1 are
reported next to it under `accuracy` / `weighted_f1`, because under macro-F1 a handful of rare
start-up events weigh as much as the events that make up most of a run):

- `next_event`: the next event name from the previous events;
- `syscall_latency`: the duration class of a syscall (exit − entry on the same thread, classes
  split at 1 µs, 10 µs, 100 µs, 1 ms) from the events up to and including its entry;
- `workload`: which workload a window of `WORKLOAD_WINDOW` events comes from (only when
  several workloads are evaluated; see `workload_classification`);
- `augmentation`: next-event prediction trained on a small real set (the first
  `AUGMENT_SHARE` of each real training trace, at most `AUGMENT_MAX_EVENTS`) alone vs the same
  small set plus the synthetic traces.

Seeds: seed s trains on a seeded random `TRAIN_BLOCK_SHARE` of the 1,024-event blocks of the
training side (and seeds the GRU); the real test examples are one fixed seeded subsample,
identical for TSTR and TRTR. So identical synthetic and real training data give identical scores.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sklearn.metrics import f1_score

from tracesynth.evaluation.predictors import GRU_CONTEXT, NGRAM_ORDER, GRUClassifier, NGramBackoff, WindowNaiveBayes
from tracesynth.evaluation.windows import Encoded, contexts, syscall_pairs

TRAIN_BLOCK = 1024
TRAIN_BLOCK_SHARE = 0.8
NGRAM_MAX_TRAIN = 400_000
TEST_MAX_NGRAM = 50_000
TEST_MAX_GRU = 8_000
LATENCY_EDGES_LOG10_NS = np.array([3.0, 4.0, 5.0, 6.0])
AUGMENT_SHARE = 0.10
AUGMENT_MAX_EVENTS = 20_000
WORKLOAD_WINDOW = 128
WORKLOAD_MAX_TRAIN_WINDOWS = 2_000
WORKLOAD_MAX_TEST_WINDOWS = 1_000
PREDICTORS = ("ngram", "gru")


def macro_f1(truth: np.ndarray, predicted: np.ndarray) -> float:
    return float(f1_score(truth, predicted, labels=np.unique(truth), average="macro", zero_division=0))


#: Secondary scores reported next to macro-F1 (which stays the headline): macro-F1 weighs a
#: rare start-up event as much as the most common one; these weigh examples by frequency.
SECONDARY_SCORES = ("accuracy", "weighted_f1")


def all_scores(truth: np.ndarray, predicted: np.ndarray) -> dict[str, float]:
    """Macro-F1, accuracy and support-weighted F1 (over the classes present in `truth`)."""
    return {
        "macro_f1": macro_f1(truth, predicted),
        "accuracy": float(np.mean(truth == predicted)) if len(truth) else 0.0,
        "weighted_f1": float(f1_score(truth, predicted, labels=np.unique(truth), average="weighted",
                                      zero_division=0)),
    }


def _summary(values: list[float]) -> dict:
    return {"mean": float(np.mean(values)), "std": float(np.std(values)), "per_seed": [float(v) for v in values]}


def _summaries(per_seed: list[dict[str, float]]) -> dict:
    """Macro-F1 summary at the top level (mean/std/per_seed, unchanged keys) plus one summary
    per secondary score under its own key."""
    out = _summary([s["macro_f1"] for s in per_seed])
    for name in SECONDARY_SCORES:
        out[name] = _summary([s[name] for s in per_seed])
    return out


# --- examples ----------------------------------------------------------------------------------
class Examples:
    """Prediction examples of one side: (trace index, position of the target) and targets."""

    def __init__(self, traces: Sequence[Encoded], trace_index: np.ndarray, positions: np.ndarray,
                 targets: np.ndarray, context_end_offset: int):
        self.traces = traces
        self.trace_index = trace_index
        self.positions = positions
        self.targets = targets
        self.offset = context_end_offset  # context = the `width` events before position+offset

    def __len__(self) -> int:
        return len(self.targets)

    def subset(self, pick: np.ndarray) -> Examples:
        return Examples(self.traces, self.trace_index[pick], self.positions[pick], self.targets[pick], self.offset)

    def context(self, width: int, field: str = "tokens") -> np.ndarray:
        out = np.empty((len(self), width), dtype=np.float64 if field == "log_dt" else np.int64)
        for i, trace in enumerate(self.traces):
            rows = np.flatnonzero(self.trace_index == i)
            if len(rows):
                pad = 0.0 if field == "log_dt" else -1
                out[rows] = contexts(getattr(trace, field), self.positions[rows] + self.offset, width, pad)
        return out


def next_event_examples(traces: Sequence[Encoded]) -> Examples:
    index = np.concatenate([np.full(max(len(t) - 1, 0), i) for i, t in enumerate(traces)])
    positions = np.concatenate([np.arange(1, len(t)) for t in traces])
    targets = np.concatenate([t.tokens[1:] for t in traces]).astype(np.int64)
    return Examples(traces, index, positions, targets, 0)


def latency_examples(traces: Sequence[Encoded], vocab) -> Examples:
    idx, pos, cls = [], [], []
    for i, t in enumerate(traces):
        entries, durations = syscall_pairs(t.tokens, t.tid, t.cpu, t.ts, vocab)
        idx.append(np.full(len(entries), i))
        pos.append(entries)
        cls.append(np.searchsorted(LATENCY_EDGES_LOG10_NS, np.log10(np.maximum(durations, 1)), side="right"))
    return Examples(traces, np.concatenate(idx).astype(np.int64), np.concatenate(pos).astype(np.int64),
                    np.concatenate(cls).astype(np.int64), 1)  # context ends with the entry itself


def seeded_training_subset(examples: Examples, seed: int, cap: int) -> Examples:
    """Seed s keeps a random TRAIN_BLOCK_SHARE of 1,024-event blocks, then at most `cap` examples."""
    rng = np.random.default_rng(seed)
    block = examples.trace_index * (1 << 40) + examples.positions // TRAIN_BLOCK
    blocks = np.unique(block)
    keep = rng.choice(blocks, max(1, int(round(len(blocks) * TRAIN_BLOCK_SHARE))), replace=False)
    pick = np.flatnonzero(np.isin(block, keep))
    if len(pick) > cap:
        pick = np.sort(rng.choice(pick, cap, replace=False))
    return examples.subset(pick)


def fixed_test_subset(examples: Examples, cap: int) -> Examples:
    if len(examples) <= cap:
        return examples
    rng = np.random.default_rng(0)
    return examples.subset(np.sort(rng.choice(len(examples), cap, replace=False)))


def score(predictor: str, train: Examples, test: Examples, seed: int, n_classes: int, vocab_size: int) -> float:
    """Macro-F1 on `test` of `predictor` trained on `train` with `seed` (one thread, see cost)."""
    return scores(predictor, train, test, seed, n_classes, vocab_size)["macro_f1"]


def scores(predictor: str, train: Examples, test: Examples, seed: int, n_classes: int,
           vocab_size: int) -> dict[str, float]:
    """`all_scores` of one trained predictor on `test` (one training run, three figures)."""
    from tracesynth.evaluation.cost import single_threaded

    with single_threaded():
        return all_scores(*_predict(predictor, train, test, seed, n_classes, vocab_size))


def _predict(predictor: str, train: Examples, test: Examples, seed: int, n_classes: int,
             vocab_size: int) -> tuple[np.ndarray, np.ndarray]:
    """(true targets, predicted targets) of the real test examples."""
    if predictor == "ngram":
        train = seeded_training_subset(train, seed, NGRAM_MAX_TRAIN)
        model = NGramBackoff().fit(train.context(NGRAM_ORDER), train.targets)
        test = fixed_test_subset(test, TEST_MAX_NGRAM)
        return test.targets, model.predict(test.context(NGRAM_ORDER))
    train = seeded_training_subset(train, seed, 1 << 62)
    model = GRUClassifier(vocab_size, n_classes, seed)
    model.fit(train.context(GRU_CONTEXT), train.context(GRU_CONTEXT, "log_dt"), train.targets)
    test = fixed_test_subset(test, TEST_MAX_GRU)
    return test.targets, model.predict(test.context(GRU_CONTEXT), test.context(GRU_CONTEXT, "log_dt"))


def trained_on(predictor: str, train: Examples, test: Examples, seeds, n_classes: int,
               vocab_size: int) -> dict | None:
    """Scores on `test` of `predictor` trained on `train`, one training per seed (None: no
    training examples)."""
    if len(train) == 0:
        return None
    return _summaries([scores(predictor, train, test, s, n_classes, vocab_size) for s in seeds])


def tstr_trtr(make_examples, real_train, real_test, synthetic, seeds, n_classes, vocab_size,
              predictors=PREDICTORS) -> dict:
    test = make_examples(real_test)
    if len(test) == 0:
        return {"available": False, "reason": "no examples in the real test traces"}
    sides = {"trtr": make_examples(real_train), "tstr": make_examples(synthetic)}
    out: dict = {"available": True, "test_examples": int(len(test))}
    for predictor in predictors:
        result = {side: trained_on(predictor, train, test, seeds, n_classes, vocab_size)
                  for side, train in sides.items()}
        tstr = result["tstr"]["mean"] if result["tstr"] else 0.0
        trtr = result["trtr"]["mean"] if result["trtr"] else None
        result["ratio"] = (tstr / trtr) if trtr else None
        out[predictor] = result
    return out


def augmentation(real_train, real_test, synthetic, seeds, vocab_size, predictors=PREDICTORS) -> dict:
    small = []
    for t in real_train:
        n = min(int(len(t) * AUGMENT_SHARE), AUGMENT_MAX_EVENTS // max(len(real_train), 1))
        if n > 1:
            small.append(t.slice(0, n))
    test = next_event_examples(real_test)
    if not small or not len(test):
        return {"available": False, "reason": "real training traces too short for a small subset"}
    alone = next_event_examples(small)
    both = next_event_examples([*small, *synthetic])
    out: dict = {"available": True, "small_real_events": int(sum(len(s) for s in small))}
    for predictor in predictors:
        a = _summary([score(predictor, alone, test, s, vocab_size, vocab_size) for s in seeds])
        b = _summary([score(predictor, both, test, s, vocab_size, vocab_size) for s in seeds])
        out[predictor] = {"small_real": a, "small_real_plus_synthetic": b, "gain": b["mean"] - a["mean"]}
    return out


def evaluate_workload(real_train, real_test, synthetic, vocab, seeds, predictors=PREDICTORS) -> dict:
    n_vocab = len(vocab)
    return {
        "next_event": tstr_trtr(next_event_examples, real_train, real_test, synthetic, seeds, n_vocab, n_vocab,
                                predictors),
        "syscall_latency": tstr_trtr(lambda ts: latency_examples(ts, vocab), real_train, real_test, synthetic, seeds,
                                     len(LATENCY_EDGES_LOG10_NS) + 1, n_vocab, predictors),
        "augmentation": augmentation(real_train, real_test, synthetic, seeds, n_vocab, predictors),
    }


# --- workload classification (across workloads) ------------------------------------------------
def _workload_windows(by_workload: dict[str, Sequence[Encoded]], labels: dict[str, int], cap: int, seed: int):
    rng = np.random.default_rng(seed)
    xs, ds, ys = [], [], []
    for name, traces in by_workload.items():
        rows, dts = [], []
        for t in traces:
            if len(t) >= WORKLOAD_WINDOW:
                starts = np.arange(0, len(t) - WORKLOAD_WINDOW + 1, WORKLOAD_WINDOW)
                index = starts[:, None] + np.arange(WORKLOAD_WINDOW)[None, :]
                rows.append(t.tokens[index])
                dts.append(t.log_dt[index])
        if not rows:
            continue
        x, d = np.concatenate(rows), np.concatenate(dts)
        per_class = cap // max(len(by_workload), 1)
        if len(x) > per_class:
            pick = np.sort(rng.choice(len(x), per_class, replace=False))
            x, d = x[pick], d[pick]
        xs.append(x)
        ds.append(d)
        ys.append(np.full(len(x), labels[name]))
    return np.concatenate(xs), np.concatenate(ds), np.concatenate(ys)


def workload_classification(real_train: dict, real_test: dict, synthetic: dict, vocab_size: int, seeds,
                            predictors=PREDICTORS) -> dict:
    names = sorted(real_test)
    if len(names) < 2:
        return {"available": False, "reason": "needs at least two workloads"}
    labels = {n: i for i, n in enumerate(names)}
    test_x, test_d, test_y = _workload_windows(real_test, labels, WORKLOAD_MAX_TEST_WINDOWS, 0)
    out: dict = {"available": True, "workloads": names, "window": WORKLOAD_WINDOW}
    for predictor in predictors:
        result = {}
        for side, data in (("trtr", real_train), ("tstr", synthetic)):
            per_seed = []
            for seed in seeds:
                x, d, y = _workload_windows(data, labels, WORKLOAD_MAX_TRAIN_WINDOWS, seed)
                if predictor == "ngram":
                    predicted = WindowNaiveBayes().fit(x, y).predict(test_x)
                else:
                    model = GRUClassifier(vocab_size, len(names), seed).fit(x, d, y)
                    predicted = model.predict(test_x, test_d)
                per_seed.append(all_scores(test_y, predicted))
            result[side] = _summaries(per_seed)
        result["ratio"] = result["tstr"]["mean"] / result["trtr"]["mean"] if result["trtr"]["mean"] else None
        out[predictor] = result
    return out

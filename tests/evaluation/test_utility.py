"""TSTR/TRTR utility on cases with known answers."""

from __future__ import annotations

import numpy as np
import pytest
from evaluation.constructed import build, chain_events, chain_trace

from tracesynth.evaluation import utility
from tracesynth.evaluation.windows import Vocabulary, encode


def _setup(train, test, synthetic):
    vocab = Vocabulary.from_traces([train, test])
    return vocab, [encode(train, vocab)], [encode(test, vocab)], [encode(synthetic, vocab)]


def test_identical_synthetic_and_real_training_give_tstr_equal_trtr():
    train, test = chain_trace(8000, seed=1), chain_trace(4000, seed=2)
    vocab, a, b, c = _setup(train, test, train)
    result = utility.evaluate_workload(a, b, c, vocab, seeds=[0, 1], predictors=("ngram",))
    for task in ("next_event", "syscall_latency"):
        r = result[task]["ngram"]
        assert r["tstr"] == r["trtr"] and r["ratio"] == 1.0, task
    ngram = result["next_event"]["ngram"]["trtr"]
    assert 0 < ngram["mean"] < 1 and len(ngram["per_seed"]) == 2
    assert result["augmentation"]["ngram"]["gain"] > 0  # more (identical-process) data helps
    gru = utility.tstr_trtr(utility.next_event_examples, a, b, c, [0], len(vocab), len(vocab), ("gru",))["gru"]
    assert gru["tstr"] == gru["trtr"] and 0 < gru["tstr"]["mean"] < 1


def test_shuffled_training_data_loses_next_event_utility():
    events = chain_events(20_000, seed=1, concentration=0.1)
    train, test = build(events), build(chain_events(8000, seed=2, concentration=0.1), seed=2)
    shuffled = build(np.random.default_rng(0).permutation(events))
    vocab, a, b, c = _setup(train, test, shuffled)
    r = utility.tstr_trtr(utility.next_event_examples, a, b, c, [0], len(vocab), len(vocab), ("ngram",))
    assert r["ngram"]["ratio"] < 0.6


def test_macro_f1_counts_every_real_class_equally():
    truth = np.array([0, 0, 0, 0, 1])
    assert utility.macro_f1(truth, np.zeros(5, dtype=int)) == pytest.approx((2 * 0.8 / 1.8 + 0) / 2)


def test_accuracy_and_weighted_f1_weigh_classes_by_frequency():
    # one rare class never predicted: macro-F1 halves it, accuracy and weighted-F1 barely notice
    truth = np.array([0] * 98 + [1, 2])
    predicted = np.array([0] * 98 + [0, 2])
    scores = utility.all_scores(truth, predicted)
    assert scores["macro_f1"] == pytest.approx(utility.macro_f1(truth, predicted))
    assert scores["accuracy"] == pytest.approx(0.99)
    f1_zero = 2 * 98 / (2 * 98 + 1)  # precision 98/99, recall 1
    assert scores["weighted_f1"] == pytest.approx(0.98 * f1_zero + 0.01 * 0 + 0.01 * 1)
    assert scores["macro_f1"] == pytest.approx((f1_zero + 0 + 1) / 3)


def test_tstr_trtr_reports_accuracy_and_weighted_f1_next_to_macro_f1():
    train, test = chain_trace(8000, seed=1), chain_trace(4000, seed=2)
    vocab, a, b, c = _setup(train, test, build(np.random.default_rng(0).permutation(
        train.column("event").to_pylist())))
    r = utility.tstr_trtr(utility.next_event_examples, a, b, c, [0, 1], len(vocab), len(vocab), ("ngram",))
    for side in ("tstr", "trtr"):
        summary = r["ngram"][side]
        assert set(summary) == {"mean", "std", "per_seed", "accuracy", "weighted_f1"}
        for name in ("accuracy", "weighted_f1"):
            assert 0 < summary[name]["mean"] <= 1 and len(summary[name]["per_seed"]) == 2
    assert r["ngram"]["trtr"]["accuracy"]["mean"] > r["ngram"]["tstr"]["accuracy"]["mean"]  # shuffled loses


def test_latency_classes_follow_log_spaced_edges():
    vocab = Vocabulary.from_traces([chain_trace(100)])
    trace = build(["syscall_entry_read", "syscall_exit_read"] * 3, switch_rate=0.0, tids=(5,))
    enc = [encode(trace, vocab)]
    examples = utility.latency_examples(enc, vocab)
    gaps = np.diff(trace.column("ts").to_numpy())[0::2]  # 100..1000 ns by construction
    assert len(examples) == 3
    assert (examples.targets == np.searchsorted(utility.LATENCY_EDGES_LOG10_NS, np.log10(gaps), "right")).all()


def test_workload_classification_separates_distinct_workloads():
    def side(seed):
        return {
            "a": [encode(chain_trace(6000, seed=seed, matrix_seed=1), vocab)],
            "b": [encode(chain_trace(6000, seed=seed, matrix_seed=2), vocab)],
        }

    vocab = Vocabulary.from_traces([chain_trace(1000, matrix_seed=1), chain_trace(1000, matrix_seed=2)])
    r = utility.workload_classification(side(1), side(2), side(3), len(vocab), [0], ("ngram",))
    assert r["ngram"]["trtr"]["mean"] > 0.95 and r["ngram"]["tstr"]["mean"] > 0.95

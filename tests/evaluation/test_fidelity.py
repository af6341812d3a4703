"""Fidelity metrics on cases with known answers."""

from __future__ import annotations

import numpy as np
from evaluation.constructed import build, chain_events, chain_trace

from tracesynth.evaluation import fidelity
from tracesynth.evaluation.windows import Vocabulary, encode


def _enc(*traces):
    vocab = Vocabulary.from_traces(traces)
    return vocab, [[encode(t, vocab)] for t in traces]


def test_identical_traces_are_at_distance_zero():
    trace = chain_trace(5000, seed=1)
    vocab, (a, b) = _enc(trace, trace)
    ret = np.zeros(5000, dtype=np.int64)
    proc = np.array(["p"] * 5000)
    marginals = fidelity.marginals(a, b, ret, ret, proc, proc)
    assert marginals["event_jsd"] == 0 and marginals["cpu_jsd"] == 0 and marginals["tid_count_jsd"] == 0
    assert marginals["log_dt_wasserstein"] == 0 and marginals["log_dt_ks"] == 0
    ngrams = fidelity.ngram_stats(a, b)
    for n in ("1", "2", "3", "4"):
        assert ngrams[n]["jsd"] == 0 and ngrams[n]["coverage"] == 1 and ngrams[n]["novel_share"] == 0
    assert fidelity.transition_distance(a, b, len(vocab)) == 0


def test_shuffled_events_lose_ngram_fidelity_but_not_marginals():
    events = chain_events(20_000, seed=1, concentration=0.1)  # strongly structured transitions
    real, shuffled = build(events), build(np.random.default_rng(0).permutation(events))
    same_process = build(chain_events(20_000, seed=2, concentration=0.1), seed=2)
    vocab, (r, s, p) = _enc(real, shuffled, same_process)
    assert fidelity.categorical_jsd(s[0].tokens, r[0].tokens) < 1e-9  # same multiset of events
    shuffled_4 = fidelity.ngram_stats(s, r)["4"]
    process_4 = fidelity.ngram_stats(p, r)["4"]
    assert shuffled_4["jsd"] > 3 * process_4["jsd"]
    assert shuffled_4["novel_weighted"] > 0.2 > process_4["novel_weighted"]
    assert fidelity.transition_distance(s, r, len(vocab)) > 3 * fidelity.transition_distance(p, r, len(vocab))


def test_jsd_of_disjoint_distributions_is_one_bit():
    assert abs(fidelity.categorical_jsd(np.zeros(10), np.ones(10)) - 1.0) < 1e-12


def test_thread_interleaving_counts():
    trace = build(["sched_switch"] * 1024, switch_rate=1.0, tids=(1, 2))  # tids drawn each event
    _, (a,) = _enc(trace)
    inter = fidelity.interleaving(a, window=512)
    tid = a[0].tid
    assert inter["tid_switches"][0] == np.count_nonzero(np.diff(tid[:512]))
    assert set(inter["distinct_tids"].tolist()) == {2}


def _brute_edit_distance(a, b) -> int:
    table = np.zeros((len(a) + 1, len(b) + 1), dtype=int)
    table[:, 0], table[0, :] = np.arange(len(a) + 1), np.arange(len(b) + 1)
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            table[i, j] = min(table[i - 1, j] + 1, table[i, j - 1] + 1, table[i - 1, j - 1] + (a[i - 1] != b[j - 1]))
    return int(table[-1, -1])


def test_edit_distance_matches_the_textbook_table():
    rng = np.random.default_rng(0)
    for _ in range(200):
        a, b = rng.integers(0, 4, rng.integers(0, 14)), rng.integers(0, 4, rng.integers(0, 14))
        assert fidelity.edit_distance(a, b) == _brute_edit_distance(a, b)
    assert fidelity.edit_distance(np.arange(5), np.arange(5)) == 0
    assert fidelity.edit_distance(np.arange(5), np.zeros(0, int)) == 5


def test_startup_counts_a_doubled_call_in_a_real_start_up_and_not_a_real_run():
    """The bundled tar runs begin with execve and the loader; a copy of run 3's start with its
    first brk pair doubled (what a spliced start-up looked like) is two edits further from the
    training runs than run 3 and holds 8-grams they never have."""
    import tracesynth.datasets as ds

    runs = [ds.load("tar", r) for r in (1, 2, 3)]
    vocab = Vocabulary.from_traces(runs)
    train, test = [encode(t, vocab) for t in runs[:2]], encode(runs[3 - 1], vocab)
    itself = fidelity.startup(train, train)
    assert itself["events"] == fidelity.STARTUP_EVENTS
    assert itself["edits"]["per_trace"] == [0, 0] and itself["unseen_8grams"]["per_trace"] == [0, 0]
    real = fidelity.startup([test], train)
    names = runs[2].column("event").to_pylist()
    brk = names.index("syscall_entry_brk")
    assert names[brk + 1] == "syscall_exit_brk"
    doubled = test.slice(0, len(test))
    doubled.tokens = np.concatenate([test.tokens[:brk + 2], test.tokens[brk:]])
    spliced = fidelity.startup([doubled], train)
    assert spliced["edits"]["mean"] == real["edits"]["mean"] + 2  # the pair inserted, nothing else moved
    assert spliced["unseen_8grams"]["mean"] > real["unseen_8grams"]["mean"]
    assert fidelity.startup([], train)["edits"]["mean"] is None

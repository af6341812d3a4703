"""Tokenising: one vocabulary from real traces, unknown names kept visible, k-gram hashes."""

from __future__ import annotations

import numpy as np
from evaluation.constructed import build

from tracesynth import Trace
import pytest

from tracesynth.evaluation.windows import (UNKNOWN, Vocabulary, encode, in_sorted, kgram_hashes, require_sorted,
                                         syscall_pairs)


def test_unknown_synthetic_events_map_to_the_unknown_class():
    real = build(["sched_switch", "syscall_entry_read", "syscall_exit_read"])
    synthetic = build(["sched_switch", "made_up_event", "syscall_exit_read"])
    vocab = Vocabulary.from_traces([real])
    tokens = vocab.encode(synthetic)
    assert tokens[1] == UNKNOWN and tokens[0] != UNKNOWN and tokens[2] != UNKNOWN
    assert vocab.names[tokens[0]] == "sched_switch"


def test_kgram_hashes_equal_exactly_for_equal_kgrams():
    tokens = np.array([5, 1, 2, 3, 9, 1, 2, 3, 7, 1, 2, 4])
    h = kgram_hashes(tokens, 3)
    assert len(h) == len(tokens) - 2
    assert h[1] == h[5]  # (1,2,3) twice
    assert h[1] != h[9]  # (1,2,4)
    assert len(np.unique(h)) == 9  # 10 trigrams, (1,2,3) twice
    assert len(kgram_hashes(tokens[:2], 3)) == 0


def test_syscall_pairs_match_entry_and_exit_on_the_same_thread():
    # thread 1's read is interrupted by thread 2's write: pairs are found per thread
    trace = Trace.from_pydict({
        "ts": [100, 200, 350, 700, 1000],
        "tid": [1, 2, 2, 3, 1],
        "event": ["syscall_entry_read", "syscall_entry_write", "syscall_exit_write", "sched_switch",
                  "syscall_exit_read"],
    })
    vocab = Vocabulary.from_traces([trace])
    enc = encode(trace, vocab)
    entries, durations = syscall_pairs(enc.tokens, enc.tid, enc.cpu, enc.ts, vocab)
    assert {int(e): int(d) for e, d in zip(entries, durations)} == {0: 900, 1: 150}


def test_in_sorted_is_isin_for_a_sorted_table():
    rng = np.random.default_rng(0)
    table = np.sort(rng.integers(0, 2**63, 5000, dtype=np.uint64).repeat(2))  # duplicates allowed
    values = np.concatenate([table[rng.integers(0, len(table), 300)],
                             rng.integers(0, 2**63, 300, dtype=np.uint64), table[:1], table[-1:]])
    assert np.array_equal(in_sorted(values, table), np.isin(values, table))
    assert in_sorted(values, table[:0]).tolist() == [False] * len(values)
    assert in_sorted(values[:0], table).dtype == bool and len(in_sorted(values[:0], table)) == 0
    assert require_sorted(table, "t") is table
    with pytest.raises(ValueError, match="spans/tar is not sorted"):
        require_sorted(table[::-1], "spans/tar")

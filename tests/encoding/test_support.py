"""The training traces' event 8-gram table: what real runs contain, what they do not, saved as arrays."""

from __future__ import annotations

import numpy as np
import pytest

import tracesynth.datasets as ds
from tracesynth.encoding.support import EventSupport, gram_hashes
from tracesynth.encoding.trace_encoder import TraceEncoder


@pytest.fixture(scope="module")
def gzip_runs():
    runs = [ds.load("gzip", r) for r in (1, 2, 3)]
    encoder = TraceEncoder("light").fit(runs[:2])
    return encoder, [encoder.encode(t)["event"] for t in runs]


def test_training_runs_are_fully_supported_and_a_held_out_run_almost(gzip_runs):
    encoder, (run1, run2, run3) = gzip_runs
    support = encoder.support
    assert support.k == 8 and list(support.grams) == ["gzip"]
    assert support.novel_share(run1, "gzip") == 0.0 and not support.cover(run2, "gzip").any()
    # a real run of the same command repeats the training runs' loops: almost no unseen 8-gram
    assert support.novel_share(run3, "gzip") < 0.01
    shuffled = np.random.default_rng(0).permutation(run3)
    assert support.novel_share(shuffled, "gzip") > 0.5
    # another workload's table is empty: everything is unseen there
    assert support.novel_share(run1[:100], "tar") == 1.0


def test_cover_marks_exactly_the_events_inside_unseen_grams(gzip_runs):
    encoder, (run1, _, _) = gzip_runs
    support = encoder.support
    codes = run1[1000:1100].copy()
    codes[50] = encoder.event.encode(np.array(["sched_process_exec"]))[0]  # never at this place in gzip
    cover = support.cover(codes, "gzip")
    novel = support.novel(codes, "gzip")
    assert novel[43:51].all() and not novel[:43].any() and not novel[51:].any()
    assert cover[43:58].all() and not cover[:43].any() and not cover[58:].any()
    assert support.novel_share(codes[:5], "gzip") == 0.0 and len(support.novel(codes[:5], "gzip")) == 0


def test_hashes_are_order_sensitive_and_the_table_round_trips_as_arrays(gzip_runs):
    encoder, _ = gzip_runs
    a, b = np.array([1, 2, 3, 0]), np.array([3, 2, 1, 0])
    assert gram_hashes(a, 4)[0] != gram_hashes(b, 4)[0]
    assert gram_hashes(np.array([0, 0]), 2)[0] != gram_hashes(np.array([0]), 1)[0]
    arrays = encoder.support.to_arrays()
    assert {v.dtype for v in arrays.values()} == {np.dtype(np.int64), np.dtype(np.float64)}  # safetensors-friendly
    back = EventSupport.from_arrays(arrays)
    assert back.k == 8 and np.array_equal(back.grams["gzip"], encoder.support.grams["gzip"])
    assert back.natural == encoder.support.natural and back.positions == encoder.support.positions
    with pytest.raises(ValueError):
        EventSupport(k=1)


def test_natural_share_is_what_one_real_run_lacks_from_the_others(gzip_runs):
    encoder, (run1, run2, _) = gzip_runs
    support = encoder.support
    held_out = [EventSupport.fit([("gzip", b)]).novel_share(a, "gzip") for a, b in ((run1, run2), (run2, run1))]
    assert support.natural["gzip"] == pytest.approx(np.mean(held_out))
    assert 0 < support.natural["gzip"] < 0.01  # gzip's runs repeat each other's loops
    one = EventSupport.fit([("gzip", run1)])  # one trace: its second half against its first
    half = len(run1) // 2
    expected = np.mean([EventSupport.fit([("gzip", run1[half:])]).novel_share(run1[:half], "gzip"),
                        EventSupport.fit([("gzip", run1[:half])]).novel_share(run1[half:], "gzip")])
    assert one.natural["gzip"] == pytest.approx(expected)


def test_excess_cover_leaves_windows_within_the_natural_share_alone(gzip_runs):
    encoder, (run1, _, _) = gzip_runs
    support = EventSupport(8, encoder.support.grams, {"gzip": 0.05})
    codes = run1[2000:2400].copy()
    codes[100] = encoder.event.encode(np.array(["sched_process_exec"]))[0]  # 8 of 393 grams unseen: 2%
    assert not support.excess_cover(codes, "gzip").any()
    strict = EventSupport(8, encoder.support.grams, {"gzip": 0.0})
    assert np.array_equal(strict.excess_cover(codes, "gzip"), strict.cover(codes, "gzip"))
    assert strict.excess_cover(codes, "gzip").sum() == 15


def test_the_corrector_applies_to_closed_grammars_only(gzip_runs):
    encoder, (run1, run2, _) = gzip_runs
    support = encoder.support
    assert support.positions["gzip"] == len(run1) + len(run2) - 14
    assert support.density("gzip") < 0.005 and support.applies("gzip")  # 482 distinct 8-grams in 173k
    noise = EventSupport.fit([("noise", np.random.default_rng(1).integers(0, 40, 5000))])
    assert noise.density("noise") > 0.9 and not noise.applies("noise")
    assert not support.applies("tar") and EventSupport(8, support.grams).density("gzip") == 1.0

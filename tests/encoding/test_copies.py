"""The training traces' event 256-gram and branch-point table (the copy guard's), on real tar runs."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import tracesynth.datasets as ds
from tracesynth.encoding.copies import SHARED_SPANS, SpanTable
from tracesynth.encoding.trace_encoder import TraceEncoder
from tracesynth.evaluation.windows import kgram_hashes


@pytest.fixture(scope="module")
def tar_runs():
    runs = [ds.load("tar", r) for r in (1, 2, 3)]
    encoder = TraceEncoder("light").fit(runs[:2])
    return encoder, [encoder.encode(t)["event"] for t in runs]


def test_training_spans_are_copies_and_a_shuffled_run_copies_nothing(tar_runs):
    encoder, (run1, run2, run3) = tar_runs
    table = encoder.copies
    assert table.span == 256 and list(table.spans) == ["tar"]
    assert table.copied(run1, "tar").all() and table.copy_share(run2, "tar") == 1.0
    # the held-out run shares some long stretches with the training runs, far from all
    assert 0.0 < table.copy_share(run3, "tar") < 0.5
    shuffled = np.random.default_rng(0).permutation(run3)
    assert table.copy_share(shuffled, "tar") == 0.0
    assert table.copy_share(run1[:100], "tar") == 0.0 and len(table.copied(run1[:100], "tar")) == 0
    assert table.copy_share(run1, "gzip") == 0.0  # a workload the table does not know


def test_branch_points_are_where_training_continues_in_more_than_one_way(tar_runs):
    encoder, (run1, run2, _) = tar_runs
    table = encoder.copies
    points = table.branch_points(run1, "tar")
    assert len(points) == len(run1) and not points[:7].any()
    assert 0.001 < points.mean() < 0.9  # tar: 60% (its loops vary; the start-up less)
    lead = table.branch - 1
    # every branch point: the events before it are followed by two or more events in training,
    # the one it has among them; elsewhere training knows one follower only
    seen: dict[int, Counter] = {}
    for run in (run1, run2):
        contexts = kgram_hashes(run[:-1], lead)
        for h, nxt in zip(contexts.tolist(), run[lead:].tolist()):
            seen.setdefault(h, Counter())[nxt] += 1
    for p in np.nonzero(points)[0][:50]:
        followers, times = table.followers(run1[p - lead:p], "tar")
        assert dict(zip(followers.tolist(), times.tolist())) == seen[int(kgram_hashes(run1[p - lead:p], lead)[0])]
        assert len(followers) >= 2 and run1[p] in followers
    plain = np.nonzero(~points[lead:])[0][:50] + lead
    for p in plain:
        assert len(seen[int(kgram_hashes(run1[p - lead:p], lead)[0])]) == 1
        assert len(table.followers(run1[p - lead:p], "tar")[0]) == 0


def test_natural_share_is_what_one_real_run_copies_from_the_other_and_gates_the_guard(tar_runs):
    encoder, (run1, run2, _) = tar_runs
    table = encoder.copies
    shares = [float(np.isin(kgram_hashes(a, 256), kgram_hashes(b, 256)).mean()) for a, b in ((run1, run2), (run2, run1))]
    assert table.natural["tar"] == pytest.approx(np.mean(shares))
    assert 0.1 < table.natural["tar"] < SHARED_SPANS and table.applies("tar")  # tar runs share a quarter
    # one trace: its second half against its first
    half = len(run1) // 2
    single = SpanTable.fit([("tar", run1)])
    first, second = kgram_hashes(run1[:half], 256), kgram_hashes(run1[half:], 256)
    assert single.natural["tar"] == pytest.approx(np.mean([np.isin(first, second).mean(), np.isin(second, first).mean()]))
    # a workload whose runs share most long spans: the guard stays out
    assert not SpanTable.fit([("loop", np.tile(np.arange(5), 400)), ("loop", np.tile(np.arange(5), 300))]).applies("loop")
    assert not table.applies("gzip")


def test_the_table_round_trips_as_arrays(tar_runs):
    encoder, (run1, _, run3) = tar_runs
    arrays = encoder.copies.to_arrays()
    assert {v.dtype for v in arrays.values()} == {np.dtype(np.int64), np.dtype(np.float64)}  # safetensors-friendly
    back = SpanTable.from_arrays(arrays)
    assert (back.span, back.branch) == (256, 8)
    assert np.array_equal(back.copied(run3, "tar"), encoder.copies.copied(run3, "tar"))
    assert np.array_equal(back.branch_points(run1, "tar"), encoder.copies.branch_points(run1, "tar"))
    assert np.array_equal(back.nexts["tar"], encoder.copies.nexts["tar"])
    assert np.array_equal(back.counts["tar"], encoder.copies.counts["tar"])
    assert back.natural == encoder.copies.natural
    with pytest.raises(ValueError):
        SpanTable(span=1)

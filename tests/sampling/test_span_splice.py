"""The span splice (sampling/span_splice.py) on real sqlite runs: slips planted in a held-out
run are replaced by training's own events, known events stay, and it is seeded."""

from __future__ import annotations

import numpy as np
import pytest

import tracesynth.datasets as ds
from tracesynth.encoding.trace_encoder import TraceEncoder, _gaps
from tracesynth.evaluation.windows import in_sorted, kgram_hashes
from tracesynth.sampling import span_splice
from tracesynth.sampling.span_splice import (MAX_COPY, MAX_DRIFT, PHASE, Training, covered, least_shared,
                                             run_copy_share, splice)


@pytest.fixture(scope="module")
def sqlite():
    runs = [ds.load("sqlite", r) for r in (1, 2, 3)]
    for r, t in zip((1, 2, 3), runs):
        t.meta.workload = "sqlite"
    encoder = TraceEncoder("light").fit(runs[:2])
    table = encoder.splices
    held_out = encoder.event.encode(runs[2].events.column("event").to_numpy(zero_copy_only=False))[:6000]
    gaps = _gaps(runs[2].events.column("ts").to_numpy())[:6000]
    return encoder, table.runs("sqlite"), held_out, gaps


def _unseen(codes, runs, k=8):
    support = np.unique(np.concatenate([kgram_hashes(c, k) for c, _ in runs]))
    return int((~in_sorted(kgram_hashes(codes, k), support)).sum())


def _plant(codes, gaps, every=500, seed=0):
    """A slip every `every` events: an event doubled (the sampled traces' commonest slip)."""
    rng = np.random.default_rng(seed)
    at = np.arange(every, len(codes) - every, every) + rng.integers(-50, 50, len(np.arange(every, len(codes) - every, every)))
    return np.insert(codes, at, codes[at]), np.insert(gaps, at, gaps[at]), at


def test_table_is_kept_for_sqlite_whose_runs_share_most_long_spans(sqlite):
    encoder, runs, _, _ = sqlite
    assert encoder.copies.natural["sqlite"] >= 0.4
    assert [len(c) for c, _ in runs] == [66416, 66450]
    first = ds.load("sqlite", 1)
    assert np.array_equal(runs[0][1], _gaps(first.events.column("ts").to_numpy()))
    assert list(encoder.event.decode(runs[0][0][:3])) == first.events.column("event").to_pylist()[:3]


def test_planted_slips_are_replaced_by_training_events_and_the_rest_stays(sqlite):
    _, runs, held_out, gaps = sqlite
    slipped, slipped_gaps, at = _plant(held_out, gaps)
    assert _unseen(slipped, runs) >= len(at)  # each doubled event makes unseen 8-grams
    result = splice(slipped, slipped_gaps, runs, np.random.default_rng(0))
    # a slip is left where its fix would join copied stretches into a run over 1,023 events
    # (run 3's start-up is training's for thousands of events)
    assert result.spliced >= len(at) - 2 and result.unmatched <= 2
    assert _unseen(result.codes, runs) <= _unseen(held_out, runs) + 16  # at most two slips left
    assert len(result.codes) == len(result.gaps)
    # each replacement is a path between the same anchors, at most twice its stretch (a planted
    # slip's is under 64 events) and the anchors: the run's same phase comes before the closest length
    assert all(length <= 2 * 64 + 2 * 64 for _, _, _, length in result.sources)
    assert abs(len(result.codes) - len(slipped)) <= len(at) * 128
    # what was not spliced is the trace's own: the first 64 events (the first anchor) at least
    assert np.array_equal(result.codes[:64], slipped[:64]) and np.array_equal(result.gaps[1:64], slipped_gaps[1:64])
    assert 0 < result.from_training < len(result.codes) // 2
    # every spliced event, with its anchors, is a verbatim training span
    assert covered(result.codes, np.unique(np.concatenate([kgram_hashes(c, 64) for c, _ in runs])),
                   np.unique(np.concatenate([kgram_hashes(c, 8) for c, _ in runs]))).mean() > 0.99


def test_a_clean_real_run_is_left_as_it_is_and_known_events_are_never_touched(sqlite):
    _, runs, held_out, gaps = sqlite
    clean = splice(runs[0][0][:5000], runs[0][1][:5000], runs, np.random.default_rng(0))
    assert clean.spliced == 0 and np.array_equal(clean.codes, runs[0][0][:5000])
    slipped, slipped_gaps, at = _plant(held_out, gaps)
    kept = splice(slipped, slipped_gaps, runs, np.random.default_rng(0), keep=int(at[3]) + 10)
    assert np.array_equal(kept.codes[:at[3] + 10], slipped[:at[3] + 10])
    assert kept.spliced < splice(slipped, slipped_gaps, runs, np.random.default_rng(0)).spliced


def test_seeded_and_a_trace_with_nothing_in_common_is_unmatched(sqlite):
    _, runs, held_out, gaps = sqlite
    slipped, slipped_gaps, _ = _plant(held_out, gaps, seed=1)
    a = splice(slipped, slipped_gaps, runs, np.random.default_rng(5))
    b = splice(slipped, slipped_gaps, runs, np.random.default_rng(5))
    assert np.array_equal(a.codes, b.codes) and np.array_equal(a.gaps, b.gaps)
    noise = np.random.default_rng(0).integers(2, 40, 3000)
    none = splice(noise, np.ones(3000, dtype=np.int64), runs, np.random.default_rng(0), max_copy=384)
    assert none.spliced == 0 and none.unmatched >= 1 and np.array_equal(none.codes, noise)
    assert splice(held_out[:100], gaps[:100], runs, np.random.default_rng(0)).spliced == 0  # under 2 anchors


def test_run_copy_share_counts_one_runs_spans(sqlite):
    _, runs, held_out, _ = sqlite
    assert run_copy_share(runs[0][0][:3000], runs[0][0], 256) == 1.0
    share = run_copy_share(held_out, runs[0][0], 256)
    assert 0.3 < share < 1.0
    assert run_copy_share(held_out[:100], runs[0][0], 256) == 0.0


def test_a_splice_never_joins_copied_stretches_into_a_run_longer_than_max_copy(sqlite):
    _, runs, _, _ = sqlite
    codes, gaps = runs[0][0][:3000].copy(), runs[0][1][:3000].copy()
    slipped, slipped_gaps = np.insert(codes, 1500, codes[1500]), np.insert(gaps, 1500, gaps[1500])
    # the fix would make 3,000 events of run 1 verbatim: over the bound, so the slip stays
    bounded = splice(slipped, slipped_gaps, runs, np.random.default_rng(0))
    assert bounded.spliced == 0 and bounded.unmatched == 1 and np.array_equal(bounded.codes, slipped)
    # with room for it, the slip goes and the run is itself again
    free = splice(slipped, slipped_gaps, runs, np.random.default_rng(0), max_copy=4000)
    assert free.spliced == 1 and _unseen(free.codes, runs) == 0


def test_spliced_events_come_from_the_stretchs_own_phase_of_the_run(sqlite):
    """sqlite's windows lose event entropy as a run goes on: an iteration from elsewhere in the
    run brings that phase with it, so candidates near the stretch's own place come first."""
    _, runs, held_out, gaps = sqlite
    slipped, slipped_gaps, at = _plant(held_out, gaps, every=400, seed=2)
    result = splice(slipped, slipped_gaps, runs, np.random.default_rng(0))
    assert len(result.sources) == result.spliced >= len(at) - 2
    for start, run, offset, length in result.sources:
        assert np.array_equal(result.codes[start:start + length], runs[run][0][offset:offset + length])
        assert np.array_equal(result.gaps[start:start + length], runs[run][1][offset:offset + length])
    # run 3 is not event for event where the training runs are (its start-up differs), but close:
    # a candidate from anywhere in a 66,000-event run would be ~20,000 events off
    drift = np.array([abs(offset - start) for start, _, offset, _ in result.sources])
    assert np.median(drift) < 2 * PHASE and drift.max() < 8 * PHASE and drift.max() < MAX_DRIFT + PHASE
    # ranked by length alone, candidates come from anywhere in the runs
    anywhere = splice(slipped, slipped_gaps, runs, np.random.default_rng(0), phase=False)
    assert np.median([abs(offset - start) for start, _, offset, _ in anywhere.sources]) > 2 * np.median(drift)


def test_a_stretch_too_long_for_anchors_of_64_is_spliced_between_shorter_ones(sqlite, monkeypatch):
    _, runs, held_out, gaps = sqlite
    # 900 events of noise (and the 7 either side whose 8-grams hold some): more than the 895 that
    # fit between anchors of 64 under MAX_COPY, fewer than between anchors of 32. At event 4,000:
    # before it, run 3 is training's start-up for over 1,023 events, and no splice may join that.
    noise = np.random.default_rng(3).integers(2, 40, 900)
    slipped = np.concatenate([held_out[:4000], noise, held_out[4000:]])
    slipped_gaps = np.concatenate([gaps[:4000], np.ones(900, dtype=np.int64), gaps[4000:]])
    result = splice(slipped, slipped_gaps, runs, np.random.default_rng(0))
    assert result.unmatched == 0 and _unseen(result.codes, runs) <= _unseen(held_out, runs)
    start, run, offset, length = result.sources[0]
    assert start <= 4000 and start + length >= 4000 + 100  # training's events where the noise began
    assert np.array_equal(result.codes[start:start + length], runs[run][0][offset:offset + length])
    monkeypatch.setattr(span_splice, "MIN_ANCHOR", 64)  # anchors of 64 alone: the stretch stays
    assert splice(slipped, slipped_gaps, runs, np.random.default_rng(0)).unmatched == 1


def test_an_indexed_training_set_gives_what_the_runs_give(sqlite):
    _, runs, held_out, gaps = sqlite
    slipped, slipped_gaps, _ = _plant(held_out, gaps, seed=4)
    training = Training(runs)
    a = splice(slipped, slipped_gaps, runs, np.random.default_rng(9))
    b = splice(slipped, slipped_gaps, training, np.random.default_rng(9))
    c = splice(slipped, slipped_gaps, training, np.random.default_rng(9))  # indexes reused
    assert np.array_equal(a.codes, b.codes) and np.array_equal(b.codes, c.codes) and a.sources == c.sources
    assert training.most_copied(held_out, 256) == max(run_copy_share(held_out, c_, 256) for c_, _ in runs)
    assert training.least_shared(256) == least_shared([c_ for c_, _ in runs], 256)


def test_a_stretch_no_anchors_match_is_walked_through_training_in_pieces(sqlite):
    """pybench's and build's sampled traces are mostly stretches too long for anchors; the walk
    puts training's events there piece by piece, each piece going on from another place the last
    64 events occur, and ends where the right anchor follows in training."""
    _, runs, held_out, gaps = sqlite
    noise = np.random.default_rng(3).integers(2, 40, 2500)  # 2,500 events no anchors can span
    codes = np.concatenate([held_out[:3000], noise, held_out[3000:]])
    codes_gaps = np.concatenate([gaps[:3000], np.ones(2500, dtype=np.int64), gaps[3000:]])
    training = Training(runs)
    left = splice(codes, codes_gaps, training, np.random.default_rng(0))  # no walk: the noise stays
    assert left.walked == 0 and left.unmatched >= 1 and np.array_equal(left.codes[3000:5500], noise)
    result = splice(codes, codes_gaps, training, np.random.default_rng(0), walk=64)
    assert result.walked >= 1 and len(result.sources) >= 10
    pieces = result.sources[:1]  # the noise's walk: the pieces that follow on from the first, output-wise
    for source in result.sources[1:]:
        if source[0] != pieces[-1][0] + pieces[-1][3]:
            break
        pieces.append(source)
    first, last = pieces[0][0], pieces[-1][0] + pieces[-1][3]
    assert first <= 3000 and abs(last - 5500) < 4 * 64  # about the stretch's length
    for start, run, offset, length in pieces:  # training verbatim, from near its own place in the run
        assert np.array_equal(result.codes[start:start + length], runs[run][0][offset:offset + length])
        assert np.array_equal(result.gaps[start:start + length], runs[run][1][offset:offset + length])
        assert abs(offset - start) <= MAX_DRIFT
    # every 64-event span through the walk and its two ends occurs in training, with no unseen 8-gram
    ok = covered(result.codes, training.grams(64), training.grams(8))
    assert ok[first - 64:last + 64].all()
    # pieces of at least half of 64 events (a piece runs on until the draw leaves its place),
    # and none joins into a verbatim training run over MAX_COPY events
    assert len(pieces) >= 5 and np.min([length for *_, length in pieces[:-1]]) >= 32
    long_runs = in_sorted(kgram_hashes(result.codes, MAX_COPY + 1), training.grams(MAX_COPY + 1))
    assert not long_runs[max(0, first - MAX_COPY):last].any()
    again = splice(codes, codes_gaps, Training(runs), np.random.default_rng(0), walk=64)
    assert np.array_equal(again.codes, result.codes) and again.sources == result.sources


def test_a_walk_with_a_drift_of_its_own_keeps_the_order_of_the_run_it_began_in(sqlite):
    """`walk_drift`: each jump lands within that many events of where the walk would be had it
    stayed in the run it began in, so its pieces keep that run's order (with the splice's
    alignment a jump lands anywhere within 4,096 events of the stretch's place: pieces thousands
    of events apart, repeating and skipping what the run holds once); `walk_context`: the events
    matched at each jump (16 branches often enough to walk sqlite within 64 events)."""
    _, runs, held_out, gaps = sqlite
    noise = np.random.default_rng(3).integers(2, 40, 2500)
    codes = np.concatenate([held_out[:3000], noise, held_out[3000:]])
    codes_gaps = np.concatenate([gaps[:3000], np.ones(2500, dtype=np.int64), gaps[3000:]])
    training = Training(runs)
    lags = {}
    for drift, aligned in ((None, False), (64, False), (64, True)):
        result = splice(codes, codes_gaps, training, np.random.default_rng(0), walk=64, walk_context=16,
                        walk_drift=drift, walk_aligned=aligned)
        assert result.walked >= 1 and len(result.sources) >= 10
        for start, run, offset, length in result.sources:  # verbatim training still
            assert np.array_equal(result.codes[start:start + length], runs[run][0][offset:offset + length])
        lag = np.array([offset - start for start, _, offset, _ in result.sources])
        lags[drift, aligned] = lag.max() - lag.min()
        again = splice(codes, codes_gaps, Training(runs), np.random.default_rng(0), walk=64, walk_context=16,
                       walk_drift=drift, walk_aligned=aligned)
        assert again.sources == result.sources  # seeded
    assert max(lags[64, False], lags[64, True]) <= 64 < 1000 < lags[None, False]

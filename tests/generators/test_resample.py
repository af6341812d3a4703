"""Resample (the span splice's walk with no model): conformance, and on real runs its output is
training's events in pieces, walked where the runs branch, held to the splice's copy bounds."""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc
import pytest
from generators.conformance import check_generator

import tracesynth.datasets as ds
from tracesynth.errors import ConfigError
from tracesynth.evaluation.windows import in_sorted, kgram_hashes
from tracesynth.experiments.peers import make_peer
from tracesynth.generators import make
from tracesynth.generators.diffusion import SPLICE_MARGIN
from tracesynth.generators.resample import Resample
from tracesynth.sampling.span_splice import ANCHOR, MAX_COPY, MAX_DRIFT


def _runs(workload: str, runs=(1, 2), limit: int | None = None):
    out = []
    for r in runs:
        trace = ds.load(workload, r)
        trace = trace.slice(0, limit) if limit else trace
        trace.meta.workload = workload
        out.append(trace)
    return out


@pytest.fixture(scope="module")
def build():
    train = _runs("build")
    return train, Resample(random_state=0).fit(train)


def test_conformance():
    """On a real run (a constructed random chain has no 64-gram twice: nowhere to branch)."""
    check_generator(lambda seed: Resample(piece=64, random_state=seed), _runs("sqlite", (1,), 12000))


@pytest.mark.parametrize("params", [{"piece": 1}, {"piece": 511}, {"piece": 64.0}, {"piece": True},
                                    {"channels": "all"}, {"context": 0}, {"context": 257}, {"context": 8.0},
                                    {"drift": 0}, {"drift": 64.0}, {"aligned": 1},
                                    {"aligned": "nearest"}])
def test_bad_parameters_are_refused(params):
    with pytest.raises(ConfigError):
        Resample(**params).fit(_runs("sqlite", (1,), 3000))


def test_a_trace_is_training_verbatim_in_pieces_walked_where_the_runs_branch(build):
    train, generator = build
    trace = generator.sample(32768, seed=0)
    extra = trace.meta.extra
    assert extra["generator"] == "resample" and extra["segments"] == 1 and extra["chunks_over_max_copy"] == 0
    training = generator.training_["build"]
    vocabulary = np.unique(np.concatenate([t.column("event").to_numpy(zero_copy_only=False).astype(str)
                                           for t in train]))
    codes = np.searchsorted(vocabulary, trace.column("event").to_numpy(zero_copy_only=False).astype(str))
    # begins as a training run begins; every 64-event span occurs in training (one walk, no restart)
    first = [t.column("event").to_pylist()[:ANCHOR] for t in train]
    assert trace.column("event").to_pylist()[:ANCHOR] in first
    assert in_sorted(kgram_hashes(codes, ANCHOR), training.grams(ANCHOR)).all()
    # but no verbatim training run over MAX_COPY events, and a run's copy share within the bound
    assert not in_sorted(kgram_hashes(codes, MAX_COPY + 1), training.grams(MAX_COPY + 1)).any()
    assert extra["within_bound"] and training.most_copied(codes, 256) <= training.least_shared(256) + SPLICE_MARGIN
    assert extra["copy_share_256_one_run"] == pytest.approx(training.most_copied(codes, 256), abs=1e-4)
    # the gaps are training's: every gap of the trace is one a training run has before the same event
    gaps = np.diff(trace.column("ts").to_numpy())
    real = {(e, g) for t in train for e, g in zip(t.column("event").to_pylist()[1:], np.diff(t.column("ts").to_numpy()))}
    assert all((e, int(g)) in real for e, g in zip(trace.column("event").to_pylist()[1:], gaps))
    # light: event types and times only
    assert all(trace.column(c).null_count == len(trace) for c in ("tid", "cpu", "procname", "ret", "payload"))
    # the walk leaves a run where the runs branch: not one long copy of either
    assert generator.sample(32768, seed=1).column("event") != trace.column("event")


def test_pieces_stay_near_their_phase_of_the_run(build):
    """Each piece comes from within MAX_DRIFT of its place in the output (a run changes as it goes)."""
    from tracesynth.sampling.span_splice import resample

    _, generator = build
    training = generator.training_["build"]
    walked = resample(training, 20000, 128, np.random.default_rng(4))
    place = 0
    for a, b in walked.steps:
        run = int(training.run_of(a))
        assert b <= training.ends[run]
        assert abs(a - int(training.offsets[run]) - place) <= MAX_DRIFT + 2 * 128
        place += b - a
    assert walked.length == place >= 20000 and len(walked.steps) >= 20000 // 256
    again = resample(training, 20000, 128, np.random.default_rng(4))
    assert again.steps == walked.steps
    # it leaves a run only where the runs branch: after k events that occur elsewhere followed by
    # another event, and lands where those k events occur
    branches = set(training.branches(ANCHOR).tolist())
    codes = training.codes
    for (_, b), (a, _) in zip(walked.steps, walked.steps[1:]):
        if a != b:
            assert b in branches and np.array_equal(codes[b - ANCHOR:b], codes[a - ANCHOR:a])


def test_a_shorter_context_jumps_among_more_places_and_copies_fewer_long_spans():
    """`context` is the walk's privacy dial: a jump needs only the last `context` events to match,
    so the walk branches more often (sqlite: 0.39 of its 256-event spans from training with 64,
    0.02-0.04 with 8, where run 3 shares 0.88)."""
    from tracesynth.generators.resample import CONTEXT

    assert CONTEXT == ANCHOR  # the splice's anchor: the default walk is the splice's
    train = _runs("sqlite", (1, 2), 30000)
    wide, narrow = (Resample(context=c, random_state=0).fit(train) for c in (64, 8))
    a, b = wide.sample(20000, seed=0), narrow.sample(20000, seed=0)
    assert (a.meta.extra["context"], b.meta.extra["context"]) == (64, 8)
    training = narrow.training_["sqlite"]
    assert len(training.branches(8)) > 2 * len(training.branches(64))
    vocabulary = np.unique(np.concatenate([t.column("event").to_numpy(zero_copy_only=False).astype(str) for t in train]))
    shares = [training.most_copied(np.searchsorted(vocabulary, t.column("event").to_numpy(zero_copy_only=False).astype(str)),
                                   256) for t in (a, b)]
    assert shares[1] < shares[0] / 2
    # every 8-event span of the narrow walk still occurs in training
    codes = np.searchsorted(vocabulary, b.column("event").to_numpy(zero_copy_only=False).astype(str))
    assert in_sorted(kgram_hashes(codes, 8), training.grams(8)).all()


def test_a_short_drift_keeps_the_walk_in_the_runs_order():
    """`drift`: a jump lands within that many events of the output's own position in the run.
    With the splice's 4,096 a jump in pybench's repeated structures (its imports) lands thousands
    of events back or ahead, so the walk repeats and skips what the runs hold once; with 64 every
    event sits within 64 of its place in the run."""
    from tracesynth.generators.resample import DRIFT
    from tracesynth.sampling.span_splice import resample

    assert DRIFT == MAX_DRIFT  # the splice's: the default walk is the splice's
    train = _runs("pybench", (1, 2), 20000)
    generator = Resample(drift=64, random_state=0).fit(train)
    assert generator.sample(2000, seed=0).meta.extra["drift"] == 64
    training = generator.training_["pybench"]
    lags = {}
    for drift in (64, 4096):
        walked = resample(training, 12000, 128, np.random.default_rng(3), drift=drift)
        assert walked.segments == 1
        rows = np.concatenate([np.arange(a, b) for a, b in walked.steps])
        lags[drift] = np.abs(rows - training.offsets[training.run_of(rows)] - np.arange(len(rows))).max()
    assert lags[64] <= 64 < 1000 < lags[4096]


def test_an_aligned_walk_branches_between_runs_not_back_or_ahead_within_one():
    """`aligned`: a jump draws among one place per training run, the nearest the output's own
    position, so the walk moves between runs at the same moment of each. Unaligned, a jump in
    pybench's repeated structures lands back or ahead in the same run (repeating or skipping
    what it holds once) as often as in the other run."""
    from tracesynth.sampling.span_splice import _near, resample

    train = _runs("pybench", (1, 2), 20000)
    generator = Resample(context=16, drift=64, aligned=True, random_state=0).fit(train)
    assert generator.sample(2000, seed=0).meta.extra["aligned"] is True
    training = generator.training_["pybench"]
    # _near: of each run's places within the drift, the nearest (the earlier of two as near)
    first = int(training.offsets[1])
    where = np.array([10, 40, 60, 90, first + 50, first + 70, first + 400])
    runs = training.run_of(where)
    near, near_runs = _near(where, runs, 50, training, drift=64, aligned=True)
    assert near.tolist() == [40, first + 50] and near_runs.tolist() == [0, 1]
    assert _near(where, runs, 50, training, drift=64)[0].tolist() == [10, 40, 60, 90, first + 50, first + 70]
    # "shared": aligned where both runs hold places; where one run alone does, all of them
    assert _near(where, runs, 50, training, drift=64, aligned="shared")[0].tolist() == [40, first + 50]
    alone = where[:4]
    assert _near(alone, runs[:4], 50, training, drift=64, aligned="shared")[0].tolist() == [10, 40, 60, 90]
    assert _near(alone, runs[:4], 50, training, drift=64, aligned=True)[0].tolist() == [40]
    within = {}
    for aligned in (False, True):
        walked = resample(training, 12000, 128, np.random.default_rng(3), k=16, drift=64, aligned=aligned)
        a, b = np.array(walked.steps).T
        jumps = a[1:] != b[:-1]
        same_run = jumps & (training.run_of(a[1:]) == training.run_of(b[:-1] - 1))
        # events skipped or repeated by jumps within a run; jumps in all
        within[aligned] = int(np.abs(a[1:] - b[:-1])[same_run].sum()), int(jumps.sum())
    # aligned, a jump within a run only makes up what the other run's timing shifted (8 such
    # jumps of 2-30 events against 27 of up to 116, seed 3); it still branches as often
    assert within[True][0] < within[False][0] / 4 and within[True][1] > 20


def test_branch_places_are_where_the_same_context_goes_on_differently():
    from tracesynth.sampling.span_splice import Training

    runs = [(np.array([0, 1, 2, 0, 1, 3, 4, 0, 1, 2]), np.ones(10, dtype=np.int64)), (np.array([5, 1, 3]), np.ones(3, dtype=np.int64))]
    # (0, 1) goes on with 2, 3 and 2; (1, 2) with 0 and, at run 1's end, nothing; (1, 3) with 4 and,
    # at run 2's end, nothing; (2, 0), (3, 4), (4, 0) and (5, 1) occur once: no branch after them
    assert Training(runs).branches(2).tolist() == [2, 3, 5, 6, 9, 10, 13]


def test_full_copies_whole_rows(build):
    """Every channel filled from training (rows whole but for thread ids, renamed across the walk's
    jumps: tests/sampling/test_thread_seams.py)."""
    train, _ = build
    trace = Resample(channels="full", random_state=0).fit(train).sample(5000, seed=2)
    assert trace.column("tid").null_count == 0 and trace.column("cpu").null_count == 0
    rows = {(r["cpu"], r["procname"], r["event"]) for t in train for r in t.events.to_pylist()}
    assert all((r["cpu"], r["procname"], r["event"]) in rows for r in trace.events.to_pylist())


def test_a_run_too_short_to_walk_begins_again_at_a_run_start():
    """Where the walk cannot go on (the end of a run whose last 64 events occur nowhere else), the
    next walk begins at a run's start: the length asked is always met."""
    train = _runs("gzip", (1,), 3000)
    trace = Resample(random_state=0).fit(train).sample(10000, seed=0)
    assert len(trace) == 10000 and trace.meta.extra["segments"] >= 2
    assert trace.column("event").to_pylist()[:100] == train[0].column("event").to_pylist()[:100]


def test_registered_as_a_baseline_and_a_peer():
    train = _runs("sqlite", (1,), 4000)
    assert type(make("resample", piece=32)) is Resample
    peer = make_peer("resample", {"piece": 64}, random_state=3).fit(train)
    assert peer.sample(500).meta.extra["piece"] in (64, 32)
    assert set(pc.unique(peer.sample(500).column("event")).to_pylist()) <= set(pc.unique(train[0].column("event")).to_pylist())

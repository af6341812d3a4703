"""The copy guard's edits on real tar runs: they break copied spans and stay within training's grammar."""

from __future__ import annotations

import numpy as np
import pytest

import tracesynth.datasets as ds
from tracesynth.encoding.trace_encoder import TraceEncoder
from tracesynth.sampling.copy_guard import CopyGuard, Edit, _shift_ends


@pytest.fixture(scope="module")
def tar_guard():
    runs = [ds.load("tar", r) for r in (1, 2)]
    encoder = TraceEncoder("light").fit(runs)
    guard = CopyGuard(encoder.copies, encoder.support, "tar")
    return guard, encoder.encode(runs[0])["event"]


def apply(codes: np.ndarray, edits: list[Edit], hole: int = -1) -> np.ndarray:
    """The edits right to left, as the sampler does; the position a shift frees before a known
    event (which the sampler draws again) gets `hole`."""
    out = codes.copy()
    for e in edits:
        stop = len(out) if e.until is None else e.until
        if e.kind == "replace":
            out[e.position] = e.event
        elif e.kind == "insert":
            out[e.position + 1:stop] = out[e.position:stop - 1].copy()
            out[e.position] = e.event
        else:
            out[e.position:stop - 1] = out[e.position + 1:stop].copy()
        if e.kind != "replace" and e.until is not None:
            out[stop - 1] = hole
    return out


def test_edits_break_a_replayed_training_window_without_unseen_grams(tar_guard):
    guard, run1 = tar_guard
    window = run1[:4096].copy()
    assert guard.copied(window).all()  # a verbatim replay of a training start-up
    edits = guard.plan(window, np.ones(len(window), bool), np.random.default_rng(0))
    positions = [e.position for e in edits]
    assert positions == sorted(positions, reverse=True) and len(set(positions)) == len(positions)
    # about one edit per 256 copied events, each at a branch point
    assert len(window) // 256 - 2 <= len(edits) <= len(window) // 128
    assert guard.spans.branch_points(window, "tar")[positions].all()
    assert {e.kind for e in edits} <= {"insert", "replace", "delete"}
    edited = apply(window, edits)
    # the last event of a window that lost one to a deletion is redrawn by the sampler: judge
    # the grams before it
    body = edited[:-len(edits)]
    assert guard.copied(edited).mean() < 0.2  # some edits make a span match the other run
    assert not guard.support.novel(body, "tar").any()


def test_repeated_rounds_leave_nothing_copied_and_known_events_alone(tar_guard):
    guard, run1 = tar_guard
    window = run1[8000:12096].copy()
    free = np.ones(len(window), bool)
    free[:1024] = False  # a known prefix, as in every window after the first
    rng = np.random.default_rng(1)
    for _ in range(6):
        edits = guard.plan(window, free, rng)
        if not edits:
            break
        assert min(e.position for e in edits) >= 1024
        window = apply(window, edits)
    assert np.array_equal(window[:1024], run1[8000:9024])
    starts = np.nonzero(guard.copied(window))[0]
    assert (starts < 1024).all()  # only spans that lie mostly in the known prefix can remain


def test_plans_are_seeded_and_an_uncopied_window_gets_none(tar_guard):
    guard, run1 = tar_guard
    window = run1[:2048]
    free = np.ones(len(window), bool)
    a = guard.plan(window, free, np.random.default_rng(5))
    b = guard.plan(window, free, np.random.default_rng(5))
    assert a == b and a
    shuffled = np.random.default_rng(0).permutation(window)
    assert guard.plan(shuffled, free, np.random.default_rng(5)) == []


def test_shifts_end_before_known_events_more_than_k_away():
    free = np.ones(30, bool)
    free[:3] = False  # a known prefix
    free[[15, 20]] = False  # two anchors
    ends = _shift_ends(free, 4)
    assert (ends[:3] == -1).all() and ends[15] == -1 and ends[20] == -1
    assert ends[3:11].tolist() == [15] * 8  # more than 4 events before the anchor at 15
    assert (ends[11:15] == -1).all()  # too close: the grams next to it would change unchecked
    assert (ends[16:20] == -1).all()
    assert (ends[21:] == 30).all()  # nothing known after: the shift runs to the window's end
    assert (_shift_ends(np.ones(5, bool), 4) == 5).all()


def test_known_events_inside_a_copied_window_stay_put_and_shifts_break_spans_between(tar_guard):
    guard, run1 = tar_guard
    window = run1[:4096].copy()
    free = np.ones(len(window), bool)
    anchors = np.arange(500, 4096, 700)  # known events the scaffold put
    free[anchors] = False
    rng = np.random.default_rng(2)
    edits = guard.plan(window, free, rng)
    shifts = [e for e in edits if e.kind != "replace"]
    assert shifts and any(e.until is not None for e in shifts)  # not only replacements
    for e in shifts:
        later = anchors[anchors > e.position]
        assert e.until == (int(later[0]) if len(later) else None)
        assert e.until is None or e.until - e.position > guard.support.k
    edited = apply(window, edits)
    assert np.array_equal(edited[anchors], window[anchors])
    assert guard.copied(np.where(edited < 0, 0, edited)).mean() < 0.2
    holes = np.flatnonzero(edited < 0)  # drawn again by the sampler: judge the grams between
    pieces = np.split(edited, np.sort(np.concatenate([holes, holes + 1])))
    assert not any(guard.support.novel(piece, "tar").any()
                   for piece in pieces if len(piece) > guard.support.k)

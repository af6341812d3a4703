"""The cadence scaffold: where it places a rhythm's anchors, what it rules out, how it mends members,
and that a model which cannot count still gives a steady rhythm with it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tracesynth.datasets as ds
from tracesynth import Trace, TraceMeta
from tracesynth.encoding.trace_encoder import TraceEncoder
from tracesynth.errors import ConfigError
from tracesynth.sampling.cadence_scaffold import ROOM, CadenceScaffold, Plan, scaffolded

N = 4096


@pytest.fixture(scope="module")
def fileio():
    encoder = TraceEncoder("light").fit([ds.load("fileio", r) for r in (2, 3)])
    (rhythm,) = encoder.cadence.of("fileio")
    code = {name: int(encoder.event.encode(np.array([name]))[0]) for name in (
        "syscall_entry_write", "syscall_exit_write", "syscall_entry_fdatasync", "syscall_exit_fdatasync",
        "sched_switch", "syscall_exit_read", "syscall_entry_fsync", "syscall_exit_fsync")}
    return rhythm, code


def writes(code, n=N) -> np.ndarray:
    """A window of write pairs: what fileio does between syncs."""
    return np.where(np.arange(n) % 2 == 0, code["syscall_entry_write"], code["syscall_exit_write"]).astype(np.int64)


def in_phase(rhythm, seed: int, last: int, left: int, pending: int) -> CadenceScaffold:
    """A scaffold in the middle of a phase: last anchor at `last`, `left` to come from `pending`."""
    scaffold = CadenceScaffold([rhythm], seed=seed)
    scaffold.last[rhythm.event], scaffold.left[rhythm.event], scaffold.pending[rhythm.event] = last, left, pending
    return scaffold


def anchors(plan: Plan, event: int) -> list[int]:
    return sorted(p for p, e in plan.places.items() if e == event)


def test_auto_places_rhythms_with_closers_only(fileio):
    rhythm, _ = fileio
    stream = TraceEncoder("light").fit([ds.load("stream", r) for r in (1, 2)]).cadence.of("stream")
    assert stream and not any(r.period for r in stream)  # its writes: a plain gap rhythm
    assert scaffolded([rhythm, *stream], "auto") == [rhythm]  # fileio's syncs close a file every 20th
    assert scaffolded([rhythm, *stream], True) == [rhythm, *stream]
    assert scaffolded([rhythm, *stream], False) == []
    for bad in ("on", 1, None):
        with pytest.raises(ValueError, match="cadence must be true, false or 'auto'"):
            scaffolded([rhythm], bad)


def test_a_rhythm_the_model_starts_goes_on_at_training_gaps(fileio):
    rhythm, code = fileio
    scaffold = CadenceScaffold([rhythm], seed=0)
    plan = scaffold.plan(0, 0, N)
    assert not plan.places and not plan.bans  # nothing to continue yet: the model draws freely
    drawn = writes(code)
    drawn[[700, 950, 1010]] = rhythm.event  # the model's syncs, irregular
    new = scaffold.restart(plan, drawn, 0, 0)
    placed = anchors(new, rhythm.event)
    assert placed[0] == 700 and len(placed) >= 6  # its first one stays, the rest follow the table
    assert set(np.diff(placed).tolist()) <= set(rhythm.gaps.tolist())
    ban = new.bans[rhythm.event]
    assert not ban[placed].any() and ban.sum() == N - len(placed)  # nowhere else in the window
    for closer in rhythm.closers.tolist():  # the scaffold puts them; before the phase, the start-up's own
        assert new.bans[closer][700:].all() and not new.bans[closer][:700].any()
    exit_code, lowest, highest = rhythm.members[0].tolist()
    zones = new.zones[exit_code]
    assert [a for a, _, _ in zones] == placed
    assert all(lo == a + 1 and hi == min(N, a + highest + 1) for a, lo, hi in zones)
    assert not new.bans[exit_code][701:701 + highest].any() and new.bans[exit_code][701 + highest:placed[1]].all()
    # the next window goes on from the one already drawn past this window's end
    scaffold.observe(new, drawn, 0, 0)
    nxt = scaffold.plan(N - N // 4, N // 4, N)
    first = anchors(nxt, rhythm.event)[0] + N - N // 4
    assert first - placed[-1] in set(rhythm.gaps.tolist())
    assert not nxt.bans[rhythm.event][:N // 4].any()  # the known prefix is never touched


def test_a_phase_ends_after_its_drawn_length_and_the_anchor_is_free_again(fileio):
    rhythm, code = fileio
    scaffold = in_phase(rhythm, 3, last=100, left=2, pending=640)
    plan = scaffold.plan(0, 0, N)
    placed = anchors(plan, rhythm.event)
    assert placed[:1] == [640] and len(placed) == 2 and plan.left[rhythm.event] == 0
    ban = plan.bans[rhythm.event]
    assert ban[placed[1] + 1:placed[1] + rhythm.low].all() and not ban[placed[1] + rhythm.low:].any()
    drawn = writes(code)
    drawn[placed] = rhythm.event
    scaffold.observe(plan, drawn, 0, 0)
    assert scaffold.plan(N - 1024, 1024, N).bans == {}  # the model decides whether it goes on


def test_same_seed_same_places():
    encoder = TraceEncoder("light").fit([ds.load("stream", r) for r in (1, 2)])
    rhythms = encoder.cadence.of("stream")
    assert rhythms  # stream writes its results every ~1,670 events
    plans = []
    for _ in range(2):
        scaffold = CadenceScaffold(rhythms, seed=11)
        drawn = np.zeros(N, dtype=np.int64)
        drawn[300] = rhythms[0].event
        plans.append(scaffold.restart(scaffold.plan(0, 0, N), drawn, 0, 0).places)
    assert plans[0] == plans[1] and len(plans[0]) >= 2


def test_settle_drops_a_second_exit_moves_a_late_one_and_puts_a_missing_one(fileio):
    rhythm, code = fileio
    scaffold = in_phase(rhythm, 0, last=0, left=3, pending=1600)
    plan = scaffold.plan(512, 512, N)
    a, b, c = anchors(plan, rhythm.event)
    entry, exit_, switch = rhythm.event, code["syscall_exit_fdatasync"], code["sched_switch"]
    clean = writes(code)
    for p in (a, b, c):
        clean[p:p + 3] = entry, switch, exit_
    assert CadenceScaffold.settle(plan, clean, 512) is None
    drawn = writes(code)
    drawn[[a, b, c]] = entry
    # a: its exit after three switches, and a second exit further on
    drawn[a + 1:a + 4], drawn[a + 4], drawn[a + 10] = switch, exit_, exit_
    # b: one switch, then the model wrote on and closed the sync late (a write inside it)
    drawn[b + 1], drawn[b + 20] = switch, exit_
    # c: one switch and no exit at all
    drawn[c + 1] = switch
    index, put = CadenceScaffold.settle(plan, drawn, 512)
    assert (index[:512] == np.arange(512)).all()  # the known prefix stays
    assert index[-1] == -1  # the dropped exit's place: the window's last event is drawn again
    settled = np.where(index >= 0, drawn[np.maximum(index, 0)], -1)
    for q, event in put.items():
        settled[q] = event
    assert list(put.values()) == [exit_]
    a2, b2, c2 = np.flatnonzero(settled == entry)
    assert a2 == a and b2 == b - 1 and c2 == c - 1  # what follows the dropped exit moved up one
    assert list(settled[a:a + 5]) == [entry, switch, switch, switch, exit_]
    assert (settled[a + 5:a + 12] != exit_).all()  # the second exit is gone
    # b's exit moved before the write; c's exit put there, the rest moved down one
    assert list(settled[b2:b2 + 4]) == [entry, switch, exit_, drawn[b + 2]]
    assert list(settled[c2:c2 + 4]) == [entry, switch, exit_, drawn[c + 2]]
    assert (np.isin(settled, [exit_]).sum(), (settled == entry).sum()) == (3, 3)


def test_the_20th_sync_of_a_phase_gets_its_fsync(fileio):
    """fileio finishes a file every 20 syncs: an fsync right after the sync's exit, the file's
    close, the next one's openat. The scaffold puts them there at a training layout (the model
    never draws the rare call), the events between and after them drawn again, the rest of the
    window moved down."""
    rhythm, code = fileio
    scaffold = in_phase(rhythm, 0, last=0, left=3, pending=1600)
    scaffold.total[rhythm.event] = 20  # these are the phase's 18th, 19th and 20th
    plan = scaffold.plan(512, 512, N)
    a, b, c = anchors(plan, rhythm.event)
    assert [p for p, *_ in plan.closing] == [c]
    fsync_in, fsync_out = code["syscall_entry_fsync"], code["syscall_exit_fsync"]
    assert plan.bans[fsync_in][512:c + rhythm.low].all() and not plan.bans[fsync_in][:512].any()
    entry, exit_, switch = rhythm.event, code["syscall_exit_fdatasync"], code["sched_switch"]
    drawn = writes(code)
    for p in (a, b, c):
        drawn[p:p + 3] = entry, switch, exit_
    index, put = CadenceScaffold.settle(plan, drawn, 512)
    layout = plan.closing[0][3]
    q, span = c + 2 + int(layout[0]), int(layout[-1]) + 1
    assert put == dict(zip((q + layout[1:]).tolist(), rhythm.closers.tolist()))
    assert put[q] == fsync_in and fsync_out in put.values()
    assert (index[:q] == np.arange(q)).all()  # up to the sync's exit nothing moves
    assert (index[q:q + span + ROOM] < 0).all()  # the closers, what lies between and after: drawn
    assert (index[q + span + ROOM:] == np.arange(q + ROOM, N - span)).all()  # the rest moved down
    own = q + np.arange(len(rhythm.closers))
    drawn[own[:2]] = fsync_in, fsync_out  # a model that only synced the file: its closers still put
    assert CadenceScaffold.settle(plan, drawn, 512) is not None
    drawn[own] = rhythm.closers  # a model that closed the file itself is left alone
    assert CadenceScaffold.settle(plan, drawn, 512) is None
    drawn[own] = writes(code)[own]
    tight = plan.copy()  # a closing sync at the window's end: no room for its closers here, left as drawn
    tight.closing = [(N - 10, *plan.closing[0][1:])]
    drawn[N - 10:N - 7] = entry, switch, exit_
    assert CadenceScaffold.settle(tight, drawn, 512) is None


def test_a_closing_sync_waits_for_room_and_a_phase_ended_early_is_closed(fileio):
    """The scaffold does not place a closing sync where its closers would not fit before the
    window's end: it comes first in the next window. A phase the model ends early (it went on
    to reading) ends with its closers, as every training phase does."""
    rhythm, code = fileio
    room = CadenceScaffold._closing_room(rhythm)
    scaffold = in_phase(rhythm, 0, last=0, left=1, pending=N - room + 5)
    scaffold.total[rhythm.event] = 20
    plan = scaffold.plan(0, 0, N)
    assert anchors(plan, rhythm.event) == [] and not plan.closing
    assert plan.left[rhythm.event] == 1 and plan.pending[rhythm.event] == N - room + 5
    follow = scaffold.plan(N - 1024, 1024, N)  # the next window: its first free position
    assert anchors(follow, rhythm.event) == [1024] and [p for p, *_ in follow.closing] == [1024]
    scaffold = in_phase(rhythm, 0, last=0, left=9, pending=600)
    scaffold.total[rhythm.event] = 20  # the 12th to the 20th: the 20th is past this window
    plan = scaffold.plan(0, 0, N)
    placed = anchors(plan, rhythm.event)
    assert not plan.closing
    drawn = writes(code)
    drawn[placed] = rhythm.event
    drawn[placed[2] - 20:placed[2]] = code["syscall_exit_read"]  # the model reads before the third
    ended = scaffold.out_of_phase(plan, drawn, 0, 0)
    assert anchors(ended, rhythm.event) == placed[:2] and [p for p, *_ in ended.closing] == [placed[1]]


def test_an_anchor_among_events_training_never_has_before_it_ends_the_phase(fileio):
    rhythm, code = fileio
    scaffold = in_phase(rhythm, 0, last=0, left=9, pending=600)
    plan = scaffold.plan(0, 0, N)
    placed = anchors(plan, rhythm.event)
    drawn = writes(code)
    drawn[placed] = rhythm.event
    assert scaffold.out_of_phase(plan, drawn, 0, 0) is None  # each sync among writes
    drawn[placed[1] - 5] = code["syscall_exit_read"]  # one stray event does not end a phase
    assert scaffold.out_of_phase(plan, drawn, 0, 0) is None
    drawn[placed[2] - 20:placed[2]] = code["syscall_exit_read"]  # the model went on to reading there
    ended = scaffold.out_of_phase(plan, drawn, 0, 0)
    assert anchors(ended, rhythm.event) == placed[:2] and ended.left[rhythm.event] == 0
    assert not ended.bans[rhythm.event][placed[1] + rhythm.low:].any()


# --- end to end: a tiny model that cannot count to 130 keeps a 130-event rhythm with the scaffold

def _synced(n_syncs: int = 40, seed: int = 0) -> Trace:
    """Write pairs with a sync (entry, a switch, exit) every 128-136 events."""
    rng = np.random.default_rng(seed)
    events = []
    for _ in range(n_syncs):
        events += ["syscall_entry_write", "syscall_exit_write"] * int(rng.integers(64, 68))
        events += ["syscall_entry_fdatasync", "sched_switch", "syscall_exit_fdatasync"]
    ts = np.cumsum(rng.integers(100, 200, len(events)))
    return Trace.from_pydict({"ts": ts.tolist(), "event": events}, TraceMeta(workload="sync"))


def _tiny_model(traces: list[Trace]):
    """(model, encoder) of a tiny light model with a 64-event window, trained on `traces`."""
    from tracesynth.model.config import SIZES, ModelConfig, TrainConfig
    from tracesynth.model.train import train

    torch.set_num_threads(1)
    model, encoder, _ = train(traces, None, channels="light", model_config=ModelConfig(context=64, **SIZES["tiny"]),
                              train_config=TrainConfig(steps=300, batch_size=8, lr=5e-3, val_every=0,
                                                       checkpoint_every=0))
    return model, encoder


@pytest.fixture(scope="module")
def tiny():
    return _tiny_model([_synced(seed=s) for s in (1, 2)])


def test_the_scaffold_gives_a_model_that_cannot_count_a_steady_rhythm(tiny):
    from tracesynth.sampling import generate

    model, encoder = tiny
    (rhythm,) = encoder.cadence.of("sync")
    assert encoder.event.decode(np.array([rhythm.event]))[0] == "syscall_entry_fdatasync"
    gaps = {}
    for cadence in (False, True):
        trace = generate(model, encoder, 2400, "sync", steps=8, seed=5, cadence=cadence)
        events = np.array(trace.events.column("event").to_pylist())
        assert len(events) == 2400
        syncs = np.flatnonzero(events == "syscall_entry_fdatasync")
        gaps[cadence] = np.diff(syncs)
        if cadence:  # every sync has its exit, and nothing but the switch between them
            entries = np.flatnonzero(events == "syscall_entry_fdatasync")
            exits = np.flatnonzero(events == "syscall_exit_fdatasync")
            assert len(exits) >= len(entries) - 1 and (events[entries[:len(exits)] + 1] == "sched_switch").mean() > 0.9
    steady = (gaps[True] >= rhythm.low) & (gaps[True] <= rhythm.high)
    # from the model's first sync on (where it puts it: 637 here, the same with or without)
    assert len(gaps[True]) >= (2400 - syncs[0]) // 140 and steady.mean() >= 0.9, gaps[True]
    off = (gaps[False] < rhythm.low) | (gaps[False] > rhythm.high)
    assert off.mean() > 0.3, gaps[False]  # without it: a 64-event window does not count to 130
    again = generate(model, encoder, 2400, "sync", steps=8, seed=5, cadence=True)
    assert again.to_pandas().equals(generate(model, encoder, 2400, "sync", steps=8, seed=5, cadence=True).to_pandas())
    # a plain gap rhythm (no closers) is the model's own by default ("auto")
    auto = generate(model, encoder, 2400, "sync", steps=8, seed=5, cadence="auto").events.column("event")
    assert np.array_equal(np.diff(np.flatnonzero(np.array(auto.to_pylist()) == "syscall_entry_fdatasync")), gaps[False])
    with pytest.raises(ConfigError, match="cadence must be true, false or 'auto', got 'always'"):
        generate(model, encoder, 64, "sync", steps=2, cadence="always")


def _filed(n_syncs: int = 40, seed: int = 0) -> Trace:
    """`_synced` with a file switch after every 8th sync (fsync, close, the next file's openat)
    and an openat/close pair at the start, as a program's loader has. (Every 4th would make the
    fsync a steady rhythm of its own: 10 a run.)"""
    rng = np.random.default_rng(seed)
    events = ["syscall_entry_openat", "syscall_exit_openat", "syscall_entry_close", "syscall_exit_close"]
    for k in range(1, n_syncs + 1):
        events += ["syscall_entry_write", "syscall_exit_write"] * int(rng.integers(64, 68))
        events += ["syscall_entry_fdatasync", "sched_switch", "syscall_exit_fdatasync"]
        if k % 8 == 0:
            events += ["syscall_entry_fsync", "sched_switch", "syscall_exit_fsync", "syscall_entry_close",
                       "syscall_exit_close", "syscall_entry_openat", "syscall_exit_openat"]
    ts = np.cumsum(rng.integers(100, 200, len(events)))
    return Trace.from_pydict({"ts": ts.tolist(), "event": events}, TraceMeta(workload="filed"))


def test_closers_end_every_8th_sync_of_a_model_that_cannot_count_them():
    from tracesynth.sampling import generate

    model, encoder = _tiny_model([_filed(seed=s) for s in (1, 2)])
    (rhythm,) = encoder.cadence.of("filed")
    assert rhythm.period == 8 and list(encoder.event.decode(rhythm.closers)) == [
        f"syscall_{k}_{call}" for call in ("fsync", "close", "openat") for k in ("entry", "exit")]
    trace = generate(model, encoder, 4800, "filed", steps=8, seed=5, cadence=True)
    # a rhythm with closers is placed by default ("auto")
    assert trace.to_pandas().equals(generate(model, encoder, 4800, "filed", steps=8, seed=5, cadence="auto").to_pandas())
    events = np.array(trace.events.column("event").to_pylist())
    syncs = np.flatnonzero(events == "syscall_exit_fdatasync")
    fsyncs = np.flatnonzero(events == "syscall_entry_fsync")
    fsyncs = fsyncs[fsyncs > syncs[0]]  # before its first sync the rhythm has not begun: the model's own
    # one file switch per 8 syncs from the model's first, each right after a sync's exit
    assert len(fsyncs) >= 2 and len(syncs) // 8 - 1 <= len(fsyncs) <= len(syncs) // 8 + 1, (len(syncs), fsyncs)
    assert all(f - 1 in set(syncs.tolist()) for f in fsyncs), fsyncs
    for f in fsyncs[:-1]:  # the file closed, the next one opened, before the next sync
        after = events[f:f + 12].tolist()
        assert "syscall_exit_fsync" in after and "syscall_entry_close" in after and "syscall_entry_openat" in after
    assert events[0] == "syscall_entry_openat" and "syscall_entry_close" in events[:8]  # the start-up keeps its own

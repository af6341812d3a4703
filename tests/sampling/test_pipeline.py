"""Any length, window by window: exact counts, monotonic clock, and no visible seams."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch

from tracesynth import Trace, TraceMeta
from tracesynth.errors import ConfigError
from tracesynth.model.config import SIZES, ModelConfig, TrainConfig
from tracesynth.model.train import train
from tracesynth.sampling import generate

CYCLE = ["sched_waking", "sched_wakeup", "sched_switch", "syscall_entry_poll", "syscall_exit_poll"]
GAPS = [40, 900, 15, 12_000, 3]
WINDOW = 32


def _toy(n=800) -> Trace:
    idx = np.arange(n) % len(CYCLE)
    return Trace.from_pydict({"ts": np.cumsum([GAPS[i] for i in idx]).tolist(), "event": [CYCLE[i] for i in idx]},
                             TraceMeta(workload="toy"))


@pytest.fixture(scope="module")
def toy():
    torch.set_num_threads(1)
    model, encoder, _ = train([_toy()], None, channels="light", model_config=ModelConfig(context=WINDOW, **SIZES["tiny"]),
                              train_config=TrainConfig(steps=400, batch_size=8, lr=5e-3, val_every=0, checkpoint_every=0))
    return model, encoder


def _ngrams(events, n, positions):
    return Counter(tuple(events[p:p + n]) for p in positions if p + n <= len(events))


def test_no_visible_seams(toy):
    model, encoder = toy
    trace = generate(model, encoder, 600, "toy", steps=16, seed=4)
    events = trace.to_pandas()["event"].tolist()
    real = set(_ngrams([CYCLE[i % 5] for i in range(50)], 3, range(48)))
    step = WINDOW - WINDOW // 4
    seams = [WINDOW + k * step for k in range((600 - WINDOW) // step + 1)]
    # Every trigram that straddles a seam is a real one. Inside windows the tiny model may slip
    # now and then (an event doubled or left out: its own uncertainty, at any position), rarely.
    at_seams = _ngrams(events, 3, [s + d for s in seams for d in (-2, -1)])
    inside = _ngrams(events, 3, [p for p in range(len(events)) if all(abs(p - s) > 3 for s in seams)])
    assert sum(at_seams.values()) >= 2 * (len(seams) - 1)
    assert set(at_seams) <= real, set(at_seams) - real
    slips = sum(n for gram, n in inside.items() if gram not in real)
    assert slips <= 0.01 * sum(inside.values()), {g: n for g, n in inside.items() if g not in real}
    gaps = np.diff(trace.to_pandas()["ts"].to_numpy())
    seam_gaps = {(events[s], int(gaps[s - 1])) for s in seams if s < len(events)}
    assert seam_gaps <= {(CYCLE[i], GAPS[i]) for i in range(5)}


def test_exact_length_monotonic_clock_any_length(toy):
    model, encoder = toy
    for n in (1, 31, 33, 100):
        trace = generate(model, encoder, n, "toy", steps=4, seed=0)
        ts = trace.to_pandas()["ts"].to_numpy()
        assert len(trace) == n and (np.diff(ts) >= 0).all()
        assert trace.meta.workload == "toy"


def test_same_seed_same_trace(toy):
    model, encoder = toy
    a = generate(model, encoder, 80, "toy", steps=4, seed=9).to_pandas()
    b = generate(model, encoder, 80, "toy", steps=4, seed=9).to_pandas()
    assert a.equals(b)


def test_unknown_workload_is_a_config_error(toy):
    model, encoder = toy
    with pytest.raises(ConfigError, match="unknown workload"):
        generate(model, encoder, 10, "nope")


def test_start_steps_draw_the_first_window_only(toy, monkeypatch):
    """The trace's first window (its start-up) takes `start_steps`; every later window, and a
    window that continues a given trace, takes `steps`."""
    import tracesynth.sampling.pipeline as pipeline

    model, encoder = toy
    calls = []
    plain = pipeline.sample_window

    def recording(model, known, known_mask, label, steps, *args, **kwargs):
        calls.append((kwargs["offset"], steps))
        return plain(model, known, known_mask, label, steps, *args, **kwargs)

    monkeypatch.setattr(pipeline, "sample_window", recording)
    trace = generate(model, encoder, 100, "toy", steps=4, start_steps=9, seed=1)
    assert calls[0] == (0, 9) and len(calls) > 3 and {s for _, s in calls[1:]} == {4}
    calls.clear()
    generate(model, encoder, 40, "toy", steps=4, start_steps=9, seed=1, prefix=trace)
    assert calls and {s for _, s in calls} == {4} and min(o for o, _ in calls) > 0
    calls.clear()
    same = generate(model, encoder, 100, "toy", steps=4, start_steps=4, seed=1).to_pandas()
    assert same.equals(generate(model, encoder, 100, "toy", steps=4, seed=1).to_pandas())
    with pytest.raises(ConfigError, match="at least 1"):
        generate(model, encoder, 10, "toy", steps=4, start_steps=0)


def test_start_anchor_takes_the_first_events_from_a_training_run(toy, monkeypatch):
    """`start_anchor=K`: the trace's first K events are the K first of the training run the seed
    picks (known events of its first window, still the trace's start: offset 0), the model draws
    the rest; gaps are drawn within the anchored gap classes. Off (0), with a prefix to continue,
    or for a model without the table, nothing changes."""
    import copy

    import tracesynth.sampling.pipeline as pipeline
    from tracesynth.encoding.startups import StartupTable

    model, encoder = toy
    # two "runs" whose start-ups are not the toy's cycle: every event in reverse order, and the poll pair first
    order = {"reverse": CYCLE[::-1] * 4, "polls": (CYCLE[3:] + CYCLE[:3]) * 4}
    runs = []
    for name, events in order.items():
        trace = Trace.from_pydict({"ts": np.cumsum([GAPS[CYCLE.index(e)] for e in events]).tolist(), "event": events},
                                  TraceMeta(workload="toy"))
        runs.append(("toy", encoder.startup_codes(trace)))
    anchored = copy.copy(encoder)
    anchored.startups = StartupTable.fit(runs)
    calls = []
    plain = pipeline.sample_window

    def recording(model, known, known_mask, *args, **kwargs):
        calls.append((kwargs["offset"], int(known_mask["event"].sum())))
        return plain(model, known, known_mask, *args, **kwargs)

    monkeypatch.setattr(pipeline, "sample_window", recording)
    for seed, events in ((0, order["reverse"]), (1, order["polls"]), (2, order["reverse"])):
        calls.clear()
        trace = generate(model, anchored, 60, "toy", steps=4, seed=seed, start_anchor=12)
        frame = trace.to_pandas()
        assert len(trace) == 60 and frame["event"].tolist()[:12] == events[:12]
        assert calls[0] == (0, 12) and trace.meta.extra["start_anchor"] == 12
        assert len(calls) > 1 and all(offset > 0 for offset, _ in calls[1:])  # later windows continue
        gaps = np.diff(frame["ts"].to_numpy())[:11]
        want = np.array([GAPS[CYCLE.index(e)] for e in events[1:12]])
        assert (np.abs(np.log2(gaps) - np.log2(want)) < 0.5).all()  # within the gap class
        # the model goes on from the anchor: what it draws next is the toy's cycle again
        drawn = frame["event"].tolist()[12:]
        assert sum(drawn[i + 1] == CYCLE[(CYCLE.index(drawn[i]) + 1) % 5] for i in range(len(drawn) - 1)) >= 0.9 * (len(drawn) - 1)
    assert generate(model, anchored, 60, "toy", steps=4, seed=3, start_anchor=12).to_pandas().equals(
        generate(model, anchored, 60, "toy", steps=4, seed=3, start_anchor=12).to_pandas())
    # at most half a window, and never more than asked for
    assert generate(model, anchored, 60, "toy", steps=4, seed=0, start_anchor=40).meta.extra["start_anchor"] == WINDOW // 2
    short = generate(model, anchored, 5, "toy", steps=4, seed=1, start_anchor=12).to_pandas()["event"].tolist()
    assert short == order["polls"][:5]
    # off, or continuing a trace, or a model saved without the table: the plain sampler's trace
    same = generate(model, encoder, 60, "toy", steps=4, seed=5).to_pandas()
    assert generate(model, anchored, 60, "toy", steps=4, seed=5, start_anchor=0).to_pandas().equals(same)
    bare = copy.copy(encoder)
    bare.startups = None
    assert generate(model, bare, 60, "toy", steps=4, seed=5, start_anchor=12).to_pandas().equals(same)
    prefix = Trace.from_pydict({"ts": [1, 2], "event": CYCLE[:2]}, TraceMeta(workload="toy"))
    cont = generate(model, anchored, 30, "toy", steps=4, seed=5, start_anchor=12, prefix=prefix)
    assert cont.meta.extra["start_anchor"] == 0
    with pytest.raises(ConfigError, match="start anchor"):
        generate(model, anchored, 10, "toy", start_anchor=-1)

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

"""Trace-boundary awareness: the start flag reaches the denoiser, and a model trained with start
windows begins a generated trace with the start-up events that only real trace starts hold."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from toy_traces import CYCLE, STARTUP, startup_trace
from tracesynth.errors import ConfigError
from tracesynth.model.config import SIZES, ModelConfig, TrainConfig
from tracesynth.model.denoiser import Denoiser
from tracesynth.model.train import WindowSource, train
from tracesynth.sampling import generate


@pytest.fixture(scope="module")
def start_model():
    torch.set_num_threads(1)
    # Two traces, so start windows are a small minority of what the model sees.
    traces = [startup_trace(), startup_trace()]
    return train(traces, None, channels="light", model_config=ModelConfig(context=32, **SIZES["tiny"]),
                 train_config=TrainConfig(steps=700, batch_size=8, lr=5e-3, start_rate=0.3,
                                          val_every=0, checkpoint_every=0))


def test_start_flag_changes_the_denoiser_output():
    torch.manual_seed(0)
    model = Denoiser(ModelConfig(vocab_sizes={"event": 5, "dt": 7}, context=16, **SIZES["tiny"])).eval()
    torch.nn.init.normal_(model.start.weight)
    codes = {"event": torch.zeros(1, 16, dtype=torch.long), "dt": torch.zeros(1, 16, dtype=torch.long)}
    t, w = torch.tensor([0.5]), torch.tensor([0])
    off, on = (model.hidden(codes, t, w, torch.tensor([flag])) for flag in (0, 1))
    assert not torch.allclose(off, on)
    assert torch.equal(off, model.hidden(codes, t, w))  # no flag given: "not at start"


def test_configs_saved_before_the_flag_load_without_it():
    legacy = ModelConfig(vocab_sizes={"event": 5}).to_dict()
    del legacy["start_flag"], legacy["trace_positions"], legacy["trace_phases"], legacy["trace_phase_events"]
    assert ModelConfig.from_dict(legacy).start_flag is False
    assert ModelConfig.from_dict(legacy).trace_positions == 0
    assert ModelConfig.from_dict(legacy).trace_phases == 0
    old = Denoiser(ModelConfig.from_dict(legacy))
    assert old.start is None and old.trace_position is None and old.trace_phase is None


def _window_features(**config):
    """A tiny untrained denoiser and `hidden(offset)`: its features of one fixed 16-event window
    placed at `offset` in its trace (None: no offset given)."""
    torch.manual_seed(0)
    model = Denoiser(ModelConfig(vocab_sizes={"event": 5, "dt": 7}, context=16, start_flag=False, **config,
                                 **SIZES["tiny"])).eval()
    codes = {"event": torch.zeros(1, 16, dtype=torch.long), "dt": torch.zeros(1, 16, dtype=torch.long)}
    t, w = torch.tensor([0.5]), torch.tensor([0])
    return model, lambda offset: model.hidden(codes, t, w, offset=None if offset is None else torch.tensor([offset]))


def test_trace_positions_start_as_a_no_op_and_end_in_one_far_class():
    model, hidden = _window_features(trace_positions=8)
    assert torch.equal(hidden(0), hidden(None))  # zero-initialised: no effect until trained
    torch.nn.init.normal_(model.trace_position.weight)
    assert not torch.allclose(hidden(0), hidden(None))
    assert torch.equal(hidden(8), hidden(None))  # every event at index >= 8 is "far"
    assert torch.equal(hidden(1000), hidden(None))
    assert not torch.allclose(hidden(0), hidden(1))


def test_trace_phases_are_blocks_of_the_trace_and_end_in_one_far_class():
    model, hidden = _window_features(trace_positions=0, trace_phases=3, trace_phase_events=4)
    assert torch.equal(hidden(0), hidden(None))  # zero-initialised: no effect until trained
    torch.nn.init.normal_(model.trace_phase.weight)
    assert not torch.allclose(hidden(0), hidden(4))  # events 0-15 span phases 0-3, events 4-19 phases 1-3
    assert torch.equal(hidden(12), hidden(None))  # from event 12 on: the "far" phase
    assert torch.equal(hidden(10_000), hidden(None))
    with pytest.raises(ConfigError):
        ModelConfig(vocab_sizes={"event": 5}, trace_phases=2, trace_phase_events=0).validate()


def test_windows_know_their_index_in_the_trace(monkeypatch):
    import tracesynth.sampling.pipeline as pipeline

    seen = []
    real = pipeline.sample_window

    def spy(*args, **kwargs):
        seen.append(kwargs["offset"])
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline, "sample_window", spy)
    torch.manual_seed(0)
    traces = [startup_trace()]
    model, encoder, _ = train(traces, None, channels="light", model_config=ModelConfig(context=32, **SIZES["tiny"]),
                              train_config=TrainConfig(steps=2, batch_size=2, val_every=0, checkpoint_every=0))
    generate(model, encoder, 80, "toy", steps=2, seed=0)
    assert seen == [0, 24, 48]  # 32 + 24 + 24 events: each window keeps the last 8 of the one before
    seen.clear()
    generate(model, encoder, 30, "toy", steps=2, seed=0, prefix=startup_trace(40))
    assert seen == [32, 56]  # the first window holds the prefix's last 8 events (index 32..39)


def test_training_windows_carry_their_offsets():
    encoder_traces = [startup_trace()]
    from tracesynth.encoding.trace_encoder import TraceEncoder

    encoder = TraceEncoder("light").fit(encoder_traces)
    source = WindowSource(encoder, encoder_traces, 32, 0.0, seed=0, start_rate=0.5)
    codes, _, offsets = source.batch_with_offsets(3, 64)
    first = encoder.encode(encoder_traces[0])["event"]
    for row, offset in enumerate(offsets.tolist()):
        assert torch.equal(codes["event"][row], torch.as_tensor(first[offset:offset + 32]))


def test_start_windows_are_taken_and_flagged(start_model):
    model, encoder, _ = start_model
    source = WindowSource(encoder, [startup_trace()], 32, 0.0, seed=0, start_rate=0.5)
    codes, _, at_start = source.batch_with_starts(0, 64)
    assert 10 < int(at_start.sum()) < 54
    first = codes["event"][:, 0]
    assert torch.equal(at_start, first == int(encoder.event.encode(np.array([STARTUP[0]], dtype=object))[0]))


def test_the_share_of_start_windows_moves_linearly_to_start_rate_end(start_model):
    _, encoder, _ = start_model
    source = WindowSource(encoder, [startup_trace()], 32, 0.0, seed=0, start_rate=0.6, start_rate_end=0.2, steps=101)
    assert [source.start_rate_at(s) for s in (0, 50, 100, 500)] == pytest.approx([0.6, 0.4, 0.2, 0.2])

    def share(steps):
        return float(np.mean([source.batch_with_offsets(s, 64)[2].eq(0).float().mean() for s in steps]))

    assert 0.5 < share(range(5)) < 0.7 and 0.1 < share(range(96, 101)) < 0.3
    constant = WindowSource(encoder, [startup_trace()], 32, 0.0, seed=0, start_rate=0.6, steps=101)
    assert constant.start_rate_at(100) == 0.6
    same = WindowSource(encoder, [startup_trace()], 32, 0.0, seed=0, start_rate=0.6)
    assert torch.equal(constant.batch_with_offsets(7, 16)[2], same.batch_with_offsets(7, 16)[2])
    with pytest.raises(ConfigError, match="final start rate must be in"):
        TrainConfig(start_rate_end=1.5).validate()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_generation_begins_with_the_startup_prefix(start_model, seed):
    model, encoder, _ = start_model
    # A tiny model, briefly trained, gives the first event ~97%: temperature 0.5 tests what it
    # learned rather than a 1-in-30 draw. 80 events from 32-event windows: the start-up prefix
    # must appear once, at the beginning, and never again in the continuation windows.
    events = generate(model, encoder, 80, "toy", steps=16, seed=seed, temperature=0.5).to_pandas()["event"].tolist()
    assert events[:len(STARTUP)] == STARTUP, events[:10]
    assert not set(STARTUP) & set(events[len(STARTUP):])  # start-up happens once
    assert set(events[len(STARTUP):]) <= set(CYCLE)

"""Trace-boundary awareness: the start flag reaches the denoiser, and a model trained with start
windows begins a generated trace with the start-up events that only real trace starts hold."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from toy_traces import CYCLE, STARTUP, startup_trace
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
    del legacy["start_flag"]
    assert ModelConfig.from_dict(legacy).start_flag is False
    assert Denoiser(ModelConfig.from_dict(legacy)).start is None


def test_start_windows_are_taken_and_flagged(start_model):
    model, encoder, _ = start_model
    source = WindowSource(encoder, [startup_trace()], 32, 0.0, seed=0, start_rate=0.5)
    codes, _, at_start = source.batch_with_starts(0, 64)
    assert 10 < int(at_start.sum()) < 54
    first = codes["event"][:, 0]
    assert torch.equal(at_start, first == int(encoder.event.encode(np.array([STARTUP[0]], dtype=object))[0]))


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

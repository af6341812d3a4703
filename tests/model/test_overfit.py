"""The model can learn: a tiny periodic trace is reproduced exactly, across window seams."""

from __future__ import annotations

import numpy as np
import pytest

from toy_traces import CYCLE, GAPS, periodic_trace, train_toy_model
from tracesynth.sampling import generate


@pytest.fixture(scope="module")
def toy_model():
    return train_toy_model()


def _is_periodic(events: list[str]) -> bool:
    for phase in range(len(CYCLE)):
        if all(events[i] == CYCLE[(phase + i) % len(CYCLE)] for i in range(len(events))):
            return True
    return False


def test_training_loss_falls(toy_model):
    _, _, state = toy_model
    first = np.mean([loss for _, loss in state.train_loss[:10]])
    last = np.mean([loss for _, loss in state.train_loss[-20:]])
    assert last < 0.1 * first


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_periodic_trace_is_reproduced_exactly(toy_model, seed):
    model, encoder, _ = toy_model
    # 150 events from 32-event windows: 6 windows, 5 seams.
    trace = generate(model, encoder, 150, "toy", steps=16, seed=seed)
    frame = trace.to_pandas()
    events = frame["event"].tolist()
    assert _is_periodic(events), events
    gaps = np.diff(frame["ts"].to_numpy())
    expected = {(CYCLE[i], GAPS[i]) for i in range(len(CYCLE))}
    assert {(e, int(g)) for e, g in zip(events[1:], gaps)} <= expected


@pytest.mark.parametrize("seed", [0, 1])
def test_continuing_a_real_prefix_follows_its_phase_exactly(toy_model, seed):
    model, encoder, _ = toy_model
    prefix = periodic_trace(40)  # ends on event 39: the continuation starts at phase 40 % 6
    frame = generate(model, encoder, 100, "toy", steps=8, seed=seed, prefix=prefix).to_pandas()
    assert frame["event"].tolist() == [CYCLE[(40 + i) % 6] for i in range(100)]
    gaps = np.diff(np.concatenate([[prefix.events["ts"][39].as_py()], frame["ts"].to_numpy()]))
    assert gaps.tolist() == [GAPS[(40 + i) % 6] for i in range(100)]

"""Copy baseline: conformance, and its output is made of real chunks."""

from __future__ import annotations

import numpy as np
import pytest
from evaluation.constructed import chain_trace
from generators.conformance import check_generator

from tracesynth.errors import ConfigError
from tracesynth.generators.copy import Copy


def test_conformance():
    check_generator(lambda seed: Copy(chunk_length=256, random_state=seed), [chain_trace(6000, seed=1)])


def test_bad_chunk_length():
    with pytest.raises(ConfigError):
        Copy(chunk_length=0).fit([chain_trace(100)])


def test_output_is_real_chunks_with_real_gaps():
    train = chain_trace(5000, seed=2)
    out = Copy(chunk_length=100, random_state=3).fit([train]).sample(1050)
    real = train.to_pandas()
    syn = out.to_pandas()
    real_events = real.event.to_numpy()
    real_gaps = np.diff(real.ts.to_numpy())
    for start in range(0, 1050, 100):
        chunk = syn.iloc[start:start + 100]
        # find the chunk's position in training by its first 30 events (unique in a random chain)
        hits = [i for i in range(len(real) - 30)
                if (real_events[i:i + 30] == chunk.event.to_numpy()[:30]).all()]
        assert hits, f"chunk at {start} not found in training"
        i = hits[0]
        assert (real_events[i:i + len(chunk)] == chunk.event.to_numpy()).all()
        assert (np.diff(chunk.ts.to_numpy()) == real_gaps[i:i + len(chunk) - 1]).all()
        assert (real.tid.to_numpy()[i:i + len(chunk)] == chunk.tid.to_numpy()).all()

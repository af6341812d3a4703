"""Markov baseline: conformance, and properties with known answers on constructed traces."""

from __future__ import annotations

import numpy as np
import pytest
from evaluation.constructed import chain_trace, cycle_trace
from generators.conformance import check_generator

from tracesynth.errors import ConfigError
from tracesynth.generators import make
from tracesynth.generators.markov import Markov


@pytest.mark.parametrize("order", [1, 8])
def test_conformance(order):
    check_generator(lambda seed: Markov(order=order, random_state=seed), [chain_trace(6000, seed=1)])


def test_registry_and_bad_order():
    assert isinstance(make("markov", order=3), Markov)
    with pytest.raises(ConfigError):
        make("nope")
    with pytest.raises(ConfigError):
        Markov(order=0).fit([chain_trace(100)])


def test_cycle_is_reproduced_exactly():
    # a period-6 cycle: every generated transition must be one of the 6 real ones
    train = cycle_trace(3000, period=6)
    names = train.column("event").to_pylist()
    real_pairs = set(zip(names, names[1:]))
    out = Markov(order=3, random_state=0).fit([train]).sample(5000).column("event").to_pylist()
    assert set(zip(out, out[1:])) <= real_pairs


def test_channels_follow_the_training_distribution():
    train = chain_trace(20_000, seed=3)
    out = Markov(order=2, random_state=0).fit([train]).sample(20_000)
    real, syn = train.to_pandas(), out.to_pandas()
    # tids stay the real small set and switch about as often as in training
    assert set(syn.tid.unique()) <= set(real.tid.unique())
    real_rate = (real.tid.diff() != 0).mean()
    syn_rate = (syn.tid.diff() != 0).mean()
    assert abs(real_rate - syn_rate) < 0.05
    # pid/procname follow the thread as in training
    assert (syn.procname == "proc" + syn.tid.astype(str)).all()
    # every gap before an event type is a real gap seen before that type (or pair)
    real_gaps = set(np.diff(real.ts.to_numpy()).tolist())
    assert set(np.diff(syn.ts.to_numpy()).tolist()) <= real_gaps
    # ret only on exits, as in training
    assert syn.ret.notna().equals(syn.event.str.startswith("syscall_exit_"))
    # first-order statistics match: event shares within 2 points
    shares = real.event.value_counts(normalize=True)
    syn_shares = syn.event.value_counts(normalize=True).reindex(shares.index).fillna(0)
    assert (shares - syn_shares).abs().max() < 0.02


def test_reports_its_cost():
    out = Markov(order=2, random_state=0).fit([chain_trace(2000)]).sample(1000)
    assert {"train_seconds", "events_per_second", "generator"} <= set(out.meta.extra)

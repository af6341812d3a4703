"""Long-range metrics: the discriminative score and autocorrelation on known processes."""

from __future__ import annotations

import numpy as np
from evaluation.constructed import chain_trace, cycle_trace

from tracesynth.evaluation import longrange
from tracesynth.evaluation.windows import Vocabulary, encode


def _enc(*traces):
    vocab = Vocabulary.from_traces(traces)
    return [[encode(t, vocab)] for t in traces]


def test_discriminative_is_chance_for_one_process_and_one_for_different_ones():
    a, b, c = _enc(chain_trace(40_000, seed=1), chain_trace(40_000, seed=2), cycle_trace(40_000, period=8))
    same = longrange.discriminative(a, b, seeds=[0, 1], lengths=[512])["512"]
    different = longrange.discriminative(a, c, seeds=[0], lengths=[512])["512"]
    assert abs(same["accuracy_mean"] - 0.5) < 0.15
    assert different["accuracy_mean"] > 0.95
    assert same["windows_per_side"] == (40_000 - 512) // 256 + 1  # stride = half a window


def test_discriminative_reports_too_little_data_instead_of_a_number():
    a, b = _enc(chain_trace(3000, seed=1), chain_trace(3000, seed=2))
    result = longrange.discriminative(a, b, seeds=[0], lengths=[4096])["4096"]
    assert result["accuracy_mean"] is None and "fewer than" in result["reason"]


def test_autocorrelation_finds_the_period_of_a_cycle():
    (c,) = _enc(cycle_trace(20_000, period=7))
    top, weights = longrange.top_events(c)
    acf = longrange.autocorrelation(c, top, weights, max_lag=100)
    assert longrange.periodicity(acf)["period"] == 7
    assert longrange.periodicity(acf)["regularity"] > 0.99


def test_recurrence_distance_of_a_cycle_is_its_period():
    (c,) = _enc(cycle_trace(5000, period=5))
    distances, never = longrange.recurrence_log_distances(c, k=8)
    assert np.allclose(10 ** distances, 5) and never == 0

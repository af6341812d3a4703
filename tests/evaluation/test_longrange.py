"""Long-range metrics: the discriminative score and autocorrelation on known processes."""

from __future__ import annotations

from dataclasses import replace

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
    assert result["available"] is False


def test_small_held_out_set_gives_no_constant_score():
    # a 6k-event held-out side has 22 windows of 512: the classifier could not split on so few
    # and returned the same fold-size constant (0.4545) for a same-process and a periodic side
    small, same, periodic = _enc(chain_trace(6000, seed=1), chain_trace(40_000, seed=2),
                                 cycle_trace(40_000, period=8))
    for other in (same, periodic):
        result = longrange.discriminative(other, small, seeds=[0], lengths=[512])["512"]
        assert result["available"] is False and result["accuracy_mean"] is None
        assert "too few" in result["reason"]
    # just above the minimum (9k events = 34 windows) the score is computed and separates
    small, same, periodic = _enc(chain_trace(9000, seed=1), chain_trace(40_000, seed=2),
                                 cycle_trace(40_000, period=8))
    near = longrange.discriminative(same, small, seeds=[0], lengths=[512])["512"]
    far = longrange.discriminative(periodic, small, seeds=[0], lengths=[512])["512"]
    assert near["available"] and far["available"]
    assert near["windows_per_side"] >= longrange.DISCRIMINATIVE_MIN_WINDOWS
    assert abs(near["accuracy_mean"] - 0.5) < 0.2 and far["accuracy_mean"] > 0.95


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


def test_repeat_share_counts_spans_that_recur_within_reach():
    # a cycle repeats every span at its period; a long-memory-free chain over a wide vocabulary
    # repeats almost none; the same block twice, farther apart than the reach, counts nothing
    (cycle,) = _enc(cycle_trace(5000, period=8))
    assert longrange.repeat_share(cycle) == 1.0
    assert longrange.repeat_share(cycle, reach=7) == 0.0  # the next copy starts 8 events later
    rng = np.random.default_rng(0)
    noise = rng.integers(0, 60, 3000)
    wide = longrange.Encoded(noise, np.zeros(3000), np.zeros(3000, np.int64), np.zeros(3000, np.int64),
                             np.arange(3000))
    assert longrange.repeat_share([wide]) == 0.0
    block = rng.integers(0, 60, 100)
    twice = np.concatenate([block, rng.integers(60, 120, 700), block])
    far = longrange.Encoded(twice, np.zeros(900), np.zeros(900, np.int64), np.zeros(900, np.int64), np.arange(900))
    assert longrange.repeat_share([far]) == 0.0
    near = longrange.repeat_share([far], reach=800)
    assert near == 2 * (100 - 32) / (900 - 32)  # the 68 spans inside each copy of the block
    short = longrange.Encoded(noise[:20], np.zeros(20), np.zeros(20, np.int64), np.zeros(20, np.int64), np.arange(20))
    assert longrange.repeat_share([short]) is None


def _direct_acf(x: np.ndarray, max_lag: int) -> np.ndarray:
    x = x - x.mean()
    out = np.zeros(max_lag + 1)
    for k in range(min(len(x), max_lag + 1)):
        out[k] = np.dot(x[: len(x) - k], x[k:]) / np.dot(x, x)
    return out


def test_autocorrelation_length_never_depends_on_trace_length_around_max_lag():
    # traces shorter than, equal to and one/two past the lag range, odd and even, mixed in one
    # call: the weighted sum once failed with a shape mismatch (4097 vs 2048) on such runs
    for max_lag in (64, longrange.MAX_LAG):
        lengths = (max_lag - 1, max_lag, max_lag + 1, max_lag + 2, max_lag // 2 + 1, 3)
        traces = _enc(*[chain_trace(n, seed=n) for n in lengths])
        for (t,) in traces:
            acf = longrange.autocorrelation([t], np.array([t.tokens[0]]), np.array([1.0]), max_lag=max_lag)
            assert acf.shape == (max_lag + 1,)
            expected = _direct_acf((t.tokens == t.tokens[0]).astype(float), max_lag)
            assert np.allclose(acf, expected, atol=1e-9), (max_lag, len(t))
        mixed = [t for (t,) in traces]
        top, weights = longrange.top_events(mixed)
        assert longrange.autocorrelation(mixed, top, weights, max_lag=max_lag).shape == (max_lag + 1,)


def test_a_classifier_that_never_splits_gives_no_score(monkeypatch):
    # the old minimum (10 windows) let 22-window sides through: too few training windows for any
    # leaf of 20, so every fold predicted one class; the second guard reports that, not 0.4545
    monkeypatch.setattr(longrange, "DISCRIMINATIVE_MIN_WINDOWS", 10)
    small, periodic = _enc(chain_trace(6000, seed=1), cycle_trace(40_000, period=8))
    result = longrange.discriminative(periodic, small, seeds=[0], lengths=[512])["512"]
    assert result["available"] is False and "one class" in result["reason"]


def test_a_trace_without_thread_ids_is_judged_on_the_channels_it_has():
    # A `light` generator writes no tid or cpu. Against a real run, windows must not be told
    # apart by that column alone: the same real events with tid/cpu blanked score like real.
    import dataclasses

    import tracesynth.datasets as ds

    runs = [ds.load("gzip", run=r).slice(0, 30_000) for r in (1, 2)]
    vocab = Vocabulary.from_traces(runs)
    real, other = ([encode(t, vocab)] for t in runs)
    blind = [dataclasses.replace(other[0], tid=np.full(len(other[0]), -1), cpu=np.full(len(other[0]), -1))]
    assert longrange.compared_channels(real, other) == ("tid", "cpu")
    assert longrange.compared_channels(real, blind) == ()
    fair = longrange.discriminative(real, blind, seeds=[0], lengths=[512])["512"]["accuracy_mean"]
    same_features = longrange.discriminative(real, other, seeds=[0], lengths=[512], channels=())["512"]
    assert fair == same_features["accuracy_mean"]  # blanking == judging the real pair without tid/cpu
    forced = longrange.discriminative(real, blind, seeds=[0], lengths=[512], channels=("tid", "cpu"))["512"]
    assert forced["accuracy_mean"] > 0.95 > fair  # what the score used to be: the missing column


def test_tells_name_what_differs_and_nothing_between_real_runs():
    # Plausible slips (an event that training does have after the previous one) in a real run:
    # the tells must name a repetition feature as what gives the windows away, with the slipped
    # side holding more distinct k-grams, and between two real runs no feature tells much.
    import tracesynth.datasets as ds

    runs = [ds.load("sqlite", run=r).slice(0, 24_000) for r in (1, 2)]
    vocab = Vocabulary.from_traces(runs)
    real, other = (encode(t, vocab) for t in runs)
    followers: dict[int, list[int]] = {}
    for a, b in zip(real.tokens[:-1], real.tokens[1:]):
        followers.setdefault(int(a), []).append(int(b))
    rng = np.random.default_rng(0)
    slipped = other.tokens.copy()
    for p in np.flatnonzero(rng.random(len(slipped)) < 0.05)[1:]:
        slipped[p] = rng.choice(followers[int(slipped[p - 1])])
    import dataclasses

    bad = dataclasses.replace(other, tokens=slipped)
    result = longrange.discriminative([bad], [real], seeds=[0, 1], lengths=[512], explain=True)["512"]
    tells = result["tells"]
    assert result["accuracy_mean"] > 0.85 and len(tells) == len(longrange.feature_groups()) == 13
    assert [t["accuracy_alone"] for t in tells] == sorted((t["accuracy_alone"] for t in tells), reverse=True)
    top = tells[0]
    assert top["feature"].startswith("distinct") and top["accuracy_alone"] > 0.85
    assert top["mean_a"] > top["mean_b"]  # slips make k-grams no real window has
    floor = longrange.discriminative([other], [real], seeds=[0], lengths=[512], explain=True, channels=())["512"]
    assert len(floor["tells"]) == 9  # no thread/CPU features when they are not compared
    assert floor["tells"][0]["accuracy_alone"] < 0.8
    plain = longrange.discriminative([other], [real], seeds=[0], lengths=[512], channels=())["512"]
    assert "tells" not in plain and plain["accuracy_mean"] == floor["accuracy_mean"]  # explaining changes no score


def _fileio(run: int, n: int = 32_768):
    import tracesynth.datasets as ds

    return ds.load("fileio", run).slice(0, n)


def test_cadence_sees_real_fileio_sync_every_256_writes_and_a_random_one():
    """Every real fileio run syncs every 256 writes (`fdatasync` every ~523 events): two runs
    agree on it within a fraction of an octave. The same run with each sync pair moved to a
    random place among the writes keeps its event mix and grammar, and its fdatasync gaps come
    out furthest from real; an event type that never comes back counts as one trace-long gap."""
    real, other = _fileio(1), _fileio(3)
    vocab = Vocabulary.from_traces([real, other])
    enc_real, enc_other = encode(real, vocab), encode(other, vocab)
    itself = longrange.compare_cadence([enc_real], [enc_real], vocab.names)
    assert itself["mean_octaves"] == 0.0 and itself["events"]
    runs = {r["event"]: r for r in longrange.compare_cadence([enc_other], [enc_real], vocab.names)["events"]}
    assert runs["syscall_entry_fdatasync"]["octaves"] < 0.2
    assert 500 < runs["syscall_entry_fdatasync"]["median_reference"] < 560

    tokens = enc_real.tokens  # each sync pair moved before a randomly chosen write
    entry, exit_ = (vocab.names.index(f"syscall_{side}_fdatasync") for side in ("entry", "exit"))
    write = vocab.names.index("syscall_entry_write")
    kept = tokens[~np.isin(tokens, [entry, exit_])]
    n_pairs = int((tokens == entry).sum())
    at = np.sort(np.random.default_rng(0).choice(np.flatnonzero(kept == write), n_pairs, replace=False))
    moved = np.insert(kept, np.repeat(at, 2), np.tile([entry, exit_], n_pairs))
    assert np.array_equal(np.bincount(moved), np.bincount(tokens))  # the same event mix
    shuffled = longrange.compare_cadence([replace(enc_real, tokens=moved)], [enc_real], vocab.names)
    worst = shuffled["events"][0]
    assert worst["event"].endswith("fdatasync") and worst["octaves"] > 1.0
    assert shuffled["mean_octaves"] > longrange.compare_cadence([enc_other], [enc_real])["mean_octaves"]

    dropped = np.where(np.isin(tokens, [entry, exit_]), write, tokens)
    gone = {r["event"]: r for r in longrange.compare_cadence([replace(enc_real, tokens=dropped)], [enc_real],
                                                                vocab.names)["events"]}
    assert gone["syscall_entry_fdatasync"]["candidate_gaps"] == 0 and gone["syscall_entry_fdatasync"]["median"] is None
    assert gone["syscall_entry_fdatasync"]["octaves"] > 5  # one 32,768-event gap against ~523: 6 octaves

"""The training traces' event n-gram counts: exact counts, the Witten-Bell estimate, the prior."""

from __future__ import annotations

import numpy as np
import pytest

import tracesynth.datasets as ds
from tracesynth.encoding.ngrams import CachedPrior, EventNGrams
from tracesynth.encoding.trace_encoder import TraceEncoder
from tracesynth.evaluation.windows import kgram_hashes


@pytest.fixture(scope="module")
def pybench():
    runs = [ds.load("pybench", r) for r in (1, 2, 3)]
    encoder = TraceEncoder("light").fit(runs[:2])
    return encoder, [encoder.encode(t)["event"] for t in runs]


def _code(encoder, name):
    return int(encoder.event.encode(np.array([name]))[0])


def test_counts_match_a_brute_force_count_in_both_directions(pybench):
    encoder, (run1, run2, _) = pybench
    ngrams = encoder.ngrams
    assert ngrams.k == 8 and ngrams.knows("pybench") and not ngrams.knows("gzip")
    for order in (1, 3, 8):
        for direction in ("left", "right"):
            context = run1[5000:5000 + order] if direction == "left" else run1[5001:5001 + order]
            expected = np.zeros(ngrams.vocab_size)
            for run in (run1, run2):
                for i in range(len(run)):
                    lo, hi = (i - order, i) if direction == "left" else (i + 1, i + 1 + order)
                    if lo >= 0 and hi <= len(run) and np.array_equal(run[lo:hi], context):
                        expected[run[i]] += 1
            window = np.full(64, ngrams.vocab_size)
            if direction == "left":
                window[10 - order:10] = context
            else:
                window[11:11 + order] = context
            table = ngrams.tables[("pybench", direction, order)]
            row = table.lookup(kgram_hashes(np.asarray(context), order))[0]
            counts, total, distinct = table.dense(np.array([row]), ngrams.vocab_size)
            assert np.array_equal(counts[0], expected) and total[0] == expected.sum()
            assert distinct[0] == (expected > 0).sum()
            q, used = ngrams.conditional(window, np.array([10]), "pybench", direction)
            assert used[0] == order and np.isclose(q.sum(), 1.0)


def test_a_certain_transition_is_certain_and_undecided_neighbours_give_no_prior(pybench):
    encoder, (_, _, run3) = pybench
    ngrams = encoder.ngrams
    mask = ngrams.vocab_size
    exec_, exit_execve = _code(encoder, "sched_process_exec"), _code(encoder, "syscall_exit_execve")
    # every sched_process_exec of the training runs is followed by <execve: the denoiser at 1000
    # steps gives that 0.12-0.29 (docs/model.md); the counts say so outright
    window = np.full(32, mask)
    window[9] = exec_
    q, used = ngrams.conditional(window, np.array([10]), "pybench", "left")
    assert used[0] == 1 and q[0, exit_execve] > 0.95
    prior = ngrams.log_prior(window, np.array([10, 20]), "pybench")
    assert prior[0].argmax() == exit_execve and prior[0, exit_execve] > 0
    assert np.all(prior[1] == 0.0)  # no decided neighbour on either side
    assert np.all(ngrams.log_prior(window, np.array([10]), "gzip") == 0.0)  # unknown workload


def test_the_prior_predicts_a_held_out_run_far_better_than_event_frequencies(pybench):
    encoder, (_, _, run3) = pybench
    ngrams = encoder.ngrams
    window = run3[8000:8000 + 4096].copy()
    hide = np.random.default_rng(0).random(len(window)) < 0.3
    masked = window.copy()
    masked[hide] = ngrams.vocab_size
    positions = np.flatnonzero(hide)
    base = np.log(ngrams._base("pybench"))
    with_prior = (base + ngrams.log_prior(masked, positions, "pybench")).argmax(1)
    assert (with_prior == window[positions]).mean() > 0.8
    assert (base.argmax() == window[positions]).mean() < 0.4


def test_the_table_round_trips_as_safetensors_friendly_arrays(pybench):
    encoder, (_, _, run3) = pybench
    arrays = encoder.ngrams.to_arrays()
    assert {v.dtype for v in arrays.values()} <= {np.dtype(np.int64), np.dtype(np.float64)}
    back = EventNGrams.from_arrays(arrays)
    window = run3[:512].copy()
    window[::3] = back.vocab_size
    positions = np.arange(0, 512, 3)
    assert np.array_equal(back.log_prior(window, positions, "pybench"),
                          encoder.ngrams.log_prior(window, positions, "pybench"))
    with pytest.raises(ValueError):
        EventNGrams(10, k=0)


def test_the_estimate_is_the_witten_bell_recursion_written_out(pybench):
    encoder, (_, _, run3) = pybench
    ngrams = encoder.ngrams
    window = run3[20000:20400].copy()
    window[np.random.default_rng(1).random(len(window)) < 0.2] = ngrams.vocab_size
    positions = np.arange(8, 392)
    for direction in ("left", "right"):
        q, used = ngrams.conditional(window, positions, "pybench", direction)
        assert used.max() == 8 and (used == 0).any()
        for row in np.flatnonzero(used)[::7]:
            p = positions[row]
            expected = ngrams._base("pybench").copy()
            for order in range(1, used[row] + 1):
                context = window[p - order:p] if direction == "left" else window[p + 1:p + 1 + order]
                table = ngrams.tables[("pybench", direction, order)]
                counts, total, distinct = table.dense(table.lookup(kgram_hashes(context, order)), ngrams.vocab_size)
                expected = (counts[0] + distinct[0] * expected) / (total[0] + distinct[0])
            assert np.allclose(q[row], expected, rtol=1e-4, atol=1e-7)


def test_every_order_looked_up_at_once_gives_the_order_by_order_numbers_exactly(pybench):
    # The prior looks all orders of a row up in one merged table; the sampler's traces stay the
    # same only if that is the loop's arithmetic float for float, on windows half decided or
    # nearly all, rows near the edges included.
    from tracesynth.evaluation.windows import KGramHasher

    encoder, (_, _, run3) = pybench
    ngrams = encoder.ngrams
    rng = np.random.default_rng(4)
    for share in (0.0, 0.1, 0.5, 0.9):
        window = _masked_window(run3, int(rng.integers(0, len(run3) - 512)), share, ngrams.vocab_size, rng)
        positions = np.sort(rng.choice(512, 200, replace=False))
        positions[:2] = [0, 511]
        for direction in ("left", "right"):
            hasher = KGramHasher(window)
            merged = ngrams._conditional(window, hasher, positions, "pybench", direction)
            ngrams._merged[("pybench", direction)], kept = None, ngrams._merged[("pybench", direction)]
            try:
                loop = ngrams._conditional(window, hasher, positions, "pybench", direction)
            finally:
                ngrams._merged[("pybench", direction)] = kept
            assert kept is not None and len(loop[0]) > 0
            assert all(np.array_equal(a, b) for a, b in zip(merged, loop))
    # two orders sharing a context hash (a 2^-64 chance): no merged table, the loop does it all
    from tracesynth.encoding.ngrams import _Merged

    table = ngrams.tables[("pybench", "left", 3)]
    assert _Merged.build([table, table]) is None


def test_contexts_seen_a_hundred_thousand_times_keep_a_finite_distribution():
    """scimark's loop: the same two events after the same 8-event context ~10^5 times, so each
    order scales the Witten-Bell row by ~10^-5 (the bug this guards against: a float32 row
    overflowed to inf and the prior turned into noise)."""
    loop = np.tile(np.array([1, 2]), 100_000)
    loop[::1000] = 3
    ngrams = EventNGrams.fit([("w", loop)], vocab_size=5, k=16)
    window = np.tile(np.array([1, 2]), 32)
    window[40:] = 5  # undecided
    prior = ngrams.log_prior(window, np.arange(40, 64), "w")
    assert np.isfinite(prior).all()
    q, used = ngrams.conditional(window, np.array([40]), "w", "left")
    assert used[0] == 16 and np.isclose(q.sum(), 1.0, atol=1e-5) and q[0].argmax() == 1 and q[0, 1] > 0.99



def test_rows_whose_scale_folds_get_the_loops_numbers_exactly(monkeypatch):
    """At 32 orders the same loop's rows scale by ~10^-5 per order and fold (below 1e-100); the
    merged lookup adds those rows up one by one as the order-by-order loop does, float for
    float, beside rows that need no folding (a short context, the edges)."""
    from tracesynth.evaluation.windows import KGramHasher

    loop = np.tile(np.array([1, 2]), 100_000)
    loop[::1000] = 3
    ngrams = EventNGrams.fit([("w", loop)], vocab_size=5, k=32)
    window = np.tile(np.array([1, 2]), 48)
    window[44] = 3
    window[50:60] = 5  # undecided
    positions = np.array([0, 3, 40, 45, 50, 55, 60, 95])
    folded = []
    real = EventNGrams._folded_row
    monkeypatch.setattr(EventNGrams, "_folded_row", staticmethod(lambda *a: folded.append(1) or real(*a)))
    for direction in ("left", "right"):
        merged = ngrams._conditional(window, KGramHasher(window), positions, "w", direction)
        ngrams._merged[("w", direction)], kept = None, ngrams._merged[("w", direction)]
        try:
            by_order = ngrams._conditional(window, KGramHasher(window), positions, "w", direction)
        finally:
            ngrams._merged[("w", direction)] = kept
        assert kept is not None and all(np.array_equal(a, b) for a, b in zip(merged, by_order))
        assert np.isfinite(merged[1]).all()
    assert folded  # the case is exercised

def _masked_window(run, start: int, share: float, mask: int, rng) -> np.ndarray:
    """512 events of a real run from `start`, a `share` of them sent to MASK."""
    window = run[start:start + 512].copy()
    window[rng.random(len(window)) < share] = mask
    return window


def test_the_cached_prior_is_exactly_the_prior_after_any_change(pybench):
    encoder, (_, _, run3) = pybench
    ngrams = encoder.ngrams
    mask = ngrams.vocab_size
    rng = np.random.default_rng(2)
    window = _masked_window(run3, 30000, 0.7, mask, rng)
    cached = CachedPrior(ngrams, "pybench", 0.5)
    for _ in range(6):
        positions = np.flatnonzero(window == mask)
        assert np.array_equal(cached(window, positions), 0.5 * ngrams.log_prior(window, positions, "pybench"))
        # reveal some, send a few back to MASK, and shift the tail (what the copy guard does)
        reveal = rng.choice(positions, size=len(positions) // 4, replace=False)
        window[reveal] = run3[30000 + reveal]
        window[rng.choice(len(window), size=5, replace=False)] = mask
        window[400:] = np.roll(window[400:], 1)
    # versions: a row's version moves exactly when the row is recomputed
    positions = np.flatnonzero(window == mask)
    before = cached.refresh(window, positions).copy()
    assert np.array_equal(cached.refresh(window, positions), before)  # nothing changed: nothing moves
    p = positions[len(positions) // 2]
    window[p] = run3[30000 + p]
    later = positions[positions != p]
    after = cached.refresh(window, later)
    moved = after != before[positions != p]
    assert 1 <= moved.sum() <= 2 * ngrams.k and np.abs(later[moved] - p).max() <= ngrams.k
    assert np.array_equal(cached.rows[later], 0.5 * ngrams.log_prior(window, later, "pybench"))
    other = run3[:300].copy()  # another window length starts afresh
    other[::2] = mask
    assert np.array_equal(cached(other, np.arange(0, 300, 2)),
                          0.5 * ngrams.log_prior(other, np.arange(0, 300, 2), "pybench"))


def test_a_quiet_cached_prior_gives_the_first_rows_nothing_until_told_otherwise(pybench):
    encoder, (_, _, run3) = pybench
    ngrams = encoder.ngrams
    mask = ngrams.vocab_size
    window = _masked_window(run3, 20000, 0.5, mask, np.random.default_rng(5))
    positions = np.flatnonzero(window == mask)
    cached = CachedPrior(ngrams, "pybench", 1.0)
    full = ngrams.log_prior(window, positions, "pybench")
    assert np.array_equal(cached(window, positions), full)  # cached rows, before quieting
    cached.quiet(100)
    rows = cached(window, positions)
    early = positions < 100
    assert not rows[early].any() and np.array_equal(rows[~early], full[~early])
    assert full[early].any()  # there was something to leave out
    cached.quiet(-5)  # clamped to 0: every row again
    assert cached.quiet_before == 0 and np.array_equal(cached(window, positions), full)


def test_the_cached_prior_recomputes_only_the_rows_a_reveal_can_move(pybench):
    encoder, (_, _, run3) = pybench
    ngrams = encoder.ngrams
    rng = np.random.default_rng(4)
    window = _masked_window(run3, 10000, 0.5, ngrams.vocab_size, rng)
    mask = ngrams.vocab_size
    cached = CachedPrior(ngrams, "pybench", 1.0)
    asked = []
    real_log_prior = ngrams.log_prior

    def counting(codes, positions, workload, memo=None):
        asked.append(len(positions))
        return real_log_prior(codes, positions, workload, memo)

    first = int((window == mask).sum())
    ngrams.log_prior = counting
    try:
        for step in range(40):  # one event at a time, as the parts of a step reveal them
            positions = np.flatnonzero(window == mask)
            assert np.array_equal(cached(window, positions), real_log_prior(window, positions, "pybench"))
            p = rng.choice(positions)
            window[p] = run3[10000 + p]
            if step % 10 == 9:  # and now and then one goes back to MASK
                window[rng.choice(np.flatnonzero(window != mask))] = mask
    finally:
        del ngrams.log_prior
    # After the first call, a reveal moves the nearest masked row on either side (a re-mask a
    # few more): about two rows a call, where "everything within k" would be ~8.
    assert asked[0] == first
    assert np.mean(asked[1:]) <= 3.0



def test_a_few_changes_move_the_rows_the_whole_window_rule_moves(pybench, monkeypatch):
    # A part of a denoising step changes one or two events: the cache looks within k of each
    # change only, and must move exactly the rows the whole-window rule moves (edges, runs of
    # decided events longer than k, neighbouring changes, re-masks, changes to MASK and back).
    from tracesynth.encoding import ngrams as module

    encoder, (_, _, run3) = pybench
    mask = encoder.ngrams.vocab_size
    cached = CachedPrior(encoder.ngrams, "pybench", 1.0)
    rng = np.random.default_rng(7)
    for trial in range(300):
        share = (0.02, 0.3, 0.9)[trial % 3]
        old = _masked_window(run3, int(rng.integers(0, len(run3) - 512)), share, mask, rng)
        new = old.copy()
        where = rng.choice(512, int(rng.integers(1, module._FEW_CHANGES + 1)), replace=False)
        if trial % 4 == 0:
            where[0] = (0, 511)[trial % 8 == 0]
        new[where] = np.where(new[where] == mask, rng.integers(0, mask, len(where)), mask)
        changed = old != new
        near = cached._moved(old, new, changed)
        monkeypatch.setattr(module, "_FEW_CHANGES", 0)
        whole = cached._moved(old, new, changed)
        monkeypatch.undo()
        assert np.array_equal(near, whole), trial


def test_terms_kept_by_context_give_the_prior_computed_afresh(pybench):
    # The memo keeps each side's term under the decided events it depends on; across windows
    # and calls of any size (contexts cut by MASK, by the window's edges, or k long) the prior
    # must be the one computed without it, and contexts do come back (that is what it is for).
    encoder, (_, _, run3) = pybench
    ngrams = encoder.ngrams
    rng = np.random.default_rng(11)
    memo: dict = {}
    asked = 0
    for trial in range(200):
        window = _masked_window(run3, int(rng.integers(0, 4000)), (0.05, 0.3, 0.7)[trial % 3],
                                ngrams.vocab_size, rng)
        size = 300 if trial % 10 == 0 else int(rng.integers(1, 9))
        positions = np.sort(rng.choice(512, size, replace=False))
        if trial % 5 == 0:
            positions[0] = 0
        expected = ngrams.log_prior(window, positions, "pybench")
        assert np.array_equal(ngrams.log_prior(window, positions, "pybench", memo), expected), trial
        asked += 2 * size
    assert 0 < len(memo) < asked / 3


def test_the_encoder_counts_contexts_up_to_the_order_it_is_given(pybench):
    from tracesynth.errors import ConfigError

    runs = [ds.load("pybench", r) for r in (1, 2)]
    encoder = TraceEncoder("light", ngram_order=3).fit(runs)
    assert encoder.ngrams.k == 3 and ("pybench", "left", 3) in encoder.ngrams.tables
    assert ("pybench", "left", 4) not in encoder.ngrams.tables
    with pytest.raises(ConfigError, match="n-gram order must be 1-64"):
        TraceEncoder("light", ngram_order=0)

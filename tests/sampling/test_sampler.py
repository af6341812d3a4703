"""The sampler: known tokens stay clamped, any number of steps, seeds, and the guide hook."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import shared_trace

from tracesynth.model.config import SIZES, ModelConfig, TrainConfig
from tracesynth.model.train import train
from tracesynth.sampling import generate, sample_window


@pytest.fixture(scope="module")
def full_model():
    torch.set_num_threads(1)
    real = shared_trace("bug446190").slice(0, 4000).with_meta(workload="bug")
    model, encoder, _ = train([real], None, channels="full", model_config=ModelConfig(context=64, **SIZES["tiny"]),
                              train_config=TrainConfig(steps=30, batch_size=4, val_every=0, checkpoint_every=0))
    return model, encoder, real


def _window(encoder, real, start=500, length=64):
    return encoder.window(encoder.encode(real), start, length)


def test_known_tokens_are_clamped_and_everything_else_is_decided(full_model):
    model, encoder, real = full_model
    codes, _ = _window(encoder, real)
    known_mask = {ch: (np.arange(64) % 3 == 0) for ch in codes}  # infilling: every third event known
    known_mask["dt"] = np.zeros(64, dtype=bool)                  # ... but all gaps generated
    for steps in (1, 4):
        out = sample_window(model, codes, known_mask, 0, steps=steps, generator=torch.Generator().manual_seed(0))
        for ch in codes:
            assert (out[ch][known_mask[ch]] == codes[ch][known_mask[ch]]).all()
            assert (out[ch] < encoder.vocab_sizes()[ch]).all()  # no MASK left


def test_same_seed_same_window_other_seed_other_window(full_model):
    model, encoder, real = full_model
    codes, _ = _window(encoder, real)
    none = {ch: np.zeros(64, dtype=bool) for ch in codes}
    a = sample_window(model, codes, none, 0, steps=4, generator=torch.Generator().manual_seed(5))
    b = sample_window(model, codes, none, 0, steps=4, generator=torch.Generator().manual_seed(5))
    c = sample_window(model, codes, none, 0, steps=4, generator=torch.Generator().manual_seed(6))
    assert all((a[ch] == b[ch]).all() for ch in a)
    assert any((a[ch] != c[ch]).any() for ch in a)


def test_guidance_scale_and_random_order_run(full_model):
    model, encoder, real = full_model
    codes, _ = _window(encoder, real)
    none = {ch: np.zeros(64, dtype=bool) for ch in codes}
    out = sample_window(model, codes, none, 0, steps=3, guidance_scale=2.0, order="random",
                        generator=torch.Generator().manual_seed(1))
    assert all((out[ch] < encoder.vocab_sizes()[ch]).all() for ch in out)


class ForbidEvent:
    """A fake guide: any decided position holding `event` breaks the 'rule'."""

    def __init__(self, event: str):
        self.event = event
        self.partials: list[dict] = []

    def violating_positions(self, partial):
        self.partials.append(partial)
        return partial["decided"] & (partial["event"] == self.event)


def test_guide_hook_contract_and_effect(full_model):
    model, encoder, real = full_model
    top = real.to_pandas()["event"].value_counts().index[0]
    counts = {}
    for use_guide in (False, True):
        guide = ForbidEvent(top) if use_guide else None
        trace = generate(model, encoder, 512, "bug", steps=8, seed=2, guide=guide)
        counts[use_guide] = int((trace.to_pandas()["event"] == top).sum())
    assert counts[True] < counts[False]
    partial = guide.partials[3]
    assert set(partial) == {"event", "tid", "cpu", "ret", "decided"}
    n = len(partial["event"])
    assert n == 64 and all(len(v) == n for v in partial.values())
    assert partial["event"].dtype == object and partial["decided"].dtype == bool
    assert partial["tid"].dtype == np.int64 and partial["cpu"].dtype == np.int64
    assert partial["ret"].dtype == np.float64
    assert all(e is None for e in partial["event"][~partial["decided"]])
    assert all(isinstance(e, str) for e in partial["event"][partial["decided"]])
    # Windows after the first start with a known prefix, decided from the first step on.
    later = guide.partials[len(guide.partials) // 2]
    assert later["decided"][:16].all()
    # Called after every step but the last, for every window (512 events: 1 + ceil(448/48) windows).
    assert len(guide.partials) == 7 * 11


def test_guide_rounds_redraw_what_the_last_step_left_and_never_leave_more(full_model):
    model, encoder, real = full_model
    codes, _ = _window(encoder, real)
    known_mask = {ch: np.arange(64) < 16 for ch in codes}

    def partial_fn(c, decided):
        return encoder.partial(c, decided, np.full(encoder.tid.slots, -1, dtype=np.int64))

    def run(rounds, guide):
        return sample_window(model, codes, known_mask, 0, steps=4, guide=guide, partial_fn=partial_fn,
                             guide_rounds=rounds, generator=torch.Generator().manual_seed(3))

    names = encoder.event.decode(np.arange(encoder.event.vocab_size))
    plain = run(0, None)
    top = names[np.bincount(plain["event"][16:]).argmax()]  # the commonest generated event: "forbidden"
    guides = {rounds: ForbidEvent(top) for rounds in (0, 4)}
    out = {rounds: run(rounds, guide) for rounds, guide in guides.items()}
    left = {rounds: int((names[o["event"][16:]] == top).sum()) for rounds, o in out.items()}
    assert 0 < left[0] and left[4] < left[0]
    assert all((out[4][ch][:16] == codes[ch][:16]).all() for ch in codes)
    assert len(guides[0].partials) == 3  # after each step but the last, nothing more
    # Then once per round: each kept round leaves fewer, an undone one is not kept.
    flagged = [int((p["event"][16:] == top).sum()) for p in guides[4].partials[3:]]
    assert flagged[0] == left[0] and min(flagged) == left[4]
    with pytest.raises(ValueError, match="rounds"):
        run(-1, guides[0])


class RuleOutEvent(ForbidEvent):
    """A fake guide that also rules names out before they are drawn."""

    def __init__(self, event: str):
        super().__init__(event)
        self.masks = 0

    def allowed_event_mask(self, partial, vocabulary):
        self.masks += 1
        return np.tile(np.array([name != self.event for name in vocabulary]), (len(partial["event"]), 1))


def test_ruled_out_names_are_never_drawn_even_at_the_last_step(full_model):
    model, encoder, real = full_model
    top = real.to_pandas()["event"].value_counts().index[0]
    # One denoising step: no later step could re-mask, so only ruling out before drawing helps.
    plain = generate(model, encoder, 200, "bug", steps=1, seed=2, guide=ForbidEvent(top))
    assert (plain.to_pandas()["event"] == top).any()
    guide = RuleOutEvent(top)
    ruled = generate(model, encoder, 200, "bug", steps=1, seed=2, guide=guide)
    assert not (ruled.to_pandas()["event"] == top).any() and guide.masks > 0


def test_corrector_redraws_only_generated_tokens_and_stays_seeded(full_model):
    model, encoder, real = full_model
    codes, _ = _window(encoder, real)
    known_mask = {ch: np.arange(64) < 16 for ch in codes}  # a known prefix, as in continuation
    run = lambda k, seed=0: sample_window(model, codes, known_mask, 0, steps=4, corrector_steps=k,  # noqa: E731
                                          corrector_fraction=0.25, generator=torch.Generator().manual_seed(seed))
    plain, corrected = run(0), run(3)
    for ch in codes:
        assert (corrected[ch][:16] == codes[ch][:16]).all()
        assert (corrected[ch] < encoder.vocab_sizes()[ch]).all()
    assert any((plain[ch] != corrected[ch]).any() for ch in codes)  # it did redraw something
    assert all((run(3)[ch] == corrected[ch]).all() for ch in codes)


def test_a_guide_can_keep_to_re_masking(full_model):
    from tracesynth.constraints import ConstraintGuide

    model, encoder, real = full_model
    top = real.to_pandas()["event"].value_counts().index[0]
    guide = RuleOutEvent(top)
    guide.rule_out_names = False  # as ConstraintGuide() by default
    generate(model, encoder, 100, "bug", steps=2, seed=2, guide=guide)
    assert guide.masks == 0 and guide.partials
    assert ConstraintGuide().rule_out_names is False and ConstraintGuide(rule_out_names=True).rule_out_names


def test_start_temperature_applies_to_the_trace_start_only(full_model):
    model, encoder, real = full_model
    codes, _ = _window(encoder, real)
    none = {ch: np.zeros(64, dtype=bool) for ch in codes}
    run = lambda offset, **kw: sample_window(model, codes, none, 0, steps=4, offset=offset,  # noqa: E731
                                             generator=torch.Generator().manual_seed(3), **kw)
    # Far from the start (past the trace-position embedding), the start temperature changes nothing.
    far = model.config.trace_positions + 100
    assert all((run(far, start_temperature=0.05)[ch] == run(far)[ch]).all() for ch in codes)
    # A window at the trace's start is drawn wholly at the start temperature.
    cold_start = run(0, start_temperature=0.05)
    assert all((cold_start[ch] == run(0, temperature=0.05)[ch]).all() for ch in codes)
    assert any((cold_start[ch] != run(0)[ch]).any() for ch in codes)
    with pytest.raises(ValueError, match="start temperature"):
        run(0, start_temperature=0.0)


def test_channel_temperature_changes_that_channel_alone(full_model):
    model, encoder, real = full_model
    codes, _ = _window(encoder, real)
    none = {ch: np.zeros(64, dtype=bool) for ch in codes}
    run = lambda **kw: sample_window(model, codes, none, 0, steps=1, order="random",  # noqa: E731
                                     generator=torch.Generator().manual_seed(5), **kw)
    base = run()
    # One step draws every token from the same network pass with the same random numbers, so
    # only the cooled channel moves (with more steps, later draws condition on its tokens).
    cold = run(channel_temperature={"tid": 0.05})
    assert (cold["tid"] != base["tid"]).any()
    assert all((cold[ch] == base[ch]).all() for ch in codes if ch != "tid")
    # Very cold = the most likely thread slot at every draw: fewer distinct slots than at 1.
    assert len(np.unique(cold["tid"])) <= len(np.unique(base["tid"]))
    assert all((run(channel_temperature={"tid": 1.0})[ch] == base[ch]).all() for ch in codes)
    with pytest.raises(ValueError, match="channel temperatures"):
        run(channel_temperature={"tid": 0.0})


class RecordDecided:
    """A guide that breaks nothing and records which positions each step has decided."""

    def __init__(self):
        self.decided: list[dict] = []

    def violating_positions(self, partial):
        self.decided.append(partial)
        return np.zeros(len(next(iter(partial.values()))), dtype=bool)


def _first_step_reveals(model, codes, spread):
    guide = RecordDecided()
    none = {ch: np.zeros(64, dtype=bool) for ch in codes}
    sample_window(model, codes, none, 0, steps=4, spread=spread, guide=guide,
                  partial_fn=lambda c, decided: {ch: d.copy() for ch, d in decided.items()},
                  generator=torch.Generator().manual_seed(4))
    return guide.decided[0]


def test_spread_keeps_tokens_revealed_together_apart(full_model):
    model, encoder, real = full_model
    codes, _ = _window(encoder, real)
    gaps = {}
    for spread in (0, 3):
        first = _first_step_reveals(model, codes, spread)
        assert 0 < sum(int(d.sum()) for d in first.values()) < 6 * 64 // 7  # within the eligible count
        gaps[spread] = min(np.diff(np.nonzero(d)[0]).min() for d in first.values() if d.sum() > 1)
    assert gaps[0] <= 3 < gaps[3]  # without spread, neighbours go together; with it, > 3 apart
    with pytest.raises(ValueError, match="spread"):
        _first_step_reveals(model, codes, -1)


def test_support_corrector_redraws_flagged_events_and_never_leaves_more(full_model):
    """The corrector re-masks what `support_cover` flags and draws it again; known events stay,
    and a round that would leave more flagged events than it found is undone."""
    model, encoder, real = full_model
    codes, _ = _window(encoder, real)
    known_mask = {ch: np.arange(64) < 16 for ch in codes}  # prefix continuation
    plain = sample_window(model, codes, known_mask, 0, steps=4, generator=torch.Generator().manual_seed(3))
    target = np.bincount(plain["event"][16:]).argmax()  # the commonest generated event: "unseen"
    calls = []

    def cover(events):
        calls.append(int((events[16:] == target).sum()))
        return events == target

    fixed = sample_window(model, codes, known_mask, 0, steps=4, generator=torch.Generator().manual_seed(3),
                          support_cover=cover, support_rounds=3)
    for ch in codes:
        assert (fixed[ch][:16] == codes[ch][:16]).all()
    assert calls[0] == int((plain["event"][16:] == target).sum())  # the corrector starts from the plain window
    assert int((fixed["event"][16:] == target).sum()) < calls[0]
    assert int((fixed["event"][16:] == target).sum()) == min(calls)
    untouched = sample_window(model, codes, known_mask, 0, steps=4, generator=torch.Generator().manual_seed(3),
                              support_cover=cover, support_rounds=0)
    assert all((untouched[ch] == plain[ch]).all() for ch in plain)
    with pytest.raises(ValueError):
        sample_window(model, codes, known_mask, 0, steps=4, support_cover=cover, support_rounds=-1)


class _StubGuard:
    """Spans of 8 events count as copied when the plain window has them; one planned round."""

    def __init__(self, plain_events, edits, known=None):
        self.spans = {tuple(plain_events[i:i + 8]) for i in range(len(plain_events) - 7)}
        self.edits, self.plans = edits, 0
        self.known = np.arange(len(plain_events)) < 16 if known is None else known

    def copied(self, events):
        return np.array([tuple(events[i:i + 8]) in self.spans for i in range(len(events) - 7)])

    def plan(self, events, free, rng):
        self.plans += 1
        assert np.array_equal(free, ~self.known)
        return self.edits if self.plans == 1 else []


def test_copy_guard_edits_shift_all_channels_and_redraw_the_edited_events(full_model):
    from tracesynth.sampling.copy_guard import Edit

    model, encoder, real = full_model
    codes, _ = _window(encoder, real)
    known_mask = {ch: np.arange(64) < 16 for ch in codes}
    plain = sample_window(model, codes, known_mask, 0, steps=4, generator=torch.Generator().manual_seed(3))
    other = int((plain["event"][40] + 1) % encoder.event.vocab_size)
    edits = [Edit("replace", 40, other), Edit("insert", 30, other), Edit("delete", 20)]
    guard = _StubGuard(plain["event"], edits)
    guarded = sample_window(model, codes, known_mask, 0, steps=4, generator=torch.Generator().manual_seed(3),
                            copy_guard=guard, copy_rounds=3)
    assert guard.plans == 2  # the second round found nothing to edit
    expected = {ch: plain[ch].copy() for ch in plain}
    redrawn = {ch: np.zeros(64, bool) for ch in plain}
    for ch in plain:  # apply the plan by hand, right to left, marking what the model redraws
        e, r = expected[ch], redrawn[ch]
        e[40] = other if ch == "event" else -1
        e[31:], r[31:] = e[30:-1].copy(), r[30:-1].copy()
        e[30] = other if ch == "event" else -1
        e[20:-1], r[20:-1] = e[21:].copy(), r[21:].copy()
        e[-1] = -1
        r |= e == -1
        r[-1] = True
    for ch in plain:
        keep = ~redrawn[ch]
        assert (guarded[ch][keep] == expected[ch][keep]).all(), ch
        assert (guarded[ch] != model.mask_ids[ch]).all()
        assert (guarded[ch][:16] == codes[ch][:16]).all()
    assert guarded["event"][40] == other and guarded["event"][29] == other  # moved by the insert, the delete
    untouched = sample_window(model, codes, known_mask, 0, steps=4, generator=torch.Generator().manual_seed(3),
                              copy_guard=_StubGuard(plain["event"], edits), copy_rounds=0)
    assert all((untouched[ch] == plain[ch]).all() for ch in plain)
    with pytest.raises(ValueError):
        sample_window(model, codes, known_mask, 0, steps=4, copy_guard=guard, copy_rounds=-1)


def test_copy_guard_shifts_stop_before_a_known_event_which_stays_put(full_model):
    from tracesynth.sampling.copy_guard import Edit

    model, encoder, real = full_model
    codes, _ = _window(encoder, real)
    known = (np.arange(64) < 16) | (np.arange(64) == 50)  # a prefix and one scaffold anchor
    known_mask = {ch: known for ch in codes}
    plain = sample_window(model, codes, known_mask, 0, steps=4, generator=torch.Generator().manual_seed(3))
    other = int((plain["event"][30] + 1) % encoder.event.vocab_size)
    edits = [Edit("insert", 30, other, until=50), Edit("delete", 20, until=50)]
    guarded = sample_window(model, codes, known_mask, 0, steps=4, generator=torch.Generator().manual_seed(3),
                            copy_guard=_StubGuard(plain["event"], edits, known), copy_rounds=3)
    for ch in plain:
        e = plain[ch].copy()
        e[31:50] = e[30:49].copy()  # the insert pushes the event before the anchor out
        e[30] = other if ch == "event" else -1
        e[20:49] = e[21:50].copy()  # the delete closes up to the anchor
        e[48:50] = -1  # freed before the anchor: the event the insert moved there, and the hole
        keep = e != -1
        assert (guarded[ch][keep] == e[keep]).all(), ch
        assert (guarded[ch] != model.mask_ids[ch]).all()
        assert guarded[ch][50] == codes[ch][50] and (guarded[ch][:16] == codes[ch][:16]).all()
        assert (guarded[ch][51:] == plain[ch][51:]).all()  # nothing after the anchor moved
    assert guarded["event"][29] == other


def test_a_copy_guard_round_that_copies_as_much_is_undone(full_model):
    from tracesynth.sampling.copy_guard import Edit

    model, encoder, real = full_model
    codes, _ = _window(encoder, real)
    known_mask = {ch: np.arange(64) < 16 for ch in codes}
    plain = sample_window(model, codes, known_mask, 0, steps=4, generator=torch.Generator().manual_seed(3))
    guard = _StubGuard(plain["event"], [Edit("replace", 50, int(plain["event"][50]))])  # changes no event
    guard.copied = lambda events: np.ones(len(events) - 7, bool)  # everything stays "copied"
    undone = sample_window(model, codes, known_mask, 0, steps=4, generator=torch.Generator().manual_seed(3),
                           copy_guard=guard, copy_rounds=2)
    assert all((undone[ch] == plain[ch]).all() for ch in plain)


def test_event_prior_is_added_to_every_event_draw_and_zero_changes_nothing(full_model):
    model, encoder, real = full_model
    codes, _ = _window(encoder, real)
    known_mask = {ch: np.arange(64) < 16 for ch in codes}
    plain = sample_window(model, codes, known_mask, 0, steps=4, generator=torch.Generator().manual_seed(3))
    calls = []

    def zero(window, positions):
        calls.append((window.copy(), positions.copy()))
        return np.zeros((len(positions), encoder.vocab_sizes()["event"]))

    same = sample_window(model, codes, known_mask, 0, steps=4, generator=torch.Generator().manual_seed(3),
                         event_prior=zero)
    assert all((plain[ch] == same[ch]).all() for ch in plain)
    mask_id = model.mask_ids["event"]
    # the hook sees the window as decided so far (known prefix, MASK elsewhere) and the masked
    # positions it is asked about
    assert (calls[0][0][:16] == codes["event"][:16]).all() and (calls[0][0][16:] == mask_id).all()
    assert all((window[positions] == mask_id).all() for window, positions in calls)
    target = int(codes["event"][0])

    def force(window, positions):
        out = np.zeros((len(positions), encoder.vocab_sizes()["event"]))
        out[:, target] = 100.0
        return out

    forced = sample_window(model, codes, known_mask, 0, steps=4, generator=torch.Generator().manual_seed(3),
                           event_prior=force)
    assert (forced["event"][16:] == target).all() and (forced["event"][:16] == codes["event"][:16]).all()


def test_prior_rounds_let_events_revealed_in_one_step_see_each_other(full_model):
    model, encoder, real = full_model
    codes, _ = _window(encoder, real)
    known_mask = {ch: np.arange(64) < 8 for ch in codes}
    mask_id = model.mask_ids["event"]

    def like_left(window, positions):
        """+20 for the event just before, where that one is decided."""
        out = np.zeros((len(positions), encoder.vocab_sizes()["event"]))
        left = positions[positions > 0] - 1
        rows = np.flatnonzero(positions > 0)
        decided = window[left] != mask_id
        out[rows[decided], window[left[decided]]] = 20.0
        return out

    def repeats(out):
        return int((out["event"][9:] == out["event"][8:-1]).sum())

    # One denoising step: every generated event is drawn in the same network call.
    one = sample_window(model, codes, known_mask, 0, steps=1, generator=torch.Generator().manual_seed(4),
                        event_prior=like_left)
    parts = sample_window(model, codes, known_mask, 0, steps=1, generator=torch.Generator().manual_seed(4),
                          event_prior=like_left, prior_rounds=16)
    assert repeats(parts) > repeats(one) + 20
    # without a prior the rounds change nothing
    plain = sample_window(model, codes, known_mask, 0, steps=2, generator=torch.Generator().manual_seed(4))
    same = sample_window(model, codes, known_mask, 0, steps=2, generator=torch.Generator().manual_seed(4),
                         prior_rounds=16)
    assert all((plain[ch] == same[ch]).all() for ch in plain)
    with pytest.raises(ValueError):
        sample_window(model, codes, known_mask, 0, steps=1, event_prior=like_left, prior_rounds=0)


def test_later_parts_redraw_only_the_rows_whose_prior_moved(full_model):
    model, encoder, real = full_model
    codes, _ = _window(encoder, real)
    known_mask = {ch: np.arange(64) < 8 for ch in codes}
    vocab = encoder.vocab_sizes()["event"]
    favour = int(codes["event"][3])
    asked = []

    def fixed(window, positions):
        """A prior that ignores the window: no part after the first has anything to redraw."""
        asked.append(len(positions))
        out = np.zeros((len(positions), vocab))
        out[:, favour] = 1.5
        return out

    # Without spread the parts then rank the same confidences the one part ranks, so they reveal
    # the same tokens: the window is the one-part window, draw for draw.
    one = sample_window(model, codes, known_mask, 0, steps=3, generator=torch.Generator().manual_seed(5),
                        event_prior=fixed)
    parts = sample_window(model, codes, known_mask, 0, steps=3, generator=torch.Generator().manual_seed(5),
                          event_prior=fixed, prior_rounds=4)
    assert all((one[ch] == parts[ch]).all() for ch in one)
    assert len(asked) > 3  # the later parts did ask the prior (and found nothing had moved)


def test_a_cached_prior_draws_exactly_what_the_same_prior_as_a_plain_callable_draws(full_model):
    # CachedPrior tells the sampler which rows it recomputed (versions), so later parts compare
    # only those; any other callable has every row compared. The windows must be identical.
    from tracesynth.encoding.ngrams import CachedPrior

    model, encoder, real = full_model
    codes, _ = _window(encoder, real)
    known_mask = {ch: np.arange(64) < 8 for ch in codes}
    cached = CachedPrior(encoder.ngrams, "bug", 1.0)
    plain = CachedPrior(encoder.ngrams, "bug", 1.0)
    refreshes = []
    real_refresh = cached.refresh
    cached.refresh = lambda *a: refreshes.append(1) or real_refresh(*a)
    fast = sample_window(model, codes, known_mask, 0, steps=3, generator=torch.Generator().manual_seed(7),
                         event_prior=cached, prior_rounds=8)
    slow = sample_window(model, codes, known_mask, 0, steps=3, generator=torch.Generator().manual_seed(7),
                         event_prior=lambda w, p: plain(w, p), prior_rounds=8)
    assert refreshes and all((fast[ch] == slow[ch]).all() for ch in fast)


def test_before_prior_from_the_trace_start_is_drawn_by_the_network_alone(full_model):
    """`prior_from` N: the prior is left out at window positions among the trace's first N
    events and applies after them; at offset 0 a window shorter than N is drawn as without a
    prior; a CachedPrior carried to a later window gets its rows back."""
    from tracesynth.encoding.ngrams import CachedPrior

    model, encoder, real = full_model
    codes, _ = _window(encoder, real)
    known_mask = {ch: np.arange(64) < 8 for ch in codes}
    vocab = encoder.vocab_sizes()["event"]
    target = int(codes["event"][0])
    start = 512  # past the tiny model's 64-event window at offset 0

    def force(window, positions, from_row=0):
        out = np.zeros((len(positions), vocab), dtype=np.float32)
        out[np.asarray(positions) >= from_row, target] = 100.0
        return out

    def draw(**kw):
        return sample_window(model, codes, known_mask, 0, steps=4, generator=torch.Generator().manual_seed(3), **kw)

    plain = draw(offset=0)
    assert all((draw(offset=0, event_prior=force, prior_from=start)[ch] == plain[ch]).all() for ch in plain)
    assert (draw(offset=0, event_prior=force)["event"][8:] == target).all()  # prior_from 0: as before
    # a window straddling the end of the start-up: rows past it get the prior, the others not
    straddle = draw(offset=start - 32, event_prior=force, prior_from=start)
    by_hand = draw(offset=start - 32, event_prior=lambda w, p: force(w, p, from_row=32))
    assert all((straddle[ch] == by_hand[ch]).all() for ch in plain)
    assert (straddle["event"][32:] == target).all()
    # the same with the n-gram counts in a CachedPrior, kept across windows as the pipeline does
    cached = CachedPrior(encoder.ngrams, "bug", 1.0)
    assert all((draw(offset=0, event_prior=cached, prior_from=start)[ch] == plain[ch]).all() for ch in plain)
    assert cached.quiet_before == start
    far = draw(offset=10_000, event_prior=cached, prior_from=start)
    assert cached.quiet_before == 0
    fresh = draw(offset=10_000, event_prior=CachedPrior(encoder.ngrams, "bug", 1.0))
    assert all((far[ch] == fresh[ch]).all() for ch in plain)
    # unknown offset: nothing is known to be the start, the prior applies everywhere
    assert (draw(event_prior=force, prior_from=start)["event"][8:] == target).all()
    with pytest.raises(ValueError):
        draw(offset=0, event_prior=force, prior_from=-1)


def test_bf16_network_samples_valid_seeded_windows_close_to_fp32(full_model):
    """bf16 autocast covers the network only: features come back fp32, draws stay seeded, and
    the heads' distributions stay within bf16 rounding of fp32's."""
    model, encoder, real = full_model
    codes, _ = _window(encoder, real)
    none = {ch: np.zeros(64, dtype=bool) for ch in codes}
    a = sample_window(model, codes, none, 0, steps=4, generator=torch.Generator().manual_seed(5), precision="bf16")
    b = sample_window(model, codes, none, 0, steps=4, generator=torch.Generator().manual_seed(5), precision="bf16")
    assert all((a[ch] == b[ch]).all() and (a[ch] < encoder.vocab_sizes()[ch]).all() for ch in a)
    batch = {ch: torch.as_tensor(codes[ch])[None] for ch in codes}
    with torch.inference_mode():
        full = model.hidden(batch, torch.tensor([0.5]), torch.tensor([0]))
        with torch.autocast("cpu", dtype=torch.bfloat16):
            half = model.hidden(batch, torch.tensor([0.5]), torch.tensor([0]))
        p = torch.softmax(model.logits(full, "event"), -1)
        q = torch.softmax(model.logits(half.float(), "event"), -1)
    assert (p - q).abs().max() < 0.05
    with pytest.raises(ValueError, match="precision must be fp32 or bf16"):
        sample_window(model, codes, none, 0, steps=1, precision="auto")


def test_a_rows_draw_is_the_same_drawn_alone_or_with_every_row():
    # The sampler draws only a step's winners, from the uniform number each row took when it
    # was ranked: that is the same window as drawing every row and keeping the winners only if
    # a row's class depends on its logits, its number and its temperature alone.
    from tracesynth.sampling.sampler import _lookup, _uniforms

    gen = torch.Generator().manual_seed(3)
    logits = torch.randn(500, 71, generator=gen) * 3
    logits[:, 5] = float("-inf")  # banned classes are never drawn
    rows = torch.tensor([0, 7, 8, 250, 499])
    for temperature in (1.0, 0.7, torch.rand(500, generator=gen) + 0.5):
        u = _uniforms(len(logits), gen, temperature)
        every = _lookup(logits, u, temperature)
        alone = _lookup(logits[rows], u[rows], temperature[rows] if isinstance(temperature, torch.Tensor)
                        else temperature)
        assert torch.equal(every[rows], alone) and not (every == 5).any()
    assert _uniforms(3, gen, 0.0) is None
    assert torch.equal(_lookup(logits, None, 0.0), logits.argmax(-1))  # temperature 0: greedy
    # and the draw still samples softmax(logits / T): frequencies of a 3-class row
    probs = torch.tensor([0.6, 0.3, 0.1])
    drawn = _lookup(probs.log().expand(20000, 3).clone(), _uniforms(20000, torch.Generator().manual_seed(0), 1.0), 1.0)
    assert np.allclose(np.bincount(drawn.numpy(), minlength=3) / 20000, probs.numpy(), atol=0.015)


def test_the_neighbourhood_best_kept_across_parts_is_a_fresh_max_every_time():
    # Each part of a step reveals a few rows and gives a few others new confidences; the
    # candidates keep who is the surest of its neighbourhood and look again only near those
    # changes. The scores must be what a max over the whole window gives at every ranking
    # (ties, the window's edges and rows with no open neighbour included).
    from tracesynth.sampling.sampler import _SPREAD_BONUS, _Candidates

    rng = np.random.default_rng(5)
    length, spread = 300, 4
    idx = np.sort(rng.choice(length, 200, replace=False))
    cand = _Candidates(torch.as_tensor(idx), torch.zeros(len(idx), 3), length, spread)

    def confidences(rows):
        return torch.as_tensor(rng.choice([-0.5, -1.0, -2.0], len(rows)).astype(np.float32))  # many ties

    cand.store(np.arange(len(idx)), torch.zeros(len(idx), 3), None, confidences(idx), None)
    for part in range(60):
        still = np.flatnonzero(cand.open)
        window = np.full(length, -np.inf, dtype=np.float32)
        window[idx[still]] = cand.conf[still]
        best = np.array([window[max(p - spread, 0):p + spread + 1].max() for p in idx[still]])
        expected = cand.conf[still] + np.float32(_SPREAD_BONUS) * (cand.conf[still] >= best).astype(np.float32)
        assert np.array_equal(cand.scores(still), expected), part
        cand.revealed(rng.choice(still, 3, replace=False))
        moved = np.sort(rng.choice(np.flatnonzero(cand.open), 2, replace=False))
        cand.store(moved, torch.zeros(2, 3), None, confidences(moved), None)
    assert cand.open.sum() == 200 - 180


def test_a_self_conditioned_model_reads_the_last_step_estimate_at_the_masked_positions():
    """From the second step on, the network's input carries the previous step's estimate at
    the tokens still masked and nothing at decided ones; the draws stay seeded."""
    torch.set_num_threads(1)
    real = shared_trace("bug446190").slice(0, 2000).with_meta(workload="bug")
    model, encoder, _ = train([real], None, channels="light",
                              model_config=ModelConfig(context=64, self_condition=True, **SIZES["tiny"]),
                              train_config=TrainConfig(steps=10, batch_size=4, val_every=0, checkpoint_every=0))
    codes, _ = encoder.window(encoder.encode(real), 100, 64)
    none = {ch: np.zeros(64, dtype=bool) for ch in codes}
    seen = []
    hidden = model.hidden

    def spy(batch, *args, self_cond=None, **kw):
        masked = torch.zeros(64, dtype=torch.bool)
        for ch in model.channels:
            masked |= batch[ch][0] == model.mask_ids[ch]
        seen.append((masked, None if self_cond is None else self_cond[0].abs().sum(-1) > 0))
        return hidden(batch, *args, self_cond=self_cond, **kw)

    model.hidden = spy
    out = sample_window(model, codes, none, 0, steps=4, generator=torch.Generator().manual_seed(3))
    assert len(seen) == 4 and all(fed is not None for _, fed in seen)
    assert not seen[0][1].any()  # nothing estimated yet
    for masked, fed in seen[1:]:
        assert masked.any() and fed[masked].all() and not fed[~masked].any()
    again = sample_window(model, codes, none, 0, steps=4, generator=torch.Generator().manual_seed(3))
    assert all((out[ch] == again[ch]).all() for ch in out)


def test_event_bans_keep_a_code_out_of_their_positions_at_every_step(full_model):
    """The cadence scaffold's bans: the code is drawn nowhere it is banned, even by one step
    (nothing re-masks), and still where it is not; with nothing else left, it is drawn."""
    model, encoder, real = full_model
    codes, _ = _window(encoder, real)
    mask = {ch: np.zeros(64, bool) for ch in model.channels}
    plain = sample_window(model, codes, mask, 0, steps=1, generator=torch.Generator().manual_seed(3))["event"]
    top = int(np.bincount(plain).argmax())
    banned = np.zeros(64, bool)
    banned[:48] = True
    for steps in (1, 8):
        out = sample_window(model, codes, mask, 0, steps=steps, generator=torch.Generator().manual_seed(3),
                            event_bans=[(top, banned)])["event"]
        assert not (out[:48] == top).any() and len(out) == 64
    every = [(c, np.ones(64, bool)) for c in range(encoder.event.vocab_size)]
    out = sample_window(model, codes, mask, 0, steps=2, generator=torch.Generator().manual_seed(3), event_bans=every)
    assert len(out["event"]) == 64  # nothing allowed anywhere: drawn as if unbanned, no NaN

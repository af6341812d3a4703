"""One window of reverse diffusion: the masked-diffusion sampler (MDLM ancestral steps).

Starting from the known tokens (a prefix, or any infilling pattern) and MASK elsewhere, each of
`steps` steps goes from time t to s < t (see `time_points`): a still-masked token is revealed
with probability (t - s) / t and drawn from the denoiser's prediction, with classifier-free
guidance when `guidance_scale` ≠ 1. With `order="random"` the revealed tokens are chosen
independently (the exact ancestral sampler); with `order="confidence"` (default) the same
expected number is spent on the positions whose prediction is most determined (highest top
probability; optional Gumbel noise `rank_noise`·t as in MaskGIT, Chang et al. 2022): tokens
revealed together are drawn independently, so revealing the well-determined ones first (next to
known events) avoids contradictions far from any context. `spread` keeps the tokens revealed in
one step apart: a token goes first only if it is the surest of its channel within `spread`
positions either side (the rest fill the step's quota after it). Neighbours drawn in the same
step are exactly the pairs whose independence hurts most (a thread id and the next event's, an
entry and its exit): at 16 steps and no spread, ~256 tokens of a 4096 window are revealed per
step, many of them side by side (docs/model.md, "Spread reveals"). The rank uses the distribution, not
the drawn value, so it does not favour frequent values; the drawn values are still samples. Known tokens are clamped throughout; a guide may send positions back
to MASK (and, if it asks to, rule event names out before they are drawn). Optional corrector
steps afterwards re-mask and redraw the least likely generated tokens. Only positions revealed
at a step go through the output heads, and a step that reveals nothing skips the network.

The support corrector (`support_cover`, `support_rounds`) runs after the reverse steps: the
events in an event 8-gram no training trace contains (`encoding.support`) go back to MASK and are
drawn again in `support_steps` short reverse steps, up to `support_rounds` times; a round that leaves more
such events than it found is undone. Those grams are where tokens drawn in the same step do not
fit together (a loop iteration with one read too many), and they are what a window classifier
sees; the model's own per-token scores (the corrector above) rate most of them as likely, the
table does not (docs/model.md, "Support corrector"). The copy guard (`copy_guard`,
`copy_rounds`) runs after it: event spans found verbatim in training are edited where training
itself varies (`sampling.copy_guard`) and the edited events' other channels are drawn in the
same short reverse pass.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from tracesynth.model.denoiser import Denoiser
from tracesynth.model.noise import MaskingSchedule
from tracesynth.model.precision import autocast
from tracesynth.sampling.copy_guard import CopyGuard, Edit

PartialFn = Callable[[dict[str, np.ndarray], dict[str, np.ndarray]], dict[str, np.ndarray]]


def _uniforms(n: int, generator: torch.Generator, temperature: float | torch.Tensor) -> torch.Tensor | None:
    """The one uniform number per row that `_lookup` turns into a class (None for greedy rows:
    temperature <= 0 draws nothing). Taken when a row is ranked, so the generator's stream
    does not depend on which rows win."""
    if not isinstance(temperature, torch.Tensor) and temperature <= 0:
        return None
    return torch.rand((n, 1), generator=generator)


def _lookup(logits: torch.Tensor, u: torch.Tensor | None, temperature: float | torch.Tensor) -> torch.Tensor:
    """One class per row from softmax(logits / temperature) by inverse CDF at `u` (from
    `_uniforms`): one uniform number per row instead of one per class (Gumbel-max), which
    matters with 200-class heads. `temperature` is one number, or one per row (all positive).
    Rows are independent: a subset of rows gives the same classes as the whole."""
    if u is None:
        return logits.argmax(-1)
    logits = logits.float()
    if isinstance(temperature, torch.Tensor):
        logits = logits / temperature.to(logits.device, torch.float32)[:, None]
    elif temperature != 1.0:
        logits = logits / temperature
    cdf = torch.softmax(logits, dim=-1).cumsum_(-1)
    return torch.searchsorted(cdf, u.to(logits.device) * cdf[:, -1:]).clamp_(max=logits.shape[-1] - 1).flatten()


_SPREAD_BONUS = 1e4  # ranks every spread-eligible token above every other one


def time_points(steps: int, kind: str = "cosine") -> list[float]:
    """Diffusion times t_0 = 1 > t_1 > ... > t_steps = 0 of the reverse steps.

    With α(t) = 1 - t, the revealed fraction after step i is 1 - t_i. "linear" reveals the same
    share every step; "cosine" (MaskGIT's schedule) reveals few tokens first and most at the
    end, when context makes predictions sharp: tokens revealed in the same step are drawn
    independently, so early steps, with little context, should reveal few.
    """
    if kind == "linear":
        return [1.0 - i / steps for i in range(steps + 1)]
    if kind == "cosine":
        return [float(np.cos(np.pi / 2 * i / steps)) if i < steps else 0.0 for i in range(steps + 1)]
    raise ValueError(f"unknown time grid {kind!r}")


def _guided_logits(model: Denoiser, hidden: torch.Tensor, channel: str, guidance_scale: float) -> torch.Tensor:
    """Logits of one channel; with classifier-free guidance row 0 is conditional, row 1 not."""
    logits = model.logits(hidden, channel).float()
    if guidance_scale != 1.0:
        return logits[1] + guidance_scale * (logits[0] - logits[1])
    return logits[0]


def _partial(x, model, mask_ids, partial_fn) -> dict[str, np.ndarray]:
    """The window as a guide reads it: decided codes decoded to canonical terms."""
    codes = {ch: x[ch][0].cpu().numpy() for ch in model.channels}
    decided = {ch: codes[ch] != mask_ids[ch] for ch in model.channels}
    return partial_fn(codes, decided)


def _quieted(prior: Callable[[np.ndarray, np.ndarray], np.ndarray], before: int):
    """`prior` with zero rows at window positions before `before`."""
    def quieted(codes: np.ndarray, positions: np.ndarray) -> np.ndarray:
        rows = prior(codes, positions)
        return np.where((np.asarray(positions) < before)[:, None], 0.0, rows).astype(rows.dtype, copy=False)
    return quieted


@torch.inference_mode()
def sample_window(
    model: Denoiser,
    known: dict[str, np.ndarray],
    known_mask: dict[str, np.ndarray],
    workload: int,
    steps: int = 16,
    guidance_scale: float = 1.0,
    generator: torch.Generator | None = None,
    temperature: float = 1.0,
    guide=None,
    partial_fn: PartialFn | None = None,
    time_grid: str = "cosine",
    order: str = "confidence",
    banned: dict[str, list[int]] | None = None,
    rank_noise: float = 0.0,
    at_start: bool = False,
    offset: int | None = None,
    event_names: list | None = None,
    corrector_steps: int = 0,
    corrector_fraction: float = 0.05,
    start_temperature: float | None = None,
    prior_from: int = 0,
    spread: int = 0,
    channel_temperature: dict[str, float] | None = None,
    support_cover: Callable[[np.ndarray], np.ndarray] | None = None,
    support_rounds: int = 0,
    support_steps: int = 2,
    copy_guard: CopyGuard | None = None,
    copy_rounds: int = 0,
    guide_rounds: int = 0,
    event_prior: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
    prior_rounds: int = 1,
    precision: str = "fp32",
    self_condition: bool = True,
    event_bans: list[tuple[int, np.ndarray]] | None = None,
) -> dict[str, np.ndarray]:
    """Codes for one window (numpy int64 per channel). `known[ch]` holds codes where
    `known_mask[ch]` is True; everything else is generated. `banned[ch]` lists classes never
    to draw (e.g. "no event name"). `offset`: the index in the trace of the window's first
    event (None: unknown, far from the start; `at_start` alone means 0). With a guide that
    has `allowed_event_mask` (and does not set `rule_out_names = False`) and `event_names` (the
    event channel's class names), event names that would break a rule given the events
    already decided are ruled out before drawing. `start_temperature` (with a known offset)
    replaces `temperature` for the events among the trace's first `trace_positions`;
    `prior_from` > 0 (with a known offset) gives the events before the trace's `prior_from`-th
    no `event_prior`. `spread`
    (confidence order only): tokens revealed in one step stay more than this many positions
    apart where the step's quota allows. `channel_temperature` divides a channel's logits
    before drawing and ranking (so it multiplies `temperature` for that channel).
    `support_cover(event codes) -> bool per position` marks events inside k-grams unseen in
    training; with `support_rounds` > 0 the support corrector redraws them (module docstring).
    `copy_guard` (`sampling.copy_guard`) with `copy_rounds` > 0 edits event spans copied from
    training at branch points and redraws the edited events' other channels. With a guide,
    `guide_rounds` > 0 re-masks what still breaks a rule after the last step (which nothing
    re-masked) and redraws it in a short pass, keeping a round only if fewer positions break.
    `event_prior(event codes of the window, positions) -> [len(positions), V]` is added to the
    event logits before every draw and ranking (the n-gram prior, `encoding.ngrams`); with it,
    `prior_rounds` > 1 spends each step's quota in that many parts, the prior recomputed between
    them from what the parts before decided (one network call per step all the same).
    `precision` ("fp32" or "bf16", `model.precision`): what the network runs in; its features
    come back as fp32, so the output heads and the draws stay in fp32. `self_condition`: a
    self-conditioned model reads its previous step's estimates of the still-masked tokens
    (False: it sees none, as at its first step; models without it: no-op). `event_bans`:
    (event code, bool per window position) pairs: the code is never drawn at those positions
    (the cadence scaffold's anchors between their places, `sampling.cadence_scaffold`), unless
    nothing else is left there."""
    if steps < 1:
        raise ValueError("steps must be at least 1")
    if support_rounds < 0 or support_steps < 1:
        raise ValueError("support rounds must be >= 0 and support steps >= 1")
    if copy_rounds < 0 or guide_rounds < 0:
        raise ValueError("copy and guide rounds must be >= 0")
    if start_temperature is not None and start_temperature <= 0:
        raise ValueError("start temperature must be positive")
    if spread < 0:
        raise ValueError("spread must be >= 0")
    if prior_rounds < 1:
        raise ValueError("prior rounds must be >= 1")
    if prior_from < 0:
        raise ValueError("prior_from must be >= 0")
    channel_temperature = {ch: float(v) for ch, v in (channel_temperature or {}).items() if v != 1.0}
    if any(v <= 0 for v in channel_temperature.values()):
        raise ValueError("channel temperatures must be positive")
    device = next(model.parameters()).device
    generator = generator or torch.Generator().manual_seed(0)
    schedule = MaskingSchedule()
    mask_ids = model.mask_ids
    x = {ch: torch.where(torch.as_tensor(known_mask[ch]), torch.as_tensor(known[ch], dtype=torch.long),
                         torch.tensor(mask_ids[ch])).to(device)[None] for ch in model.channels}
    clamped = {ch: torch.as_tensor(known_mask[ch]).to(device) for ch in model.channels}
    any_clamped = np.zeros(len(known["event"]), dtype=bool)
    for ch in model.channels:
        any_clamped |= np.asarray(known_mask[ch])
    use_cfg = guidance_scale != 1.0
    labels = torch.tensor([workload, model.null_workload] if use_cfg else [workload], device=device)
    if offset is None and at_start:
        offset = 0
    offsets = None if offset is None else torch.full((len(labels),), int(offset), device=device)
    grid = time_points(steps, time_grid)
    early_until = -1  # window positions before this one are among the trace's first events
    if start_temperature is not None and offset is not None:
        early_until = model.config.trace_positions - int(offset)

    def temperature_of(idx: torch.Tensor) -> float | torch.Tensor:
        if early_until <= 0 or temperature <= 0:
            return temperature
        early = idx < early_until
        if not bool(early.any()):
            return temperature
        return torch.where(early.cpu(), torch.tensor(float(start_temperature)), torch.tensor(float(temperature)))
    rule_out = (guide is not None and partial_fn is not None and event_names is not None
                and "event" in model.channels and callable(getattr(guide, "allowed_event_mask", None))
                and getattr(guide, "rule_out_names", True))
    if event_prior is not None:
        # The start-up's rows without the prior: the network's trace-position embedding places
        # each start-up event, and counts read from decided neighbours would splice training
        # runs whose start-ups differ by a few scheduler events into a doubled or dropped call.
        quiet = 0 if offset is None else max(0, int(prior_from) - int(offset))
        if callable(getattr(event_prior, "quiet", None)):
            event_prior.quiet(quiet)  # a CachedPrior lives across windows: set (or clear) it each time
        elif quiet:
            event_prior = _quieted(event_prior, quiet)
    versioned = callable(getattr(event_prior, "refresh", None))  # a CachedPrior: row versions
    if precision not in ("fp32", "bf16"):
        raise ValueError(f"precision must be fp32 or bf16, not {precision!r}")

    # A self-conditioned model's latest estimate of each token (class probabilities; zero rows
    # until a step has predicted it), fed back at the positions still masked.
    estimate = None if model.self_cond is None or not self_condition else {
        ch: torch.zeros(len(x[ch][0]), model.config.vocab_sizes[ch], device=device) for ch in model.channels}

    def self_cond() -> torch.Tensor | None:
        if estimate is None:
            return None
        still = {}
        for ch in model.channels:
            pos = torch.nonzero(x[ch][0] == mask_ids[ch]).flatten()
            still[ch] = (torch.zeros_like(pos), pos, estimate[ch][pos])
        return model.self_cond_input(still, (1, len(x["event"][0]))).expand(len(labels), -1, -1)

    def features(t: float, positions: torch.Tensor) -> torch.Tensor:
        """The network's features (fp32) of the window as it is now, at time t, at `positions`
        (sorted): the last block's pointwise layers run there only (`Denoiser.hidden`)."""
        batch = {ch: x[ch].expand(len(labels), -1) for ch in model.channels}
        if len(positions) == len(x[model.channels[0]][0]):
            positions = None  # every position: the plain forward pass
        with autocast(precision, device):
            hidden = model.hidden(batch, torch.full((len(labels),), t, device=device), labels, offset=offsets,
                                  positions=positions, self_cond=self_cond())
        return hidden.float()

    def reveal(t: float, p_reveal: float) -> None:
        """One reverse step at time t: reveal (an expected share `p_reveal` of) the masked tokens."""
        masked = {ch: torch.nonzero(x[ch][0] == mask_ids[ch]).flatten() for ch in model.channels}
        if order == "random":  # ancestral MDLM: each masked token independently
            candidates = {ch: m[torch.rand(len(m), generator=generator).to(device) < p_reveal]
                          for ch, m in masked.items()}
            quota = sum(len(c) for c in candidates.values())
        else:  # the same expected count, spent on the tokens the model is surest of
            candidates = masked
            expected = sum(len(m) for m in masked.values()) * p_reveal
            quota = int(expected) + int(torch.rand((), generator=generator) < expected - int(expected))
        if quota == 0:
            return
        need = torch.unique(torch.cat([c for c in candidates.values()]))  # sorted
        hidden = features(t, need)
        allowed = None
        if rule_out:  # bool[L, V_event]: names each position may take given what is decided
            allowed = np.asarray(guide.allowed_event_mask(_partial(x, model, mask_ids, partial_fn), event_names),
                                 dtype=bool)
        base = {}  # channel -> the step's candidates: positions, logits before the prior, draws
        for ch in model.channels:
            if len(candidates[ch]):
                rows = torch.searchsorted(need, candidates[ch])
                base[ch] = _Candidates(candidates[ch], _guided_logits(model, hidden[:, rows], ch, guidance_scale),
                                       len(x[ch][0]), spread if order != "random" else 0)
                if estimate is not None:  # the network's own estimate, before prior and temperature
                    estimate[ch][candidates[ch]] = torch.softmax(base[ch].logits.float(), -1)
        # With an n-gram prior the step's quota is spent in `prior_rounds` parts: the network
        # call is shared, the prior is recomputed from the events the parts before decided, so
        # neighbours revealed in one step no longer ignore each other.
        rounds = prior_rounds if event_prior is not None and order != "random" else 1
        remaining = quota
        for part in range(rounds):
            share = remaining if part == rounds - 1 else int(round(remaining / (rounds - part)))
            if share > 0:
                _draw_part(base, share, t, allowed)
            remaining -= share
            if remaining <= 0:
                break

    def _finish(ch: str, idx: torch.Tensor, logits: torch.Tensor, t: float, allowed):
        """What ranking and drawing need of candidates `idx` of channel `ch`, from their logits
        (prior included): the logits with temperatures, bans and rules applied, the uniform
        number each row's draw will use, and the ranking confidence (None in random order).
        The draw itself waits for the ranking (`_reveal_rows`): most candidates of a step are
        not revealed in it, and a draw whose row loses is wasted work."""
        if ch in channel_temperature:
            logits = logits / channel_temperature[ch]
        if banned and banned.get(ch):
            logits[:, banned[ch]] = float("-inf")
        if ch == "event" and allowed is not None:
            at = idx.cpu().numpy()
            rows = allowed[at]
            for code, where in event_bans or ():
                rows[where[at], code] = False
            rows[~rows.any(1)] = True  # nothing allowed: leave it to the re-mask and repair
            logits[torch.as_tensor(~rows, device=logits.device)] = float("-inf")
        elif ch == "event" and event_bans:  # the rows a ban hits only (a few codes of 4096 rows)
            at = idx.cpu().numpy()
            for code, where in event_bans:
                hit = torch.as_tensor(np.flatnonzero(where[at]), device=logits.device)
                if len(hit):
                    kept = logits[hit, code].clone()
                    logits[hit, code] = float("-inf")
                    dead = torch.isneginf(logits[hit].amax(1))  # nothing else left: leave it drawable
                    logits[hit[dead], code] = kept[dead]
        u = _uniforms(len(logits), generator, temperature_of(idx))
        if order == "random":
            return logits, u, None
        # How determined the position is (its most likely class), not how likely the drawn
        # token is: ranking by the drawn token would favour frequent values.
        confidence = torch.log_softmax(logits, -1).amax(-1)
        noise = torch.rand(confidence.shape, generator=generator).to(device).clamp_(1e-10, 1.0)
        return logits, u, confidence - rank_noise * t * torch.log(-torch.log(noise))

    def _reveal_rows(ch: str, cand: "_Candidates", rows: np.ndarray) -> None:
        """Draw candidates `rows` of channel `ch` from what `_finish` kept and write them."""
        at = torch.as_tensor(rows, device=device)
        idx = cand.idx[at]
        u = None if cand.u is None else cand.u[at]
        x[ch][0, idx] = _lookup(cand.final[at], u, temperature_of(idx)).to(x[ch].dtype)
        cand.revealed(rows)

    def _draw_part(base: dict, share: int, t: float, allowed) -> None:
        """Reveal the `share` surest still-masked candidates (all of them in random order). The
        first part of a step ranks every candidate; a later part ranks again only the event
        rows whose prior changed since (a ranking whose distribution did not change is as good
        as a fresh one), so a part costs what the reveals before it changed, not the whole
        window again. The bookkeeping (which rows are still masked, their confidences, which
        are the surest of their neighbourhood) lives in numpy on the CPU and is updated where a
        part changed something: with hundreds of parts a step, a part reveals a token or two."""
        ranked = []  # (channel, candidates, rows still masked: sorted numpy indices)
        for ch, cand in base.items():
            still = np.flatnonzero(cand.open)
            if len(still) == 0:
                continue
            with_prior = ch == "event" and event_prior is not None
            prior = None
            if with_prior and versioned:
                # Only rows recomputed since this step's last look can have moved: compare those.
                positions = cand.pos[still]
                version = event_prior.refresh(x["event"][0].cpu().numpy(), positions)
                redo = still
                if cand.final is not None:
                    stale = np.flatnonzero(version != cand.version[still])
                    redo = still[stale[(event_prior.rows[positions[stale]] != cand.prior[still[stale]]).any(1)]]
                cand.remember(still, version)
                prior = event_prior.rows[cand.pos[redo]]
            elif with_prior:  # any callable: compare every row with what this step last saw
                prior = event_prior(x["event"][0].cpu().numpy(), cand.pos[still])
                redo = still
                if cand.final is not None:
                    moved = np.flatnonzero((prior != cand.prior[still]).any(1))
                    redo, prior = still[moved], prior[moved]
            else:
                redo = still if cand.final is None else still[:0]
            if len(redo):
                # `_finish` writes into its logits: they must be this part's own copy.
                at = torch.as_tensor(redo, device=device)
                logits = cand.logits if len(redo) == len(cand.idx) else cand.logits.index_select(0, at)
                if with_prior:
                    logits = logits + torch.as_tensor(prior, dtype=logits.dtype, device=logits.device)
                elif logits is cand.logits:
                    logits = logits.clone()
                cand.store(redo, *_finish(ch, cand.idx[at], logits, t, allowed), prior)
            ranked.append((ch, cand, still))
        if order != "random" and share < sum(len(r[2]) for r in ranked):
            # One ranking over all channels: the first tokens of a window are revealed alone, so
            # channels agree (an event name and a gap drawn apart could contradict each other).
            pooled = torch.from_numpy(np.concatenate([cand.scores(still) for _, cand, still in ranked]))
            winners = np.zeros(len(pooled), dtype=bool)
            winners[torch.topk(pooled, share).indices.numpy()] = True
            offset_ = 0
            for ch, cand, still in ranked:
                sel = winners[offset_:offset_ + len(still)]
                offset_ += len(still)
                if sel.any():
                    _reveal_rows(ch, cand, still[sel])
            return
        for ch, cand, still in ranked:
            _reveal_rows(ch, cand, still)

    def remask(positions: torch.Tensor) -> None:
        for ch in model.channels:
            keep = clamped[ch][positions]
            x[ch][0, positions[~keep]] = mask_ids[ch]

    for i in range(steps):
        t, s = grid[i], grid[i + 1]
        reveal(t, schedule.unmask_probability(t, s))
        if guide is not None and partial_fn is not None and i < steps - 1:
            bad = np.asarray(guide.violating_positions(_partial(x, model, mask_ids, partial_fn)), dtype=bool)
            bad &= ~any_clamped
            if bad.any():
                remask(torch.as_tensor(np.nonzero(bad)[0], device=device))
    sub = [p / steps for p in time_points(support_steps, time_grid)]

    def short_pass() -> None:
        """Reveal what is masked in `support_steps` short reverse steps (from t = 1/steps)."""
        for j in range(support_steps):
            reveal(sub[j], schedule.unmask_probability(sub[j], sub[j + 1]))

    def violations() -> np.ndarray:
        return np.asarray(guide.violating_positions(_partial(x, model, mask_ids, partial_fn)), bool) & ~any_clamped

    free = torch.as_tensor(np.nonzero(~any_clamped)[0], device=device)
    n_redraw = int(round(corrector_fraction * len(free)))
    for _ in range(corrector_steps if n_redraw else 0):
        # Corrector (predictor-corrector sampling, as in ReMDM, Wang et al. 2025): score every
        # generated event given all the others, send the least likely back to MASK, redraw them.
        # Tokens revealed together in a step were drawn independently; a pair that contradicts
        # (an exit with a switch between it and its entry) is unlikely given its neighbours.
        hidden = features(1.0 / steps, free)
        score = torch.zeros(len(free), device=device)
        for ch in model.channels:
            logp = torch.log_softmax(_guided_logits(model, hidden, ch, guidance_scale), -1)
            score += logp.gather(1, x[ch][0, free][:, None]).flatten()
        remask(free[torch.topk(score, n_redraw, largest=False).indices])
        reveal(corrector_fraction, 1.0)
    if support_cover is not None and "event" in model.channels:
        # Support corrector: the events in unseen k-grams go back to MASK and are drawn again;
        # a round that makes things worse is undone.
        bad = np.asarray(support_cover(x["event"][0].cpu().numpy()), dtype=bool) & ~any_clamped
        for _ in range(support_rounds):
            if not bad.any():
                break
            before = {ch: x[ch].clone() for ch in model.channels}
            remask(torch.as_tensor(np.nonzero(bad)[0], device=device))
            short_pass()
            now = np.asarray(support_cover(x["event"][0].cpu().numpy()), dtype=bool) & ~any_clamped
            if now.sum() > bad.sum():
                x.update(before)
                break
            bad = now
    if copy_guard is not None and "event" in model.channels:
        # Copy guard: edit copied spans at branch points (events from the table), then draw the
        # edited events' other channels; a round that leaves as many copied spans is undone.
        rng = np.random.default_rng(int(torch.randint(2**31 - 1, (1,), generator=generator)))
        for _ in range(copy_rounds):
            codes = x["event"][0].cpu().numpy()
            n_copied = int(copy_guard.copied(codes).sum())
            edits = copy_guard.plan(codes, ~any_clamped, rng)
            if not edits:
                break
            before = {ch: x[ch].clone() for ch in model.channels}
            for edit in edits:  # right to left: an edit only moves what lies after it
                _apply(x, edit, mask_ids)
            short_pass()
            if int(copy_guard.copied(x["event"][0].cpu().numpy()).sum()) >= n_copied:
                x.update(before)
                break
    if guide is not None and partial_fn is not None and guide_rounds:
        # Last, since the passes above redraw too: the last step's tokens were drawn together
        # and nothing re-masked them, so redraw the ones that break a rule, as the steps before
        # did, until none is left or the rounds run out.
        bad, radius = violations(), 1
        for _ in range(guide_rounds):
            if not bad.any():
                break
            before = {ch: x[ch].clone() for ch in model.channels}
            # The flagged events and their neighbours (the event before may be the wrong half);
            # when a round does not help, it is undone and the next one redraws twice as far.
            near = np.convolve(bad, np.ones(2 * radius + 1), mode="same") > 0
            remask(torch.as_tensor(np.nonzero(near & ~any_clamped)[0], device=device))
            short_pass()
            now = violations()
            if now.sum() >= bad.sum():
                x.update(before)
                radius *= 2
                continue
            bad = now
    return {ch: x[ch][0].cpu().numpy().astype(np.int64) for ch in model.channels}


class _Candidates:
    """One channel's candidates in one denoising step: their positions and logits (one network
    call a step), what the latest ranking of each row saw (its final logits, the uniform number
    its draw will use, its confidence, the prior), which the step's later parts keep unless the
    prior of that row moved, and which rows are still masked.

    With `spread`, a row ranks first only if its confidence is the highest among the still
    masked candidates within `spread` positions (`scores`): kept in `best` and recomputed, at
    each ranking, only near the positions whose confidence or mask changed since the last one
    (the same numbers as a fresh max over the window: a max is exact)."""

    def __init__(self, idx: torch.Tensor, logits: torch.Tensor, length: int, spread: int = 0):
        self.idx, self.logits = idx, logits
        self.pos = idx.cpu().numpy()
        self.open = np.ones(len(self.pos), dtype=bool)  # still masked
        self.final: torch.Tensor | None = None
        self.u: torch.Tensor | None = None
        self.conf: np.ndarray | None = None  # float32 confidence per row, on the CPU
        self.prior: np.ndarray | None = None
        self.version: np.ndarray | None = None  # the prior row version each row last compared
        self.spread = spread
        # the open rows' confidences at their positions, -inf elsewhere, `spread` of -inf either side
        self.padded = np.full(length + 2 * spread, -np.inf, dtype=np.float32) if spread else None
        self.best: np.ndarray | None = None  # 1.0 where a row is the surest of its neighbourhood
        self.dirty: list[np.ndarray] = []  # positions changed since `best` was last brought up to date

    def remember(self, rows: np.ndarray, version: np.ndarray) -> None:
        if self.version is None:
            self.version = np.full(len(self.idx), -1, dtype=np.int64)
        self.version[rows] = version

    def store(self, rows: np.ndarray, final: torch.Tensor, u: torch.Tensor | None,
              confidence: torch.Tensor | None, prior: np.ndarray | None) -> None:
        if confidence is not None:
            conf = confidence.cpu().numpy()
            if self.conf is None:
                self.conf = np.zeros(len(self.idx), dtype=conf.dtype)
            self.conf[rows] = conf
            if self.padded is not None:
                self.padded[self.pos[rows] + self.spread] = conf
                self.dirty.append(self.pos[rows])
        if self.final is None and len(rows) == len(self.idx):  # every row, in order: keep them as they are
            self.final, self.u = final, u
            if prior is not None:
                self.prior = np.asarray(prior).copy()
            return
        at = torch.as_tensor(rows, device=final.device)
        if self.final is None:
            self.final = torch.zeros((len(self.idx), final.shape[1]), dtype=final.dtype, device=final.device)
            if u is not None:
                self.u = torch.zeros((len(self.idx), 1), dtype=u.dtype, device=u.device)
            if prior is not None:
                self.prior = np.zeros((len(self.idx), prior.shape[1]), dtype=prior.dtype)
        self.final[at] = final
        if u is not None:
            self.u[at] = u
        if prior is not None:
            self.prior[rows] = prior

    def revealed(self, rows: np.ndarray) -> None:
        self.open[rows] = False
        if self.padded is not None:
            self.padded[self.pos[rows] + self.spread] = -np.inf
            self.dirty.append(self.pos[rows])

    def scores(self, rows: np.ndarray) -> np.ndarray:
        """What the ranking sorts `rows` (the open ones) by: the confidence, plus a bonus that
        puts every row that is the surest within `spread` positions above every other one."""
        if not self.spread:
            return self.conf[rows]
        width = 2 * self.spread + 1
        if self.best is None:  # the step's first ranking: every open row
            self.best = np.zeros(len(self.idx), dtype=np.float32)
            near = np.flatnonzero(self.open)
        else:
            if not self.dirty:
                return self.conf[rows] + np.float32(_SPREAD_BONUS) * self.best[rows]
            changed = np.concatenate(self.dirty)
            reach = np.zeros(len(self.padded), dtype=bool)  # padded positions within `spread` of a change
            reach[(changed[:, None] + np.arange(width)).ravel()] = True
            near = np.flatnonzero(self.open & reach[self.pos + self.spread])
        self.dirty = []
        if len(near):
            windows = self.padded[self.pos[near][:, None] + np.arange(width)]
            self.best[near] = self.conf[near] >= windows.max(1)
        return self.conf[rows] + np.float32(_SPREAD_BONUS) * self.best[rows]


def _apply(x: dict[str, torch.Tensor], edit: Edit, mask_ids: dict[str, int]) -> None:
    """One copy-guard edit on a window (batch of one): the event channel takes the edit, the
    other channels of the edited event go to MASK. An insertion or deletion shifts the events up
    to `edit.until` (a known event that stays put) or the window's end. Before a known event the
    position next to it is masked after either (an insertion pushed the event there out and
    moved its predecessor next to the known one; a deletion left it empty): drawn again to fit
    it. A deletion up to the window's end masks the freed last position."""
    p = edit.position
    end = edit.until
    for ch, row in x.items():
        stop = row.shape[1] if end is None else end
        if edit.kind == "insert":
            row[0, p + 1:stop] = row[0, p:stop - 1].clone()
            if end is not None:
                row[0, stop - 1] = mask_ids[ch]
        elif edit.kind == "delete":
            row[0, p:stop - 1] = row[0, p + 1:stop].clone()
            row[0, stop - 1] = mask_ids[ch]
        if edit.kind != "delete":
            row[0, p] = edit.event if ch == "event" else mask_ids[ch]

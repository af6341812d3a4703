"""Traces of any length: window-by-window generation, each window continuing the previous one.

The first window is generated from nothing and told it is the start of a trace (offset 0: the
start flag and the trace-position embedding), so a model trained with start windows begins
with the start-up sequence (execve, the loader, ...) at the places it has in real traces; every
following window starts with the last `prefix_fraction` of the previous one as known events
(prefix continuation: the same clamping as infilling), and only its remaining positions become
new events. Thread slots are renumbered for each window from the real tids of the prefix, so
threads carry across the seam. Decoding is incremental (clock, thread ids), so memory stays
bounded by the window.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from tracesynth.encoding.ngrams import CachedPrior
from tracesynth.encoding.trace_encoder import TraceEncoder, columns_to_trace
from tracesynth.errors import ConfigError
from tracesynth.model.denoiser import Denoiser
from tracesynth.model.precision import resolve_precision
from tracesynth.runtime import SamplingThreads
from tracesynth.sampling.cadence_scaffold import CadenceScaffold, Plan, scaffolded
from tracesynth.sampling.copy_guard import CopyGuard
from tracesynth.sampling.sampler import sample_window
from tracesynth.schema import Trace, TraceMeta


def generate(
    model: Denoiser,
    encoder: TraceEncoder,
    n_events: int,
    workload: str,
    *,
    steps: int = 16,
    start_steps: int | None = None,
    seed: int = 0,
    guidance_scale: float = 1.0,
    temperature: float = 1.0,
    context: int | None = None,
    prefix_fraction: float = 0.25,
    guide=None,
    on_progress: Callable[[int], None] | None = None,
    order: str = "confidence",
    time_grid: str = "cosine",
    prefix: Trace | None = None,
    corrector_steps: int = 0,
    start_temperature: float | None = None,
    spread: int = 0,
    channel_temperature: dict[str, float] | None = None,
    support_rounds: int = 0,
    copy_rounds: int = 0,
    guide_rounds: int = 0,
    ngram_weight: float = 0.0,
    ngram_rounds: int = 1,
    prior_from: int = 0,
    precision: str = "fp32",
    self_condition: bool = True,
    cadence: bool | str = False,
    start_anchor: int = 0,
) -> Trace:
    """Generate `n_events` canonical events for `workload` (deterministic in `seed` on CPU);
    with `prefix`, they continue that trace (its last events condition the first window).
    `start_steps`: denoising steps of the trace's first window, the one that holds its start-up
    (None: `steps`; a window that continues `prefix` is not a first window).
    `support_rounds` > 0 runs the sampler's support corrector against the training traces'
    event 8-grams of `workload` where that grammar is closed (`EventSupport.applies`; a model
    saved before the table existed has none: no-op). `copy_rounds` > 0 runs the sampler's copy
    guard against the training traces' event spans of `workload` where real runs share few long
    spans (`SpanTable.applies`; none saved: no-op). `guide_rounds` > 0 (with a guide) redraws
    what still breaks a rule after each window's last step. `ngram_weight` > 0 multiplies the
    event distributions by the training traces' n-gram evidence on both sides, to that power
    (`encoding.ngrams`; a model saved without the counts: no-op), recomputed `ngram_rounds`
    times per denoising step (`sample_window`'s `prior_rounds`); `prior_from` > 0 leaves the
    prior out among the trace's first `prior_from` events. `precision`: what the network
    runs in (`model.precision`: fp32, bf16, or auto = bf16 where the device does it natively).
    `self_condition`: a self-conditioned model reads its previous step's estimates (False: none).
    `cadence`: the workload's steady rhythms from training (`encoding.cadence`) are placed by
    the cadence scaffold (`sampling.cadence_scaffold`; a model saved without the table, or a
    workload without such a rhythm: no-op); a window in which the model starts a rhythm is
    drawn a second time with it. "auto": only the rhythms with closers (`scaffolded`).
    `start_anchor` K > 0: the trace's first K events are a training run's first K (the model's
    start-up table, `encoding.startups`; the seed picks the run), known events of the first
    window that the model draws the rest around, decoded like drawn ones (a model saved without
    the table, or a trace continuing `prefix`: no-op)."""
    if workload not in encoder.workloads:
        raise ConfigError(f"unknown workload {workload!r}; the model knows: {', '.join(encoder.workloads)}")
    try:
        rhythms = scaffolded(encoder.cadence.of(workload) if encoder.cadence is not None else [], cadence)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if not 0.0 <= prefix_fraction < 1.0:
        raise ConfigError("prefix fraction must be in [0, 1)")
    if steps < 1 or (start_steps is not None and start_steps < 1):
        raise ConfigError("denoising steps must be at least 1")
    if start_anchor < 0:
        raise ConfigError(f"start anchor must be 0 (off) or a number of events, got {start_anchor}")
    r = model.config.downsample
    window = context or model.config.context
    window = max(r, window - window % r)
    n_prefix = int(window * prefix_fraction)
    label = encoder.workloads.index(workload)
    precision = resolve_precision(precision, next(model.parameters()).device)
    generator = torch.Generator().manual_seed(seed)
    decoder = encoder.decoder(workload, seed)
    channels = model.channels
    banned = encoder.never_generated()
    event_names = list(encoder.event.decode(np.arange(encoder.event.vocab_size))) if guide is not None else None
    support_cover = None
    if support_rounds and encoder.support is not None and encoder.support.applies(workload):
        def support_cover(codes: np.ndarray, support=encoder.support) -> np.ndarray:
            return support.excess_cover(codes, workload)
    event_prior = None
    if ngram_weight and encoder.ngrams is not None and encoder.ngrams.knows(workload):
        event_prior = CachedPrior(encoder.ngrams, workload, ngram_weight)
    copy_guard = None
    if copy_rounds and encoder.copies is not None and encoder.copies.applies(workload) and encoder.support is not None:
        copy_guard = CopyGuard(encoder.copies, encoder.support, workload)
    scaffold = None
    if rhythms and "event" in channels:
        scaffold = CadenceScaffold(rhythms, seed)
    # The start-up anchor: a training run's first events as the first window's known start.
    anchor = None
    if (start_anchor and (prefix is None or not len(prefix)) and encoder.startups is not None
            and encoder.startups.knows(workload)):
        anchor = encoder.startups.pick(workload, seed, min(start_anchor, n_events, window // 2))
        if scaffold is not None:
            scaffold.observe(Plan(), anchor["event"], 0, 0)
    parts: list[dict[str, np.ndarray]] = []
    produced = 0
    prev_codes: dict[str, np.ndarray] | None = None
    prev_tids: np.ndarray | None = None
    if prefix is not None and len(prefix):
        # Continue a given trace: its last events are the first window's known part.
        encoded = encoder.encode(prefix)
        prev_codes = {ch: v[-n_prefix:] for ch, v in encoded.items()} if n_prefix else None
        prev_tids = encoded["tid"][-n_prefix:] if "tid" in encoded else np.full(
            len(prev_codes["event"]) if prev_codes else 0, -1, dtype=np.int64)
        decoder.last_ts = int(prefix.events["ts"][len(prefix) - 1].as_py())
        decoder.first = False
        if scaffold is not None:
            scaffold.observe(Plan(), encoded["event"], 0, 0)
    # Thread count per window: every core while no other process wants one (runtime.SamplingThreads;
    # the same trace at any count).
    with SamplingThreads(active=next(model.parameters()).device.type == "cpu") as threads:
        while produced < n_events:
            threads.update()
            known = {ch: np.zeros(window, dtype=np.int64) for ch in channels}
            known_mask = {ch: np.zeros(window, dtype=bool) for ch in channels}
            slot_tids = np.full(encoder.tid.slots, -1, dtype=np.int64)
            start = 0
            lead = 0  # known events at the window's start that are new to the trace (the anchor)
            if anchor is not None and not parts:
                start = lead = len(anchor["event"])
                for ch in channels:
                    known[ch][:start] = anchor[ch]
                    known_mask[ch][:start] = True
            elif prev_codes is not None and n_prefix:
                start = min(n_prefix, len(prev_codes["event"]))
                for ch in channels:
                    known[ch][:start] = prev_codes[ch][-start:]
                    known_mask[ch][:start] = True
                if "tid" in channels:
                    known["tid"][:start], slot_tids = encoder.tid.slot_window(prev_tids[-start:])

            def partial_fn(codes, decided, slot_tids=slot_tids):
                return encoder.partial(codes, decided, slot_tids)

            # Index in the trace of the window's first event (its known prefix included).
            offset = produced - start + lead + (len(prefix) if prefix is not None else 0)
            if guide is not None and callable(getattr(guide, "begin_window", None)):
                # What the guide can no longer see: the events before this window since the last one.
                if not parts:
                    passed = [] if prefix is None else prefix.events.column("event").to_pylist()[:len(prefix) - start]
                else:
                    passed = encoder.event.decode(prev_codes["event"][:len(prev_codes["event"]) - start])
                guide.begin_window(passed, new_trace=not parts)
            def draw(plan: Plan | None, drawn: dict[str, np.ndarray] | None = None,
                     index: np.ndarray | None = None, put: dict[int, int] | None = None) -> dict[str, np.ndarray]:
                """The window with `plan`'s anchors clamped and bans; with `drawn`, `index` and
                `put` (`CadenceScaffold.settle`), that window rearranged, the positions that
                index no event drawn anew (the plan's members banned there, but for the events
                `put`, whose other channels are drawn)."""
                window_known, window_mask = dict(known), dict(known_mask)
                bans = plan.ban_list() if plan is not None else None
                if drawn is not None:
                    fresh = index < 0
                    window_known = {ch: np.where(fresh, 0, drawn[ch][index]) for ch in channels}
                    window_mask = {ch: ~fresh for ch in channels}
                    for q, event in put.items():
                        window_known["event"][q] = event
                        window_mask["event"][q] = True
                    bans = [(e, ban | fresh if e in plan.zones else ban) for e, ban in bans]
                elif plan is not None and plan.places:
                    at = np.fromiter(plan.places, dtype=np.int64)
                    window_known["event"] = known["event"].copy()
                    window_mask["event"] = known_mask["event"].copy()
                    window_known["event"][at] = np.fromiter(plan.places.values(), dtype=np.int64)
                    window_mask["event"][at] = True
                first = offset == 0 and start_steps is not None  # the trace's start-up window
                return sample_window(model, window_known, window_mask, label, start_steps if first else steps,
                                     guidance_scale, generator,
                                     temperature, guide, partial_fn, banned=banned, order=order,
                                     time_grid=time_grid, offset=offset, event_names=event_names,
                                     corrector_steps=corrector_steps, start_temperature=start_temperature,
                                     spread=spread, channel_temperature=channel_temperature,
                                     support_cover=support_cover, support_rounds=support_rounds,
                                     copy_guard=copy_guard, copy_rounds=copy_rounds, guide_rounds=guide_rounds,
                                     event_prior=event_prior, prior_rounds=ngram_rounds, prior_from=prior_from,
                                     precision=precision, self_condition=self_condition, event_bans=bans)

            plan = scaffold.plan(offset, start, window) if scaffold is not None else None
            codes = draw(plan)
            if scaffold is not None:
                again = scaffold.restart(plan, codes["event"], offset, start)
                if again is not None:  # the model started a rhythm here: draw the window with it
                    plan, codes = again, draw(again)
                ended = scaffold.out_of_phase(plan, codes["event"], offset, start)
                if ended is not None:  # the model went on to something else: the phase ends there
                    plan, codes = ended, draw(ended)
                settled = scaffold.settle(plan, codes["event"], start)
                if settled is not None:  # members drawn twice, too late or not at all
                    index, put = settled
                    codes = draw(plan, codes, index, put) if (index < 0).any() else {
                        ch: v[index] for ch, v in codes.items()}
                scaffold.observe(plan, codes["event"], offset, start)
            emit = start - lead  # the window's first new event
            cols = decoder.decode_window(codes, emit, slot_tids.copy())
            take = min(n_events - produced, window - emit)
            parts.append({k: v[:take] for k, v in cols.items()})
            produced += take
            if on_progress:
                on_progress(take)
            prev_codes = codes
            window_tids = np.full(window, -1, dtype=np.int64)
            if "tid" in channels:
                window_tids[:emit] = prev_tids[-emit:] if emit else window_tids[:0]
                window_tids[emit:] = cols["tid"]
            prev_tids = window_tids
    meta = TraceMeta(source_format="tracesynth", workload=workload,
                     n_cpus=encoder.n_cpus if "cpu" in channels else None,
                     extra={"generator": "tracesynth", "channels": list(channels), "steps": steps,
                            "seed": seed, "guidance_scale": guidance_scale, "precision": precision,
                            "self_condition": model.self_cond is not None and self_condition,
                            "start_anchor": 0 if anchor is None else len(anchor["event"])})
    return columns_to_trace(parts, meta)


"""`TraceSynth`: the multi-channel masked-diffusion generator behind the generator interface.

    gen = TraceSynth(channels="light", context=4096).fit(traces)
    synthetic = gen.sample(100_000, workload="gzip", seed=1)
    gen.save("models/gzip"); TraceSynth.load("models/gzip")

`fit` trains in memory (the CLI's `tracesynth train` adds checkpoints, resume and DDP); see
docs/model.md for the encoding, the noise process, the network and the sampler. On a CPU, call
`tracesynth.runtime.tune_cpu_process(sampling=True)` first, before torch is imported, to sample
as fast as `tracesynth generate` does (spinning OpenMP threads, freed memory kept in glibc's
heap; same results); `sampling=False` (passive threads) is the CLI's choice for training.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tracesynth.encoding.ngrams import K as NGRAM_K
from tracesynth.errors import ConfigError, TraceFormatError
from tracesynth.generators.base import Generator
from tracesynth.generators.splice_settings import splice_setting_problem
from tracesynth.model.config import (EMA, START_RATE, VAL_FRACTION, ModelConfig, TrainConfig, phase_config,
                                     size_config)
from tracesynth.schema import Trace

CONSTRAINT_MODES = ("none", "repair", "guided")
# Sampling temperature of a trace's first `trace_positions` events (its start-up: execve, the
# loader, ...), which is the same sequence in every real run; at temperature 1 the model's own
# uncertainty there slips events in and out. 0.25 raised TSTR macro-F1 on all 8 bundled workloads
# (4 sampling seeds each, docs/model.md "Start temperature") and left steady-state windows alone.
# It needs a model that saw its start-up often (start_rate); pass 1 for one that did not.
START_TEMPERATURE = 0.25
# Tokens revealed in one denoising step stay more than this many positions apart where the step
# allows (sampling/sampler.py): neighbours drawn together are drawn independently, which is what
# broke thread runs and syscall pairs. Measured in docs/model.md, "Spread reveals".
SPREAD = 4
# Sampling temperature of the thread-id channel (models that have one). At 1, a full model's
# continuation windows drift: each switches threads more than its known prefix did, and the
# next window inherits the busier prefix (build, per 3,072 new events: 89, 233, 381, 722,
# 1,071 switches against 2-405 real). Thread identity is a low-entropy choice whose slips
# compound; drawing it colder keeps switches and distinct threads per window in real's range.
# Measured in docs/model.md, "Thread temperature".
TID_TEMPERATURE = 0.5
# Rounds of the sampler's support corrector (sampling/sampler.py): events inside event 8-grams
# that no training trace contains are redrawn, each round two short network calls, on workloads
# whose training runs have a closed grammar (encoding/support.py). 4 rounds kept generation
# above 5,000 events/s on 2 cores (8 rounds: 4,400-7,200); measured in docs/model.md, "Support
# corrector".
SUPPORT_ROUNDS = 4
# Rounds of the sampler's copy guard (sampling/sampler.py): generated event 256-grams that occur
# in training are broken at a branch point (encoding/copies.py). Measured in docs/model.md,
# "Copy guard".
COPY_ROUNDS = 4
# Rounds of redrawing, after each window's last denoising step, the events the constraint guide
# flags (guided mode only; the steps before re-mask them, the last one cannot). 4 before the
# n-gram prior; with it, 1 round gave the same TSTR/TRTR on all eight workloads (six traces each,
# same models; within 0.005) and sampled up to 1.36x faster (build, pybench; 0.95-1.36x over the
# eight): the rounds after the first fix one or two events a window for two network calls
# each, and repair fixes those anyway. Measured in
# docs/constraints.md, "Guided sampling".
GUIDE_ROUNDS = 1
# Power of the training traces' n-gram evidence on the event distribution at draw time
# (encoding/ngrams.py): 0 samples the network alone. 1 (the plain product) lifted the guided
# TSTR/TRTR of the multi-process workloads most (build 0.72 -> 0.95-0.99, pybench 0.87-0.90 ->
# 0.97-0.99 on one model each, with 4 rounds); measured in docs/model.md, "N-gram prior".
NGRAM_WEIGHT = 1.0
# Parts each denoising step's reveals are drawn in, the n-gram prior recomputed between them
# from what the parts before decided (no extra network call): at 1, neighbours revealed in one
# step ignore each other (build: 27% of 8-grams unseen in training; 4 parts: 12%).
NGRAM_ROUNDS = 4
# The event of a trace from which the n-gram prior applies (0: every event). Before it the
# network's trace-position embedding alone places each start-up event; with the prior there,
# counts read from decided neighbours pull towards another training run's layout (runs'
# start-ups differ by a scheduler event pair here and there) and the two together splice layouts
# into a doubled or dropped call (tar: `>brk <brk >brk <brk`). From event 512 on (`generate
# --prior-from 512`), start-ups follow one training run closely (scimark, tar, sqlite) but
# pybench's one-off start-up calls get lost and TSTR/TRTR fell on four of eight workloads (mean
# 0.981 -> 0.971), so the default is 0. Measured in docs/model.md, "Start-up without the prior".
PRIOR_FROM = 0
# The prior's longest context (training: the tables are counted then), encoding.ngrams.K = 8;
# 32 with 256 parts a step (`train --ngram-order 32`, `generate --ngram-rounds 256`) is the
# slow, closer-to-real mode (docs/model.md, "Sequential draws").
NGRAM_ORDER = NGRAM_K
# With keep_best: steps between validations (8 held-out windows at 4096 events: 0.19 s on 2 CPU
# cores, half a training step; 0.5% more training time at 100).
VAL_EVERY_BEST = 100
# What the network trains in (model/precision.py): auto = bf16 autocast on CUDA, fp32 on CPU.
# On this project's CPUs (AVX512-BF16) bf16 made a training step 0.77-0.84x as long but a whole
# default training only 0.93x at level quality, so it is opt-in there and CPU training stays
# what the published fp32 results were trained in (docs/model.md, "Precision").
TRAIN_PRECISION = "auto"
# What the network samples in: fp32. bf16 saved 0-6% of the guided pipeline's time on CPU (one
# window a network call is too small a product to gain; benchmarks/bench_precision.py).
SAMPLE_PRECISION = "fp32"
# The cadence scaffold (sampling/cadence_scaffold.py): a workload's steady rhythms from training
# (encoding/cadence.py) placed by their gap table, the rest drawn around them. Measured in
# docs/model.md, "Cadence scaffold". "auto": only rhythms with closers (fileio's file switch
# every 20th sync: 0.881/0.942/0.997 -> 0.951/0.988/1.014 TSTR/TRTR with each run held out,
# at 1.6x its sampling time); the plain gap rhythms of stream, scimark and pybench gained
# nothing for 1.1-1.8x the time (`sampling.cadence_scaffold.scaffolded`).
CADENCE = "auto"
# Denoising steps of a trace's first window (None: `sample_steps`, as every other window).
START_STEPS = None
# A trace's first events taken from a training run's start-up (encoding/startups.py; 0: off).
START_ANCHOR = 0
# Anchor length of the span splice (sampling/span_splice.py; 0: off): each stretch of a sampled
# trace that no training span of this many events covers gets training's events between the
# same anchors, on workloads whose runs share most long spans. Off by default: it brings the
# windows of a workload that repeats a loop much closer to real by copying more of the training
# runs, which on fileio went past its held-out run (docs/model.md, "Span splice").
SPLICE = 0
# How far a spliced trace's 256-gram copy share of one training run may exceed the least share
# one training run has of another before the splice is undone: the evaluation's margin for
# copying beyond a held-out run (`evaluation.privacy.FLAG_MARGIN`). Real runs vary this much
# pair to pair (sqlite's three runs' first 32,768 events: 0.57-0.78 of one in another).
SPLICE_MARGIN = 0.10
# Piece length of the splice's walk through stretches no anchors match (sampling/span_splice.py,
# `MAX_COPY`'s note; 0: leave them as sampled): pieces of at least half to twice this many events
# (a piece runs on until the walk's draw leaves its run), halved down to SPLICE_WALK_MIN where the
# walked trace copies more than the bound above. Published at 128 (with the two below at 0);
# 384 since 2026-12-08, with them (docs/model.md, "The walk").
SPLICE_WALK = 384
SPLICE_WALK_MIN = 32
# What the splice's walk matches at each jump (0: the splice's anchor, 64 events) and how far a
# jump may land from where the walk would be had it stayed in the run it began in (0: within the
# splice's `MAX_DRIFT` of the stretch's place in the trace, as published). With 128-event pieces a
# 16-event match and a 64-event drift copied less (build 0.51 -> 0.21) at windows 0.04 further
# off; with 384-event pieces the three together brought build's and pybench's 512-event windows
# closer than the published walk with each of three runs held out, at about its copying
# (experiments-splice-walk-pieces-run3, -pieces-batch4-run1, -defaults-run2).
SPLICE_WALK_CONTEXT = 16
SPLICE_WALK_DRIFT = 64
# Whether each of the walk's jumps draws among one place per training run, the nearest (`resample
# --aligned`: branches between runs, never back or ahead within one). Off: in the splice it made
# build's windows 0.59 -> 0.84 (experiments-splice-walk-aligned-run3).
SPLICE_WALK_ALIGNED = False


def walk_pieces(piece: int) -> list[int]:
    """The walk's piece lengths tried in turn while a trace copies more than the bound: `piece`,
    then halved down to SPLICE_WALK_MIN (or `piece` itself where it is shorter); none for 0. The
    splice's passes and the `resample` reference both walk these."""
    pieces = []
    while piece and piece >= min(SPLICE_WALK_MIN, pieces[0] if pieces else piece):
        pieces.append(piece)
        piece //= 2
    return pieces


def constraint_tools(mode: str, single_thread: bool = False, serial=()):
    """(guide or None, repair function or None) for a `--constraints` mode; a clear error when
    the constraints package cannot provide them (never a silent skip). `serial`: syscalls the
    guide holds to entry/exit alternation in windows without thread ids."""
    if mode not in CONSTRAINT_MODES:
        raise ConfigError(f"constraints must be one of {', '.join(CONSTRAINT_MODES)}, not {mode!r}")
    if mode == "none":
        return None, None
    try:
        from tracesynth.constraints import repair
    except ImportError as exc:
        raise ConfigError(f"--constraints {mode}: the constraints package is not available ({exc}); "
                          "use --constraints none") from None
    if single_thread:
        plain_repair = repair

        def repair(trace):
            return plain_repair(trace, assume_single_thread=True)

    guide = None
    if mode == "guided":
        try:
            from tracesynth.constraints import ConstraintGuide
            # A model without thread ids, trained on one-thread runs, reads as one thread.
            guide = ConstraintGuide(single_thread=True) if single_thread else ConstraintGuide(serial=serial)
        except (ImportError, TypeError) as exc:
            raise ConfigError(f"--constraints guided: no sampling guide available ({exc}); "
                              "use --constraints repair or none") from None
        if not callable(getattr(guide, "violating_positions", None)):
            raise ConfigError("--constraints guided: the constraints package has no working sampling guide "
                              "yet; use --constraints repair or none")
    return guide, repair


class TraceSynth(Generator):
    name = "tracesynth"

    def __init__(self, channels: str | list[str] = "light", context: int = 4096, size: str = "auto",
                 train_steps: int = 1000, batch_size: int = 8, lr: float = 2e-3, sample_steps: int = 16,
                 guidance_scale: float = 1.0, temperature: float = 1.0, prefix_fraction: float = 0.25,
                 constraints: str = "none", device: str = "auto", random_state: int = 0,
                 corrector_steps: int = 0, start_temperature: float | None = START_TEMPERATURE,
                 start_rate: float = START_RATE, phase_events: int | None = None, spread: int = SPREAD,
                 tid_temperature: float = TID_TEMPERATURE, support_rounds: int = SUPPORT_ROUNDS,
                 copy_rounds: int = COPY_ROUNDS, serial_guide: bool = True, guide_rounds: int = GUIDE_ROUNDS,
                 ngram_weight: float = NGRAM_WEIGHT, ngram_rounds: int = NGRAM_ROUNDS, prior_from: int = PRIOR_FROM,
                 precision: str = SAMPLE_PRECISION, train_precision: str = TRAIN_PRECISION,
                 ngram_order: int = NGRAM_ORDER, self_condition: bool | None = None, keep_best: bool = False,
                 ema: float = EMA, val_fraction: float = VAL_FRACTION, start_rate_end: float | None = None,
                 cadence: bool | str = CADENCE, start_steps: int | None = START_STEPS,
                 start_anchor: int = START_ANCHOR, splice: int = SPLICE, splice_walk: int = SPLICE_WALK,
                 splice_walk_context: int = SPLICE_WALK_CONTEXT, splice_walk_drift: int = SPLICE_WALK_DRIFT,
                 splice_walk_aligned: bool = SPLICE_WALK_ALIGNED, keep_runs: bool = True):
        super().__init__(random_state)
        self.channels = channels
        self.context = context
        self.size = size
        self.train_steps = train_steps
        self.batch_size = batch_size
        self.lr = lr
        self.sample_steps = sample_steps
        self.guidance_scale = guidance_scale
        self.temperature = temperature
        self.prefix_fraction = prefix_fraction
        self.constraints = constraints
        self.device = device
        self.corrector_steps = corrector_steps
        self.start_temperature = start_temperature
        self.start_rate = start_rate
        self.start_rate_end = start_rate_end  # training: the start share at the last step (None: constant)
        self.phase_events = phase_events  # None: ModelConfig's (1024); 0: no phase embedding
        self.spread = spread
        self.tid_temperature = tid_temperature
        self.support_rounds = support_rounds
        self.copy_rounds = copy_rounds
        self.serial_guide = serial_guide
        self.guide_rounds = guide_rounds
        self.ngram_weight = ngram_weight
        self.ngram_rounds = ngram_rounds
        self.prior_from = prior_from  # sampling: the n-gram prior from this event of the trace on
        self.precision = precision  # sampling
        self.train_precision = train_precision
        self.ngram_order = ngram_order  # training: the n-gram tables' longest context
        # Training: a self-conditioned model or not (None: ModelConfig's default, off); sampling:
        # False samples a self-conditioned model without its estimates (`generate --no-self-condition`).
        self.self_condition = self_condition
        # Training: validate every VAL_EVERY_BEST steps on the traces' held-out tails and sample
        # from the weights whose validation loss was lowest, not the last (long runs overfit).
        self.keep_best = keep_best
        self.ema = ema  # training: decay of the weights' moving average that is sampled (0: the last weights)
        self.val_fraction = val_fraction  # training: share of each trace's end held out (0: train on all)
        self.cadence = cadence  # sampling: the cadence scaffold (True, False or "auto")
        self.start_steps = start_steps  # sampling: steps of a trace's first window (None: sample_steps)
        self.start_anchor = start_anchor  # sampling: first events from a training run's start-up (0: off)
        for name, value in (("splice", splice), ("splice_walk", splice_walk),
                            ("splice_walk_context", splice_walk_context), ("splice_walk_drift", splice_walk_drift)):
            if problem := splice_setting_problem(name, value):
                raise ConfigError(f"{name} {problem}")
        self.splice = splice  # sampling: span splice anchor length (0: off)
        self.splice_walk = splice_walk  # sampling: the splice's walk pieces (0: no walk)
        self.splice_walk_context = splice_walk_context  # sampling: the walk's match at each jump (0: the anchor's)
        self.splice_walk_drift = splice_walk_drift  # sampling: how far from its own course the walk may land
        self.splice_walk_aligned = bool(splice_walk_aligned)  # sampling: one place per run at each jump
        self.keep_runs = keep_runs  # training: keep the runs' event sequences with the model (splice, anchor)

    def get_params(self) -> dict:
        keys = ("channels", "context", "size", "train_steps", "batch_size", "lr", "sample_steps",
                "guidance_scale", "temperature", "prefix_fraction", "constraints", "device", "random_state",
                "corrector_steps", "start_temperature", "start_rate", "start_rate_end", "phase_events", "spread",
                "tid_temperature", "support_rounds", "copy_rounds", "serial_guide", "guide_rounds", "ngram_weight",
                "ngram_rounds", "prior_from", "precision", "train_precision", "ngram_order", "self_condition",
                "keep_best", "ema", "val_fraction", "cadence", "start_steps", "start_anchor", "splice",
                "splice_walk", "splice_walk_context", "splice_walk_drift", "splice_walk_aligned", "keep_runs")
        return {k: getattr(self, k) for k in keys}

    def _configs(self) -> tuple[ModelConfig, TrainConfig]:
        model = ModelConfig(context=self.context, **size_config(self.size, self.channels),
                            **phase_config(self.phase_events),
                            **({} if self.self_condition is None else {"self_condition": self.self_condition}))
        train = TrainConfig(steps=self.train_steps, batch_size=self.batch_size, lr=self.lr,
                            seed=self.random_state, device=self.device,
                            val_every=self._val_every() if self.keep_best else 0, checkpoint_every=0,
                            keep_best=self.keep_best,
                            start_rate=self.start_rate, start_rate_end=self.start_rate_end,
                            precision=self.train_precision,
                            ngram_order=self.ngram_order, ema=self.ema, val_fraction=self.val_fraction,
                            keep_runs=self.keep_runs)
        return model, train

    def _val_every(self) -> int:
        """Validation every VAL_EVERY_BEST steps, and at least ten times in a short run."""
        return max(1, min(VAL_EVERY_BEST, self.train_steps // 10))

    def _fit(self, traces_by_workload: dict[str, list[Trace]]) -> None:
        from tracesynth.model.train import TrainCallbacks, train

        constraint_tools(self.constraints)  # fail before training, not after
        traces = [t.with_meta(workload=w) for w, ts in traces_by_workload.items() for t in ts]
        model_cfg, train_cfg = self._configs()
        best = {}

        def keep(step, loss, model):  # a copy in memory: nothing is written while fitting
            best["weights"] = {k: v.detach().clone() for k, v in model.state_dict().items()}

        self.model_, self.encoder_, self.state_ = train(
            traces, None, channels=self.channels, model_config=model_cfg, train_config=train_cfg,
            callbacks=TrainCallbacks(on_best=keep if self.keep_best else None))
        if best:
            self.model_.load_state_dict(best["weights"])
        self.train_config_ = train_cfg

    def _sample(self, n_events: int, workload: str, seed: int) -> Trace:
        return self.generate(n_events, workload, seed)

    def generate(self, n_events: int, workload: str, seed: int, steps: int | None = None,
                 guidance_scale: float | None = None, constraints: str | None = None,
                 on_progress=None) -> Trace:
        """`sample` with per-call overrides and a progress callback (used by the CLI)."""
        trace, repair = self.draw(n_events, workload, seed, steps, guidance_scale, constraints, on_progress)
        if repair is not None:
            fixed, edits = repair(trace)
            if len(fixed) < n_events:
                raise ConfigError(f"repair left {len(fixed)} of {n_events} events; try --constraints none")
            trace = fixed.slice(0, n_events)
            trace.meta.extra["repair_edits"] = len(edits)
            trace.meta.extra["constraints"] = constraints or self.constraints
        return trace

    def draw(self, n_events: int, workload: str, seed: int, steps: int | None = None,
             guidance_scale: float | None = None, constraints: str | None = None,
             on_progress=None) -> tuple[Trace, object]:
        """The sampler's raw output for a constraints mode, before repair (guided in `guided`
        mode), and the repair function that mode applies (None for `none`). Where repair
        follows, the trace has a margin of extra events, since repair may drop some (an
        orphan exit); `generate` repairs and cuts to size. Kept apart so that benchmarks can
        count what the sampler alone got wrong."""
        from tracesynth.sampling import generate

        single_thread = self.single_thread()
        guide, repair = constraint_tools(constraints or self.constraints, single_thread,
                                         self.serial_syscalls(workload))
        margin = 0 if repair is None else max(64, n_events // 20)
        splicing = self.splices(workload)
        if splicing:  # a splice may shorten the trace: sample some more, cut after
            margin += max(256, n_events // 8)
        trace = generate(self.model_, self.encoder_, n_events + margin, workload,
                         steps=steps or self.sample_steps, start_steps=self.start_steps,
                         guidance_scale=self.guidance_scale if guidance_scale is None else guidance_scale,
                         temperature=self.temperature, prefix_fraction=self.prefix_fraction, seed=seed,
                         guide=guide, on_progress=on_progress, corrector_steps=self.corrector_steps,
                         start_temperature=self.start_temperature, spread=self.spread,
                         channel_temperature={"tid": self.tid_temperature},
                         support_rounds=self.support_rounds, copy_rounds=self.copy_rounds,
                         guide_rounds=self.guide_rounds, ngram_weight=self.ngram_weight,
                         ngram_rounds=self.ngram_rounds, prior_from=self.prior_from,
                         precision=self.precision,
                         self_condition=self.self_condition is not False, cadence=self.cadence,
                         start_anchor=self.start_anchor)
        if splicing:
            trace = self._splice(trace, workload, seed, n_events + margin - max(256, n_events // 8))
        if single_thread:  # so `check` (and the evaluation's validity) read it as one thread too
            trace.meta.extra["threads"] = 1
        return trace, repair

    def splices(self, workload: str) -> bool:
        """Whether `draw` splices training spans into `workload`'s traces: `splice` is on, the
        model has the two channels it applies to (event types and gaps) and the splice table
        for `workload` (kept where the training runs share most long spans)."""
        return self.splice_off(workload) is None

    def splice_off(self, workload: str) -> str | None:
        """Why `draw` does not splice `workload`'s traces, in words (None: it does)."""
        from tracesynth.encoding.copies import SHARED_SPANS

        enc = self.encoder_
        if not self.splice:
            return "--splice 64 puts training's events where the trace leaves its training runs' grammar, " \
                   "on workloads whose runs share most long spans"
        if set(enc.channels) != {"event", "dt"}:
            return "it applies to models of event types and gaps only: --channels light"
        if enc.splices is None:
            if not self.runs_kept():
                return "model trained with --no-runs: it holds no training run to splice from"
            return "model saved without its training runs; benchmarks/refit_splices.py adds them"
        if not enc.splices.knows(workload):
            share = enc.copies.natural.get(workload) if enc.copies is not None else None
            shared = "few" if share is None else f"{share:.2f}"
            return f"{workload}'s training runs share {shared} of their 256-event spans; it applies from {SHARED_SPANS:.2f}"
        return None

    def runs_kept(self) -> bool:
        """Whether this model was trained keeping its training runs' event sequences (False: `train
        --no-runs`, a model to share; the span splice and the start-up anchor then have nothing)."""
        config = getattr(self, "train_config_", None)
        return config is None or config.keep_runs

    def _splice_training(self, workload: str):
        """`workload`'s training runs indexed for the splice (`span_splice.Training`), built on
        first use and kept: every trace of the workload looks up the same runs."""
        from tracesynth.sampling.span_splice import Training

        table = self.encoder_.splices
        cache = self.__dict__.setdefault("_splice_cache", {})
        key = (id(table), workload)  # the table is kept in the value, so its id is not reused
        if key not in cache:
            cache[key] = (table, Training(table.runs(workload)))
        return cache[key][1]

    def _splice(self, trace: Trace, workload: str, seed: int, n_events: int) -> Trace:
        """`trace` with training's events in its uncovered stretches (sampling/span_splice.py),
        cut to `n_events`; as sampled (cut) where the splice would leave it short, or copying more
        of one training run's long spans than the least one training run has of another, plus
        `SPLICE_MARGIN`, in every pass (`_splice_passes`: walks in shorter pieces, no walk, by
        length), or already as sampled."""
        import pyarrow as pa

        from tracesynth.sampling.span_splice import splice

        enc = self.encoder_
        events = trace.events
        ts = events.column("ts").to_numpy().astype(np.int64)
        codes = enc.event.encode(events.column("event").to_numpy(zero_copy_only=False))
        gaps = np.diff(ts, prepend=ts[:1])
        training = self._splice_training(workload)
        # Against one training run at a time: a trace spliced from two runs holds more of both
        # together than one real run would. Real runs' pairwise shares vary (sqlite: 0.49 at least
        # between its two training runs, 0.69 and 0.78 for run 3's first 32,768 events in each),
        # so the bound is the least pair's, with the evaluation's margin.
        span = enc.copies.span if enc.copies is not None else 256
        natural = training.least_shared(span)
        # Candidates from the stretch's own phase of the run first, walking where no anchors match
        # in shorter pieces each time the walk copies more of one run than the bound; where even the
        # anchored splice alone copies more (gzip, run 1 held out: 0.84 against 0.72), from anywhere,
        # by length. A trace that copies more than the bound as sampled (scimark) is left as it is:
        # the splice only adds training's spans.
        bound = natural + SPLICE_MARGIN
        share = training.most_copied(codes[:n_events], span)
        result, phase, walk = None, True, 0
        if share <= bound:
            for phase, walk in self._splice_passes():
                if phase and result is not None and not result.unmatched and not result.walked:
                    continue  # no stretch needed walking: the phase passes to come splice the same
                result = splice(codes, gaps, training, np.random.default_rng([seed, 0x5911CE]), k=self.splice,
                                phase=phase, walk=walk, walk_context=self.splice_walk_context,
                                walk_drift=self.splice_walk_drift or None, walk_aligned=self.splice_walk_aligned)
                share = training.most_copied(result.codes[:n_events], span)
                if share <= bound:
                    break
        def over(when: str = "") -> str:
            return (f"256-gram copy share of one training run {share:.2f}{when}, above the least one training run "
                    f"has of another, {natural:.2f}, + {SPLICE_MARGIN:.2f}")

        if result is None:
            info = {"anchor": self.splice, "copy_share_256_one_run": round(share, 4),
                    "training_runs_least_share": round(natural, 4), "kept": False, "why": over(" as sampled")}
            out = trace.slice(0, n_events)
            out.meta.extra["splice"] = info
            return out
        taken = sum(max(0, min(length, n_events - start)) for start, _, _, length in result.sources)
        info = {"anchor": self.splice, "by_phase": phase, "stretches": result.spliced, "unmatched": result.unmatched,
                "walked": result.walked, "walk_piece": walk,
                "walk_context": self.splice_walk_context or self.splice, "walk_drift": self.splice_walk_drift,
                "walk_aligned": self.splice_walk_aligned,
                "events_from_training": taken,  # of the trace as cut to n_events
                "copy_share_256_one_run": round(share, 4), "training_runs_least_share": round(natural, 4)}
        if len(result.codes) < n_events or share > bound:
            info["kept"] = False
            info["why"] = (f"{len(result.codes)} events after the splice, {n_events} asked" if len(result.codes) < n_events
                           else over())
            out = trace.slice(0, n_events)
        else:
            info["kept"] = True
            new_ts = int(ts[0]) + np.cumsum(result.gaps[:n_events]) - int(result.gaps[0])
            names = enc.event.decode(result.codes[:n_events])
            columns = {name: pa.nulls(n_events, type=events.schema.field(name).type) for name in events.column_names}
            columns["ts"] = pa.array(new_ts, type=pa.int64())
            columns["event"] = pa.array([str(x) for x in names], type=pa.string())
            out = Trace(pa.table(columns), trace.meta)
        out.meta.extra["splice"] = info
        return out

    def _splice_passes(self) -> list[tuple[bool, int]]:
        """(by phase, walk piece) of each splice `_splice` tries, in order, until one copies no
        more than the bound: walking in pieces of `splice_walk` events, then half as long down to
        SPLICE_WALK_MIN, then no walk, then by length from anywhere."""
        return [(True, w) for w in walk_pieces(self.splice_walk)] + [(True, 0), (False, 0)]

    def single_thread(self) -> bool:
        """Whether this model's traces, having no thread ids, are checked, guided and repaired
        as one thread: when every training trace made its syscalls from one thread (sched
        events of other tasks do not count; see `TraceEncoder.single_syscall_thread`)."""
        enc = self.encoder_
        return "tid" not in enc.channels and (enc.single_syscall_thread or len(enc.tid.pool) <= 1)

    def serial_syscalls(self, workload: str) -> list[str]:
        """The syscalls guided sampling holds to entry/exit alternation for `workload`: those its
        training runs never overlap (`encoding.serial`), for a model without thread ids on a
        workload with several syscall threads (with one thread, every syscall is paired
        already); none when `serial_guide` is off or the model was saved before they were fitted."""
        enc = self.encoder_
        if not self.serial_guide or "tid" in enc.channels or self.single_thread():
            return []
        return list(enc.serial.get(workload, []))

    # --- persistence --------------------------------------------------------------------
    def save(self, directory: str | Path) -> Path:
        from tracesynth.model.checkpoint import save_checkpoint

        if not hasattr(self, "model_"):
            raise ConfigError(f"{self.name}: call fit() before save()")
        import dataclasses

        state = dataclasses.asdict(self.state_) if hasattr(self, "state_") else {}
        state["generator"] = self.get_params()
        return save_checkpoint(directory, self.model_, self.encoder_, getattr(self, "train_config_", None),
                               None, state)

    @classmethod
    def load(cls, directory: str | Path, device: str = "auto") -> TraceSynth:
        from tracesynth.model.checkpoint import load_model
        from tracesynth.model.train import resolve_device

        model, encoder, train_cfg, state = load_model(directory, resolve_device(device))
        params = dict(state.get("generator") or {})
        params.setdefault("channels", list(encoder.channels))
        params["context"] = model.config.context
        params["device"] = device
        if train_cfg is not None:  # what trained it (a model saved before `ema` existed: 0)
            params.setdefault("ema", train_cfg.ema)
            params.setdefault("val_fraction", train_cfg.val_fraction)
            params.setdefault("start_rate_end", train_cfg.start_rate_end)
        try:
            gen = cls(**params)
        except (TypeError, ConfigError) as exc:  # a hand-edited or foreign state.json
            raise TraceFormatError(Path(directory) / "state.json", None,
                                   f"its generator settings are not TraceSynth's ({exc})") from None
        gen.model_, gen.encoder_, gen.train_config_ = model, encoder, train_cfg
        gen.workloads_ = list(encoder.workloads)
        return gen

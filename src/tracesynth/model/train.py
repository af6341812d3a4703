"""Training: masked-diffusion ELBO on random windows, plain PyTorch loop, DDP from torchrun.

A share `start_rate` of the windows is taken at the very start of a trace and flagged as such
(the denoiser's start embedding), so the model learns how traces begin; the sampler raises the
flag for the first window of a generated trace. With `start_rate_end` the share moves linearly
to that value over the run: the starts are learnt early (a few hundred steps), and what a
constant share spends on them afterwards could go to the rest of the trace.

Data order and noise depend only on (seed, step), never on hidden RNG state: a run resumed
from a checkpoint continues exactly as if it had never stopped, and N DistributedDataParallel
processes each take 1/N of the same global batch a single process would see, so their
averaged gradients equal single-process ones. torchrun's RANK / WORLD_SIZE / LOCAL_RANK select
the process group (gloo on CPU, nccl on CUDA); only rank 0 writes checkpoints.

Long runs can overfit small training sets (build's validation loss was lowest at 2,000 of
8,000 GPU steps and 18% higher at the end): `keep_best` keeps the weights of the lowest
validation loss in `MODEL_DIR/best` beside the resumable last checkpoint, and `patience` stops
a run that has not improved for that many validations. Both read the validation history in
the checkpoint, so a resumed run decides as an uninterrupted one would.

The weights saved, validated and sampled are an exponential moving average of the optimizer's
(`ema`, decay 0.99: about the last 100 steps; Polyak & Juditsky 1992, as diffusion models have
used since Ho et al. 2020), through `torch.optim.swa_utils.AveragedModel`. The optimizer's own
weights are checkpointed beside the average (`training.safetensors`) while the run can resume.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch.optim.swa_utils import AveragedModel

from tracesynth.encoding.trace_encoder import TraceEncoder
from tracesynth.errors import ConfigError
from tracesynth.model.checkpoint import BEST, load_model, load_optimizer, load_training_weights, save_checkpoint
from tracesynth.model.config import ModelConfig, TrainConfig
from tracesynth.model.denoiser import Denoiser
from tracesynth.model.noise import MaskingSchedule
from tracesynth.model.precision import autocast as network_autocast
from tracesynth.model.precision import resolve_precision
from tracesynth.model.provenance import data_mismatch, fingerprints
from tracesynth.schema import Trace


@dataclass
class TrainCallbacks:
    on_step: Callable[[int, int, float, float], None] | None = None   # step, total, loss, events/s
    on_validation: Callable[[int, float], None] | None = None
    on_checkpoint: Callable[[int], None] | None = None
    on_best: Callable[[int, float, Denoiser], None] | None = None  # step, loss, model: a new best validation


@dataclass
class TrainState:
    step: int = 0
    train_loss: list = field(default_factory=list)       # [step, loss] every step
    val_loss: list = field(default_factory=list)         # [step, loss]
    val_heldout: bool = True
    events_seen: int = 0
    seconds: float = 0.0
    precision: str = ""  # what the network trained in, resolved (fp32 or bf16; "" before it was kept)
    best_step: int | None = None          # the validation with the lowest loss so far
    best_val_loss: float | None = None
    stopped_early: bool = False           # `patience` validations passed without a new best
    device: str = ""                      # where it trained: "cpu", or "cuda: <device name>"
    data: list = field(default_factory=list)  # a fingerprint of each training trace (model.provenance)
    val_data: list = field(default_factory=list)  # and of each separate validation trace (`val_traces`)


# A validation loss must beat the best by more than this (nats per event) to count as better:
# smaller moves are float noise, and should not reset `patience` or rewrite `best/`.
MIN_IMPROVEMENT = 1e-4


def validations_since_best(state: TrainState) -> int:
    """How many validations came after the best one (all of them when there is none yet)."""
    if state.best_step is None:
        return len(state.val_loss)
    return sum(1 for step, _ in state.val_loss if step > state.best_step)


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError("--device cuda: no CUDA device is available here")
    return torch.device(name)


class WindowSource:
    """Random training windows and fixed held-out validation windows from encoded traces.

    Validation windows come from the last `val_fraction` of each training trace, or, given
    `val_traces` (whole runs the network never trains on), evenly through those: the tails of
    the training runs are an optimistic stand-in for a new run where runs differ
    (docs/model.md, "What the training and validation losses measure")."""

    def __init__(self, encoder: TraceEncoder, traces: Sequence[Trace], context: int, val_fraction: float, seed: int,
                 start_rate: float = 0.0, val_traces: Sequence[Trace] = (), start_rate_end: float | None = None,
                 steps: int = 1):
        self.encoder = encoder
        self.start_rate = start_rate
        self.start_rate_end = start_rate if start_rate_end is None else start_rate_end
        self.steps = steps
        self.context = context
        self.seed = seed
        self.encoded = [encoder.encode(t) for t in traces]
        self.labels = [encoder.workloads.index(t.meta.workload or "default") for t in traces]
        lengths = np.array([len(e["event"]) for e in self.encoded])
        held = np.where(lengths * val_fraction >= context, (lengths * val_fraction).astype(int), 0)
        self.train_end = lengths - held
        self.val_start = np.where(held > 0, self.train_end, 0)
        self.val_end = lengths
        self.val_heldout = bool((held > 0).any())
        self.weights = np.maximum(self.train_end - context + 1, 0).astype(float)
        if self.weights.sum() <= 0:
            raise ConfigError(f"no training trace holds a full window of {context} events")
        self.weights /= self.weights.sum()
        self.val_encoded, self.val_labels = [], []
        for trace in val_traces:
            workload = trace.meta.workload or "default"
            if workload not in encoder.workloads:
                raise ConfigError(f"validation trace of workload {workload!r}: the training traces' workloads are "
                                  f"{', '.join(encoder.workloads)}")
            if len(trace) < context:
                raise ConfigError(f"validation trace of {workload} has {len(trace):,} events, fewer than a "
                                  f"window of {context:,}")
            self.val_encoded.append(encoder.encode(trace))
            self.val_labels.append(encoder.workloads.index(workload))
        if self.val_encoded:
            self.val_heldout = True

    def _collate(self, picks: list[tuple[int, int]], encoded: list | None = None,
                 labels: list | None = None) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        encoded, labels = encoded or self.encoded, labels or self.labels
        windows = [self.encoder.window(encoded[i], s, self.context)[0] for i, s in picks]
        codes = {ch: torch.as_tensor(np.stack([w[ch] for w in windows])) for ch in windows[0]}
        return codes, torch.tensor([labels[i] for i, _ in picks])

    def windows_at(self, picks: list[tuple[int, int]], validation: bool = False):
        """(codes, labels, offsets) of the windows at these (trace, first event) picks: of the
        training traces, or with `validation` of the separate validation traces. What
        `validation` and benchmarks/bench_loss_by_window.py measure the loss on."""
        if validation:
            codes, labels = self._collate(picks, self.val_encoded, self.val_labels)
        else:
            codes, labels = self._collate(picks)
        return codes, labels, torch.tensor([start for _, start in picks], dtype=torch.long)

    @staticmethod
    def _spread(n_windows: int, spans: list[tuple[int, int, int]]) -> list[tuple[int, int]]:
        """n_windows (trace, first event) picks, round-robin over `spans` (trace, first start,
        last start) and evenly spaced within each."""
        per = max(1, math.ceil(n_windows / len(spans)))
        picks = []
        for k in range(n_windows):
            i, lo, hi = spans[k % len(spans)]
            picks.append((i, int(lo + (k // len(spans) + 0.5) / per * (hi - lo))))
        return picks

    def batch(self, step: int, size: int):
        codes, labels, _ = self.batch_with_starts(step, size)
        return codes, labels

    def batch_with_starts(self, step: int, size: int):
        """(codes, labels, at_start): see `batch_with_offsets`; flags windows at event 0."""
        codes, labels, offsets = self.batch_with_offsets(step, size)
        return codes, labels, offsets == 0

    def batch_with_offsets(self, step: int, size: int):
        """(codes, labels, offsets): a share `start_rate` of the windows begins at event 0 of
        its trace; the others start anywhere. `offsets` holds each window's first event index."""
        rng = np.random.default_rng([self.seed, step])
        traces = rng.choice(len(self.encoded), size=size, p=self.weights)
        starts = [int(rng.integers(0, self.train_end[i] - self.context + 1)) for i in traces]
        rate = self.start_rate_at(step)
        if rate > 0:
            at_trace_start = np.random.default_rng([self.seed, step, 2]).random(size) < rate
            starts = [0 if first else s for first, s in zip(at_trace_start, starts)]
        codes, labels = self._collate(list(zip(traces.tolist(), starts)))
        return codes, labels, torch.tensor(starts, dtype=torch.long)

    def start_rate_at(self, step: int) -> float:
        """The share of start windows at `step` (0-based): start_rate, moving linearly to
        start_rate_end at the run's last step."""
        if self.start_rate_end == self.start_rate:
            return self.start_rate
        progress = min(1.0, step / max(1, self.steps - 1))
        return self.start_rate + (self.start_rate_end - self.start_rate) * progress

    def validation(self, n_windows: int):
        """Evenly spaced windows over the validation traces, else the held-out tails (or the
        training data, if none held)."""
        if self.val_encoded:
            spans = [(i, 0, len(e["event"]) - self.context) for i, e in enumerate(self.val_encoded)]
            return self.windows_at(self._spread(n_windows, spans), validation=True)
        usable = [i for i in range(len(self.encoded)) if self.val_end[i] - self.val_start[i] >= self.context]
        return self.windows_at(self._spread(n_windows, [(i, int(self.val_start[i]), int(self.val_end[i] - self.context))
                                                        for i in usable]))


class _HiddenOnly(torch.nn.Module):
    """DDP wraps `forward`; this routes it to `hidden` so the heads stay in the graph."""

    def __init__(self, model: Denoiser):
        super().__init__()
        self.model = model

    def forward(self, noisy, t, labels, offset, estimates=None):
        return _hidden(self.model, noisy, t, labels, offset, estimates)


def _hidden(model: Denoiser, noisy, t, labels, offset, estimates):
    """The denoiser's features, self-conditioned on `estimates` when the model takes them."""
    self_cond = None if estimates is None else model.self_cond_input(estimates, tuple(noisy["event"].shape))
    return model.hidden(noisy, t, labels, offset=offset, self_cond=self_cond)


#: Share of training windows that are self-conditioned (the model's own estimate from a first
#: pass at the same noise, as the sampler's previous step gives it); the others see none, as
#: the sampler's first step. 0.5 as in Chen et al. 2022; the first pass runs on those windows only.
SELF_COND_RATE = 0.5


def _estimates(model: Denoiser, noisy, t, labels, offset, masked, chosen: torch.Tensor):
    """Per channel (window rows, positions, class probabilities) of the masked tokens of the
    `chosen` windows, from a pass without gradient: the self-conditioning input."""
    rows = torch.nonzero(chosen).flatten()
    out = {}
    with torch.no_grad():
        hidden = None
        if len(rows):
            pick = {ch: v[rows] for ch, v in noisy.items()}
            hidden = model.hidden(pick, t[rows], labels[rows], offset=None if offset is None else offset[rows])
        for ch in model.channels:
            bi, pi = torch.nonzero(masked[ch][rows], as_tuple=True)
            if hidden is None:
                probs = torch.zeros(0, model.config.vocab_sizes[ch], device=t.device)
            else:
                probs = torch.softmax(model.logits(hidden[bi, pi], ch).float(), -1)
            out[ch] = (rows[bi], pi, probs)
    return out


def _noise(step: int, seed: int, codes, labels, model: Denoiser, cfg: TrainConfig):
    gen = torch.Generator().manual_seed(int(np.random.default_rng([seed, step, 1]).integers(2**62)))
    schedule = MaskingSchedule()
    t = schedule.sample_t(len(labels), gen)
    noisy, masked = schedule.mask(codes, t, model.mask_ids, gen)
    # Some windows keep a clean prefix, as in window-by-window generation: no noise, no loss there.
    with_prefix = torch.rand(len(labels), generator=gen) < cfg.prefix_rate
    n_prefix = int(codes["event"].shape[1] * cfg.prefix_length)
    if with_prefix.any() and n_prefix:
        rows = torch.nonzero(with_prefix).flatten()
        for ch in codes:
            masked[ch][rows, :n_prefix] = False
            noisy[ch][rows, :n_prefix] = codes[ch][rows, :n_prefix]
    drop = torch.rand(len(labels), generator=gen) < cfg.label_dropout
    labels = torch.where(drop, torch.full_like(labels, model.null_workload), labels)
    return t, noisy, masked, labels


#: Learning-rate multiplier of the trace-position and trace-phase embeddings. Each of their rows
#: learns only from windows that cover that position (the first events of a trace: a few per
#: cent of the data), and Adam moves a parameter by about one learning rate per step, so at the
#: base rate the rows would still be near zero when training ends on CPU budgets.
TRACE_POSITION_LR_SCALE = 10.0


def parameter_groups(model: Denoiser) -> list[dict]:
    position = [p for table in (model.trace_position, model.trace_phase) if table is not None
                for p in table.parameters()]
    ids = {id(p) for p in position}
    groups = [{"params": [p for p in model.parameters() if id(p) not in ids], "lr_scale": 1.0}]
    if position:
        groups.append({"params": position, "lr_scale": TRACE_POSITION_LR_SCALE, "weight_decay": 0.0})
    return groups


def learning_rate(step: int, cfg: TrainConfig) -> float:
    warm = max(1, int(cfg.steps * cfg.warmup_fraction))
    if step < warm:
        return cfg.lr * (step + 1) / warm
    progress = (step - warm) / max(1, cfg.steps - warm)
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


def averaged(model: Denoiser, decay: float) -> AveragedModel | None:
    """The moving average of `model`'s weights (None when `decay` is 0). The decay warms up as
    (1 + n) / (10 + n) over the first updates, so early validations see recent weights rather
    than the random start."""
    if not decay:
        return None

    def update(average: list[torch.Tensor], current: list[torch.Tensor], n_before) -> None:
        n = int(n_before) + 1
        weight = 1.0 - min(decay, (1 + n) / (10 + n))
        for a, c in zip(average, current):
            a.lerp_(c, weight)

    return AveragedModel(model, multi_avg_fn=update, use_buffers=False)


def _distributed() -> tuple[int, int, int]:
    return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1)), int(os.environ.get("LOCAL_RANK", 0))


def train(
    traces: Sequence[Trace],
    out_dir: str | Path | None = None,
    *,
    channels: str | Sequence[str] = "light",
    model_config: ModelConfig | None = None,
    train_config: TrainConfig | None = None,
    resume: bool = False,
    callbacks: TrainCallbacks | None = None,
    val_traces: Sequence[Trace] = (),
) -> tuple[Denoiser, TraceEncoder, TrainState]:
    """Fit the encoder (unless resuming) and train the denoiser; checkpoint into `out_dir`.
    `val_traces`: whole runs to validate on instead of the training traces' held-out tails
    (never trained on; their workloads must be among the training traces')."""
    cb = callbacks or TrainCallbacks()
    cfg = (train_config or TrainConfig()).validate()
    rank, world, local_rank = _distributed()
    device = resolve_device(cfg.device)
    if device.type == "cuda" and world > 1:
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    if world > 1 and not torch.distributed.is_initialized():
        torch.distributed.init_process_group("nccl" if device.type == "cuda" else "gloo")
    if cfg.batch_size % world:
        raise ConfigError(f"batch size {cfg.batch_size} must be a multiple of the {world} processes")

    data_prints, val_prints = fingerprints(traces), fingerprints(val_traces)
    trained_on = {f["ts_sha256"]: i for i, f in enumerate(data_prints)}
    for j, f in enumerate(val_prints):
        if f["ts_sha256"] in trained_on:
            raise ConfigError(f"validation trace {j + 1} ({f['workload']}, {f['events']:,} events) is also training "
                              f"trace {trained_on[f['ts_sha256']] + 1}: validate on a run the model does not train on")
    state = TrainState()
    if resume:
        if out_dir is None or not (Path(out_dir) / "state.json").exists():
            raise ConfigError(f"--resume: no checkpoint in {out_dir}")
        model, encoder, saved_cfg, saved_state = load_model(out_dir, "cpu")  # the average, with ema
        model.train()
        # The saved precision stands (a resumed run continues as it began); a checkpoint saved
        # before precision was kept resumes with `auto`.
        cfg = dataclasses.replace(saved_cfg or cfg, steps=cfg.steps, device=cfg.device)
        state = TrainState(**{k: v for k, v in saved_state.items() if k in TrainState.__dataclass_fields__})
        if state.best_step is None and state.val_loss:  # saved before the best was kept
            state.best_step, state.best_val_loss = min(state.val_loss, key=lambda r: r[1])
        if state.data and (why := data_mismatch(state.data, traces)):
            raise ConfigError(f"--resume: {out_dir} was trained on other traces than these ({why})")
        if (state.val_data or val_traces) and (why := data_mismatch(state.val_data, val_traces, "validation")):
            raise ConfigError(f"--resume: {out_dir} was validated on other traces than these ({why})")
    else:
        # keep_runs=False: no verbatim training run leaves with the model
        encoder = TraceEncoder(channels, ngram_order=cfg.ngram_order).fit(traces, keep_runs=cfg.keep_runs)
        mc = dataclasses.replace(model_config or ModelConfig())
        longest = max(len(t) for t in traces)
        if longest < mc.context:  # short training data: a shorter window, same architecture
            mc.context = max(mc.downsample, longest - longest % mc.downsample)
        mc.vocab_sizes = encoder.vocab_sizes()
        mc.n_workloads = len(encoder.workloads)
        torch.manual_seed(cfg.seed)
        model = Denoiser(mc)
        state.data, state.val_data = data_prints, val_prints
    average = averaged(model, cfg.ema)  # a copy: the saved, validated and sampled network
    if average is not None and resume:
        load_training_weights(out_dir, model)  # the optimizer goes on from its own weights
        average.n_averaged.fill_(state.step)
    model.to(device)
    if average is not None:
        average.to(device)
    sampled = model if average is None else average.module
    state.device = f"cuda: {torch.cuda.get_device_name(device)}" if device.type == "cuda" else device.type
    source = WindowSource(encoder, traces, model.config.context, cfg.val_fraction, cfg.seed,
                          cfg.start_rate if model.config.start_flag else 0.0, val_traces,
                          cfg.start_rate_end if model.config.start_flag else None, cfg.steps)
    state.val_heldout = source.val_heldout
    if (cfg.keep_best or cfg.patience) and not source.val_heldout:
        raise ConfigError(f"keeping the best weights or stopping early needs held-out validation windows: no "
                          f"training trace has a {cfg.val_fraction:.0%} tail of {model.config.context} events "
                          f"(traces of at least {math.ceil(model.config.context / cfg.val_fraction)} events)")
    optimizer = torch.optim.AdamW(parameter_groups(model), lr=cfg.lr, weight_decay=cfg.weight_decay,
                                  betas=(0.9, 0.99), foreach=True)
    if resume:
        load_optimizer(out_dir, optimizer, saved_state)
    wrapped = model
    if world > 1:
        wrapped = torch.nn.parallel.DistributedDataParallel(
            _HiddenOnly(model), device_ids=[local_rank] if device.type == "cuda" else None)
    # bf16 autocast when asked or, with `auto`, on CUDA (model/precision.py); the loss is fp32.
    state.precision = resolve_precision(cfg.precision, device)
    autocast = network_autocast(state.precision, device)
    local = slice(rank, cfg.batch_size, world)

    def forward_loss(codes, labels, t, noisy, masked, weighting, offset, chosen):
        with autocast:
            return training_loss(model, codes, noisy, masked, t, labels, offset, weighting, chosen,
                                 network=wrapped if world > 1 else None)

    def checkpoint():
        if out_dir is not None and rank == 0:
            # `best/` lives inside the model directory: carried over while this run keeps it
            # (a fresh run into an old directory drops the old run's until it has its own).
            carry = (BEST,) if cfg.keep_best and state.best_step is not None else ()
            save_checkpoint(out_dir, sampled, encoder, cfg, optimizer, dataclasses.asdict(state), carry=carry,
                            training=model if average is not None else None)
            if cb.on_checkpoint:
                cb.on_checkpoint(state.step)

    def validate() -> None:
        """Validation loss now; a new best is recorded (and written to `best/` with keep_best)."""
        val = validation_loss(sampled, source, cfg, device)
        if world > 1:  # every process validates the same windows; agree on one number
            value = torch.tensor(val, dtype=torch.float64)
            torch.distributed.all_reduce(value)
            val = float(value) / world
        state.val_loss.append([state.step, round(val, 5)])
        if state.best_val_loss is None or val < state.best_val_loss - MIN_IMPROVEMENT:
            state.best_step, state.best_val_loss = state.step, val
            if cfg.keep_best and out_dir is not None and rank == 0:
                save_checkpoint(Path(out_dir) / BEST, sampled, encoder, cfg, None, dataclasses.asdict(state))
            if cb.on_best:
                cb.on_best(state.step, val, sampled)
        if cb.on_validation:
            cb.on_validation(state.step, val)

    def patience_ran_out() -> bool:
        return bool(cfg.patience) and validations_since_best(state) >= cfg.patience

    start_time = time.perf_counter() - state.seconds
    state.stopped_early = patience_ran_out()  # a resumed run that had stopped stays stopped
    while state.step < cfg.steps and not state.stopped_early:
        step = state.step
        tick = time.perf_counter()
        codes, labels, offsets = source.batch_with_offsets(step, cfg.batch_size)
        t, noisy, masked, labels = _noise(step, cfg.seed, codes, labels, model, cfg)
        pick = lambda d: {k: v[local].to(device) for k, v in d.items()}  # noqa: E731
        codes_l, noisy_l, masked_l = pick(codes), pick(noisy), pick(masked)
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, cfg) * group.get("lr_scale", 1.0)
        model.train()
        chosen = self_cond_windows(cfg.seed, step, cfg.batch_size)
        loss = forward_loss(codes_l, labels[local].to(device), t[local].to(device), noisy_l, masked_l,
                            cfg.loss_weighting, offsets[local].to(device), chosen[local].to(device)).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.grad_clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        optimizer.step()
        if average is not None:
            average.update_parameters(model)
        value = loss.detach().float()
        if world > 1:
            torch.distributed.all_reduce(value)
            value /= world
        state.step += 1
        state.events_seen += cfg.batch_size * model.config.context
        state.train_loss.append([state.step, round(float(value), 5)])
        state.seconds = time.perf_counter() - start_time
        if cb.on_step:
            cb.on_step(state.step, cfg.steps, float(value),
                       cfg.batch_size * model.config.context / max(time.perf_counter() - tick, 1e-9))
        last = state.step == cfg.steps
        if cfg.val_every and (state.step % cfg.val_every == 0 or last):
            validate()
            state.stopped_early = patience_ran_out()
        if last or state.stopped_early or (cfg.checkpoint_every and state.step % cfg.checkpoint_every == 0):
            checkpoint()
    sampled.eval()
    return sampled, encoder, state


def training_loss(model: Denoiser, codes, noisy, masked, t, labels, offset, weighting: str,
                  chosen: torch.Tensor | None = None, network=None) -> torch.Tensor:
    """Per-window loss (B,) of one noised batch. A self-conditioned model first estimates the
    masked tokens of the `chosen` windows (bool (B,); a pass without gradient) and reads that
    estimate; `network` (the DDP wrapper) computes the features when given."""
    estimates = None
    if model.self_cond is not None and chosen is not None:
        estimates = _estimates(model, noisy, t, labels, offset, masked, chosen)
    hidden = (network(noisy, t, labels, offset, estimates) if network is not None
              else _hidden(model, noisy, t, labels, offset, estimates))
    return _loss_from_hidden(model, hidden, codes, t, masked, weighting)


def self_cond_windows(seed: int, step: int, batch_size: int) -> torch.Tensor:
    """Which windows of a step's batch are self-conditioned (bool (B,), `SELF_COND_RATE`)."""
    return torch.as_tensor(np.random.default_rng([seed, step, 3]).random(batch_size) < SELF_COND_RATE)


def _loss_from_hidden(model: Denoiser, hidden, codes, t, masked, weighting) -> torch.Tensor:
    """Per-window loss (B,): cross-entropy of masked tokens, ELBO-weighted, in nats per event."""
    b, n = codes["event"].shape
    total = torch.zeros(b, device=hidden.device)
    count = torch.zeros(b, device=hidden.device)
    for ch in model.channels:
        bi, pi = torch.nonzero(masked[ch], as_tuple=True)
        logits = model.logits(hidden[bi, pi], ch).float()
        ce = F.cross_entropy(logits, codes[ch][bi, pi], reduction="none")
        total = total.index_add(0, bi, ce)
        count = count.index_add(0, bi, torch.ones_like(ce))
    if weighting == "elbo":
        return total / t / n
    return total / count.clamp(min=1) * len(model.channels)


def validation_loss(model: Denoiser, source: WindowSource, cfg: TrainConfig, device) -> float:
    """Negative ELBO (nats per event) on fixed held-out windows at fixed noise levels."""
    codes, labels, offsets = source.validation(cfg.val_windows)
    return window_loss(model, codes, labels, offsets, cfg.seed, device)


@torch.inference_mode()
def window_loss(model: Denoiser, codes, labels, offsets, seed: int, device="cpu", draws: int = 1) -> float:
    """Negative ELBO (nats per event) on these windows: window k of B masked at noise level
    (k + 0.5) / B, so a fixed set of windows always sees the same levels; the mask is drawn
    from `seed` (draw d from seed + 7919 + d) and the figure averaged over `draws` masks."""
    model.eval()
    device = torch.device(device)
    t = ((torch.arange(len(labels)) + 0.5) / len(labels)).clamp(min=1e-3)
    move = lambda d: {k: v.to(device) for k, v in d.items()}  # noqa: E731
    codes_on, t_on, labels, offsets = move(codes), t.to(device), labels.to(device), offsets.to(device)
    values = []
    for draw in range(draws):
        noisy, masked = MaskingSchedule().mask(codes, t, model.mask_ids, torch.Generator().manual_seed(seed + 7919 + draw))
        hidden = model.hidden(move(noisy), t_on, labels, offset=offsets)
        values.append(float(_loss_from_hidden(model, hidden, codes_on, t_on, move(masked), "elbo").mean()))
    return float(np.mean(values))

"""Plain-dataclass configs for the denoiser and for training; both round-trip through JSON."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field

from tracesynth.errors import ConfigError

#: What the network runs in (model/precision.py): auto = bf16 on CUDA, fp32 on CPU.
PRECISIONS = ("auto", "fp32", "bf16")


@dataclass
class ModelConfig:
    """Shape of the denoiser. `vocab_sizes` comes from the fitted `TraceEncoder`."""

    vocab_sizes: dict[str, int] = field(default_factory=dict)
    n_workloads: int = 1
    context: int = 4096           # training window, in events
    d_local: int = 64             # width at full resolution (conv blocks, heads)
    d_global: int = 128           # width at low resolution (transformer blocks)
    local_blocks: int = 1         # conv blocks before downsampling (and as many after)
    kernel_size: int = 7
    dilations: tuple[int, ...] = (1, 2, 4, 8)
    downsample: int = 16          # full → low resolution factor
    global_blocks: int = 3
    heads: int = 4
    mlp_ratio: int = 2
    start_flag: bool = True       # learned "window starts at the beginning of a trace" embedding
    trace_positions: int = 512    # learned embedding of each event's index in its trace, up to
                                  # this many (later events share one "far" class); 0 = none
    trace_phases: int = 64        # coarse position: one learned embedding per `trace_phase_events`
    trace_phase_events: int = 1024  # events of the trace (later ones share a "far" class); 0 = none
    self_condition: bool = False  # the previous step's predictions of still-masked tokens as input

    def validate(self) -> ModelConfig:
        if not self.vocab_sizes or "event" not in self.vocab_sizes:
            raise ConfigError("model config needs the vocab sizes of at least the 'event' channel")
        if self.context % self.downsample:
            raise ConfigError(f"context {self.context} must be a multiple of downsample {self.downsample}")
        if self.trace_positions < 0:
            raise ConfigError(f"trace positions must be >= 0, not {self.trace_positions}")
        if self.trace_phases < 0 or self.trace_phase_events < 1:
            raise ConfigError(f"trace phases must be >= 0 and phase length >= 1, not "
                              f"{self.trace_phases} x {self.trace_phase_events}")
        if self.d_global % self.heads or (self.d_global // self.heads) % 2:
            raise ConfigError(f"d_global {self.d_global} must split into {self.heads} heads of even width")
        return self

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> ModelConfig:
        data = dict(data)
        data["dilations"] = tuple(data.get("dilations", (1, 2, 4, 8)))
        data.setdefault("start_flag", False)  # configs saved before the flag existed: no such input
        data.setdefault("trace_positions", 0)  # nor the trace-position embedding
        data.setdefault("trace_phases", 0)  # nor the trace-phase one
        data.setdefault("self_condition", False)  # nor self-conditioning
        return cls(**data)


#: Model sizes by name. `tiny` is for tests; `auto` picks `small` for the light model (event +
#: dt) and `medium` when more channels must be modelled (wider, because tid/cpu/ret/procname
#: carry more information per event than event + dt).
SIZES = {
    "tiny": dict(d_local=32, d_global=64, local_blocks=2, global_blocks=1, heads=2, downsample=8),
    "small": dict(d_local=64, d_global=128, local_blocks=1, global_blocks=3, heads=4, downsample=16),
    "medium": dict(d_local=128, d_global=192, local_blocks=2, global_blocks=3, heads=4, downsample=16),
    "base": dict(d_local=192, d_global=256, local_blocks=3, global_blocks=6, heads=8, downsample=16),
}
SIZE_NAMES = ("auto", *SIZES)


def size_config(size: str, channels) -> dict:
    """The ModelConfig keywords of a named size (`auto`: by number of channels)."""
    from tracesynth.encoding.channels import resolve_channels

    if size == "auto":
        size = "small" if len(resolve_channels(channels)) <= 2 else "medium"
    if size not in SIZES:
        raise ConfigError(f"unknown model size {size!r}; choose one of: {', '.join(SIZE_NAMES)}")
    return dict(SIZES[size])


def phase_config(phase_events: int | None) -> dict:
    """ModelConfig overrides for a trace-phase length: None keeps the default, 0 turns the
    phase embedding off, N > 0 makes each phase N events long."""
    if phase_events is None:
        return {}
    if phase_events < 0:
        raise ConfigError(f"phase length must be >= 0 events, not {phase_events}")
    return {"trace_phases": 0} if phase_events == 0 else {"trace_phase_events": phase_events}


# Default share of training windows that begin at a trace's first event (`TraceSynth` takes its
# default from here; the CLI and experiment configs leave it to TrainConfig when not given).
# 0.6: at context 4096 a batch holds 8 windows, so 0.3 showed the start-up ~2.4 times a step and
# the model never learnt it (gzip TSTR/TRTR 0.946, scimark 0.793); 0.6 gave 0.990 / 0.970.
START_RATE = 0.6

# Decay of the exponential moving average of the weights that training saves and the sampler
# uses (model.train, "EMA"; 0: the last step's weights). 0.99 averages about the last 100 steps
# and was the default on 2026-12-04 after a five-workload probe (three traces each) found its
# traces' 512-event windows told from real 0.012 less often; the headline rerun with it (eight
# workloads, six traces each, paired with the last weights of the same trainings) found no such
# gain: disc@512 +0.008 ± 0.020 on average, build clearly worse (+0.06), sqlite better (-0.016)
# (docs/model.md, "Weight averaging"). So the default is the last weights again; 0.99 an option.
EMA = 0.0
#: What `--ema` is usually given: about the last 100 steps averaged.
EMA_TYPICAL = 0.99

#: Share of each training trace's end held out for validation windows (`train --val-fraction`).
#: The network never trains on it: 0 trains on every event and validates on training windows.
VAL_FRACTION = 0.1


@dataclass
class TrainConfig:
    steps: int = 1000            # default: ~5.5 min on 2 idle CPU cores for one workload, context 4096
    batch_size: int = 8
    lr: float = 2e-3
    weight_decay: float = 0.01
    warmup_fraction: float = 0.05
    grad_clip: float = 1.0
    label_dropout: float = 0.1    # classifier-free guidance: train unconditionally this often
    loss_weighting: str = "elbo"  # "elbo" (1/t, MDLM) or "uniform" (MaskGIT-style)
    prefix_rate: float = 0.25     # share of windows whose first `prefix_length` events stay clean
    prefix_length: float = 0.25   # (the continuation task the window-by-window sampler poses)
    start_rate: float = START_RATE  # share of windows taken at the very start of a trace (start flag on)
    start_rate_end: float | None = None  # the share at the last step, reached linearly (None: constant)
    val_fraction: float = VAL_FRACTION  # tail of each trace held out for validation windows (0: none)
    val_every: int = 100
    val_windows: int = 8
    checkpoint_every: int = 100
    keep_best: bool = False       # also keep the weights of the lowest validation loss, in MODEL_DIR/best
    patience: int = 0             # stop after this many validations without a new best (0: never)
    seed: int = 0
    device: str = "auto"
    precision: str = "auto"       # what the network trains in: auto (bf16 on CUDA, fp32 on CPU), fp32, bf16
    ngram_order: int = 8          # longest context of the n-gram prior's tables, events on each side (encoding.ngrams.K)
    ema: float = EMA              # decay of the weights' moving average that is saved and sampled (0: the last weights)
    # Keep the training runs' event sequences with the model (the span splice's table, the start-up
    # anchor's table); False: a model to share holds no verbatim training run (those two opt-in
    # sampler features are then off).
    keep_runs: bool = True

    def validate(self) -> TrainConfig:
        if self.steps < 1 or self.batch_size < 1 or self.lr <= 0:
            raise ConfigError("steps, batch size and learning rate must be positive")
        if not 0.0 <= self.start_rate <= 1.0:
            raise ConfigError(f"start rate must be in [0, 1], not {self.start_rate}")
        if self.start_rate_end is not None and not 0.0 <= self.start_rate_end <= 1.0:
            raise ConfigError(f"final start rate must be in [0, 1], not {self.start_rate_end}")
        if self.loss_weighting not in ("elbo", "uniform"):
            raise ConfigError(f"loss weighting must be 'elbo' or 'uniform', not {self.loss_weighting!r}")
        if self.device not in ("auto", "cpu", "cuda") and not self.device.startswith("cuda:"):
            raise ConfigError(f"device must be auto, cpu or cuda, not {self.device!r}")
        if self.precision not in PRECISIONS:
            raise ConfigError(f"precision must be one of {', '.join(PRECISIONS)}, not {self.precision!r}")
        if not 0.0 <= self.val_fraction <= 0.5:
            raise ConfigError(f"validation fraction must be in [0, 0.5], not {self.val_fraction}")
        if not 0.0 <= self.ema < 1.0:
            raise ConfigError(f"EMA decay must be in [0, 1), not {self.ema}")
        if self.patience < 0:
            raise ConfigError(f"patience must be >= 0 validations, not {self.patience}")
        if (self.keep_best or self.patience) and not self.val_every:
            raise ConfigError("keeping the best weights or stopping early needs periodic validation (val_every > 0)")
        from tracesynth.encoding.ngrams import MAX_ORDER

        if not 1 <= self.ngram_order <= MAX_ORDER:
            raise ConfigError(f"n-gram order must be 1-{MAX_ORDER}, not {self.ngram_order}")
        return self

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> TrainConfig:
        data = dict(data)
        data.setdefault("start_rate", 0.0)  # saved before start windows existed: resume unchanged
        data.setdefault("ema", 0.0)  # nor the weights' moving average: the last weights, as trained
        return cls(**data)


def dumps(model: ModelConfig, train: TrainConfig | None) -> str:
    return json.dumps({"model": model.to_dict(), "train": train.to_dict() if train else None}, indent=1)

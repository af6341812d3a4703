"""Experiment configs: plain dataclasses loaded from YAML, validated key by key.

A config says which data (workloads, train/test runs), which grid (channels × contexts ×
constraints × seeds), how TraceSynth trains at budget 1, which peers run beside it and how
the evaluation runs. A mistake names the file and the dotted key (``default.yaml: grid.contexts:
...``), because a grid that dies two hours in on a typo costs more than the check.

Budget: ``train_steps`` is the number of optimiser steps at ``--budget 1``; the runner trains
``round(train_steps * budget)`` steps (at least 1). Steps, not seconds, so that a cell's model
does not depend on how busy the machine was, and the same config scales up on a GPU by raising
the budget. See docs/experiments.md for measured seconds per cell.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from dataclasses import dataclass, field
from pathlib import Path

from tracesynth.errors import ConfigError
from tracesynth.generators.splice_settings import SPLICE_SETTINGS, splice_setting_problem

CHANNEL_PRESETS = ("light", "full")
CONSTRAINT_MODES = ("none", "repair", "guided")
PEER_NAMES = ("markov", "copy", "resample", "ar", "par", "dgan")


FOLD_SCHEMES = ("leave-one-out",)
SYNTHETIC_EVENTS = ("test", "train")  # evaluation.synthetic_events: as many events as which side holds


@dataclass
class DataConfig:
    """Bundled workloads and the run split. `workloads: all` means every bundled workload.

    `folds: leave-one-out` rotates the split: every run of `train_runs` and `test_runs` is held
    out once, each fold training on the others (three folds for runs 1-3). One held-out run
    moves a workload's macro-F1 by 0.01-0.02 with the start-up it happens to take, and one
    training draw moves build's by up to 0.14 (docs/results-history.md), so a claim about a
    workload is safer over its folds than over one split.
    """

    workloads: list[str] | str = "all"
    train_runs: list[int] = field(default_factory=lambda: [1, 2])
    test_runs: list[int] = field(default_factory=lambda: [3])
    max_train_events: int | None = None  # per training run (first events); None = whole run
    max_test_events: int | None = None   # per held-out run; synthetic length = held-out length
    folds: str | None = None  # None: the one split above; "leave-one-out": each run held out once


@dataclass(frozen=True)
class Fold:
    """One split of the runs: `label` names it in cell ids and results ("" for a config without
    folds, whose cell ids stay what they always were)."""

    label: str
    train_runs: tuple[int, ...]
    test_runs: tuple[int, ...]


def folds(data: DataConfig) -> list[Fold]:
    """The splits a config runs: its one split, or one fold per held-out run."""
    if data.folds is None:
        return [Fold("", tuple(data.train_runs), tuple(data.test_runs))]
    runs = sorted(set(data.train_runs) | set(data.test_runs))
    return [Fold(str(run), tuple(r for r in runs if r != run), (run,)) for run in runs]


def runs_label(runs) -> str:
    """How results name a split's held-out runs: "3", "1+2"."""
    return "+".join(str(r) for r in runs)


@dataclass
class GridConfig:
    channels: list[str] = field(default_factory=lambda: ["light", "full"])
    contexts: list[int] = field(default_factory=lambda: [256, 1024, 4096, 16384])
    constraints: list[str] = field(default_factory=lambda: ["none", "repair", "guided"])
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    # False: every seed samples from the model trained with the first seed, so the intervals
    # measure sampling variation only (one training per model instead of one per seed: what
    # fits a 2-core machine); True: each seed trains its own model.
    retrain_per_seed: bool = True


@dataclass
class TraceSynthSettings:
    """How each TraceSynth cell trains and samples (steps are at budget 1).

    `batch_events`: events per optimiser step; the batch is ``max(1, batch_events // context)``
    windows, so every context sees the same number of events per step and the context sweep
    compares models of equal training compute in events, not in windows.
    """

    train_steps: int = 300
    batch_events: int = 16384
    lr: float = 2e-3
    size: str = "auto"
    sample_steps: int = 16
    device: str = "auto"
    start_rate: float | None = None  # share of training windows at a trace's first event (None: TrainConfig's)
    start_rate_end: float | None = None  # that share at the last step, reached linearly (None: constant)
    train_precision: str | None = None  # what the network trains in: auto, fp32, bf16 (None: default, auto)
    ngram_order: int | None = None  # longest context of the n-gram tables, counted at training (None: 8)
    self_condition: bool | None = None  # self-conditioned denoiser (None: ModelConfig's default)
    keep_best: bool | None = None  # sample the best-validated weights, not the last (None: off)
    ema: float | None = None  # decay of the sampled moving average of the weights (None: TrainConfig's; 0: off)
    val_fraction: float | None = None  # share of each training run's end held out for validation (None: 0.1)
    phase_events: int | None = None  # events per trace-phase embedding block (None: the model's 1024; 0: none)
    # Sampling settings apply to loaded models too (a run reusing saved models samples with them):
    temperature: float | None = None  # every draw after a trace's start-up (None: the sampler's default, 1)
    spread: int | None = None  # spread reveals, in events (None: the sampler's default; 0: off)
    tid_temperature: float | None = None  # thread-id channel's temperature (None: the sampler's default)
    support_rounds: int | None = None  # support corrector rounds (None: the sampler's default; 0: off)
    copy_rounds: int | None = None  # copy guard rounds (None: the sampler's default; 0: off)
    serial_guide: bool | None = None  # guide serial syscalls of light traces (None: the default, on)
    guide_rounds: int | None = None  # guided: redraw rounds after the last step (None: default; 0: off)
    ngram_weight: float | None = None  # power of the n-gram prior at draw time (None: default; 0: off)
    ngram_rounds: int | None = None  # parts each step's reveals are drawn in under the prior (None: default)
    prior_from: int | None = None  # the event of a trace the prior applies from (None: default, 0 = all)
    sample_precision: str | None = None  # what the network samples in: auto, fp32, bf16 (None: default, fp32)
    prefix_fraction: float | None = None  # share of a continuation window given by the previous one (None: 0.25)
    cadence: bool | str | None = None  # the cadence scaffold: true, false or auto (None: the default, auto)
    start_steps: int | None = None  # denoising steps of a trace's first window (None: the default)
    start_anchor: int | None = None  # a trace's first events from a training run's start-up (None: default; 0: off)
    splice: int | None = None  # span splice anchor length (None: default, off; 0: off)
    splice_walk: int | None = None  # the splice's walk pieces, in events (None: default, 384; 0: no walk)
    splice_walk_context: int | None = None  # the walk's match at each jump (None: default, 16; 0: the anchor's)
    splice_walk_drift: int | None = None  # how far off its course a jump may land (None: default, 64; 0: the splice's)
    splice_walk_aligned: bool | None = None  # one place per run at each of the walk's jumps (None: default, off)


@dataclass
class PeerConfig:
    """One peer generator: its adapter name (peers.py) and constructor keywords."""

    name: str = ""
    params: dict = field(default_factory=dict)
    label: str | None = None  # column name in the results (default: the name)

    @property
    def display(self) -> str:
        return self.label or self.name


@dataclass
class EvaluationSettings:
    """Arguments of `tracesynth.evaluation.runner.evaluate` for every cell."""

    seeds: int = 1
    quick: bool = True
    predictor: str = "ngram"  # which predictor's next-event figure is the headline TSTR
    # What a cell samples: "test" (or unset) one trace as long as its held-out runs, which every
    # figure reads; "train" also a training-size set, one trace per training run as long as that
    # run (`runner.matched_lengths`), on which `tstr_matched` trains the predictor: as much
    # synthetic data as TRTR has real, the usual TSTR protocol. Unset rather than "test" by
    # default, so runs started before the key resume.
    synthetic_events: str | None = None


@dataclass
class ExperimentConfig:
    name: str = "experiment"
    data: DataConfig = field(default_factory=DataConfig)
    grid: GridConfig = field(default_factory=GridConfig)
    tracesynth: TraceSynthSettings = field(default_factory=TraceSynthSettings)
    peers: list[PeerConfig] = field(default_factory=list)
    evaluation: EvaluationSettings = field(default_factory=EvaluationSettings)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict, source: str = "<config>") -> ExperimentConfig:
        config = _build(cls, data, source, "")
        validate(config, source)
        return config


# --- loading ---------------------------------------------------------------------------------
def load_config(path: str | Path) -> ExperimentConfig:
    """Read and validate a YAML experiment config; errors name the file and the key."""
    import yaml

    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read experiment config ({exc.strerror or exc})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{path}{where}: not valid YAML ({problem})") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of keys, not {type(data).__name__}")
    return ExperimentConfig.from_dict(data, str(path))


def _fail(source: str, key: str, message: str) -> typing.NoReturn:
    raise ConfigError(f"{source}: {key or '<top level>'}: {message}")


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def _build(cls, data, source: str, prefix: str):
    """Dataclass `cls` from a mapping: unknown keys and wrong types fail with the dotted key."""
    if not isinstance(data, dict):
        _fail(source, prefix, f"expected a mapping, got {_type_name(data)}")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(map(str, data)) - names)
    if unknown:
        _fail(source, _join(prefix, unknown[0]), f"unknown key; expected one of: {', '.join(sorted(names))}")
    values = {key: _convert(hints[key], value, source, _join(prefix, key)) for key, value in data.items()}
    return cls(**values)


def _type_name(value) -> str:
    return "nothing (null)" if value is None else type(value).__name__


def _convert(hint, value, source: str, key: str):
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if dataclasses.is_dataclass(hint):
        return _build(hint, value, source, key)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        errors = []
        for option in args:
            try:
                return _convert(option, value, source, key)
            except ConfigError as exc:
                errors.append(str(exc))
        wanted = " or ".join(_hint_name(a) for a in args)
        _fail(source, key, f"expected {wanted}, got {_type_name(value)} {value!r}")
    if hint is type(None):
        if value is not None:
            _fail(source, key, f"expected null, got {value!r}")
        return None
    if origin is list:
        if not isinstance(value, list):
            _fail(source, key, f"expected a list, got {_type_name(value)} {value!r}")
        return [_convert(args[0], item, source, f"{key}[{i}]") for i, item in enumerate(value)]
    if origin is dict or hint is dict:
        if not isinstance(value, dict):
            _fail(source, key, f"expected a mapping, got {_type_name(value)}")
        return dict(value)
    if hint is bool:
        if not isinstance(value, bool):
            _fail(source, key, f"expected true or false, got {value!r}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            _fail(source, key, f"expected an integer, got {_type_name(value)} {value!r}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            _fail(source, key, f"expected a number, got {_type_name(value)} {value!r}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            _fail(source, key, f"expected a string, got {_type_name(value)} {value!r}")
        return value
    raise TypeError(f"config field type {hint!r} is not supported")  # a bug in this module


def _hint_name(hint) -> str:
    if typing.get_origin(hint) is list:
        return f"a list of {_hint_name(typing.get_args(hint)[0])}"
    return {int: "an integer", str: "a string", float: "a number", bool: "true/false",
            type(None): "null"}.get(hint, getattr(hint, "__name__", str(hint)))


# --- semantic checks -------------------------------------------------------------------------
def validate(config: ExperimentConfig, source: str = "<config>") -> ExperimentConfig:
    data, grid, ts = config.data, config.grid, config.tracesynth
    if isinstance(data.workloads, str) and data.workloads != "all":
        _fail(source, "data.workloads", f"expected a list of workload names or 'all', got {data.workloads!r}")
    if isinstance(data.workloads, list) and not data.workloads:
        _fail(source, "data.workloads", "needs at least one workload")
    for key in ("train_runs", "test_runs"):
        runs = getattr(data, key)
        if not runs:
            _fail(source, f"data.{key}", "needs at least one run")
        if any(r < 1 for r in runs):
            _fail(source, f"data.{key}", f"run numbers start at 1, got {runs}")
    if data.folds is not None and data.folds not in FOLD_SCHEMES:
        _fail(source, "data.folds", f"expected {' or '.join(FOLD_SCHEMES)} (or null for one split), got {data.folds!r}")
    if data.folds is not None and len(set(data.train_runs) | set(data.test_runs)) < 2:
        _fail(source, "data.folds", "leave-one-out needs two runs or more in train_runs and test_runs together")
    overlap = sorted(set(data.train_runs) & set(data.test_runs))
    if overlap and data.folds is None:
        _fail(source, "data.test_runs", f"runs {overlap} are also training runs; the held-out runs must be others")
    for key in ("max_train_events", "max_test_events"):
        value = getattr(data, key)
        if value is not None and value < 1:
            _fail(source, f"data.{key}", f"must be positive or null, got {value}")
    for i, channels in enumerate(grid.channels):
        if channels not in CHANNEL_PRESETS:
            from tracesynth.encoding.channels import resolve_channels

            try:
                resolve_channels(channels)
            except ConfigError as exc:
                _fail(source, f"grid.channels[{i}]", f"{channels!r}: {exc}")
    for i, context in enumerate(grid.contexts):
        if context < 16 or context % 16:
            _fail(source, f"grid.contexts[{i}]", f"a context must be a positive multiple of 16, got {context}")
    for i, mode in enumerate(grid.constraints):
        if mode not in CONSTRAINT_MODES:
            _fail(source, f"grid.constraints[{i}]", f"expected one of {', '.join(CONSTRAINT_MODES)}, got {mode!r}")
    for key in ("channels", "contexts", "constraints", "seeds"):
        values = getattr(grid, key)
        if len(set(values)) != len(values):
            _fail(source, f"grid.{key}", f"has duplicates: {values}")
    if not grid.seeds:
        _fail(source, "grid.seeds", "needs at least one seed")
    emptied = [k for k in ("channels", "contexts", "constraints") if not getattr(grid, k)]
    if emptied and len(emptied) < 3:  # all three empty = a peers-only experiment
        _fail(source, f"grid.{emptied[0]}", "is empty while other grid lists are not; leave all three empty "
                                            "for a peers-only experiment")
    if emptied and not config.peers:
        _fail(source, "peers", "the grid has no TraceSynth cells and no peers: nothing to run")
    if ts.train_steps < 1:
        _fail(source, "tracesynth.train_steps", f"must be at least 1, got {ts.train_steps}")
    if ts.batch_events < 1:
        _fail(source, "tracesynth.batch_events", f"must be at least 1, got {ts.batch_events}")
    if ts.sample_steps < 1:
        _fail(source, "tracesynth.sample_steps", f"must be at least 1, got {ts.sample_steps}")
    if ts.start_rate is not None and not 0.0 <= ts.start_rate <= 1.0:
        _fail(source, "tracesynth.start_rate", f"must be in [0, 1], got {ts.start_rate}")
    if ts.start_rate_end is not None and not 0.0 <= ts.start_rate_end <= 1.0:
        _fail(source, "tracesynth.start_rate_end", f"must be in [0, 1], got {ts.start_rate_end}")
    if ts.val_fraction is not None and not 0.0 <= ts.val_fraction <= 0.5:
        _fail(source, "tracesynth.val_fraction", f"must be in [0, 0.5], got {ts.val_fraction}")
    if ts.phase_events is not None and ts.phase_events < 0:
        _fail(source, "tracesynth.phase_events", f"must be 0 (no trace-phase embedding) or positive, got {ts.phase_events}")
    if ts.spread is not None and ts.spread < 0:
        _fail(source, "tracesynth.spread", f"must be 0 (off) or positive, got {ts.spread}")
    if ts.temperature is not None and ts.temperature <= 0:
        _fail(source, "tracesynth.temperature", f"must be positive, got {ts.temperature}")
    if ts.tid_temperature is not None and ts.tid_temperature <= 0:
        _fail(source, "tracesynth.tid_temperature", f"must be positive, got {ts.tid_temperature}")
    if ts.support_rounds is not None and ts.support_rounds < 0:
        _fail(source, "tracesynth.support_rounds", f"must be 0 (off) or positive, got {ts.support_rounds}")
    if ts.prefix_fraction is not None and not 0 <= ts.prefix_fraction < 1:
        _fail(source, "tracesynth.prefix_fraction", f"must be in [0, 1), got {ts.prefix_fraction}")
    if ts.start_steps is not None and ts.start_steps < 1:
        _fail(source, "tracesynth.start_steps", f"must be at least 1, got {ts.start_steps}")
    if ts.start_anchor is not None and ts.start_anchor < 0:
        _fail(source, "tracesynth.start_anchor", f"must be 0 (off) or a number of events, got {ts.start_anchor}")
    for name in SPLICE_SETTINGS:
        value = getattr(ts, name)
        if value is not None and (problem := splice_setting_problem(name, value)):
            _fail(source, f"tracesynth.{name}", problem)
    if isinstance(ts.cadence, str) and ts.cadence != "auto":
        _fail(source, "tracesynth.cadence", f"expected true, false or auto, got {ts.cadence!r}")
    if ts.guide_rounds is not None and ts.guide_rounds < 0:
        _fail(source, "tracesynth.guide_rounds", f"must be 0 (off) or positive, got {ts.guide_rounds}")
    if ts.ngram_weight is not None and ts.ngram_weight < 0:
        _fail(source, "tracesynth.ngram_weight", f"must be 0 (off) or positive, got {ts.ngram_weight}")
    from tracesynth.encoding.ngrams import MAX_ORDER

    if ts.ngram_order is not None and not 1 <= ts.ngram_order <= MAX_ORDER:
        _fail(source, "tracesynth.ngram_order", f"must be 1-{MAX_ORDER}, got {ts.ngram_order}")
    if ts.ngram_rounds is not None and ts.ngram_rounds < 1:
        _fail(source, "tracesynth.ngram_rounds", f"must be 1 or more, got {ts.ngram_rounds}")
    if ts.prior_from is not None and ts.prior_from < 0:
        _fail(source, "tracesynth.prior_from", f"must be 0 (every event) or more, got {ts.prior_from}")
    from tracesynth.model.precision import PRECISIONS  # (loads torch: only when validating)

    for key in ("train_precision", "sample_precision"):
        if getattr(ts, key) is not None and getattr(ts, key) not in PRECISIONS:
            _fail(source, f"tracesynth.{key}", f"must be one of {', '.join(PRECISIONS)}, got {getattr(ts, key)!r}")
    if ts.copy_rounds is not None and ts.copy_rounds < 0:
        _fail(source, "tracesynth.copy_rounds", f"must be 0 (off) or positive, got {ts.copy_rounds}")
    if ts.lr <= 0:
        _fail(source, "tracesynth.lr", f"must be positive, got {ts.lr}")
    if ts.device not in ("auto", "cpu", "cuda") and not ts.device.startswith("cuda:"):
        _fail(source, "tracesynth.device", f"expected auto, cpu or cuda, got {ts.device!r}")
    from tracesynth.model.config import SIZE_NAMES

    if ts.size not in SIZE_NAMES:
        _fail(source, "tracesynth.size", f"expected one of {', '.join(SIZE_NAMES)}, got {ts.size!r}")
    labels = []
    for i, peer in enumerate(config.peers):
        if peer.name not in PEER_NAMES:
            _fail(source, f"peers[{i}].name", f"unknown peer {peer.name!r}; choose one of {', '.join(PEER_NAMES)}")
        if "random_state" in peer.params:
            _fail(source, f"peers[{i}].params.random_state", "seeds come from grid.seeds; remove this key")
        labels.append(peer.display)
    if len(set(labels)) != len(labels):
        _fail(source, "peers", f"two peers share a label ({labels}); give them distinct `label`s")
    if "tracesynth" in labels:
        _fail(source, "peers", "'tracesynth' is reserved for the grid's own cells")
    if config.evaluation.seeds < 1:
        _fail(source, "evaluation.seeds", f"must be at least 1, got {config.evaluation.seeds}")
    if config.evaluation.predictor not in ("ngram", "gru"):
        _fail(source, "evaluation.predictor", f"expected ngram or gru, got {config.evaluation.predictor!r}")
    if config.evaluation.synthetic_events is not None and config.evaluation.synthetic_events not in SYNTHETIC_EVENTS:
        _fail(source, "evaluation.synthetic_events",
              f"expected {' or '.join(SYNTHETIC_EVENTS)}, got {config.evaluation.synthetic_events!r}")
    if config.evaluation.quick and config.evaluation.predictor == "gru":
        _fail(source, "evaluation.predictor", "gru needs evaluation.quick: false (quick runs the n-gram predictor only)")
    return config


def train_steps(config: ExperimentConfig, budget: float) -> int:
    """Optimiser steps of a TraceSynth cell at `budget` (a multiplier, > 0)."""
    if not budget > 0:
        raise ConfigError(f"--budget must be positive, got {budget}")
    return max(1, round(config.tracesynth.train_steps * budget))

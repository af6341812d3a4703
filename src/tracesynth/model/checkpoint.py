"""Model directories: safetensors tensors + JSON, written atomically, never pickle.

    model.safetensors      denoiser weights (the moving average of training's, with `ema`)
    config.json            {"model": ModelConfig, "train": TrainConfig}
    encoder.json           the fitted TraceEncoder
    support.safetensors    the event 8-grams of the training traces (encoding.support), if fitted
    copies.safetensors     their event 256-grams and branch points (encoding.copies), if fitted
    ngrams.safetensors     their event n-gram counts, both directions (encoding.ngrams), if fitted
    cadence.safetensors    their steady rhythms' gaps (encoding.cadence), if fitted
    startups.safetensors   each training run's first events as codes (encoding.startups), if fitted
    splices.safetensors    the training runs' event codes and gaps where runs share most long spans
                           (encoding.splices), if fitted
    optimizer.safetensors  AdamW moments (only while training can resume)
    training.safetensors   the weights the optimizer updates, where model.safetensors holds their
                           moving average (only while training can resume)
    state.json             step, losses, validation history, optimizer hyperparameters
    best/                  with `train --keep-best`: a model directory (no optimizer state) of
                           the weights whose validation loss was lowest so far

The whole directory is written to a temporary sibling and renamed into place, so a kill during
a save leaves the previous checkpoint intact.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.numpy import load_file as load_arrays
from safetensors.numpy import save_file as save_arrays
from safetensors.torch import load_file, save_file

from tracesynth.encoding.copies import SpanTable
from tracesynth.encoding.cadence import CadenceTable
from tracesynth.encoding.splices import RunTable
from tracesynth.encoding.startups import StartupTable
from tracesynth.encoding.ngrams import EventNGrams
from tracesynth.encoding.support import EventSupport
from tracesynth.encoding.trace_encoder import TraceEncoder
from tracesynth.errors import ConfigError, TraceFormatError
from tracesynth.fileio import atomic_path
from tracesynth.model.config import ModelConfig, TrainConfig, dumps
from tracesynth.model.denoiser import Denoiser

FILES = ("model.safetensors", "config.json", "encoder.json")
BEST = "best"  # the subdirectory `train --keep-best` keeps the best-validated weights in
OPTIMIZER = "optimizer.safetensors"  # AdamW moments (resume only)
TRAINING = "training.safetensors"  # the optimizer's own weights beside their average (resume only)
RESUME_ONLY = (OPTIMIZER, TRAINING)  # what a model needs only to go on training


def _optimizer_tensors(optimizer: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], list]:
    sd = optimizer.state_dict()
    tensors = {}
    for idx, state in sd["state"].items():
        for key, value in state.items():
            tensors[f"{idx}.{key}"] = torch.as_tensor(value).detach().cpu().contiguous()
    return tensors, sd["param_groups"]


def save_checkpoint(directory: str | Path, model: Denoiser, encoder: TraceEncoder, train: TrainConfig | None,
                    optimizer: torch.optim.Optimizer | None = None, state: dict | None = None,
                    carry: tuple[str, ...] = (), training: Denoiser | None = None) -> Path:
    """Write a model directory. `carry`: subdirectories of the directory being replaced that
    the new one keeps (the `best/` weights while training goes on); they are hard-linked into
    the temporary copy, so a kill before the rename leaves the old directory whole.
    `training`: the network the optimizer updates, where `model` is its moving average (saved
    with the optimizer state, for `--resume`)."""
    directory = Path(directory)
    with atomic_path(directory, directory=True) as tmp:
        save_file(_weights(model), str(tmp / "model.safetensors"))
        (tmp / "config.json").write_text(dumps(model.config, train))
        (tmp / "encoder.json").write_text(json.dumps(encoder.to_json()))
        if encoder.support is not None:
            save_arrays(encoder.support.to_arrays(), str(tmp / "support.safetensors"))
        if encoder.copies is not None:
            save_arrays(encoder.copies.to_arrays(), str(tmp / "copies.safetensors"))
        if encoder.ngrams is not None:
            save_arrays(encoder.ngrams.to_arrays(), str(tmp / "ngrams.safetensors"))
        if encoder.cadence is not None:
            save_arrays(encoder.cadence.to_arrays(), str(tmp / "cadence.safetensors"))
        if encoder.startups is not None:
            save_arrays(encoder.startups.to_arrays(), str(tmp / "startups.safetensors"))
        if encoder.splices is not None and encoder.splices.codes:
            save_arrays(encoder.splices.to_arrays(), str(tmp / "splices.safetensors"))
        full_state = dict(state or {})
        if optimizer is not None:
            tensors, groups = _optimizer_tensors(optimizer)
            save_file(tensors, str(tmp / OPTIMIZER))
            full_state["param_groups"] = groups
            if training is not None:
                save_file(_weights(training), str(tmp / TRAINING))
        (tmp / "state.json").write_text(json.dumps(full_state, indent=1))
        for name in carry:
            if (directory / name).is_dir():
                shutil.copytree(directory / name, tmp / name, copy_function=link_or_copy)
    return directory


def _weights(model: Denoiser) -> dict[str, torch.Tensor]:
    return {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}


def resume_files(train: dict) -> tuple[str, ...]:
    """What `--resume` needs beside the model (`train`: config.json's "train"): the optimizer
    state, and the optimizer's own weights where model.safetensors holds their average."""
    return RESUME_ONLY if train.get("ema") else (OPTIMIZER,)


def link_or_copy(src: str, dst: str) -> None:
    """A hard link where the file system has them (instant, no second copy on disk), else a copy."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def is_model_dir(path: str | Path) -> bool:
    """Whether `path` looks like a model directory (its weights, config and encoder there)."""
    path = Path(path)
    return path.is_dir() and all((path / f).exists() for f in FILES)


def _check(directory: Path) -> None:
    missing = [f for f in FILES if not (directory / f).exists()]
    if missing:
        raise ConfigError(f"{directory}: not a TraceSynth model directory (missing {', '.join(missing)})")


_DAMAGED = "the model directory is damaged or not written by TraceSynth; train or copy it again"


def _json(path: Path) -> dict:
    """A model directory's JSON file; a damaged one is named with the line and column at fault."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise TraceFormatError(path, f"line {exc.lineno}, column {exc.colno}",
                               f"not valid JSON ({exc.msg}); {_DAMAGED}") from None
    except UnicodeDecodeError as exc:
        raise TraceFormatError(path, exc.start, f"not UTF-8 text; {_DAMAGED}") from None
    if not isinstance(data, dict):
        raise TraceFormatError(path, None, f"holds a JSON {type(data).__name__}, not an object; {_DAMAGED}")
    return data


def _tensors(path: Path, loader):
    """A safetensors file through `loader`; a truncated or foreign one is named, not a traceback."""
    try:
        return loader(str(path))
    except SafetensorError as exc:
        raise TraceFormatError(path, None, f"not a readable safetensors file ({exc}); {_DAMAGED}") from None


def _parts(directory: Path, what: str, build):
    """`build()` over parsed JSON: a missing key or a wrong value is named with its file."""
    try:
        return build()
    except (KeyError, TypeError, ValueError, ConfigError) as exc:
        detail = f"missing key {exc}" if isinstance(exc, KeyError) else str(exc).splitlines()[0]
        raise TraceFormatError(directory / what, None, f"{detail}; {_DAMAGED}") from None


def load_model(directory: str | Path, device: str | torch.device = "cpu"
               ) -> tuple[Denoiser, TraceEncoder, TrainConfig | None, dict]:
    directory = Path(directory)
    _check(directory)
    config = _json(directory / "config.json")
    model = _parts(directory, "config.json", lambda: Denoiser(ModelConfig.from_dict(config["model"])))
    weights = _tensors(directory / "model.safetensors", load_file)
    try:
        model.load_state_dict(weights)
    except RuntimeError as exc:  # names or shapes that are not this config's network
        lines = str(exc).splitlines()  # "Error(s) in loading state_dict ...:" then the first problem
        first = lines[min(1, len(lines) - 1)].strip()
        raise TraceFormatError(directory / "model.safetensors", None,
                               f"weights do not fit config.json's network ({first}); {_DAMAGED}") from None
    model.to(device).eval()
    encoder_data = _json(directory / "encoder.json")
    encoder = _parts(directory, "encoder.json", lambda: TraceEncoder.from_json(encoder_data))
    for name, attribute, table in (("support.safetensors", "support", EventSupport),
                                   ("copies.safetensors", "copies", SpanTable),
                                   ("ngrams.safetensors", "ngrams", EventNGrams),
                                   ("cadence.safetensors", "cadence", CadenceTable),
                                   ("startups.safetensors", "startups", StartupTable),
                                   ("splices.safetensors", "splices", RunTable)):
        path = directory / name
        if path.exists():
            arrays = _tensors(path, load_arrays)
            try:
                setattr(encoder, attribute, table.from_arrays(arrays))
            except (KeyError, ValueError) as exc:
                raise ConfigError(f"{path}: {exc}") from None
    if encoder.ngrams is not None:
        encoder.ngram_order = encoder.ngrams.k
    train = _parts(directory, "config.json",
                   lambda: TrainConfig.from_dict(config["train"]) if config.get("train") else None)
    state_path = directory / "state.json"
    state = _json(state_path) if state_path.exists() else {}
    return model, encoder, train, state


def read_model_info(directory: str | Path) -> dict:
    """A model directory's description without its weights: {"config", "encoder", "state"}
    (parsed JSON; state {} when absent) and "params", the weights' element count read from the
    safetensors header. For choosing among many model directories cheaply."""
    from safetensors import safe_open

    directory = Path(directory)
    _check(directory)
    path = directory / "model.safetensors"
    try:
        with safe_open(str(path), "pt") as weights:
            params = sum(math.prod(weights.get_slice(k).get_shape()) for k in weights.keys())
    except SafetensorError as exc:
        raise TraceFormatError(path, None, f"not a readable safetensors file ({exc}); {_DAMAGED}") from None
    state_path = directory / "state.json"
    info = {"config": _json(directory / "config.json"), "encoder": _json(directory / "encoder.json"),
            "state": _json(state_path) if state_path.exists() else {}, "params": int(params)}
    _parts(directory, "config.json", lambda: int(info["config"]["model"]["context"]))
    _parts(directory, "encoder.json", lambda: list(info["encoder"]["channels"]))
    return info


def load_training_weights(directory: str | Path, model: Denoiser) -> None:
    """The weights the optimizer was updating (`training.safetensors`) into `model`."""
    path = Path(directory) / TRAINING
    if not path.exists():
        raise ConfigError(f"{directory}: no {TRAINING} (the weights behind the saved average) to resume from")
    model.load_state_dict(_tensors(path, load_file))


def load_optimizer(directory: str | Path, optimizer: torch.optim.Optimizer, state: dict) -> None:
    path = Path(directory) / OPTIMIZER
    if not path.exists():
        raise ConfigError(f"{directory}: no optimizer state to resume from")
    tensors = _tensors(path, load_file)
    per_param: dict[int, dict] = {}
    for key, value in tensors.items():
        idx, name = key.split(".", 1)
        per_param.setdefault(int(idx), {})[name] = value
    optimizer.load_state_dict({"state": per_param, "param_groups": state["param_groups"]})

"""Models trained elsewhere, put into an experiment's grid: `tracesynth experiment --models DIR`.

Training is what a GPU speeds up; sampling with the guide and evaluation run on CPU cores either
way. So a long run trains on a GPU (`benchmarks/gpu_long_training.sh`, or `tracesynth train`
anywhere) and the experiment here samples and evaluates those models instead of training its own.

Each model directory under DIR (or DIR itself) is matched to the grid's TraceSynth models by
what it is, not by its name: its workload, channels, context and training seed must be a
model's of the grid, and its training traces must be the experiment's training split
(`model.provenance`; a model trained on a held-out run would score as if it generalised). A
match is hard-linked (copied where links cannot be made) into ``RESULTS_DIR/models/<model_id>``
without its optimizer state, beside an ``experiment.json`` that says where it came from, how
long and where it trained; the runner then uses it as one it had trained itself. Every
TraceSynth model of the grid must find exactly one match before anything runs: an experiment
that silently trained the missing ones for hours on a CPU is not what was asked for.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tracesynth.encoding import resolve_channels
from tracesynth.errors import ConfigError
from tracesynth.experiments.grid import TRACESYNTH, Cell, model_groups
from tracesynth.fileio import atomic_path
from tracesynth.model.checkpoint import BEST, RESUME_ONLY, is_model_dir, link_or_copy, read_model_info
from tracesynth.model.provenance import data_mismatch, start_mismatch

SKIPPED = (*RESUME_ONLY, BEST)  # training state, and a best/ beside the weights used


@dataclass
class Candidate:
    """A model directory offered for import, as its JSON files describe it."""

    path: Path
    workloads: list[str]
    channels: list[str]
    context: int
    seed: int | None
    info: dict

    def describe(self) -> str:
        return (f"{self.path} ({', '.join(self.workloads)}; {','.join(self.channels)}; "
                f"context {self.context}; seed {self.seed})")


def candidates(source: Path) -> list[Candidate]:
    """The model directories in `source` (itself, or its immediate subdirectories)."""
    source = Path(source)
    if not source.is_dir():
        raise ConfigError(f"--models {source}: not a directory")
    dirs = [source] if (source / "config.json").exists() else sorted(
        d for d in source.iterdir() if d.is_dir() and (d / "config.json").exists())
    if not dirs:
        raise ConfigError(f"--models {source}: no model directory there (none has a config.json)")
    found = []
    for d in dirs:
        info = read_model_info(d)
        train = info["config"].get("train") or {}
        found.append(Candidate(d, list(info["encoder"].get("workloads", [])), list(info["encoder"]["channels"]),
                               int(info["config"]["model"]["context"]), train.get("seed"), info))
    return found


def _fits(candidate: Candidate, cell: Cell) -> bool:
    return (candidate.workloads == [cell.workload] and candidate.context == cell.context
            and sorted(candidate.channels) == sorted(resolve_channels(cell.channels))
            and candidate.seed == cell.training_seed)


# (model_id, the candidate or None: in models/ already, the directory whose weights to link, what was checked)
Plan = list[tuple[str, "Candidate | None", "Path | None", "str | None"]]


def _validated_on(val_data: list[dict], test_traces) -> str | None:
    """Which held-out trace a model validated on (`train --val-data`), None if none: a held-out
    run is the same run when it begins at the same timestamp (the split may cut it short)."""
    starts = {(f["workload"], f["first_ts"]) for f in val_data}
    for trace in test_traces:
        if len(trace) and (trace.meta.workload or "default", int(trace.column("ts")[0].as_py())) in starts:
            return f"{trace.meta.workload}, run {trace.meta.run}"
    return None


def _data_check(candidate: Candidate, train_traces) -> tuple[str | None, str]:
    """(why the candidate was not trained on `train_traces`, or None; what was checked)."""
    recorded = candidate.info["state"].get("data")
    if recorded:
        return data_mismatch(recorded, train_traces), "training traces match the split's"
    return (start_mismatch(candidate.info["encoder"].get("start_ts", {}), train_traces),
            "first training trace matches the split's (saved before training data was recorded)")


def plan_imports(cells: list[Cell], out_dir: Path, source: Path, split_of: Callable[[Cell], object],
                 models_dir: str = "models", best: bool = False) -> Plan:
    """Which model of `source` each TraceSynth model of `cells` takes. `split_of(cell)` gives
    the experiment's split (its fold's), whose training traces each model must have been trained on. Raises
    ConfigError, having written nothing, when a model of the grid has no match, or two, or one
    trained on other traces. Models already in `out_dir/models_dir` (a resumed run) stay.
    `best` (the config's `tracesynth.keep_best`): a model's best-validated weights
    (`train --keep-best`, MODEL/best) are imported where it kept them, its last ones elsewhere."""
    offered = candidates(source)
    plan: Plan = []
    problems = []
    for model_id, group in model_groups(cells):
        cell = group[0]
        if cell.generator != TRACESYNTH:
            continue
        if (out_dir / models_dir / model_id / "experiment.json").exists():
            plan.append((model_id, None, None, None))
            continue
        fits = [c for c in offered if _fits(c, cell)]
        train_traces = split_of(cell).train if fits else []
        checked = [(c, *_data_check(c, train_traces)) for c in fits]  # (candidate, why not, what was checked)
        if len(checked) > 1:  # one per fold: the split's training traces tell them apart
            checked = [item for item in checked if not item[1]] or checked
        wanted = (f"{cell.workload}, {cell.channels}, context {cell.context}, seed {cell.training_seed}"
                  + (f", fold {cell.fold}" if cell.fold else ""))
        if len(checked) != 1:
            problems.append(f"{wanted}: {'no model' if not checked else 'several models'} in {source}"
                            + (f" ({', '.join(str(c.path) for c, _, _ in checked)})" if checked else ""))
            continue
        candidate, why, check = checked[0]
        if why:
            problems.append(f"{candidate.path}: trained on other traces than the experiment's training split "
                            f"({why})")
            continue
        if leak := _validated_on(candidate.info["state"].get("val_data") or [], split_of(cell).test):
            problems.append(f"{candidate.path}: validated on the experiment's held-out run ({leak}): its weights "
                            "were chosen on the traces it would be scored on")
            continue
        weights = candidate.path
        if best and is_model_dir(candidate.path / BEST):
            weights = candidate.path / BEST
            check += f"; best-validated weights, step {read_model_info(weights)['state'].get('step')}"
        elif best:
            check += "; no best/ kept: its last weights"
        plan.append((model_id, candidate, weights, check))
    if problems:
        shown = "; ".join(problems[:4]) + (f"; and {len(problems) - 4} more" if len(problems) > 4 else "")
        offers = "; ".join(c.describe() for c in offered[:8])
        raise ConfigError(f"--models: {shown}. Offered: {offers}")
    return plan


def link_imports(plan: Plan, out_dir: Path, models_dir: str = "models") -> list[str]:
    """Carry out `plan`: a line per model saying what was imported (or found there already)."""
    lines = []
    for model_id, candidate, weights, check in plan:
        if candidate is None:
            lines.append(f"{model_id}: already in {models_dir}/")
            continue
        done = _link(candidate, weights, out_dir / models_dir / model_id, check)
        lines.append(f"{model_id} ← {candidate.path}: {done}")
    return lines


def _link(candidate: Candidate, weights: Path, target: Path, check: str) -> str:
    """Link `weights` (the candidate's directory or its best/: the same encoder and tables) into
    `target` beside an experiment.json; the training figures are the whole run's."""
    state, config = candidate.info["state"], candidate.info["config"]
    info = {"train_seconds": float(state.get("seconds", 0.0)), "train_steps": int(state.get("step", 0)),
            "params": candidate.info["params"], "batch_size": (config.get("train") or {}).get("batch_size"),
            "context": candidate.context, "imported_from": str(candidate.path.resolve()),
            "trained_on": state.get("device") or "not recorded", "data_check": check}
    if weights != candidate.path:
        info["best_step"] = int(read_model_info(weights)["state"].get("step", 0))
    with atomic_path(target, directory=True) as tmp:
        for item in sorted(weights.iterdir()):
            if item.name in SKIPPED or item.name.startswith("."):
                continue
            if item.is_file():
                link_or_copy(str(item), str(tmp / item.name))
        (tmp / "experiment.json").write_text(json.dumps(info, indent=1))
    where = f"on {state['device']}" if state.get("device") else "(device not recorded)"
    return f"{info['train_steps']} steps {where}; {check}"


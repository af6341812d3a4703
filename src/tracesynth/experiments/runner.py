"""Run an experiment grid: one cell = train on the training runs → generate → evaluate on the
held-out runs, with its result written atomically to ``RESULTS_DIR/cells/<cell_id>.json``.

Resumable: a cell whose JSON says ``ok`` is never run again; failed cells are retried. The
constraint modes of one (workload, channels, context, seed) sample from one trained model,
saved under ``RESULTS_DIR/models/<model_id>`` so a resumed run reuses it instead of retraining.
A cell that fails (a peer not installed, a model that cannot run at a size) records the error
message in its JSON and in the results, never a number.
"""

from __future__ import annotations

import json
import platform
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tracesynth.errors import ConfigError, TraceSynthError
from tracesynth.experiments.config import ExperimentConfig, folds, train_steps
from tracesynth.experiments.grid import TRACESYNTH, Cell, enumerate_cells, model_groups
from tracesynth.fileio import atomic_path
from tracesynth.schema import Trace

RESULT_VERSION = 1
CELLS_DIR = "cells"
MODELS_DIR = "models"
RUN_FILE = "run.json"

#: Called as on_progress(phase, cell, finished): phase is a short text ("train", "generate",
#: "evaluate", "skip", "done", "error"); `finished` is True when the cell is complete.
Progress = Callable[[str, Cell | None, bool], None]


@dataclass
class Split:
    """The real traces of one workload: training runs and held-out runs (labelled)."""

    train: list[Trace]
    test: list[Trace]

    @property
    def n_test_events(self) -> int:
        return sum(len(t) for t in self.test)


def load_split(config: ExperimentConfig, workload: str, fold: str = "") -> Split:
    """The real traces of `workload` in the config's split, or in its fold labelled `fold`."""
    import tracesynth.datasets as ds

    data = config.data
    chosen = next((f for f in folds(data) if f.label == fold), None)
    if chosen is None:
        raise ConfigError(f"no fold {fold!r} in this config; its folds: {', '.join(f.label for f in folds(data))}")

    def take(run: int, limit: int | None) -> Trace:
        trace = ds.load(workload, run)
        if limit is not None and len(trace) > limit:
            trace = trace.slice(0, limit)
        trace.meta.workload = workload
        trace.meta.run = str(run)
        return trace

    return Split([take(r, data.max_train_events) for r in chosen.train_runs],
                 [take(r, data.max_test_events) for r in chosen.test_runs])


def resolve_workloads(config: ExperimentConfig) -> list[str]:
    import tracesynth.datasets as ds

    available = ds.workloads()
    if config.data.workloads == "all":
        if not available:
            raise ConfigError("data.workloads: all, but no bundled dataset is present (run `make dataset`)")
        return available
    missing = [w for w in config.data.workloads if w not in available]
    if missing:
        raise ConfigError(f"data.workloads: no bundled workload {', '.join(map(repr, missing))}; "
                          f"available: {', '.join(available) or 'none'}")
    return list(config.data.workloads)


# --- results on disk ---------------------------------------------------------------------------
def cell_path(out_dir: Path, cell: Cell) -> Path:
    return out_dir / CELLS_DIR / f"{cell.cell_id}.json"


def read_cell(out_dir: Path, cell: Cell) -> dict | None:
    path = cell_path(out_dir, cell)
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None  # unreadable → run it again (writes are atomic, so this is rare)


def is_finished(out_dir: Path, cell: Cell) -> bool:
    result = read_cell(out_dir, cell)
    return bool(result) and result.get("status") == "ok"


def write_cell(out_dir: Path, cell: Cell, result: dict) -> Path:
    path = cell_path(out_dir, cell)
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(result, indent=1, sort_keys=True, default=_json_default))
    return path


def _json_default(value):
    import numpy as np

    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)


def _run_record(config: ExperimentConfig, budget: float) -> dict:
    return {"config": config.to_dict(), "budget": budget, "train_steps": train_steps(config, budget)}


def prepare_out_dir(out_dir: Path, config: ExperimentConfig, budget: float, resume: bool) -> None:
    """Refuse to mix results: an existing run is continued only with --resume and the same
    config and budget."""
    record = _run_record(config, budget)
    run_file = out_dir / RUN_FILE
    if run_file.exists():
        if not resume:
            raise ConfigError(f"{out_dir} already holds an experiment; pass --resume to continue it "
                              "or choose another -o")
        previous = json.loads(run_file.read_text())
        if not same_config(previous.get("config"), record["config"]) or previous.get("budget") != budget:
            raise ConfigError(f"{out_dir}: --resume with a different config or budget than the run there "
                              f"(budget {previous.get('budget')}); use another -o")
        return
    if (out_dir / CELLS_DIR).exists() and any((out_dir / CELLS_DIR).iterdir()):
        raise ConfigError(f"{out_dir} has cell results but no {RUN_FILE}; choose another -o")
    record["environment"] = environment()
    with atomic_path(run_file) as tmp:
        tmp.write_text(json.dumps(record, indent=1, sort_keys=True))


def same_config(saved, current) -> bool:
    """Whether a run.json's config is `current`: equal, except that a key one side lacks is
    equal to an unset (None) value on the other — a setting added to the config since that run
    was started, left at its default, does not stop it from resuming."""
    if isinstance(saved, dict) and isinstance(current, dict):
        return all(same_config(saved.get(k), current.get(k)) for k in set(saved) | set(current))
    return saved == current


def environment() -> dict:
    """What the figures depend on besides the config. The OpenMP wait policy is among them:
    sampling with passive threads (what `tracesynth experiment` trains with) took 1.3-1.45x the
    time of `tracesynth generate`'s spinning ones on idle cores
    (`benchmarks/results/support/bench_threads_policy.txt`); `sampling_wait_policy` says what
    TraceSynth cells sampled with (`sampling_process`: a child with libgomp's default where the
    passive policy was TraceSynth's own choice)."""
    import os

    import torch

    import tracesynth

    policy = os.environ.get("OMP_WAIT_POLICY", "libgomp default")
    env = {"python": platform.python_version(), "platform": platform.platform(), "torch": torch.__version__,
           "tracesynth": getattr(tracesynth, "__version__", "?"), "cuda": torch.cuda.is_available(),
           "torch_threads": torch.get_num_threads(), "omp_wait_policy": policy,
           "sampling_wait_policy": ("libgomp default (TraceSynth cells on the CPU sampled in a child process)"
                                    if sample_in_child() else policy)}
    if torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name(0)
    return env


def sample_in_child() -> bool:
    """Whether CPU TraceSynth cells are sampled in a child process (`sampling_process`): when this
    process's OpenMP threads are passive by TraceSynth's choice, not the user's."""
    from tracesynth.runtime import passive_set_here

    return passive_set_here()


# --- metrics of one cell ---------------------------------------------------------------------
def _get(data, *keys):
    for key in keys:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def cell_metrics(report: dict, workload: str, predictor: str) -> dict:
    """The flat headline row of one evaluated cell (None where the metric was not available)."""
    per = report["workloads"][workload]
    head = per["headline"]
    next_key, lat_key = f"next_event_{predictor}", f"syscall_latency_{predictor}"
    validity = per.get("validity", {})
    syn_valid = validity.get("synthetic", {})
    real_valid = validity.get("real_test", {})
    return {
        "tstr": _get(head, "tstr", next_key),
        "trtr": _get(head, "trtr", next_key),
        "tstr_trtr": _get(head, "tstr_trtr_ratio", next_key),
        "tstr_latency": _get(head, "tstr", lat_key),
        "trtr_latency": _get(head, "trtr", lat_key),
        "disc_512": _get(head, "discriminative", "512"),
        "disc_2048": _get(head, "discriminative", "2048"),
        "disc_floor_512": _get(head, "discriminative_real_floor", "512"),
        "disc_floor_2048": _get(head, "discriminative_real_floor", "2048"),
        # the same classifier on event types alone: what a light trace is scored on, and the one
        # score every generator shares (disc_* reads the thread/CPU columns too where both have them)
        "disc_events_512": _get(head, "discriminative_events", "512"),
        "disc_events_2048": _get(head, "discriminative_events", "2048"),
        "disc_events_floor_512": _get(head, "discriminative_events_real_floor", "512"),
        "disc_events_floor_2048": _get(head, "discriminative_events_real_floor", "2048"),
        # what gives the 512-event windows away most (`tells`: the feature that alone tells best)
        "disc_tell_512": (_get(per, "long_range", "discriminative", "synthetic_vs_real", "512", "tells") or
                          [{}])[0].get("feature"),
        "violations_per_1k": syn_valid.get("total") if syn_valid.get("available") else None,
        "violations_per_1k_real": real_valid.get("total") if real_valid.get("available") else None,
        # rules that applied to the synthetic trace (a light trace has no tid/cpu/ret to check)
        "rules_checked": len(syn_valid.get("per_rule", {})) if syn_valid.get("available") else None,
        "serial_breaks_per_1k": _get(validity, "serial", "synthetic", "per_1k"),
        "serial_breaks_per_1k_real": _get(validity, "serial", "real_test", "per_1k"),
        # share of events in a 33-event span that recurs exactly within 512 (`longrange.repeat_share`)
        "repeats": _get(per, "long_range", "synthetic_vs_real", "repeats", "candidate"),
        "repeats_real": _get(per, "long_range", "synthetic_vs_real", "repeats", "reference"),
        # the first 256 events against the training runs' (`fidelity.startup`): edits to the
        # nearest one, and 8-grams no training run has; the held-out run's beside them
        "startup_edits": _get(per, "fidelity", "startup", "synthetic", "edits", "mean"),
        "startup_edits_real": _get(per, "fidelity", "startup", "real_test", "edits", "mean"),
        "startup_unseen_8gram": _get(per, "fidelity", "startup", "synthetic", "unseen_8grams", "mean"),
        "startup_unseen_8gram_real": _get(per, "fidelity", "startup", "real_test", "unseen_8grams", "mean"),
        # recurring event types' gaps against the held-out run's, W1 of log2 gaps (octaves;
        # `longrange.compare_cadence`), and a training run's
        "cadence_octaves": _get(per, "long_range", "synthetic_vs_real", "cadence", "mean_octaves"),
        "cadence_octaves_real": _get(per, "long_range", "real_vs_real", "cadence", "mean_octaves"),
        "copy_rate_256": _get(head, "copy_rate", "256"),
        "copy_rate_256_holdout": _get(head, "copy_rate_holdout", "256"),
        "privacy_flagged": head.get("privacy_flagged"),
        "unseen_8gram": head.get("unseen_8gram_share"),
        "unseen_8gram_holdout": head.get("unseen_8gram_share_holdout"),
        "event_jsd": head.get("event_jsd"),
        "event_jsd_floor": head.get("event_jsd_real_floor"),
        "eval_seconds": report["cost"]["wall_seconds"],
    }


# --- generators --------------------------------------------------------------------------------
def _tracesynth(config: ExperimentConfig, cell: Cell, steps: int):
    from tracesynth.generators.diffusion import TraceSynth

    ts = config.tracesynth
    return TraceSynth(channels=cell.channels, context=cell.context, size=ts.size, train_steps=steps,
                      batch_size=max(1, ts.batch_events // cell.context), lr=ts.lr, sample_steps=ts.sample_steps,
                      device=ts.device, constraints="none", random_state=cell.training_seed,
                      **({} if ts.start_rate is None else {"start_rate": ts.start_rate}),
                      **({} if ts.start_rate_end is None else {"start_rate_end": ts.start_rate_end}),
                      **({} if ts.train_precision is None else {"train_precision": ts.train_precision}),
                      **({} if ts.ngram_order is None else {"ngram_order": ts.ngram_order}),
                      **({} if ts.self_condition is None else {"self_condition": ts.self_condition}),
                      **({} if ts.keep_best is None else {"keep_best": ts.keep_best}),
                      **({} if ts.ema is None else {"ema": ts.ema}),
                      **({} if ts.val_fraction is None else {"val_fraction": ts.val_fraction}),
                      **({} if ts.phase_events is None else {"phase_events": ts.phase_events}),
                      **_sampling_settings(ts))


def _sampling_settings(ts) -> dict:
    """The config's sampling settings that are set: they apply to new and reused models alike."""
    keys = ("temperature", "spread", "tid_temperature", "support_rounds", "copy_rounds", "serial_guide", "guide_rounds",
            "ngram_weight", "ngram_rounds", "prior_from", "prefix_fraction", "cadence", "start_steps",
            "start_anchor", "splice", "splice_walk", "splice_walk_context", "splice_walk_drift",
            "splice_walk_aligned")
    settings = {key: getattr(ts, key) for key in keys if getattr(ts, key) is not None}
    if ts.sample_precision is not None:
        settings["precision"] = ts.sample_precision
    return settings


def _trained_tracesynth(config, cell, steps, split, out_dir, on_progress):
    """(generator, train seconds): loaded from models/ when a previous run saved it."""
    from tracesynth.generators.diffusion import TraceSynth

    model_dir = out_dir / MODELS_DIR / cell.model_id
    info_file = model_dir / "experiment.json"
    if info_file.exists():
        info = json.loads(info_file.read_text())
        generator = TraceSynth.load(model_dir, device=config.tracesynth.device)
        for key, value in _sampling_settings(config.tracesynth).items():  # the config's win over the saved ones
            setattr(generator, key, value)
        return generator, info["train_seconds"], info
    on_progress("train", cell, False)
    generator = _tracesynth(config, cell, steps)
    start = time.perf_counter()
    generator.fit(split.train)
    seconds = time.perf_counter() - start
    from tracesynth.model.denoiser import parameter_count

    info = {"train_seconds": seconds, "train_steps": steps, "params": parameter_count(generator.model_),
            "batch_size": generator.batch_size, "context": generator.model_.config.context}
    if generator.keep_best:  # the weights sampled are this step's
        info["best_step"] = generator.state_.best_step
    generator.save(model_dir)
    with atomic_path(info_file) as tmp:
        tmp.write_text(json.dumps(info, indent=1))
    return generator, seconds, info


def _peer(config: ExperimentConfig, cell: Cell):
    from tracesynth.experiments.peers import make_peer

    peer = next(p for p in config.peers if p.display == cell.generator)
    return make_peer(peer.name, dict(peer.params), cell.seed)


# --- the loop ------------------------------------------------------------------------------------
def run_experiment(config: ExperimentConfig, out_dir: str | Path, *, budget: float = 1.0, resume: bool = False,
                   on_progress: Progress | None = None, models_from: str | Path | None = None,
                   on_message: Callable[[str], None] | None = None) -> dict:
    """Run every unfinished cell; returns counts {"cells", "skipped", "ok", "error"}.
    `models_from`: model directories trained elsewhere, used instead of training
    (`experiments.imported`); what was imported is said through `on_message`."""
    from tracesynth.experiments.results import write_results

    out_dir = Path(out_dir)
    steps = train_steps(config, budget)
    workloads = resolve_workloads(config)
    cells = enumerate_cells(config, workloads)
    plan = None
    if models_from is not None:  # checked before the results directory is made
        from tracesynth.experiments.imported import link_imports, plan_imports

        loaded: dict[tuple[str, str], Split] = {}  # a split once, however many of its models there are

        def split_of(cell: Cell) -> Split:
            key = (cell.workload, cell.fold)
            if key not in loaded:
                loaded.clear()  # one split's traces in memory at a time, as the cells below
                loaded[key] = load_split(config, *key)
            return loaded[key]

        plan = plan_imports(cells, out_dir, Path(models_from), split_of, MODELS_DIR,
                            best=bool(config.tracesynth.keep_best))
    prepare_out_dir(out_dir, config, budget, resume)
    report = on_progress or (lambda phase, cell, finished: None)
    for line in link_imports(plan, out_dir, MODELS_DIR) if plan is not None else []:
        if on_message:
            on_message(line)
    counts = {"cells": len(cells), "skipped": 0, "ok": 0, "error": 0}
    with _Sampler() as sampler:
        _run_groups(config, cells, out_dir, steps, budget, report, counts, sampler)
    write_results(out_dir)
    return counts


class _Sampler:
    """Samples a TraceSynth cell: in a child process with `generate`'s OpenMP threads where
    `sample_in_child` says so and the model is on the CPU (started at the first such cell, ended
    with the run), in this process otherwise."""

    def __init__(self):
        self._child = None
        self._no_child = False  # the child could not be started here: sample in this process

    def generate(self, generator, model_dir: Path, n_events: int, cell: Cell, seed: int | None = None):
        """(trace, sampling seconds); `seed` (default: the cell's) seeds the trace."""
        seed = cell.seed if seed is None else seed
        on_cpu = next(generator.model_.parameters()).device.type == "cpu"
        if on_cpu and model_dir.exists() and sample_in_child() and not self._no_child:
            if self._child is None:
                self._child = self._start()
            if self._child is not None:
                return self._child.generate(model_dir, generator.get_params(), n_events, cell.workload, seed,
                                            cell.constraints)
        start = time.perf_counter()
        trace = generator.generate(n_events, cell.workload, seed, constraints=cell.constraints)
        return trace, time.perf_counter() - start

    def _start(self):
        """The child, or None (said once) where the system cannot start one (no /dev/shm for
        multiprocessing's locks, a process limit): the cells are then sampled here, passive."""
        import warnings

        import torch

        from tracesynth.experiments.sampling_process import SamplingProcess

        try:
            return SamplingProcess(torch.get_num_threads())
        except OSError as exc:
            self._no_child = True
            warnings.warn(f"sampling in this process (passive OpenMP threads): no child process ({exc})",
                          RuntimeWarning, stacklevel=2)
            return None

    def __enter__(self) -> _Sampler:
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if self._child is not None:
            self._child.close(interrupted=exc_type is not None)


def _run_groups(config, cells, out_dir, steps, budget, report, counts, sampler) -> None:
    splits: dict[tuple[str, str], Split] = {}
    for _model_id, group in model_groups(cells):
        pending = [c for c in group if not is_finished(out_dir, c)]
        for cell in group:
            if cell not in pending:
                counts["skipped"] += 1
                report("skip", cell, True)
        if not pending:
            continue
        key = (group[0].workload, group[0].fold)
        if key not in splits:
            splits = {key: load_split(config, *key)}  # one split's traces in memory
        split = splits[key]
        generator, train_seconds, info, failure = None, None, {}, None
        try:
            if group[0].generator == TRACESYNTH:
                generator, train_seconds, info = _trained_tracesynth(config, group[0], steps, split, out_dir, report)
            else:
                report("train", group[0], False)
                generator = _peer(config, group[0])
                start = time.perf_counter()
                generator.fit(split.train)
                train_seconds = time.perf_counter() - start
        except Exception as exc:  # noqa: BLE001 — recorded per cell, never hidden
            failure = _describe(exc, "train")
        for cell in pending:
            result = _failed(cell, failure) if failure else _run_cell(
                config, cell, generator, train_seconds, info, split, steps, report,
                lambda n, seed, c=cell, g=generator: sampler.generate(g, out_dir / MODELS_DIR / c.model_id, n, c,
                                                                      seed))
            result["budget"] = budget
            write_cell(out_dir, cell, result)
            counts[result["status"]] += 1
            report("done" if result["status"] == "ok" else "error", cell, True)


def _describe(exc: BaseException, phase: str) -> dict:
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    known = isinstance(exc, TraceSynthError)
    return {"phase": phase, "type": type(exc).__name__, "message": message or type(exc).__name__,
            "traceback": None if known else traceback.format_exc(limit=6)}


def _failed(cell: Cell, failure: dict) -> dict:
    return {"result_version": RESULT_VERSION, "cell": cell.to_dict(), "cell_id": cell.cell_id,
            "model_id": cell.model_id, "status": "error", "error": failure, "metrics": {}}


def matched_lengths(split: Split) -> list[int]:
    """Events of each trace of a cell's training-size set (`evaluation.synthetic_events:
    train`): one per training run, as long as that run, so the synthetic set has the training
    set's shape — as much data, as many trace starts, no trace longer than a run of the program."""
    return [len(t) for t in split.train]


def trace_seed(seed: int, index: int) -> int:
    """The seed of a cell's `index`-th trace: the cell's own for trace 0 (the one every figure
    but `tstr_matched` reads), one drawn from (seed, index) for the training-size set's traces
    1, 2, ..., which no other cell's seed or trace gives by chance."""
    if index == 0:
        return seed
    return int(np.random.SeedSequence([seed, index]).generate_state(1, dtype=np.uint32)[0])


def _run_cell(config, cell, generator, train_seconds, info, split, steps, report, sample_tracesynth) -> dict:
    """`sample_tracesynth(n_events, seed) -> (trace, seconds)`: how a TraceSynth cell is sampled (`_Sampler`)."""
    from tracesynth.evaluation.runner import evaluate, next_event_tstr

    n_events = split.n_test_events
    matched = config.evaluation.synthetic_events == "train"

    def sample(length: int, seed: int) -> tuple[Trace, float]:
        if cell.generator == TRACESYNTH:
            trace, seconds = sample_tracesynth(length, seed)
        else:
            start = time.perf_counter()
            trace = generator.sample(length, workload=cell.workload, seed=seed)
            seconds = time.perf_counter() - start
        trace.meta.workload = cell.workload
        return trace, seconds

    try:
        report("generate", cell, False)
        synthetic, sample_seconds = sample(n_events, cell.seed)
        # the training-size set, sampled apart: a generator need not draw a trace's start the
        # same however long the trace (Markov draws its gaps, threads and CPUs per trace), so
        # the figures above read exactly the trace a cell without it samples
        sized = [sample(length, trace_seed(cell.seed, i + 1)) for i, length in enumerate(matched_lengths(split))
                 ] if matched else []
    except Exception as exc:  # noqa: BLE001
        return _failed(cell, _describe(exc, "generate"))
    synthetic.meta.extra.update({"train_seconds": train_seconds, "sample_seconds": sample_seconds,
                                 "events_per_second": len(synthetic) / max(sample_seconds, 1e-9)})
    try:
        report("evaluate", cell, False)
        full = evaluate(split.train, split.test, [synthetic], seeds=config.evaluation.seeds,
                        quick=config.evaluation.quick)
        tstr_matched = next_event_tstr(split.train, split.test, [t for t, _ in sized], seeds=config.evaluation.seeds,
                                       predictor=config.evaluation.predictor) if matched else None
    except Exception as exc:  # noqa: BLE001
        return _failed(cell, _describe(exc, "evaluate"))
    metrics = cell_metrics(full, cell.workload, config.evaluation.predictor)
    if matched:
        tstr = tstr_matched["mean"] if tstr_matched else None
        metrics["tstr_matched"] = tstr
        metrics["tstr_trtr_matched"] = tstr / metrics["trtr"] if tstr is not None and metrics["trtr"] else None
        metrics["events_matched"] = sum(len(t) for t, _ in sized)
        metrics["matched_events_per_s"] = metrics["events_matched"] / max(sum(s for _, s in sized), 1e-9)
    edits = synthetic.meta.extra.get("repair_edits")
    splice = synthetic.meta.extra.get("splice")
    metrics.update({
        # share of the trace's events the span splice took from training (0: undone; None: no splice)
        "splice_from_training": (splice["events_from_training"] / len(synthetic) if splice.get("kept") else 0.0)
        if splice else None,
        "edits_per_1k": 1000.0 * edits / len(synthetic) if edits is not None else None,
        "train_seconds": train_seconds,
        "sample_seconds": sample_seconds,
        "gen_events_per_s": len(synthetic) / max(sample_seconds, 1e-9),
        "events_synthetic": len(synthetic),
        "events_train": sum(len(t) for t in split.train),
        "events_test": n_events,
        "train_steps": info.get("train_steps", steps) if cell.generator == TRACESYNTH else None,
        "best_step": info.get("best_step") if cell.generator == TRACESYNTH else None,
        "params": info.get("params") if cell.generator == TRACESYNTH else getattr(generator, "params_", None),
    })
    return {"result_version": RESULT_VERSION, "cell": cell.to_dict(), "cell_id": cell.cell_id,
            "model_id": cell.model_id, "status": "ok", "error": None, "metrics": metrics,
            "validity": full["workloads"][cell.workload].get("validity"),
            "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}

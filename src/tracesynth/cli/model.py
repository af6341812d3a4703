"""`train` and `generate`: the diffusion model's command line (all logic lives in the package)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import typer

from tracesynth.cli.app import app, console_err, progress
from tracesynth.errors import ConfigError


def load_training_data(items: list[str]):
    """Trace paths, or bundled dataset names: `gzip` (every run) or `gzip:1,2` (those runs)."""
    from tracesynth import load

    traces = []
    for item in items:
        if Path(item).exists():
            traces.append(load(item))
            continue
        from tracesynth import datasets

        name, _, runs = item.partition(":")
        if name not in datasets.workloads():
            raise ConfigError(f"{item}: neither a trace file nor a bundled workload "
                              f"({', '.join(datasets.workloads()) or 'none bundled'})")
        picked = [int(r) for r in runs.split(",")] if runs else datasets.runs(name)
        for run in picked:
            trace = datasets.load(name, run)
            traces.append(trace.with_meta(workload=trace.meta.workload or name))
    return traces


@app.command()
def train(
    data: list[str] = typer.Argument(..., help="Canonical traces, or bundled workloads (gzip, gzip:1,2)."),
    out: Path = typer.Option(..., "-o", "--out", help="Model directory (checkpoints land here)."),
    channels: str = typer.Option("light", "--channels", help="light, full, or a list: event,dt,tid (light,tid: the same)"),
    context: int = typer.Option(4096, "--context", help="Window length in events."),
    size: str = typer.Option("auto", "--size", help="Model size: auto (small for light, medium otherwise), tiny, small, medium, base."),
    steps: int = typer.Option(1000, "--steps", help="Optimizer steps (total, also when resuming)."),
    batch_size: int = typer.Option(8, "--batch-size", help="Windows per step (global, over all processes)."),
    lr: float = typer.Option(2e-3, "--lr", help="Peak learning rate (warmup, then cosine)."),
    start_rate: float = typer.Option(None, "--start-rate",
                                     help="Share of training windows taken at a trace's first event "
                                          "(default: TrainConfig's, 0.6)."),
    start_rate_end: float = typer.Option(None, "--start-rate-end", min=0.0, max=1.0,
                                         help="Move the share of start windows linearly to this by the last "
                                              "step (default: constant). Set on the first run, kept on --resume."),
    phase_events: int = typer.Option(None, "--phase-events", min=0,
                                     help="Events per trace phase: the model learns one vector per block "
                                          "of this many events of a trace (64 blocks, then 'far'); 0: no "
                                          "phase embedding (default: ModelConfig's, 1024)."),
    self_condition: bool = typer.Option(None, "--self-condition/--no-self-condition",
                                        help="Feed the previous denoising step's estimates of still-masked "
                                             "events back into the network (default: off; "
                                             "docs/model.md, \"Self-conditioning\")."),
    seed: int = typer.Option(0, "--seed", help="Seed: same seed, same model on CPU."),
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda."),
    precision: str = typer.Option("auto", "--precision",
                                  help="What the network trains in: auto (bf16 on CUDA, fp32 on CPU), fp32 "
                                       "or bf16 (on a CPU with native bf16: faster steps, see docs/model.md)."),
    ngram_order: int = typer.Option(8, "--ngram-order", min=1, max=64,
                                    help="Longest context (events on each side) of the n-gram counts kept "
                                         "for the sampler's prior; 32 with `generate --ngram-rounds 256` "
                                         "samples closer to real, several times slower (docs/model.md)."),
    ema: float = typer.Option(None, "--ema", min=0.0, max=0.9999,
                              help="Decay of a moving average of the weights to save and sample instead of "
                                   "the last weights (default 0: the last; 0.99 averages about the last 100 "
                                   "steps). Set on the first run, kept on --resume."),
    val_fraction: float = typer.Option(None, "--val-fraction", min=0.0, max=0.5,
                                       help="Share of each training trace's end held out for validation "
                                            "windows, never trained on (default 0.1; 0: train on every event "
                                            "and validate on training windows). Set on the first run, kept "
                                            "on --resume."),
    val_data: list[str] = typer.Option(None, "--val-data", metavar="TRACE",
                                       help="Validate on these whole runs instead of the training traces' "
                                            "tails (trace files or bundled workloads, e.g. sqlite:3; repeat for "
                                            "several; never trained on); --val-fraction then defaults to 0. "
                                            "Give the same on --resume."),
    resume: bool = typer.Option(False, "--resume", help="Continue from the checkpoint in --out."),
    val_every: int = typer.Option(100, "--val-every", help="Validation loss every N steps (0: only at the end)."),
    checkpoint_every: int = typer.Option(100, "--checkpoint-every", help="Checkpoint every N steps."),
    keep_best: bool = typer.Option(False, "--keep-best",
                                   help="Also keep the weights of the lowest validation loss, as a model "
                                        "directory in OUT/best (generate from it); set on the first run, "
                                        "kept on --resume."),
    keep_runs: bool = typer.Option(True, "--keep-runs/--no-runs",
                                   help="Keep the training runs' event types and gaps with the model, for "
                                        "the opt-in span splice and start-up anchor (default); --no-runs: "
                                        "a model to share, with no verbatim training run in it."),
    patience: int = typer.Option(0, "--patience", min=0,
                                 help="Stop after this many validations without a better loss (0: never); "
                                      "set on the first run, kept on --resume."),
):
    """Train the diffusion generator; `torchrun --nproc_per_node N -m tracesynth train ...` for DDP."""
    from tracesynth.encoding import resolve_channels
    from tracesynth.model.checkpoint import BEST
    from tracesynth.model.config import ModelConfig, TrainConfig, phase_config, size_config
    from tracesynth.model.precision import cpu_has_native_bf16
    from tracesynth.model.train import TrainCallbacks, resolve_device, validations_since_best
    from tracesynth.model.train import train as run_training

    model_cfg = ModelConfig(context=context, **size_config(size, resolve_channels(channels)),
                            **phase_config(phase_events),
                            **({} if self_condition is None else {"self_condition": self_condition}))
    if patience and not val_every:
        raise ConfigError("--patience counts validations: it needs --val-every N (0 validates only at the end)")
    traces = load_training_data(data)
    val_traces = load_training_data(val_data) if val_data else []
    if val_traces and val_fraction is None and not resume:
        val_fraction = 0.0  # a separate run validates: train on every event of the training runs
    train_cfg = TrainConfig(steps=steps, batch_size=batch_size, lr=lr, seed=seed, device=device, precision=precision,
                            ngram_order=ngram_order,
                            val_every=val_every or steps, checkpoint_every=checkpoint_every,
                            keep_best=keep_best, patience=patience, keep_runs=keep_runs,
                            **({} if start_rate is None else {"start_rate": start_rate}),
                            **({} if start_rate_end is None else {"start_rate_end": start_rate_end}),
                            **({} if ema is None else {"ema": ema}),
                            **({} if val_fraction is None else {"val_fraction": val_fraction}))
    rank0 = int(os.environ.get("RANK", 0)) == 0
    start = time.perf_counter()
    with progress() as prog:
        task = prog.add_task("train", total=steps, rate="", visible=rank0)
        last_val = {"v": None}

        def on_step(step, total, loss, events_per_s):
            val = f" val {last_val['v']:.3f}" if last_val["v"] is not None else ""
            prog.update(task, completed=step, rate=f"loss {loss:.3f}{val} · {events_per_s:,.0f} ev/s")

        def on_validation(step, value):
            last_val["v"] = value

        model, encoder, state = run_training(
            traces, out, channels=channels, model_config=model_cfg, train_config=train_cfg, resume=resume,
            callbacks=TrainCallbacks(on_step=on_step, on_validation=on_validation), val_traces=val_traces)
    if rank0:
        val = f", validation {state.val_loss[-1][1]:.3f} nats/event" if state.val_loss else ""
        held = (f" on {len(val_traces)} separate trace{'s' if len(val_traces) > 1 else ''}" if val_traces else ""
                if state.val_heldout else " (no held-out tail long enough: validated on training data)")
        seconds = time.perf_counter() - start
        emulated = state.precision == "bf16" and resolve_device(device).type == "cpu" and not cpu_has_native_bf16()
        used = f"{state.precision}, emulated on this CPU: slower than fp32" if emulated else state.precision
        console_err.print(f"trained {state.step} steps in {seconds:.0f} s ({used}){val}{held} → {out}",
                          highlight=False)
        if state.stopped_early:
            console_err.print(f"stopped early: no better validation loss in the {validations_since_best(state)} "
                              f"validations after step {state.best_step}", highlight=False)
        if state.best_step is not None and (out / BEST).is_dir():  # --keep-best (this run's or the saved one's)
            console_err.print(f"best validation {state.best_val_loss:.3f} nats/event at step {state.best_step} "
                              f"→ {out / BEST}", highlight=False)


def _point_to_best(model_dir: Path) -> None:
    """Say so when `train --keep-best` kept other weights than the last ones sampled here."""
    import json

    from tracesynth.model.checkpoint import BEST, is_model_dir

    if not is_model_dir(model_dir / BEST):
        return
    try:
        state = json.loads((model_dir / "state.json").read_text())
    except (OSError, ValueError):
        return
    best, step = state.get("best_step"), state.get("step")
    if best is not None and best != step and state.get("val_loss"):
        last = state["val_loss"][-1][1]
        console_err.print(f"note: sampling the last weights (step {step:,}, validation {last:.3f}); "
                          f"{model_dir / BEST} holds step {best:,}'s ({state['best_val_loss']:.3f})",
                          highlight=False)


@app.command()
def generate(
    model_dir: Path = typer.Argument(..., help="A model directory from `tracesynth train`."),
    n_events: int = typer.Option(..., "-n", "--events", help="How many events to generate."),
    out: Path = typer.Option(..., "-o", "--out", help="Output trace (format from the suffix, or --format)."),
    workload: str = typer.Option(None, "--workload", "-w", help="Workload label (needed if trained on several)."),
    steps: int = typer.Option(16, "--steps", help="Denoising steps per window (fewer: faster, rougher)."),
    start_steps: int = typer.Option(None, "--start-steps",
                                    help="Denoising steps of the trace's first window, the one with its "
                                         "start-up (default: the model's; none set: --steps)."),
    start_anchor: int = typer.Option(None, "--start-anchor",
                                     help="Take the trace's first N events from a training run's start-up "
                                          "(the seed picks the run; 0 = off; default: the model's)."),
    splice: int = typer.Option(None, "--splice",
                               help="Replace each stretch that no training span of K events covers with the "
                                    "training events between the same K-event anchors (e.g. 64; 0 = off; "
                                    "light models, on workloads whose runs share most long spans; "
                                    "docs/model.md, \"Span splice\")."),
    splice_walk: int = typer.Option(None, "--splice-walk",
                                    help="With --splice: walk the stretches no anchors match through training in "
                                         "pieces of about N events, halved while the trace copies more than the "
                                         "bound (default: the model's; 384 for a model trained since 2026-12-08, "
                                         "128 before; 0 = leave them as sampled)."),
    splice_walk_context: int = typer.Option(None, "--splice-walk-context",
                                            help="With --splice: the events the walk matches at each jump "
                                                 "(default: the model's, 16 since 2026-12-08; 0 = the splice's "
                                                 "anchor length)."),
    splice_walk_drift: int = typer.Option(None, "--splice-walk-drift",
                                          help="With --splice: how far a jump may land from where the walk would "
                                               "be had it stayed in the run it began in, in events (default: the "
                                               "model's, 64 since 2026-12-08; 0 = within 4096 of the stretch's "
                                               "place)."),
    splice_walk_aligned: bool = typer.Option(None, "--splice-walk-aligned/--no-splice-walk-aligned",
                                             help="With --splice: each of the walk's jumps draws among one place per "
                                                  "training run, the one nearest its own position (default: the "
                                                  "model's, off)."),
    seed: int = typer.Option(0, "--seed", help="Seed: same seed, same trace on CPU."),
    guidance_scale: float = typer.Option(1.0, "--guidance-scale", help="Classifier-free guidance (1 = off)."),
    corrector_steps: int = typer.Option(0, "--corrector-steps",
                                        help="After the steps, redraw the least likely 5% of events this many "
                                             "times (fewer contradictions, slower)."),
    temperature: float = typer.Option(None, "--temperature",
                                      help="Sampling temperature (default: the model's, 1.0 unless trained otherwise)."),
    start_temperature: float = typer.Option(None, "--start-temperature",
                                            help="Temperature for the trace's first 512 events, its start-up "
                                                 "(default: the model's, 0.25)."),
    spread: int = typer.Option(None, "--spread",
                               help="Keep events revealed in one denoising step more than this many positions "
                                    "apart (0 = off; default: the model's, 4)."),
    tid_temperature: float = typer.Option(None, "--tid-temperature",
                                          help="Temperature of the thread-id channel, on top of --temperature "
                                               "(full models; default: the model's, 0.5)."),
    support_rounds: int = typer.Option(None, "--support-rounds",
                                       help="Rounds of redrawing the events in 8-grams no training trace "
                                            "contains (0 = off; default: the model's, 4)."),
    copy_rounds: int = typer.Option(None, "--copy-rounds",
                                    help="Rounds of editing 256-event spans copied verbatim from a training "
                                         "trace, at places where training itself varies (0 = off; default: "
                                         "the model's, 4)."),
    guide_rounds: int = typer.Option(None, "--guide-rounds",
                                     help="Guided: rounds of redrawing, after each window's last step, the "
                                          "events that still break a rule (0 = off; default: the model's, 1)."),
    serial_guide: bool = typer.Option(None, "--serial-guide/--no-serial-guide",
                                      help="Guided, light models on multi-threaded workloads: hold the "
                                           "syscalls the training runs make one at a time to that "
                                           "order (default: on)."),
    ngram_weight: float = typer.Option(None, "--ngram-weight",
                                       help="Power of the training runs' n-gram evidence (up to 8 decided "
                                            "events on each side) on every event draw (0 = the network "
                                            "alone; default: the model's)."),
    ngram_rounds: int = typer.Option(None, "--ngram-rounds",
                                     help="With the n-gram prior: parts each denoising step's reveals are "
                                          "drawn in, the prior recomputed between them (1 = once a step; "
                                          "default: the model's)."),
    prior_from: int = typer.Option(None, "--prior-from",
                                   help="With the n-gram prior: apply it from this event of the trace on, "
                                        "leaving the start-up before it to the network (default: 0, every "
                                        "event; 512 gives start-ups closer to one training run's)."),
    prefix_fraction: float = typer.Option(None, "--prefix-fraction",
                                          help="Share of each window after the first that repeats the "
                                               "previous window's last events as known context (in [0, 1); "
                                               "smaller: fewer windows, faster; default: the model's, 0.25)."),
    precision: str = typer.Option(None, "--precision",
                                  help="What the network samples in: fp32, bf16, or auto (bf16 on CUDA, fp32 "
                                       "on CPU) (default: the model's, fp32)."),
    self_condition: bool = typer.Option(None, "--self-condition/--no-self-condition",
                                        help="Self-conditioned models: feed each denoising step's estimates "
                                             "of the still-masked events to the next (default: on for a "
                                             "model trained with it)."),
    cadence: bool = typer.Option(None, "--cadence/--no-cadence",
                                 help="Place the workload's steady rhythms (an event that recurs every "
                                      "~500 events in training, like fileio's syncs) by their training "
                                      "gaps, the rest drawn around them; --no-cadence: none (default: the "
                                      "model's: auto, the rhythms with closers, like fileio's file switch "
                                      "every 20th sync)."),
    constraints: str = typer.Option("guided", "--constraints", help="none, repair, or guided (guide + repair)."),
    format: str = typer.Option(None, "-f", "--format", help="parquet, csv, jsonl, text or ctf."),
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda."),
):
    """Generate a synthetic trace of any length with a trained model."""
    from tracesynth.generators.diffusion import TraceSynth, constraint_tools
    from tracesynth.generators.splice_settings import splice_setting_problem
    from tracesynth.model.precision import resolve_precision
    from tracesynth.sinks import sink_for

    sink_for(out, format)  # a bad suffix fails before minutes of sampling
    constraint_tools(constraints)
    gen = TraceSynth.load(model_dir, device=device)
    _point_to_best(model_dir)
    if corrector_steps < 0:
        raise ConfigError(f"--corrector-steps must be >= 0, got {corrector_steps}")
    gen.corrector_steps = corrector_steps
    # Sampling overrides: (flag, value, the generator's attribute, least allowed, strictly above it)
    overrides = (
        ("--temperature", temperature, "temperature", 0, True),
        ("--start-temperature", start_temperature, "start_temperature", 0, True),
        ("--tid-temperature", tid_temperature, "tid_temperature", 0, True),
        ("--spread", spread, "spread", 0, False),
        ("--support-rounds", support_rounds, "support_rounds", 0, False),
        ("--copy-rounds", copy_rounds, "copy_rounds", 0, False),
        ("--guide-rounds", guide_rounds, "guide_rounds", 0, False),
        ("--ngram-weight", ngram_weight, "ngram_weight", 0, False),
        ("--ngram-rounds", ngram_rounds, "ngram_rounds", 1, False),
        ("--prior-from", prior_from, "prior_from", 0, False),
        ("--start-steps", start_steps, "start_steps", 1, False),
        ("--start-anchor", start_anchor, "start_anchor", 0, False),
    )
    for flag, value, _, least, strict in overrides:
        if value is not None and (value <= least if strict else value < least):
            raise ConfigError(f"{flag} must be {'positive' if strict else f'>= {least}'}, got {value}")
    for _, value, attribute, _, _ in overrides:
        if value is not None:
            setattr(gen, attribute, value)
    # the splice's settings: TraceSynth's own rule (the loaded model is built; these override it)
    for attribute, value in (("splice", splice), ("splice_walk", splice_walk),
                             ("splice_walk_context", splice_walk_context), ("splice_walk_drift", splice_walk_drift)):
        if value is not None:
            if problem := splice_setting_problem(attribute, value):
                raise ConfigError(f"--{attribute.replace('_', '-')} {problem}")
            setattr(gen, attribute, value)
    if splice_walk_aligned is not None:
        gen.splice_walk_aligned = splice_walk_aligned
    if prefix_fraction is not None:
        if not 0 <= prefix_fraction < 1:
            raise ConfigError(f"--prefix-fraction must be in [0, 1), got {prefix_fraction}")
        gen.prefix_fraction = prefix_fraction
    if serial_guide is not None:
        gen.serial_guide = serial_guide
    if cadence is not None:
        gen.cadence = cadence
    if self_condition is not None:
        if self_condition and not gen.model_.config.self_condition:
            raise ConfigError(f"--self-condition: {model_dir} was trained without self-conditioning "
                              f"(`tracesynth train --self-condition`)")
        gen.self_condition = self_condition
    if precision is not None:
        resolve_precision(precision, "cpu")  # a bad value fails before loading anything else
        gen.precision = precision
    if n_events <= 0:
        raise ConfigError(f"-n must be positive, got {n_events}")
    if workload is None:
        if len(gen.workloads_) > 1:
            raise ConfigError(f"the model knows several workloads ({', '.join(gen.workloads_)}); pass --workload")
        workload = gen.workloads_[0]
    if workload not in gen.workloads_:
        raise ConfigError(f"unknown workload {workload!r}; the model knows: {', '.join(gen.workloads_)}")
    start = time.perf_counter()
    with progress() as prog:
        task = prog.add_task("generate", total=n_events, rate="")

        drawn = {"n": 0}

        def on_progress(k):
            # The generator draws a margin beyond n_events (repair may drop events; the trace
            # is cut to length after): the bar counts up to n_events, the rate counts all.
            drawn["n"] += k
            rate = drawn["n"] / max(time.perf_counter() - start, 1e-9)
            prog.update(task, completed=min(drawn["n"], n_events), rate=f"{rate:,.0f} ev/s")

        trace = gen.generate(n_events, workload, seed, steps=steps, guidance_scale=guidance_scale,
                             constraints=constraints, on_progress=on_progress)
    trace = trace.slice(0, n_events)
    trace.save(out, format)
    edits = trace.meta.extra.get("repair_edits")
    note = f", {edits} repair edits" if edits is not None else ""
    console_err.print(f"{n_events:,} events ({workload}, {steps} steps, constraints {constraints}{note}) "
                      f"in {time.perf_counter() - start:.1f} s → {out}", highlight=False)
    codes = gen.encoder_.encode(trace)["event"]
    console_err.print(f"network precision: {trace.meta.extra.get('precision', 'fp32')} (--precision {gen.precision})",
                      highlight=False)
    console_err.print(_ngram_note(gen, workload), highlight=False, soft_wrap=True)
    console_err.print(_anchor_note(gen, trace, workload, seed), highlight=False, soft_wrap=True)
    console_err.print(_cadence_note(gen, codes, workload), highlight=False, soft_wrap=True)
    console_err.print(_splice_note(gen, trace, workload), highlight=False, soft_wrap=True)
    console_err.print(_repeats_note(gen, codes, workload), highlight=False, soft_wrap=True)
    console_err.print(_support_note(gen, codes, workload), highlight=False, soft_wrap=True)
    console_err.print(_copy_note(gen, codes, workload), highlight=False, soft_wrap=True)
    serial = gen.serial_syscalls(workload)
    if serial and constraints == "guided":
        console_err.print(_serial_note(serial, trace), highlight=False, soft_wrap=True)


def _ngram_note(gen, workload: str) -> str:
    """One line on the n-gram prior: on with its weight, or why not."""
    ngrams = gen.encoder_.ngrams
    if ngrams is None or not ngrams.knows(workload):
        return "n-gram prior: off (model saved without its training n-gram counts)"
    if not gen.ngram_weight:
        return "n-gram prior: off (--ngram-weight 0)"
    where = f", from event {gen.prior_from} of the trace on" if gen.prior_from else ""
    return (f"n-gram prior: weight {gen.ngram_weight:g}, {gen.ngram_rounds} parts a step (training runs' "
            f"events next to up to {ngrams.k} decided ones on each side{where})")


def _anchor_note(gen, trace, workload: str, seed: int) -> str:
    """One line on the start-up anchor: whose start-up the trace begins with, or why none."""
    table = gen.encoder_.startups
    if not gen.start_anchor:
        return "start-up anchor: off (--start-anchor N begins the trace with a training run's first N events)"
    if table is None or not table.knows(workload):
        why = "trained with --no-runs" if not gen.runs_kept() else "model saved without its training start-ups"
        return f"start-up anchor: off ({why})"
    taken = trace.meta.extra.get("start_anchor", 0)
    run = table.chosen(workload, seed) + 1
    return (f"start-up anchor: the first {taken:,} events are training run {run} of {len(table.runs[workload])}'s "
            "(event types and classes; times and thread ids drawn)")


def _splice_note(gen, trace, workload: str) -> str:
    """One line on the span splice: how much of the trace is training's, or why none."""
    off = gen.splice_off(workload)
    if off is not None:
        return f"span splice: off ({off})"
    info = trace.meta.extra.get("splice", {})
    if not info.get("kept"):
        return f"span splice: undone ({info.get('why', 'nothing to splice')})"
    where = ("from their own phase of the runs" if info.get("by_phase", True)
             else "by length from anywhere: by phase it copied more than the bound")
    drift = info.get("walk_drift") or 0
    walked = (f", {info['walked']} walked in pieces of ~{info['walk_piece']} (match {info.get('walk_context', 64)}"
              + (f", drift {drift:,}" if drift else "") + (", aligned" if info.get("walk_aligned") else "") + ")"
              if info.get("walked") else "")
    return (f"span splice: {info['stretches']} stretches{walked}, {info['events_from_training']:,} events from training "
            f"(anchors of {info['anchor']}, {where}); 256-gram copy share of one training run "
            f"{info['copy_share_256_one_run']:.2f}, one training run of another at least {info['training_runs_least_share']:.2f}")


def _cadence_note(gen, codes, workload: str) -> str:
    """One line on the cadence scaffold: the rhythms it placed and the trace's gaps, or why not."""
    table = gen.encoder_.cadence
    if table is None:
        return "cadence scaffold: off (model saved without its training rhythms)"
    rhythms = table.of(workload)
    if not rhythms:
        return f"cadence scaffold: no steady rhythm in {workload}'s training runs"
    parts = []
    for r in rhythms:
        name = gen.encoder_.event.decode(np.array([r.event]))[0]
        gaps = np.diff(np.flatnonzero(np.asarray(codes) == r.event))
        here = f"median {np.median(gaps):,.0f}" if len(gaps) else "none"
        parts.append(f"{name} every {r.low:,}-{r.high:,} events in training, here {here}")
    if gen.cadence == "auto":
        from tracesynth.sampling.cadence_scaffold import scaffolded

        placed = scaffolded(rhythms, "auto")
        state = ("auto, on (rhythms with closers)" if placed else
                 "auto, off (no rhythm with closers; --cadence to place them)")
    else:
        state = "on" if gen.cadence else "off (--cadence to place them)"
    return f"cadence scaffold: {state}; " + "; ".join(parts)


def _support_note(gen, codes, workload: str) -> str:
    """One line on the trace's event 8-grams against the training runs' (the support corrector's
    table): how many are unseen, next to what one real run has against the others."""
    support = gen.encoder_.support
    if support is None or workload not in support.grams:
        return "support corrector: off (model saved without its training 8-grams)"
    share = support.novel_share(codes, workload)
    real = f"a training run against the others: {support.natural.get(workload, 0.0):.2%}"
    if not support.applies(workload):
        return f"support corrector: off (open grammar); 8-grams unseen in training {share:.2%} ({real})"
    state = f"{gen.support_rounds} rounds" if gen.support_rounds else "off (--support-rounds 0)"
    return f"support corrector: {state}; 8-grams unseen in training {share:.2%} ({real})"


def _serial_note(serial: list[str], trace) -> str:
    """One line on the syscalls the guide held to entry/exit alternation (a light trace of a
    multi-threaded workload): how many of their events still break it."""
    from tracesynth.encoding.serial import overlaps

    broken, total = overlaps(trace.events.column("event").to_numpy(zero_copy_only=False), serial)
    return (f"serial guide: {len(serial)} syscalls the training runs never overlap; "
            f"{broken:,} of their {total:,} events break one-at-a-time order")


def _repeats_note(gen, codes, workload: str) -> str:
    """One line on how much of the trace repeats itself exactly, beside the training runs, and
    what that says to do (`evaluation.report.repeats_advice`)."""
    from tracesynth.evaluation.report import repeats_advice
    from tracesynth.evaluation.windows import REPEAT_RADIUS, REPEAT_REACH, token_repeat_share

    share = token_repeat_share(codes)
    what = f"of events in a {2 * REPEAT_RADIUS + 1}-event span that recurs within {REPEAT_REACH} events"
    if share is None:
        return f"repeats: trace too short to count the share {what}"
    real = gen.encoder_.repeat_shares.get(workload)
    if not real:
        return f"repeats: {share:.2f} {what} (model saved without its training runs' share)"
    runs = (", ".join(f"{v:.2f}" for v in real) if len(real) <= 4
            else f"{min(real):.2f}-{max(real):.2f} over {len(real)} runs")
    return f"repeats: {share:.2f} {what} (training runs: {runs}){repeats_advice(share, sum(real) / len(real))}"


def _copy_note(gen, codes, workload: str) -> str:
    """One line on the trace's event 256-grams that occur verbatim in a training trace (the copy
    guard's table)."""
    copies = gen.encoder_.copies
    if copies is None or workload not in copies.spans or gen.encoder_.support is None:
        return "copy guard: off (model saved without its training spans)"
    share = f"256-event spans copied from training {copies.copy_share(codes, workload):.2%}"
    real = f"a training run from the others: {copies.natural.get(workload, 0.0):.2%}"
    if not copies.applies(workload):
        return f"copy guard: off (real runs share most long spans); {share} ({real})"
    state = f"{gen.copy_rounds} rounds" if gen.copy_rounds else "off (--copy-rounds 0)"
    return f"copy guard: {state}; {share} ({real})"

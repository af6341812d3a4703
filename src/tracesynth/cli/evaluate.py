"""`evaluate` and `baseline`: judge synthetic traces against real ones; make reference ones."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import typer

from tracesynth.cli.app import app, console, console_err, progress
from tracesynth.errors import ConfigError


def _load_all(paths: list[Path], workload: str | None, role: str):
    from tracesynth import load

    if not paths:
        raise ConfigError(f"no {role} traces given")
    return [load(p, workload=workload) for p in paths]


class _Parser(argparse.ArgumentParser):
    """argparse, because `--train A B C` (several values after one option) is what users type and
    click options take one value each; errors become one-line ConfigErrors like everywhere else."""

    def error(self, message):
        raise ConfigError(f"evaluate: {message} (see tracesynth evaluate --help)")


def _evaluate_parser() -> _Parser:
    parser = _Parser(prog="tracesynth evaluate", add_help=False)
    parser.add_argument("--train", nargs="+", type=Path, required=True)
    parser.add_argument("--test", nargs="+", type=Path, required=True)
    parser.add_argument("--synthetic", nargs="+", type=Path, required=True)
    parser.add_argument("-o", "--out", type=Path, required=True)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("-w", "--workload", default=None)
    return parser


@app.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
def evaluate(
    args: list[str] = typer.Argument(
        None, metavar="--train FILE... --test FILE... --synthetic FILE... -o DIR", show_default=False),
):
    """Fidelity, TSTR/TRTR utility, long-range, privacy and cost of synthetic traces.

    --train FILE...      real training traces (the runs the generator saw)

    --test FILE...       real held-out traces (other runs)

    --synthetic FILE...  the traces to judge (any readable format)

    -o DIR               report directory: report.json, report.html

    --seeds N            seeds per utility/discriminative figure (3)

    --quick              n-gram predictor only; windows 512 and 2048

    -w W                 treat every trace as workload W

    Keys of report.json: docs/evaluation.md.
    """
    from tracesynth.evaluation.report import (cadence_summary, privacy_summary, startup_summary, tell_summary,
                                             terminal_table, write_report)
    from tracesynth.evaluation.runner import evaluate as run

    options = _evaluate_parser().parse_args(args or [])
    if options.seeds < 1:
        raise ConfigError("evaluate: --seeds must be at least 1")
    sides = [_load_all(paths, options.workload, role) for paths, role in
             ((options.train, "train"), (options.test, "test"), (options.synthetic, "synthetic"))]
    with progress() as prog:
        task = prog.add_task("evaluate", total=None, rate="")

        def on_step(name: str) -> None:
            prog.update(task, description=f"evaluate: {name}")

        report = run(*sides, seeds=options.seeds, quick=options.quick, workload=options.workload,
                     on_step=on_step)
    json_path, html_path = write_report(report, options.out)
    console.print(terminal_table(report))
    for name, per in report["workloads"].items():
        for line in (tell_summary(name, per), startup_summary(name, per), cadence_summary(name, per),
                     privacy_summary(name, per)):
            if line:
                console.print(line, highlight=False)
    console_err.print(f"report: {json_path}  {html_path}  ({report['cost']['wall_seconds']:.1f} s)",
                      highlight=False)


@app.command()
def baseline(
    kind: str = typer.Argument(..., help="markov, copy or resample."),
    train: list[Path] = typer.Argument(..., help="Real training traces."),
    n_events: int = typer.Option(..., "-n", "--events", help="Events to generate."),
    out: Path = typer.Option(..., "-o", "--out", help="Output trace (format from the suffix)."),
    order: int = typer.Option(8, "--order", help="markov: context length (events)."),
    chunk: int = typer.Option(4096, "--chunk", help="copy: chunk length (events)."),
    piece: int = typer.Option(128, "--piece", help="resample: walk pieces of about this many events."),
    context: int = typer.Option(64, "--context",
                                help="resample: events a jump's place must share with the walk's last ones "
                                     "(shorter: more places to jump to, fewer long spans copied)."),
    drift: int = typer.Option(4096, "--drift",
                              help="resample: how far from the output's own position in a run a jump may land "
                                   "(shorter: the walk keeps the runs' order, repeating and skipping less)."),
    aligned: bool = typer.Option(False, "--aligned",
                                 help="resample: each jump draws among one place per training run, the one nearest "
                                      "the output's own position (branches between runs, never back or ahead "
                                      "within one)."),
    aligned_shared: bool = typer.Option(False, "--aligned-shared",
                                        help="resample: as --aligned only where two training runs or more hold "
                                             "the walk's last events within the drift; where one run alone does, "
                                             "any of its places there."),
    channels: str = typer.Option("light", "--channels",
                                 help="resample: light (event types and times) or full (whole rows)."),
    seed: int = typer.Option(0, "--seed", help="Random seed (same seed, same trace)."),
    workload: str = typer.Option(None, "--workload", "-w",
                                 help="Workload to generate (and label for unlabelled inputs)."),
):
    """Generate a reference synthetic trace with a built-in baseline generator."""
    from tracesynth import load
    from tracesynth.generators import make

    if aligned and aligned_shared:
        raise ConfigError("resample: choose --aligned or --aligned-shared, not both")
    params = {"markov": {"order": order}, "copy": {"chunk_length": chunk},
              "resample": {"piece": piece, "context": context, "drift": drift,
                           "aligned": "shared" if aligned_shared else aligned,
                           "channels": channels}}
    if kind not in params:
        raise ConfigError(f"unknown baseline {kind!r}; choose markov, copy or resample")
    traces = [load(p) for p in train]
    if workload:
        traces = [t if t.meta.workload else t.with_meta(workload=workload) for t in traces]
    start = time.perf_counter()
    generator = make(kind, random_state=seed, **params[kind]).fit(traces)
    trace = generator.sample(n_events, workload=workload)
    trace.meta.extra["train_seconds"] = trace.meta.extra.get("train_seconds", round(time.perf_counter() - start, 3))
    trace.save(out)
    console_err.print(f"{kind} → {out}: {len(trace):,} events ({trace.meta.workload}) in "
                      f"{time.perf_counter() - start:.1f} s", highlight=False)
    if kind == "resample":  # what the walk copied, against what real runs share (its privacy dial)
        extra = trace.meta.extra
        console_err.print(f"walk: pieces of ~{extra['piece']}, jumps after {extra['context']} matching events, "
                          f"within {extra['drift']:,} of its place in the run"
                          + {True: ", the nearest place in each run",
                             "shared": ", the nearest place in each run where two runs or more hold one"}.get(
                              extra.get("aligned"), "") + "; "
                          f"{extra['copy_share_256_one_run']:.2f} of its 256-event spans from one training run, "
                          f"where the least one training run has of another is "
                          f"{extra['training_runs_least_share']:.2f}"
                          + ("" if extra["within_bound"] else " (over that + 0.10 even in the shortest pieces; "
                             "a shorter --context branches more often)"), highlight=False)

"""`experiment`: run a grid of train → generate → evaluate cells, with peers, and publish
results.csv, results.md and plots (see docs/experiments.md)."""

from __future__ import annotations

from pathlib import Path

import typer

from tracesynth.cli.app import app, console_err, progress


@app.command()
def experiment(
    config_file: Path = typer.Argument(..., help="Experiment config (YAML; see experiments/default.yaml)."),
    out: Path = typer.Option(..., "-o", "--out", help="Results directory (cells/, models/, results.*, plots/)."),
    budget: float = typer.Option(1.0, "--budget", help="Multiplier of the config's training steps "
                                                       "(e.g. 0.25 for a quick look, 10 on a GPU)."),
    resume: bool = typer.Option(False, "--resume", help="Continue a run in OUT: finished cells are skipped."),
    report_only: bool = typer.Option(False, "--report-only", help="Only re-render results.* from OUT's cells."),
    models: Path = typer.Option(None, "--models",
                                help="Model directories trained elsewhere (`tracesynth train`, e.g. on a GPU): "
                                     "sampled instead of training; each must match a model of the grid "
                                     "(workload, channels, context, seed) and its training runs."),
):
    """Reproduce the published ablations (channels × context × constraints × seeds) beside peers."""
    from tracesynth.experiments.config import load_config
    from tracesynth.experiments.grid import enumerate_cells
    from tracesynth.experiments.results import write_results
    from tracesynth.experiments.runner import resolve_workloads, run_experiment

    if report_only:
        paths = write_results(out)
        console_err.print(f"results: {paths['md']}  {paths['csv']}", highlight=False)
        return
    config = load_config(config_file)
    total = len(enumerate_cells(config, resolve_workloads(config)))
    with progress() as prog:
        task = prog.add_task("experiment", total=total, rate="")

        def on_progress(phase, cell, done):
            label = cell.cell_id if cell is not None else ""
            prog.update(task, description=f"{phase}: {label}", advance=1 if done else 0)

        counts = run_experiment(config, out, budget=budget, resume=resume, on_progress=on_progress,
                                models_from=models, on_message=lambda line: prog.console.print(line, highlight=False))
    write_command_record(out, config_file, budget, resume, models)
    console_err.print(f"{counts['cells']} cells: {counts['ok']} run, {counts['skipped']} already done, "
                      f"{counts['error']} failed → {out / 'results.md'}", highlight=False)
    if counts["error"]:
        console_err.print(f"[yellow]{counts['error']} cells failed; their errors are in results.md[/]")


def write_command_record(out: Path, config_file: Path, budget: float, resume: bool,
                         models: Path | None = None) -> Path:
    """COMMAND.md: the exact command, the code version and the environment of the run, so that
    published results say how to reproduce them."""
    import json
    import shlex
    import subprocess
    import sys
    import time
    from importlib import metadata

    from tracesynth.fileio import atomic_path

    def version(package: str) -> str:
        try:
            return metadata.version(package)
        except metadata.PackageNotFoundError:
            return "not installed"

    # The commit of the code that ran (this package's checkout), not of the working directory.
    source = Path(__file__).resolve().parent
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                timeout=10, cwd=source).stdout.strip() or "?"
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                                    text=True, timeout=10, cwd=source).stdout.strip())
    except (OSError, subprocess.SubprocessError):
        commit, dirty = "?", False
    run = json.loads((out / "run.json").read_text())
    env = run.get("environment", {})
    command = "tracesynth experiment " + shlex.join([str(config_file), "-o", str(out)])
    command += f" --budget {budget:g}" if budget != 1.0 else ""
    command += " --resume" if resume else ""
    command += f" --models {shlex.quote(str(models))}" if models is not None else ""
    lines = [
        "# How these results were made", "",
        "```", command, "```", "",
        f"- finished: {time.strftime('%Y-%m-%dT%H:%MZ', time.gmtime())}; git {commit}"
        + (" (with uncommitted changes)" if dirty else ""),
        f"- config: `{config_file}` (copied in full into run.json); budget {budget:g} → "
        + (f"{run.get('train_steps')} TraceSynth training steps per model" if models is None else
           f"TraceSynth models imported from `{models}` (models/*/experiment.json: where and how long each trained)"),
        f"- Python {env.get('python')} on {env.get('platform')}; torch {env.get('torch')}, "
        + (f"GPU {env['gpu']}" if env.get("gpu") else f"CPU, {env.get('torch_threads')} threads"),
        f"- numpy {version('numpy')}, pandas {version('pandas')}, scikit-learn {version('scikit-learn')}; "
        f"peers: sdv {version('sdv')}, gretel-synthetics {version('gretel-synthetics')}",
        f"- python executable: `{_shown_path(sys.executable)}`", "",
        "Published copies keep results.csv, results.md, plots/, run.json and this file; cells/ and models/",
        "stay in the results directory (re-render with `--report-only`).", "",
    ]
    path = out / "COMMAND.md"
    with atomic_path(path) as tmp:
        tmp.write_text("\n".join(lines))
    return path


def _shown_path(path: str) -> str:
    """A path relative to the working directory when it lies below it: committed records
    should not carry one machine's absolute paths."""
    import os

    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


@app.command()
def compare(
    run_a: Path = typer.Argument(..., help="The baseline: an experiment's output folder or its results.csv."),
    run_b: Path = typer.Argument(None, help="The run to compare with it, sharing workloads and seeds "
                                            "(default: RUN_A again, its cells split by --where-a/--where-b)."),
    metric: list[str] = typer.Option(None, "--metric", "-m",
                                     help="A results.csv column; repeat for several (default: TSTR/TRTR, "
                                          "disc@512 and @2048, copy rate, repeats, events/s)."),
    where: list[str] = typer.Option(None, "--where", metavar="KEY=VALUE",
                                    help="Only cells with this key value in both runs (e.g. workload=sqlite,tar); "
                                         "repeat for several keys."),
    where_a: list[str] = typer.Option(None, "--where-a", metavar="KEY=VALUE",
                                      help="Only A's cells with this key value (e.g. context=256)."),
    where_b: list[str] = typer.Option(None, "--where-b", metavar="KEY=VALUE",
                                      help="Only B's cells with this key value (e.g. context=4096)."),
    out: Path = typer.Option(None, "-o", "--out", help="Also write the report here (Markdown)."),
    plot: Path = typer.Option(None, "--plot", help="Also draw the differences as a forest plot (PNG)."),
):
    """Two experiment runs cell for cell: per workload A → B and the paired difference with a 95% interval."""
    from tracesynth.experiments.compare import (DEFAULT_METRICS, compare as compare_runs, load_results,
                                                load_run_config, parse_conditions, render_markdown, select,
                                                write_plot)
    from tracesynth.errors import ConfigError
    from tracesynth.fileio import atomic_path

    run_b = run_a if run_b is None else run_b
    both = parse_conditions(where)
    only_a, only_b = parse_conditions(where_a), parse_conditions(where_b)
    clash = sorted(set(both) & (set(only_a) | set(only_b)))
    if clash:
        raise ConfigError(f"--where {clash[0]}=... and --where-a/--where-b {clash[0]}=...: give {clash[0]} one way")
    if run_b == run_a and not (only_a or only_b):
        raise ConfigError(f"{run_a}: a run compared with itself needs --where-a/--where-b to split its cells "
                          "(e.g. --where-a context=256 --where-b context=4096)")
    name = lambda p, c: ((p if p.is_dir() else p.parent).name or str(p)) + (  # noqa: E731
        f" [{' '.join(f'{k}={v}' for k, v in c.items())}]" if c else "")
    name_a, name_b = name(run_a, only_a), name(run_b, only_b)
    frame_a = select(load_results(run_a), {**both, **only_a}, name_a)
    frame_b = select(load_results(run_b), {**both, **only_b}, name_b)
    result = compare_runs(frame_a, frame_b, metric or DEFAULT_METRICS, name_a=name_a, name_b=name_b,
                          configs=(load_run_config(run_a), load_run_config(run_b)))
    text = render_markdown(result)
    if out is not None:
        with atomic_path(out) as tmp:
            tmp.write_text(text)
        console_err.print(f"report: {out}", highlight=False)
    if plot is not None:
        console_err.print(f"plot: {write_plot(result, plot)}", highlight=False)
    typer.echo(text, nl=False)

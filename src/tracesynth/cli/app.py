"""The Typer application object and the shared consoles (stdout for results, stderr for
progress and errors, so piping a command's output stays clean)."""

from __future__ import annotations

import functools

import typer
from rich.console import Console

app = typer.Typer(
    name="tracesynth",
    help="Learn from real Linux kernel traces and generate realistic synthetic ones.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
)
console = Console()
console_err = Console(stderr=True)


def _print_version(value: bool) -> None:
    if value:
        from tracesynth import __version__

        console.print(f"tracesynth {__version__}", highlight=False)
        raise typer.Exit()


#: Commands whose work is sampling: their OpenMP threads spin before they sleep (tracesynth.runtime).
SAMPLING_COMMANDS = frozenset({"generate"})


@app.callback()
def _root(ctx: typer.Context,
          version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                       help="Print the version and exit.")) -> None:
    """Learn from real Linux kernel traces and generate realistic synthetic ones."""
    from tracesynth.runtime import tune_cpu_process

    # How OpenMP threads wait and a malloc that keeps freed memory (tracesynth.runtime says why
    # and what each is worth). Runs before the command, so before anything imports torch.
    tune_cpu_process(sampling=ctx.invoked_subcommand in SAMPLING_COMMANDS)


#: Seconds between progress lines when stderr is not a terminal (a log file, CI, nohup).
LOG_INTERVAL_S = 30.0


def progress(log_interval_s: float | None = None):
    """A rich progress bar on stderr with rate and ETA, for anything longer than a moment.

    When stderr is not a terminal (redirected to a log, a CI job, ``nohup``), a live bar would
    print nothing until the end; a :class:`LogProgress` writes plain timestamped lines instead."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    if not console_err.is_terminal:
        return _log_progress_class()(console_err, LOG_INTERVAL_S if log_interval_s is None else log_interval_s)
    return Progress(
        SpinnerColumn(),
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console_err,
        transient=False,
    )


@functools.cache
def _log_progress_class():
    """Defined on first use so that importing the CLI does not import rich.progress."""
    import time

    from rich.progress import Progress

    class LogProgress(Progress):
        """Progress for logs: the same API as rich's bar (tasks, update, advance), rendered as one
        plain line per task when its description changes, when it completes, and at most every
        `interval_s` seconds otherwise — ``[03:12:09] train 1,500/3,000 50% loss 1.23 · 9,000 ev/s
        · 5:01 elapsed · ETA 5:00``."""

        def __init__(self, console, interval_s: float):
            super().__init__(console=console, disable=True)
            self.interval_s = interval_s
            self._logged: dict = {}  # task id -> (monotonic time, description, completed, finished)

        def update(self, task_id, **kwargs):
            super().update(task_id, **kwargs)
            self._maybe_log(task_id)

        def advance(self, task_id, advance: float = 1) -> None:
            super().advance(task_id, advance)
            self._maybe_log(task_id)

        def stop(self) -> None:
            for task in self.tasks:  # the final state of anything that moved since its last line
                last = self._logged.get(task.id)
                if task.visible and (last is None or last[1:] != (task.description, task.completed, task.finished)):
                    self._write(task)
            super().stop()

        def _maybe_log(self, task_id) -> None:
            task = self._tasks[task_id]
            if not task.visible:
                return
            last = self._logged.get(task_id)
            due = (last is None or task.description != last[1] or (task.finished and not last[3])
                   or time.monotonic() - last[0] >= self.interval_s)
            if due:
                self._write(task)

        def _write(self, task) -> None:
            parts = [time.strftime("[%H:%M:%S]"), task.description]
            if task.total:
                parts.append(f"{task.completed:,.0f}/{task.total:,.0f} {100 * task.completed / task.total:.0f}%")
            elif task.completed:
                parts.append(f"{task.completed:,.0f}")
            rate = task.fields.get("rate")
            if rate:
                parts.append(str(rate))
            tail = [f"{_clock(task.elapsed or 0.0)} elapsed"]
            if task.total and not task.finished and task.time_remaining is not None:
                tail.append(f"ETA {_clock(task.time_remaining)}")
            self.console.print(" ".join(parts) + " · " + " · ".join(tail), highlight=False, markup=False,
                                   soft_wrap=True)
            self._logged[task.id] = (time.monotonic(), task.description, task.completed, task.finished)

    return LogProgress


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"

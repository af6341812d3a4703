"""The Typer application object and the shared consoles (stdout for results, stderr for
progress and errors, so piping a command's output stays clean)."""

from __future__ import annotations

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


def progress():
    """A rich progress bar on stderr with rate and ETA, for anything longer than a moment."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

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

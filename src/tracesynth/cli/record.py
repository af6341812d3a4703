"""`record` (a real ftrace trace of a command) and `datasets list` (the bundled real runs)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from tracesynth.cli.app import app, console, console_err

datasets_app = typer.Typer(help="The bundled real traces under datasets/.", no_args_is_help=True)
app.add_typer(datasets_app, name="datasets")


@app.command(context_settings={"allow_interspersed_args": False})
def record(
    command: list[str] = typer.Argument(..., help="The command to trace, after `--`.",
                                        metavar="-- COMMAND [ARGS]..."),
    out: Path = typer.Option(..., "-o", "--out", help="Output .parquet (written atomically)."),
    workload: str = typer.Option(None, "--workload", "-w", help="Workload label stored with the trace."),
    events: str = typer.Option("default", "--events", "-e",
                               help="Event preset: minimal, default, sched or full."),
    buffer_mb: int = typer.Option(None, "--buffer-mb",
                                  help="Ring buffer per CPU in MiB (default: 128, less if memory is short)."),
    strict: bool = typer.Option(False, "--strict", help="Lost events are an error, not a warning."),
    wait: float = typer.Option(0.0, "--wait", help="Seconds to wait for another ftrace user to finish."),
):
    """Record a real kernel trace of COMMAND and its children with ftrace (needs root).

    The exit code is COMMAND's. tracefs is left as it was found, whatever happens.
    """
    from tracesynth.record import RecordOptions
    from tracesynth.record import record as do_record
    from tracesynth.record.recorder import exit_status_text

    options = RecordOptions(workload=workload, events=events, buffer_mb=buffer_mb, strict=strict,
                            wait_lock_s=wait)
    try:
        result = do_record(list(command), out, options,
                           on_stage=lambda text: console_err.print(f"[dim]record: {text}[/]",
                                                                   highlight=False))
    except KeyboardInterrupt:
        # Ctrl-C outside the recorder's signal guard (before tracefs was touched, or while
        # converting). Exit explicitly: Typer turns KeyboardInterrupt into a return value
        # that the entry point does not pass on.
        console_err.print("[bold red]interrupted[/]; nothing written")
        raise SystemExit(130) from None
    console_err.print(
        f"{out}: {result.events:,} events in {result.duration_s:.2f} s, "
        f"{result.lost_events:,} lost; command {exit_status_text(result.exit_code)}", highlight=False)
    if result.lost_events:
        console_err.print(f"[bold yellow]warning:[/] the ftrace buffer lost {result.lost_events:,} "
                          "events (the trace has gaps); pass a larger --buffer-mb, or --strict to "
                          "make this an error", highlight=False)
    raise SystemExit(result.exit_code)


@datasets_app.command("list")
def datasets_list(
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
):
    """List the bundled workloads and runs with their event counts."""
    import json

    from tracesynth.datasets import catalog, datasets_dir

    runs = catalog()
    if as_json:
        console.print_json(json.dumps([r.to_dict() for r in runs]))
        return
    table = Table("workload", "run", "events", "distinct", "threads", "duration", "lost", "size",
                  title=f"bundled real traces ({datasets_dir()})", title_justify="left")
    for r in runs:
        table.add_row(r.workload, str(r.run), f"{r.events:,}", str(r.distinct_events),
                      str(r.threads), f"{r.duration_s:.2f} s", str(r.lost_events),
                      f"{r.size_bytes / 1e6:.2f} MB")
    console.print(table)

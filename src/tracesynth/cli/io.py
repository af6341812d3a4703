"""`ingest`, `export`, `info`, `formats`: the doors in and out of the canonical table."""

from __future__ import annotations

import json
import time
from pathlib import Path

import typer
from rich.table import Table

from tracesynth.cli.app import app, console, console_err, progress
from tracesynth.errors import ConfigError
from tracesynth.isolation import run_isolated
from tracesynth.schema import TraceMeta


def _rate_updater(prog, task, start):
    def on_batch(batch):
        prog.advance(task, batch.num_rows)
        done = prog.tasks[task].completed
        prog.update(task, rate=f"{done / max(time.perf_counter() - start, 1e-9):,.0f} ev/s")

    return on_batch


def _ingest_one(src, dst, format, lenient, workload, anonymise, vocab) -> tuple[str, int]:
    from tracesynth.sources import ingest as do_ingest

    start = time.perf_counter()
    with progress() as prog:
        task = prog.add_task(f"ingest {src.name}", total=None, rate="")
        meta = do_ingest(src, dst, format, lenient=lenient, workload=workload,
                         anonymise=anonymise, vocab=vocab, on_batch=_rate_updater(prog, task, start))
        return meta.to_json(), int(prog.tasks[task].completed)


@app.command()
def ingest(
    sources: list[Path] = typer.Argument(..., help="Trace files or CTF directories to read."),
    out: Path = typer.Option(..., "-o", "--out", help="Output .parquet (a directory when several sources)."),
    format: str = typer.Option(None, "--format", "-F", help="Input format (default: auto-detect)."),
    workload: str = typer.Option(None, "--workload", "-w", help="Workload label stored with the trace."),
    lenient: bool = typer.Option(False, "--lenient", help="Skip bad records and report how many."),
    anonymise: bool = typer.Option(False, "--anonymise", help="Replace the host name by a hash."),
    vocab: Path = typer.Option(None, "--vocab", help="Event-id sequences: file mapping ids to event names."),
):
    """Convert real traces (LTTng CTF, ftrace, strace, event ids, CSV/JSONL) to the canonical table."""
    if len(sources) > 1 and out.suffix == ".parquet":
        raise ConfigError(f"{out}: several sources go to a directory, one .parquet each; pass a directory")
    targets = (
        [(sources[0], out)]
        if len(sources) == 1
        else [(s, out / (s.name.split(".")[0] + ".parquet")) for s in sources]
    )
    for src, dst in targets:
        # In a forked child: a decoder crash on corrupt input becomes a one-line error.
        meta_json, n = run_isolated(
            _ingest_one, (src, dst, format, lenient, workload, anonymise, vocab), source=src, target=dst
        )
        meta = TraceMeta.from_json(meta_json)
        msg = f"{src} → {dst}: {n:,} events ({meta.source_format})"
        if meta.skipped_records:
            msg += f", [yellow]{meta.skipped_records:,} bad records skipped[/]"
        if meta.lost_events:
            msg += f", [yellow]{meta.lost_events:,} events lost by the tracer[/]"
        console_err.print(msg, highlight=False)


@app.command()
def export(
    src: Path = typer.Argument(..., help="Any readable trace."),
    out: Path = typer.Option(..., "-o", "--out", help="Output file (or directory for ctf)."),
    format: str = typer.Option(None, "-f", "--format", help="parquet, csv, jsonl, text or ctf (default: from suffix)."),
    in_format: str = typer.Option(None, "--in-format", help="Input format (default: auto-detect)."),
):
    """Write a trace out as Parquet, CSV, JSONL, babeltrace2-like text or a real CTF trace."""
    from tracesynth.sinks import export as do_export

    start = time.perf_counter()
    n = do_export(src, out, format, in_format=in_format)
    console_err.print(f"{src} → {out}: {n:,} events in {time.perf_counter() - start:.1f} s", highlight=False)


@app.command()
def info(
    traces: list[Path] = typer.Argument(..., help="Traces in any readable format, or model directories "
                                                  "(`tracesynth train`'s output)."),
    top: int = typer.Option(10, help="How many top events and processes to list."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of tables."),
    format: str = typer.Option(None, "--format", "-F", help="Input format (default: auto-detect)."),
):
    """Summarise traces (events, duration, threads, CPUs, top events and processes) or models
    (channels, workloads, size, training, losses, training traces)."""
    from tracesynth import load
    from tracesynth.model.checkpoint import is_model_dir
    from tracesynth.summary import summarize

    results = {}
    for path in traces:
        if format is None and is_model_dir(path):
            from tracesynth.model.summary import summarize_model

            summary = summarize_model(path)
            results[str(path)] = {"model": summary.to_dict()}
            if not as_json:
                print_model_summary(path, summary)
            continue
        trace = load(path, format)
        s = summarize(trace, top)
        results[str(path)] = {"meta": json.loads(trace.meta.to_json()), "summary": s.to_dict()}
        if not as_json:
            print_summary(path, trace.meta, s)
    if as_json:
        console.print_json(json.dumps(results))


def print_model_summary(path, summary) -> None:
    from tracesynth.model.summary import summary_rows

    table = Table(title=f"{path} (model)", show_header=False, title_justify="left")
    table.add_column("field", style="bold")
    table.add_column("value")
    for k, v in summary_rows(summary):
        table.add_row(k, v)
    console.print(table)


def print_summary(path, meta, s) -> None:
    table = Table(title=f"{path}", show_header=False, title_justify="left")
    table.add_column("field", style="bold")
    table.add_column("value")
    rows = [
        ("format", meta.source_format + (
            f" ({' '.join(x for x in (meta.tracer, meta.tracer_version) if x)})" if meta.tracer else "")),
        ("kernel", meta.kernel_version or "?"),
        ("workload", meta.workload or "-"),
        ("events", f"{s.events:,} ({s.distinct_events} distinct)"),
        ("duration", f"{s.duration_s:.3f} s"),
        ("threads / processes", f"{s.threads} / {s.processes}"),
        ("CPUs", str(s.cpus)),
        ("events with unknown thread", f"{s.unknown_thread_events:,}"),
        ("syscall entries / exits", f"{s.syscall_entries:,} / {s.syscall_exits:,}"),
        ("lost / skipped", f"{meta.lost_events:,} / {meta.skipped_records:,}"),
        ("top events", ", ".join(f"{e} {c:,}" for e, c in s.top_events)),
        ("top processes", ", ".join(f"{p} {c:,}" for p, c in s.top_processes) or "-"),
    ]
    for k, v in rows:
        table.add_row(k, v)
    console.print(table)


@app.command()
def formats():
    """List the input and output formats."""
    from tracesynth.sinks import registry as sinks
    from tracesynth.sources import registry as sources

    table = Table("direction", "format", "description")
    for name, r in sources().items():
        table.add_row("in", name, r.description)
    for name, s in sinks().items():
        table.add_row("out", name, s.description)
    console.print(table)

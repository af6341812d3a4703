"""`check` and `repair`: kernel-semantics rules on any readable trace."""

from __future__ import annotations

import json
import time
from pathlib import Path

import typer
from rich.table import Table

from tracesynth.cli.app import app, console, console_err, progress


@app.command()
def check(
    traces: list[Path] = typer.Argument(..., help="Traces in any readable format."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of tables."),
    rules: str = typer.Option(None, "--rules", help="Comma-separated rule names (default: all)."),
    examples: int = typer.Option(3, "--examples", help="Examples shown per violated rule."),
    single_thread: bool = typer.Option(None, "--single-thread/--no-single-thread",
                                       help="Read a trace without tids as one thread "
                                            "(default: when its metadata says it has one)."),
    format: str = typer.Option(None, "--format", "-F", help="Input format (default: auto-detect)."),
):
    """Check traces against kernel-semantics rules; exit 1 when any rule is violated."""
    from tracesynth import load
    from tracesynth.constraints import check as run_check

    reports = {}
    violated = False
    with progress() as prog:
        task = prog.add_task("check", total=len(traces), rate="")
        for path in traces:
            prog.update(task, description=f"check {path.name}")
            trace = load(path, format)
            start = time.perf_counter()
            report = run_check(trace, rules, max_examples=examples, assume_single_thread=single_thread)
            elapsed = time.perf_counter() - start
            prog.update(task, advance=1, rate=f"{len(trace) / max(elapsed, 1e-9):,.0f} ev/s")
            report.source = str(path)
            reports[str(path)] = report.to_dict()
            violated |= report.violated
            if not as_json:
                _print_report(path, report, elapsed)
    if as_json:
        console.print_json(json.dumps(reports))
    raise SystemExit(1 if violated else 0)


def _print_report(path, report, elapsed: float) -> None:
    table = Table(title=f"{path}: {report.events:,} events, checked in {elapsed:.2f} s",
                  title_justify="left")
    for col in ("rule", "status", "violations", "per 1k", "first examples / why n/a"):
        table.add_column(col, overflow="fold")
    style = {"ok": "green", "violated": "bold red", "n/a": "dim"}
    for r in report.rules:
        if r.status == "n/a":
            detail = r.reason or ""
        else:
            detail = "\n".join(
                f"row {e['row']} ts {e['ts']} tid {e['tid']} cpu {e['cpu']} {e['event']}: {e['reason']}"
                for e in r.examples)
        table.add_row(r.name, f"[{style[r.status]}]{r.status}[/]",
                      f"{r.count:,}" if r.status != "n/a" else "-",
                      f"{r.per_1000:.3f}" if r.status != "n/a" else "-", detail)
    console.print(table)


@app.command()
def repair(
    trace_path: Path = typer.Argument(..., metavar="TRACE", help="Any readable trace."),
    out: Path = typer.Option(..., "-o", "--out", help="Repaired trace (format from the suffix)."),
    edits: Path = typer.Option(None, "--edits", help="Write the edit log here (JSONL)."),
    rules: str = typer.Option(None, "--rules", help="Comma-separated rule names (default: all)."),
    single_thread: bool = typer.Option(None, "--single-thread/--no-single-thread",
                                       help="Read a trace without tids as one thread "
                                            "(default: when its metadata says it has one)."),
    format: str = typer.Option(None, "--format", "-F", help="Input format (default: auto-detect)."),
):
    """Repair a trace with few edits so that it checks clean; log every edit."""
    from tracesynth import load
    from tracesynth.constraints import repair as run_repair
    from tracesynth.fileio import atomic_path

    with console_err.status(f"repairing {trace_path.name}"):
        trace = load(trace_path, format)
        start = time.perf_counter()
        fixed, log = run_repair(trace, rules, assume_single_thread=single_thread)
        elapsed = time.perf_counter() - start
        fixed.save(out)
    if edits is not None:
        with atomic_path(edits) as tmp, open(tmp, "w") as fh:
            for record in log:
                fh.write(json.dumps(record, sort_keys=True, default=str) + "\n")
    by_rule: dict[str, int] = {}
    for record in log:
        by_rule[record["rule"]] = by_rule.get(record["rule"], 0) + 1
    summary = ", ".join(f"{k} {v:,}" for k, v in sorted(by_rule.items())) or "none needed"
    console_err.print(f"{trace_path} → {out}: {len(trace):,} → {len(fixed):,} events, "
                      f"{len(log):,} edits ({summary}) in {elapsed:.2f} s", highlight=False)

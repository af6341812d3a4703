"""The CLI's shared progress display: a live bar on a terminal, plain timestamped lines in logs."""

from __future__ import annotations

import importlib
import io
import re
import sys

from rich.console import Console

importlib.import_module("tracesynth.cli.app")
app_module = sys.modules["tracesynth.cli.app"]


def _log_of(monkeypatch, interval_s, drive) -> list[str]:
    buf = io.StringIO()
    monkeypatch.setattr(app_module, "console_err", Console(file=buf, stderr=True, width=200))
    with app_module.progress(log_interval_s=interval_s) as prog:
        drive(prog)
    return buf.getvalue().splitlines()


def test_a_log_gets_a_line_per_description_change_and_at_completion(monkeypatch):
    def drive(prog):
        task = prog.add_task("train", total=1000, rate="")
        for step in range(1, 1001):
            prog.update(task, completed=step, rate=f"loss {1 / step:.3f}")
        hidden = prog.add_task("rank 1", total=5, rate="", visible=False)
        prog.advance(hidden, 5)
        cells = prog.add_task("experiment", total=2, rate="")
        for cell in ("a", "b"):
            prog.update(cells, description=f"train: {cell}")
            prog.update(cells, description=f"generate: {cell}")
            prog.advance(cells, 1)

    lines = _log_of(monkeypatch, 3600.0, drive)  # no periodic lines within the test's time
    assert all(re.match(r"\[\d\d:\d\d:\d\d\] ", line) for line in lines), lines
    assert lines[0][11:].startswith("train 1/1,000 0% loss 1.000 · ")
    assert "train 1,000/1,000 100% loss 0.001 · " in lines[1] and "ETA" not in lines[1]
    assert [line.split(" · ")[0][11:] for line in lines[2:]] == [
        "train: a 0/2 0%", "generate: a 0/2 0%", "train: b 1/2 50%", "generate: b 1/2 50%", "generate: b 2/2 100%"]
    assert not any("rank 1" in line for line in lines)


def test_periodic_lines_follow_the_interval(monkeypatch):
    def drive(prog):
        task = prog.add_task("generate", total=None, rate="")
        for _ in range(50):
            prog.advance(task, 100)

    every = _log_of(monkeypatch, 0.0, drive)
    assert len(every) == 50 and every[-1].split(" · ")[0].endswith("generate 5,000")
    rare = _log_of(monkeypatch, 3600.0, drive)
    assert [line.split(" · ")[0][11:] for line in rare] == ["generate 100", "generate 5,000"]


def test_version_is_printed(capsys):
    from tracesynth import __version__
    from tracesynth.cli import main

    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"tracesynth {__version__}"

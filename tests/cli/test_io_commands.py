"""`tracesynth ingest/export/info/formats` end to end through the real CLI entry point."""

from __future__ import annotations

import json
import subprocess
import sys

import tracesynth
from tracesynth.cli import main


def test_ingest_export_info_round_trip(tmp_path, small_trace, capsys):
    src = tmp_path / "in.jsonl"
    small_trace.save(src)
    out = tmp_path / "out.parquet"
    assert main(["ingest", str(src), "-o", str(out), "--workload", "demo"]) == 0
    back = tracesynth.load(out)
    assert back.events.equals(small_trace.events)
    assert back.meta.workload == "demo"

    csv = tmp_path / "out.csv"
    assert main(["export", str(out), "-o", str(csv)]) == 0
    assert tracesynth.load(csv).events.equals(small_trace.events)

    capsys.readouterr()
    assert main(["info", str(out), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    summary = info[str(out)]["summary"]
    assert summary["events"] == 6 and summary["threads"] == 2 and summary["cpus"] == 2
    assert summary["syscall_entries"] == 2 and summary["syscall_exits"] == 2


def test_bad_input_is_one_line_nonzero_and_leaves_nothing(tmp_path, small_trace):
    src = tmp_path / "bad.jsonl"
    small_trace.save(src)
    src.write_text(src.read_text() + "{broken\n")
    out = tmp_path / "out.parquet"
    proc = subprocess.run(
        [sys.executable, "-m", "tracesynth", "ingest", str(src), "-o", str(out)],
        capture_output=True, text=True,
    )
    assert proc.returncode != 0
    err_lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert any("bad.jsonl:7: bad JSONL record" in line for line in err_lines), proc.stderr
    assert "Traceback" not in proc.stderr
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tracesynth-tmp")]

    ok = subprocess.run(
        [sys.executable, "-m", "tracesynth", "ingest", str(src), "-o", str(out), "--lenient"],
        capture_output=True, text=True,
    )
    assert ok.returncode == 0, ok.stderr
    assert "1 bad records skipped" in ok.stderr
    assert tracesynth.load(out).meta.skipped_records == 1


def test_unknown_output_format_is_refused(tmp_path, small_trace, capsys):
    src = tmp_path / "in.parquet"
    small_trace.save(src)
    assert main(["export", str(src), "-o", str(tmp_path / "x.weird")]) != 0
    assert "cannot tell the output format" in capsys.readouterr().err


def test_anonymise_hides_hostname(tmp_path, small_trace):
    src = tmp_path / "in.parquet"
    small_trace.save(src)
    out = tmp_path / "anon.parquet"
    assert main(["ingest", str(src), "-o", str(out), "--anonymise"]) == 0
    host = tracesynth.load(out).meta.hostname
    assert host.startswith("host-") and "box" not in host

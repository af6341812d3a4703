"""Parquet, CSV and JSONL: round trips through TraceSynth's own table formats, bad input."""

from __future__ import annotations

import pytest

import tracesynth
from tracesynth.errors import TraceFormatError
from tracesynth.sources import detect_format


@pytest.mark.parametrize("suffix,fmt", [(".parquet", "parquet"), (".csv", "csv"), (".jsonl", "jsonl")])
def test_round_trip_keeps_every_column_and_meta(tmp_path, small_trace, suffix, fmt):
    out = tmp_path / f"t{suffix}"
    small_trace.save(out)
    assert detect_format(out) == fmt
    back = tracesynth.load(out)
    assert back.events.equals(small_trace.events)
    assert back.meta.workload == "unit" and back.meta.kernel_version == "6.1"
    assert back.meta.source_format == "test"  # the original source's format is kept


def test_no_partial_output_on_failure(tmp_path, small_trace):
    out = tmp_path / "t.parquet"

    def batches():
        yield from small_trace.batches()
        raise RuntimeError("boom")

    from tracesynth.sinks import write_batches

    with pytest.raises(RuntimeError):
        write_batches(batches(), small_trace.meta, out)
    assert list(tmp_path.iterdir()) == []


def test_bad_jsonl_line_is_named_and_lenient_skips(tmp_path, small_trace):
    out = tmp_path / "t.jsonl"
    small_trace.save(out)
    lines = out.read_text().splitlines()
    lines.insert(2, '{"ts": "not-a-number", "event": "x"}')
    out.write_text("\n".join(lines) + "\n")
    with pytest.raises(TraceFormatError, match=r"t\.jsonl:3: bad JSONL record"):
        tracesynth.load(out)
    back = tracesynth.load(out, lenient=True)
    assert len(back) == len(small_trace) and back.meta.skipped_records == 1


def test_csv_missing_required_column(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("ts,cpu\n1,0\n")
    with pytest.raises(TraceFormatError, match="missing required column 'event'"):
        tracesynth.load(bad, format="csv")


def test_empty_and_unknown_inputs(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    with pytest.raises(TraceFormatError, match="empty file"):
        tracesynth.load(empty)
    with pytest.raises(TraceFormatError, match="not a CTF trace"):
        tracesynth.load(tmp_path)
    with pytest.raises(TraceFormatError, match="no such file"):
        tracesynth.load(tmp_path / "missing.parquet")


@pytest.mark.parametrize("name,says", [
    ("export.parquet", "named .parquet but not parquet data: no Parquet magic bytes 'PAR1'"),
    ("export.csv", "named .csv but not csv data: its header line does not name both 'ts' and 'event'"),
    ("export.jsonl", "named .jsonl but not jsonl data: its first line is not a JSON object"),
])
def test_a_table_name_over_other_content_says_what_the_content_lacks(tmp_path, name, says):
    """A file named like a table format that none of the readers recognises (a corrupt or
    mislabelled export) is refused with what its content lacks, the file named."""
    bad = tmp_path / name
    bad.write_bytes(b"\x00\x01 not a trace at all, @@@\nsecond line ###\n")
    with pytest.raises(TraceFormatError, match="pass --format") as raised:
        tracesynth.load(bad)
    message = str(raised.value)
    assert says in message and name in message


def test_a_csv_value_that_does_not_convert_is_named_with_its_line(tmp_path):
    """Arrow names the column and the value but not where; the error gives the line."""
    rows = ["ts,event,cpu"] + [f"{1000 + i},syscall_entry_read,0" for i in range(5000)]
    rows[3001] = "10x0,syscall_entry_read,0"
    bad = tmp_path / "bad.csv"
    bad.write_text("\n".join(rows) + "\n")
    with pytest.raises(TraceFormatError, match=r"bad.csv \(line 3002\): bad CSV .*invalid value '10x0'"):
        tracesynth.load(bad)

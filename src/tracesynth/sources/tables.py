"""TraceSynth's own table formats: Parquet (canonical), CSV and JSONL.

All three go through pyarrow's streaming readers, so large files convert in bounded memory.
CSV and JSONL cannot carry trace metadata in-band; a sidecar ``<file>.meta.json`` (written by
the matching sinks) is read when present.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from tracesynth.errors import TraceFormatError
from tracesynth.schema import BATCH_ROWS, COLUMNS, SCHEMA, TraceMeta, conform, read_parquet_meta
from tracesynth.sources.base import SourceReader


def sidecar_path(path: Path) -> Path:
    return path.with_name(path.name + ".meta.json")


def _load_sidecar(reader: SourceReader) -> None:
    side = sidecar_path(reader.path)
    if side.exists():
        try:
            meta = TraceMeta.from_json(side.read_text())
        except (ValueError, TypeError) as exc:
            raise TraceFormatError(side, None, f"bad metadata sidecar ({exc})") from None
        meta.source_path = meta.source_path or str(reader.path)
        reader.meta = meta


def _check_columns(path: Path, names: list[str]) -> None:
    for required in ("ts", "event"):
        if required not in names:
            raise TraceFormatError(
                path, "header", f"missing required column {required!r} (have: {', '.join(names)})"
            )


class ParquetReader(SourceReader):
    format = "parquet"
    description = "TraceSynth canonical table (Apache Parquet, zstd)"
    suffixes = (".parquet", ".pq")
    lacks = "no Parquet magic bytes 'PAR1' at its start"

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        return head[:4] == b"PAR1"

    def __init__(self, path, *, lenient=False):
        super().__init__(path, lenient=lenient)
        self.meta = read_parquet_meta(self.path)
        self.meta.source_path = self.meta.source_path or str(self.path)

    def batches(self) -> Iterator[pa.RecordBatch]:
        try:
            pf = pq.ParquetFile(self.path)
            _check_columns(self.path, pf.schema_arrow.names)
            for batch in pf.iter_batches(batch_size=BATCH_ROWS):
                table = conform(pa.Table.from_batches([batch]))
                yield from table.to_batches()
        except (pa.ArrowInvalid, OSError) as exc:
            raise TraceFormatError(self.path, None, f"corrupt Parquet file ({exc})") from None


class CsvReader(SourceReader):
    format = "csv"
    description = "CSV with the canonical columns as header (payload as JSON text)"
    suffixes = (".csv",)
    lacks = "its header line does not name both 'ts' and 'event' columns"

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        first = head.split(b"\n", 1)[0].decode("utf-8", "replace").strip()
        first = [name.strip().strip('"') for name in first.split(",")]
        return "ts" in first and "event" in first

    def __init__(self, path, *, lenient=False):
        super().__init__(path, lenient=lenient)
        _load_sidecar(self)

    def batches(self) -> Iterator[pa.RecordBatch]:
        if self.path.stat().st_size == 0:
            raise TraceFormatError(self.path, 1, "empty file")
        types = {f.name: f.type for f in SCHEMA}
        convert = pacsv.ConvertOptions(column_types=types, strings_can_be_null=True)
        parse = pacsv.ParseOptions(
            invalid_row_handler=self._invalid_row if self.lenient else None
        )
        read = pacsv.ReadOptions(block_size=1 << 22)
        try:
            stream = pacsv.open_csv(
                self.path, read_options=read, parse_options=parse, convert_options=convert
            )
            _check_columns(self.path, stream.schema.names)
            for batch in stream:
                yield from conform(pa.Table.from_batches([batch])).to_batches()
        except pa.ArrowInvalid as exc:
            raise TraceFormatError(self.path, _row_of(exc) or _line_of_bad_value(self.path, exc),
                                   f"bad CSV ({exc})") from None

    def _invalid_row(self, row) -> str:
        self.meta.skipped_records += 1
        return "skip"


_BAD_VALUE = re.compile(r"column #(\d+): CSV conversion error to [^:]+: invalid value '(.*)'", re.S)


def _line_of_bad_value(path: Path, exc: Exception) -> str | None:
    """The line of the value Arrow could not convert: its message names the column and the
    value but not where (Arrow reads in blocks), so the error path reads the file again with the
    csv module until that value turns up in that column."""
    found = _BAD_VALUE.search(str(exc))
    if not found:
        return None
    column, value = int(found.group(1)), found.group(2)
    with open(path, newline="", encoding="utf-8", errors="replace") as fh:
        reader = csv.reader(fh)
        for row in reader:
            if len(row) > column and row[column] == value and reader.line_num > 1:
                return f"line {reader.line_num}"
    return None


def _row_of(exc: Exception) -> str | None:
    text = str(exc)
    marker = "Row #"
    if marker in text:
        return "row " + text.split(marker, 1)[1].split(":", 1)[0]
    return None


class JsonlReader(SourceReader):
    format = "jsonl"
    description = "JSON Lines, one canonical event object per line"
    suffixes = (".jsonl", ".ndjson")
    lacks = "its first line is not a JSON object with 'ts' and 'event' keys"

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        line = head.split(b"\n", 1)[0].strip()
        if not line.startswith(b"{"):
            return False
        try:
            obj = json.loads(line)
        except ValueError:
            return False
        return isinstance(obj, dict) and "ts" in obj and "event" in obj

    def __init__(self, path, *, lenient=False):
        super().__init__(path, lenient=lenient)
        _load_sidecar(self)

    def batches(self) -> Iterator[pa.RecordBatch]:
        # Parsed line by line (not pyarrow.json) so that a bad line is reported by number and
        # --lenient can skip exactly that line.
        from tracesynth.sources.rows import RowBuffer

        buf = RowBuffer()
        with open(self.path, encoding="utf-8", errors="replace") as fh:
            seen = False
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                seen = True
                try:
                    obj = json.loads(line)
                    payload = obj.get("payload")
                    if isinstance(payload, str):
                        payload = json.loads(payload) if payload else None
                    buf.append(
                        ts=int(obj["ts"]),
                        event=str(obj["event"]),
                        cpu=_opt_int(obj.get("cpu")),
                        tid=_opt_int(obj.get("tid")),
                        pid=_opt_int(obj.get("pid")),
                        procname=obj.get("procname"),
                        ret=_opt_int(obj.get("ret")),
                        payload=payload,
                    )
                except (ValueError, KeyError, TypeError, AttributeError) as exc:
                    self.skip_or_raise(lineno, f"bad JSONL record ({exc.__class__.__name__}: {exc})")
                    continue
                if buf.full():
                    yield buf.flush()
            if not seen:
                raise TraceFormatError(self.path, 1, "empty file")
        yield from buf.drain()


def _opt_int(value) -> int | None:
    return None if value is None else int(value)


__all__ = ["ParquetReader", "CsvReader", "JsonlReader", "COLUMNS"]

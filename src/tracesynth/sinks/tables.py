"""Writers for TraceSynth's own table formats: Parquet (canonical), CSV, JSONL.

CSV and JSONL cannot hold trace metadata in-band, so it goes to a ``<file>.meta.json``
sidecar that the matching readers pick up.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv

from tracesynth.schema import SCHEMA, write_parquet_batches
from tracesynth.sinks.base import MetaArg, SinkWriter, resolve_meta


class ParquetSink(SinkWriter):
    format = "parquet"
    description = "canonical table, Apache Parquet (zstd) with metadata in the footer"
    suffixes = (".parquet", ".pq")

    def write(self, batches: Iterable[pa.RecordBatch], meta: MetaArg, path: Path) -> int:
        return write_parquet_batches(batches, meta, path)


class CsvSink(SinkWriter):
    format = "csv"
    description = "CSV, canonical columns, payload as JSON text (+ .meta.json sidecar)"
    suffixes = (".csv",)

    def write(self, batches: Iterable[pa.RecordBatch], meta: MetaArg, path: Path) -> int:
        rows = 0
        with pacsv.CSVWriter(path, SCHEMA) as writer:
            for batch in batches:
                writer.write_batch(batch)
                rows += batch.num_rows
        _write_sidecar(path, resolve_meta(meta))
        return rows


class JsonlSink(SinkWriter):
    format = "jsonl"
    description = "JSON Lines, one event object per line (+ .meta.json sidecar)"
    suffixes = (".jsonl", ".ndjson")

    def write(self, batches: Iterable[pa.RecordBatch], meta: MetaArg, path: Path) -> int:
        rows = 0
        with open(path, "w", encoding="utf-8") as fh:
            for batch in batches:
                for row in batch.to_pylist():
                    payload = row.pop("payload")
                    row["payload"] = json.loads(payload) if payload else None
                    fh.write(json.dumps(row, separators=(",", ":")) + "\n")
                rows += batch.num_rows
        _write_sidecar(path, resolve_meta(meta))
        return rows


def _write_sidecar(path: Path, meta) -> None:
    # The sidecar is named after the final file name; `path` is the temporary one, so the
    # caller's final name is recovered from the temp-name convention of fileio.atomic_path.
    from tracesynth.fileio import final_name

    side = path.with_name(final_name(path) + ".meta.json")
    side.write_text(meta.to_json() + "\n")

"""Readers: every supported input format → canonical record batches.

    open_reader(path)          → a SourceReader (format auto-detected, or forced)
    read_trace(path)           → a whole Trace in memory
    ingest(src, out_parquet)   → streaming conversion to the canonical Parquet table
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa

from tracesynth.errors import ConfigError
from tracesynth.schema import Trace, TraceMeta
from tracesynth.sources.base import SourceReader
from tracesynth.sources.detect import detect_format, registry


def open_reader(
    path: str | Path, format: str | None = None, *, lenient: bool = False, vocab: str | Path | None = None
) -> SourceReader:
    """Open `path` with the reader of `format` (auto-detected when None).

    `vocab` (event-id sequences only) maps ids to event names; see docs/sources-text.md.
    """
    fmt = format or detect_format(path)
    readers = registry()
    if fmt not in readers:
        raise ConfigError(f"unknown format {fmt!r}; choose one of: {', '.join(readers)}")
    if vocab is not None:
        if fmt != "eventids":
            raise ConfigError(f"{path}: --vocab applies to event-id sequences, not {fmt}")
        return readers[fmt](path, lenient=lenient, vocab=vocab)
    return readers[fmt](path, lenient=lenient)


def _apply(meta: TraceMeta, workload: str | None, anonymise: bool = False) -> TraceMeta:
    if workload:
        meta.workload = workload
    return meta.anonymised() if anonymise else meta


def read_trace(
    path: str | Path, format: str | None = None, *, lenient: bool = False, workload: str | None = None
) -> Trace:
    reader = open_reader(path, format, lenient=lenient)
    batches = list(reader.batches())
    return Trace.from_batches(batches, _apply(reader.meta, workload))


def ingest(
    src: str | Path,
    out: str | Path,
    format: str | None = None,
    *,
    lenient: bool = False,
    workload: str | None = None,
    anonymise: bool = False,
    vocab: str | Path | None = None,
    on_batch: Callable[[pa.RecordBatch], None] | None = None,
) -> TraceMeta:
    """Convert `src` to a canonical Parquet file at `out` in bounded memory (atomic write).

    Metadata that readers complete only at the end (skipped records, lost events) lands in
    the Parquet footer, which is written last.
    """
    reader = open_reader(src, format, lenient=lenient, vocab=vocab)

    def stream() -> Iterator[pa.RecordBatch]:
        for batch in reader.batches():
            if on_batch:
                on_batch(batch)
            yield batch

    from tracesynth.sinks import write_batches

    write_batches(stream(), lambda: _apply(reader.meta, workload, anonymise), out, format="parquet")
    return _apply(reader.meta, workload, anonymise)


__all__ = ["SourceReader", "detect_format", "ingest", "open_reader", "read_trace", "registry"]

"""Writers: canonical record batches → every supported output format.

    write_batches(batches, meta, out, format)  streaming, atomic
    write_trace(trace, out, format)            a Trace in memory
    export(src, out, format)                   any readable input → any format
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa

from tracesynth.errors import ConfigError
from tracesynth.fileio import atomic_path
from tracesynth.sinks.base import MetaArg, SinkWriter


def registry() -> dict[str, type[SinkWriter]]:
    from tracesynth.sinks import ctf, tables, text

    sinks = [tables.ParquetSink, tables.CsvSink, tables.JsonlSink, text.TextSink, ctf.CtfSink]
    return {s.format: s for s in sinks}


def sink_for(path: str | Path, format: str | None = None) -> SinkWriter:
    sinks = registry()
    if format:
        if format not in sinks:
            raise ConfigError(f"unknown output format {format!r}; choose one of: {', '.join(sinks)}")
        return sinks[format]()
    suffix = Path(path).suffix.lower()
    for sink in sinks.values():
        if suffix in sink.suffixes:
            return sink()
    raise ConfigError(
        f"{path}: cannot tell the output format from the suffix {suffix or '(none)'!r}; "
        f"pass --format ({', '.join(sinks)})"
    )


def write_batches(
    batches: Iterable[pa.RecordBatch], meta: MetaArg, out: str | Path, format: str | None = None
) -> int:
    sink = sink_for(out, format)
    with atomic_path(out, directory=sink.directory) as tmp:
        return sink.write(batches, meta, tmp)


def write_trace(trace, out: str | Path, format: str | None = None) -> Path:
    write_batches(trace.batches(), trace.meta, out, format)
    return Path(out)


def export(src: str | Path, out: str | Path, format: str | None = None, *, in_format: str | None = None,
           lenient: bool = False) -> int:
    from tracesynth.sources import open_reader

    reader = open_reader(src, in_format, lenient=lenient)
    return write_batches(reader.batches(), lambda: reader.meta, out, format)


__all__ = ["SinkWriter", "export", "registry", "sink_for", "write_batches", "write_trace"]

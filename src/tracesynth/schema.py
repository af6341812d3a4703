"""The canonical trace table: one row per kernel event, whatever tracer produced it.

Every reader produces this table and every writer, generator and metric consumes it, so the
rest of TraceSynth never sees a tracer's quirks. Columns (see docs/trace-format.md):

    ts        int64   nanoseconds on the trace clock (absolute: clock offset already applied)
    cpu       int32   CPU the event was recorded on (null when the source has no CPU, e.g. strace)
    tid       int64   thread id (null when unknown, e.g. before a CPU's first sched_switch)
    pid       int64   process id / tgid (null when unknown)
    procname  string  thread's command name (null when unknown)
    event     string  event name in LTTng kernel naming (syscall_entry_<name>, sched_switch, ...)
    ret       int64   syscall return value on syscall_exit_* events, null elsewhere
    payload   string  JSON object with the remaining fields (prev_tid, next_comm, fd, ...)

Trace-level metadata (`TraceMeta`) travels in the Parquet schema metadata under the key
``tracesynth`` as JSON, so a single file is self-describing.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tracesynth.errors import TraceFormatError

SCHEMA_VERSION = 1
META_KEY = b"tracesynth"

#: Column names in their canonical order.
COLUMNS = ("ts", "cpu", "tid", "pid", "procname", "event", "ret", "payload")

SCHEMA = pa.schema(
    [
        pa.field("ts", pa.int64(), nullable=False),
        pa.field("cpu", pa.int32()),
        pa.field("tid", pa.int64()),
        pa.field("pid", pa.int64()),
        pa.field("procname", pa.string()),
        pa.field("event", pa.string(), nullable=False),
        pa.field("ret", pa.int64()),
        pa.field("payload", pa.string()),
    ]
)

SYSCALL_ENTRY_PREFIX = "syscall_entry_"
SYSCALL_EXIT_PREFIX = "syscall_exit_"

#: Rows per record batch used by streaming readers and writers.
BATCH_ROWS = 65536


@dataclass
class TraceMeta:
    """What a trace is, beyond its rows. Plain data; round-trips through JSON."""

    source_format: str = "unknown"
    source_path: str | None = None
    tracer: str | None = None
    tracer_version: str | None = None
    kernel_version: str | None = None
    hostname: str | None = None
    workload: str | None = None
    run: str | None = None
    clock_name: str | None = None
    clock_offset_ns: int = 0
    command: str | None = None
    n_cpus: int | None = None
    lost_events: int = 0
    skipped_records: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> TraceMeta:
        data = json.loads(text)
        known = {f.name for f in dataclasses.fields(cls)}
        extra = dict(data.pop("extra", {}) or {})
        for key in list(data):
            if key not in known:
                extra[key] = data.pop(key)
        return cls(**data, extra=extra)

    def anonymised(self) -> TraceMeta:
        """A copy with the host name replaced by a stable, non-reversible tag."""
        import hashlib

        copy = dataclasses.replace(self, extra=dict(self.extra))
        if copy.hostname:
            copy.hostname = "host-" + hashlib.sha256(copy.hostname.encode()).hexdigest()[:8]
        return copy


def schema_with_meta(meta: TraceMeta) -> pa.Schema:
    return SCHEMA.with_metadata({META_KEY: meta.to_json().encode()})


def empty_table() -> pa.Table:
    return SCHEMA.empty_table()


def conform(table: pa.Table) -> pa.Table:
    """Cast a table with canonical column names to the canonical schema (order, types)."""
    missing = [c for c in COLUMNS if c not in table.column_names]
    n = table.num_rows
    arrays = []
    for f in SCHEMA:
        if f.name in missing:
            if not f.nullable:
                raise ValueError(f"column {f.name!r} is required")
            arrays.append(pa.nulls(n, f.type))
        else:
            col = table.column(f.name)
            arrays.append(col.cast(f.type) if col.type != f.type else col)
    return pa.Table.from_arrays(arrays, schema=SCHEMA)


class Trace:
    """A kernel trace: an Arrow table of canonical events plus `TraceMeta`.

    >>> trace = tracesynth.load("run.parquet")
    >>> trace.events.num_rows, trace.meta.workload
    """

    def __init__(self, events: pa.Table, meta: TraceMeta | None = None):
        self.events = conform(events.replace_schema_metadata(None))
        self.meta = meta if meta is not None else TraceMeta()

    # --- construction -------------------------------------------------------------------
    @classmethod
    def from_batches(cls, batches: Iterable[pa.RecordBatch], meta: TraceMeta) -> Trace:
        table = pa.Table.from_batches(list(batches), schema=SCHEMA)
        return cls(table, meta)

    @classmethod
    def from_pydict(cls, columns: dict[str, list], meta: TraceMeta | None = None) -> Trace:
        return cls(pa.table(columns), meta)

    @classmethod
    def from_pandas(cls, frame, meta: TraceMeta | None = None) -> Trace:
        return cls(pa.Table.from_pandas(frame, preserve_index=False), meta)

    # --- access -------------------------------------------------------------------------
    def __len__(self) -> int:
        return self.events.num_rows

    def __repr__(self) -> str:
        return (
            f"Trace({len(self)} events, format={self.meta.source_format!r}, "
            f"workload={self.meta.workload!r})"
        )

    def to_pandas(self):
        return self.events.to_pandas()

    def column(self, name: str) -> pa.ChunkedArray:
        return self.events.column(name)

    def slice(self, start: int, length: int | None = None) -> Trace:
        return Trace(self.events.slice(start, length), dataclasses.replace(self.meta))

    def batches(self, rows: int = BATCH_ROWS) -> Iterator[pa.RecordBatch]:
        yield from self.events.to_batches(max_chunksize=rows)

    def with_meta(self, **changes) -> Trace:
        return Trace(self.events, dataclasses.replace(self.meta, **changes))

    # --- persistence --------------------------------------------------------------------
    def save(self, path: str | Path, format: str | None = None) -> Path:
        """Write the trace atomically; the format follows the suffix unless given."""
        from tracesynth.sinks import write_trace

        return write_trace(self, path, format=format)


def write_parquet_batches(
    batches: Iterable[pa.RecordBatch], meta: TraceMeta | Callable[[], TraceMeta], path: str | Path
) -> int:
    """Stream record batches into a zstd Parquet file at `path` (not atomic: callers wrap it
    in `atomic_path`). Returns the row count.

    `meta` may be a callable: it is called after the last batch, because some readers learn
    trace-level facts (skipped records, lost events) only at the end of their input. The
    metadata goes into the file footer, which Parquet writes last.
    """
    rows = 0
    with pq.ParquetWriter(path, SCHEMA, compression="zstd", store_schema=False) as writer:
        for batch in batches:
            if batch.num_rows:
                writer.write_batch(batch)
                rows += batch.num_rows
        final = meta() if callable(meta) else meta
        writer.add_key_value_metadata({META_KEY: final.to_json().encode()})
    return rows


def read_parquet_meta(path: str | Path) -> TraceMeta:
    try:
        schema = pq.read_schema(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise TraceFormatError(path, None, f"not a readable Parquet file ({exc})") from None
    raw = (schema.metadata or {}).get(META_KEY)
    meta = TraceMeta.from_json(raw) if raw else TraceMeta()
    return meta

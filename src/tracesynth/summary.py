"""A human-sized summary of a trace: counts, span, threads, CPUs, top events.

Used by `tracesynth info` and `make demo`; returns plain data so it can be printed or saved.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import pyarrow.compute as pc

from tracesynth.schema import SYSCALL_ENTRY_PREFIX, SYSCALL_EXIT_PREFIX, Trace


@dataclass
class TraceSummary:
    events: int
    duration_s: float
    first_ts: int | None
    last_ts: int | None
    distinct_events: int
    threads: int
    processes: int
    cpus: int
    unknown_thread_events: int
    syscall_entries: int
    syscall_exits: int
    top_events: list[tuple[str, int]] = field(default_factory=list)
    top_processes: list[tuple[str, int]] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def _top(column, k: int) -> list[tuple[str, int]]:
    counts = pc.value_counts(column.drop_null() if hasattr(column, "drop_null") else column)
    pairs = [(str(v["values"]), int(v["counts"])) for v in counts.to_pylist()]
    pairs.sort(key=lambda p: (-p[1], p[0]))
    return pairs[:k]


def summarize(trace: Trace, top: int = 10) -> TraceSummary:
    ev = trace.events
    n = ev.num_rows
    ts = ev.column("ts")
    first = pc.min(ts).as_py() if n else None
    last = pc.max(ts).as_py() if n else None
    event = ev.column("event")
    entries = pc.sum(pc.starts_with(event, SYSCALL_ENTRY_PREFIX)).as_py() or 0
    exits = pc.sum(pc.starts_with(event, SYSCALL_EXIT_PREFIX)).as_py() or 0
    return TraceSummary(
        events=n,
        duration_s=((last - first) / 1e9) if n else 0.0,
        first_ts=first,
        last_ts=last,
        distinct_events=pc.count_distinct(event).as_py() if n else 0,
        threads=pc.count_distinct(ev.column("tid").drop_null()).as_py() if n else 0,
        processes=pc.count_distinct(ev.column("pid").drop_null()).as_py() if n else 0,
        cpus=pc.count_distinct(ev.column("cpu").drop_null()).as_py() if n else 0,
        unknown_thread_events=ev.column("tid").null_count,
        syscall_entries=entries,
        syscall_exits=exits,
        top_events=_top(event, top) if n else [],
        top_processes=_top(ev.column("procname"), top) if n else [],
    )

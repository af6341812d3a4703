"""Text writer: one line per event in the shape of babeltrace2's default (``pretty``) output.

    [08:36:01.211275239] (+0.000014700) lager kmem_kfree: { cpu_id = 1 }, { tid = 12, pid = 12, procname = "bash" }, { call_site = 3204596480, ptr = 3454753792 }

People who read kernel traces know this layout, and `grep`/`awk` recipes written for
babeltrace2 work on it. Each line shows what babeltrace2 prints for the same row once the
CTF sink has written it (``babeltrace2 --clock-gmt``): the time of day in UTC, the delta from
the previous line, the host, the packet context (``cpu_id``, 0 when unknown), the event
context (-1 / "" when unknown) and the payload with canonical ``ret`` as its first field.
Two differences remain, both because a text line is written from its own row alone: a
payload key missing from a row is not shown (the CTF event would carry a default), and
integers are always decimal (babeltrace2 prints some LTTng fields in hex).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa

from tracesynth.errors import TraceFormatError
from tracesynth.sinks.base import MetaArg, SinkWriter, resolve_meta
from tracesynth.sinks.ctf import event_fields

NS_PER_S = 1_000_000_000
NS_PER_DAY = 86_400 * NS_PER_S
#: babeltrace2's string escapes: C escapes, \e, and \xNN for the other control characters.
_ESCAPES = str.maketrans(
    {chr(code): f"\\x{code:02x}" for code in (*range(0x20), 0x7F)}
    | dict(zip("\a\b\t\n\v\f\r\x1b", ("\\a", "\\b", "\\t", "\\n", "\\v", "\\f", "\\r", "\\e")))
    | {"\\": "\\\\", '"': '\\"', "'": "\\'"}
)


def time_of_day(ts: int) -> str:
    """``HH:MM:SS.nnnnnnnnn`` of a ns timestamp, in UTC."""
    seconds, ns = divmod(ts % NS_PER_DAY, NS_PER_S)
    hours, rest = divmod(seconds, 3600)
    return f"{hours:02d}:{rest // 60:02d}:{rest % 60:02d}.{ns:09d}"


def delta(ns: int | None) -> str:
    """``+S.nnnnnnnnn`` seconds since the previous line; babeltrace2's placeholder for the first."""
    if ns is None:
        return "+?.?????????"
    sign = "+" if ns >= 0 else "-"
    seconds, rest = divmod(abs(ns), NS_PER_S)
    return f"{sign}{seconds}.{rest:09d}"


def format_value(value: Any) -> str:
    """A field value as babeltrace2 prints it: quoted escaped strings, decimal integers,
    ``[ [0] = 1, [1] = 2 ]`` arrays; booleans as 0/1 and objects as JSON text, as the CTF
    sink writes them."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return '"' + value.translate(_ESCAPES) + '"'
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list) and all(type(v) is int for v in value):
        if not value:
            return "[ ]"
        return "[ " + ", ".join(f"[{i}] = {v}" for i, v in enumerate(value)) + " ]"
    return format_value(json.dumps(value, separators=(",", ":")))


def format_fields(fields: dict[str, Any]) -> str:
    """The payload braces. Keys sorted, ``ret`` first: the member order of the CTF sink."""
    if not fields:
        return "{ }"
    keys = sorted(fields)
    if "ret" in fields:
        keys.remove("ret")
        keys.insert(0, "ret")
    return "{ " + ", ".join(f"{key} = {format_value(fields[key])}" for key in keys) + " }"


class TextSink(SinkWriter):
    format = "text"
    description = "babeltrace2-style text, one event per line"
    suffixes = (".txt", ".text")

    def write(self, batches: Iterable[pa.RecordBatch], meta: MetaArg, path: Path) -> int:
        host: str | None = None
        rows = 0
        previous: int | None = None
        # backslashreplace: a lone surrogate (valid in JSON text, not in UTF-8) stays visible.
        with open(path, "w", encoding="utf-8", errors="backslashreplace") as out:
            for batch in batches:
                if host is None:
                    # A callable meta is complete only once the input is read, but readers
                    # know the host name before their first batch.
                    host = resolve_meta(meta).hostname or "-"
                columns = batch.to_pydict()
                lines = []
                for ts, cpu, tid, pid, procname, event, ret, payload in zip(
                    columns["ts"], columns["cpu"], columns["tid"], columns["pid"],
                    columns["procname"], columns["event"], columns["ret"], columns["payload"],
                ):
                    try:
                        fields = event_fields(ret, payload)
                    except ValueError as exc:
                        raise TraceFormatError(None, f"row {rows + len(lines)}", str(exc)) from None
                    context = format_value(procname or "")
                    lines.append(
                        f"[{time_of_day(ts)}] ({delta(None if previous is None else ts - previous)}) "
                        f"{host} {event}: {{ cpu_id = {cpu or 0} }}, "
                        f"{{ tid = {-1 if tid is None else tid}, pid = {-1 if pid is None else pid}, "
                        f"procname = {context} }}, {format_fields(fields)}\n"
                    )
                    previous = ts
                out.writelines(lines)
                rows += len(lines)
        return rows


__all__ = ["TextSink", "format_fields", "format_value", "time_of_day"]

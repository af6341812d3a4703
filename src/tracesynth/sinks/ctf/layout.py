"""Pass 1 of the CTF writer: the CTF field layout of each event name's payload, learned from the rows.

Trace-IR field classes freeze once an event uses them, but a field may first appear late in
the input. So the writer first streams every row past `LayoutCollector`, which learns, per
event name, the union of payload fields and their types (`FieldLayout`); the bt2 graph is
built from that afterwards. Pure Python: nothing here needs babeltrace2, so the text sink
can share `event_fields` without it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from tracesynth.errors import TraceFormatError

INT64_MIN, INT64_MAX, UINT64_MAX = -(2**63), 2**63 - 1, 2**64 - 1
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


# --- the CTF view of one canonical row (shared with the text sink) ------------------------------


def event_fields(ret: int | None, payload: str | None) -> dict[str, Any]:
    """The payload fields a CTF event gets for a row: the JSON object, with a non-null
    canonical ``ret`` as field ``ret`` placed first (where LTTng's syscall_exit_* has it)."""
    fields = json.loads(payload) if payload else None
    if fields is None:
        fields = {}
    elif not isinstance(fields, dict):
        raise ValueError(f"payload is not a JSON object: {payload[:60]!r}")
    if ret is not None:
        fields.pop("ret", None)
        fields = {"ret": ret, **fields}
    return fields


def length_field_name(array_name: str) -> str:
    """LTTng's name for a sequence's length field (TSDL ``__vtids_length``, read ``_vtids_length``)."""
    return f"_{array_name}_length"


# --- pass 1: what each event class holds --------------------------------------------------------

#: Field kinds, each mapping to one trace-IR field class (see `graph._payload_class`).
S64, U64, DOUBLE, STRING, BOOL, S64_ARRAY, U64_ARRAY, JSON = (
    "s64", "u64", "double", "string", "bool", "s64[]", "u64[]", "json",
)
DEFAULTS = {S64: 0, U64: 0, DOUBLE: 0.0, STRING: "", BOOL: False, S64_ARRAY: [], U64_ARRAY: [], JSON: "null"}


class _FieldStats:
    """What pass 1 saw of one payload key of one event name.

    Pass 1 runs on every row, so `observe` only records what changes the field class: the
    value's type, and for integers whether any falls outside int64 (then uint64 or text).
    """

    __slots__ = ("kinds", "negative", "low", "high", "list_lengths", "absent")

    def __init__(self, absent: bool = False):
        self.kinds: set[type] = set()
        self.negative = False  # some integer < 0
        self.low = 0  # smallest / largest integer outside the int64 range, else 0
        self.high = 0
        self.list_lengths: set[int] = set()
        self.absent = absent  # missing (or null) in at least one event of this name

    def observe(self, value: Any) -> None:
        kind = type(value)
        if kind is int:
            if value < 0 or value > INT64_MAX:
                self._note_range(value)
        elif kind is list:
            if all(type(v) is int for v in value):
                self.list_lengths.add(len(value))
                for item in value:
                    if item < 0 or item > INT64_MAX:
                        self._note_range(item)
            else:
                kind = dict  # a list of anything else is written as JSON text, like objects
        elif value is None:
            self.absent = True
            return
        self.kinds.add(kind)

    def _note_range(self, value: int) -> None:
        if value < 0:
            self.negative = True
            self.low = min(self.low, value) if value < INT64_MIN else self.low
        else:
            self.high = max(self.high, value)

    def kind(self) -> str:
        if len(self.kinds) != 1:
            return JSON  # mixed types (or only nulls): keep every value, as text
        only = next(iter(self.kinds))
        if only in (int, list):
            if self.low == 0 and self.high == 0:
                return S64 if only is int else S64_ARRAY
            if not self.negative and self.high <= UINT64_MAX:
                return U64 if only is int else U64_ARRAY
            return JSON
        return {float: DOUBLE, str: STRING, bool: BOOL}.get(only, JSON)


@dataclass(frozen=True)
class FieldLayout:
    """One payload member of an event class: the canonical key, the CTF member name, its kind.

    Arrays carry a length member (``length_name``) unless every value had the same length
    (``static_length``), which is written as a fixed-size array like LTTng's ``_args[6]``.
    """

    key: str
    name: str
    kind: str
    static_length: int | None = None
    length_name: str | None = None


def _member_name(key: str) -> str:
    """A valid CTF identifier for a payload key (they nearly always are already)."""
    if _IDENTIFIER.match(key):
        return key
    name = re.sub(r"[^A-Za-z0-9_]", "_", key)
    return name if _IDENTIFIER.match(name) else "_" + name


class LayoutCollector:
    """Pass 1: learns event classes, CPUs and the time range while the rows stream past."""

    def __init__(self) -> None:
        self.stats: dict[str, dict[str, _FieldStats]] = {}
        self.seen: dict[str, int] = {}  # events per name
        self.cpus: set[int] = set()
        self.first_ts: int | None = None
        self.last_ts: int | None = None
        self.rows = 0

    def observe(self, batch: pa.RecordBatch) -> None:
        columns = [batch.column(name).to_pylist() for name in ("ts", "cpu", "event", "ret", "payload")]
        for ts, cpu, event, ret, payload in zip(*columns):
            if self.last_ts is not None and ts < self.last_ts:
                raise TraceFormatError(
                    None, f"row {self.rows}", f"ts {ts} is before the previous row's {self.last_ts}: "
                    "CTF needs events in time order; sort the trace first",
                )
            if self.first_ts is None:
                self.first_ts = ts
            self.last_ts = ts
            if cpu is not None and cpu < 0:
                raise TraceFormatError(None, f"row {self.rows}", f"negative cpu {cpu}")
            self.cpus.add(cpu or 0)
            try:
                fields = event_fields(ret, payload)
            except ValueError as exc:
                raise TraceFormatError(None, f"row {self.rows}", str(exc)) from None
            stats = self.stats.setdefault(event, {})
            count = self.seen.get(event, 0)
            for key, value in fields.items():
                entry = stats.get(key)
                if entry is None:
                    entry = stats[key] = _FieldStats(absent=count > 0)
                entry.observe(value)
            if len(fields) < len(stats):
                for key, entry in stats.items():
                    if key not in fields:
                        entry.absent = True
            self.seen[event] = count + 1
            self.rows += 1

    def layouts(self) -> dict[str, list[FieldLayout]]:
        """Per event name, its payload members in writing order."""
        return {event: _layout(stats) for event, stats in self.stats.items()}


def _layout(stats: dict[str, _FieldStats]) -> list[FieldLayout]:
    keys = sorted(stats)
    if "ret" in stats:  # canonical ret leads, as in LTTng's syscall_exit_* events
        keys.remove("ret")
        keys.insert(0, "ret")
    kinds = {key: stats[key].kind() for key in keys}
    arrays = {key for key, kind in kinds.items() if kind in (S64_ARRAY, U64_ARRAY)}
    # A key "_x_length" next to an array "x" is the array's length (a CTF reader keeps
    # sequence lengths as fields): it becomes the array's length member, not a field of its own.
    lengths = {length_field_name(key): key for key in arrays if length_field_name(key) in stats}
    layout, used = [], set()
    for key in keys:
        if key in lengths:
            continue
        name = _member_name(key)
        while name in used:
            name += "_"
        used.add(name)
        kind = kinds[key]
        if key in arrays:
            sizes = stats[key].list_lengths
            if key not in lengths.values() and len(sizes) == 1 and not stats[key].absent:
                layout.append(FieldLayout(key, name, kind, static_length=next(iter(sizes))))
                continue
            length_name = length_field_name(name)
            used.add(length_name)
            layout.append(FieldLayout(key, name, kind, length_name=length_name))
        else:
            layout.append(FieldLayout(key, name, kind))
    return layout

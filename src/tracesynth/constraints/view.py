"""A columnar, decode-once view of a trace that every rule reads.

Rules must check 200k+ events/s, so nothing here loops over rows in Python: events and
process names are dictionary-encoded to integer codes, nullable integer columns become
numpy arrays with -1 (or a validity mask) for null, and payload JSON is decoded only for the
event names a rule asks about, once per name, then cached.
"""

from __future__ import annotations

import json
from functools import cached_property

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from tracesynth.errors import TraceFormatError
from tracesynth.schema import Trace

ENTRY, EXIT = 1, 2
_PREFIXES = (
    ("syscall_entry_", ENTRY), ("syscall_exit_", EXIT),
    ("compat_syscall_entry_", ENTRY), ("compat_syscall_exit_", EXIT),
    ("sys_enter_", ENTRY), ("sys_exit_", EXIT),
)
#: Exit names that carry no syscall name (old LTTng `exit_syscall`): they match any entry.
GENERIC_EXIT_NAMES = frozenset({"exit_syscall", "syscall_exit_syscall", "sys_exit"})
GENERIC = "*"


def parse_syscall(event: str) -> tuple[int, str]:
    """(ENTRY|EXIT|0, syscall name) of an event name; generic exits get the name ``*``."""
    if event in GENERIC_EXIT_NAMES:
        return EXIT, GENERIC
    for prefix, kind in _PREFIXES:
        if event.startswith(prefix):
            return kind, event[len(prefix):]
    return 0, ""


def is_generic_name(syscall: str) -> bool:
    return syscall == GENERIC or syscall.startswith("unknown_")


def _to_int(value) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value, 0)
        except ValueError:
            return None
    return None


def _nullable_ints(column: pa.ChunkedArray, fill: int = -1) -> np.ndarray:
    return pc.fill_null(column, fill).to_numpy().astype(np.int64, copy=False)


def _dictionary(column: pa.ChunkedArray) -> tuple[np.ndarray, list[str]]:
    """Integer codes (-1 for null) and the distinct values of a string column."""
    encoded = pc.dictionary_encode(column.combine_chunks() if column.num_chunks != 1 else column.chunk(0))
    codes = pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False).astype(np.int32)
    return codes, encoded.dictionary.to_pylist()


class TraceView:
    """Numpy columns of one trace plus lazily decoded payload fields (see module docstring)."""

    def __init__(self, trace: Trace | pa.Table, origin: np.ndarray | None = None,
                 single_thread: bool = False):
        table = trace.events if isinstance(trace, Trace) else trace
        self.source = trace.meta.source_path if isinstance(trace, Trace) else None
        self.table = table
        self.n = table.num_rows
        self.origin = np.arange(self.n, dtype=np.int64) if origin is None else origin
        self.ts = table.column("ts").to_numpy().astype(np.int64, copy=False)
        self.cpu = _nullable_ints(table.column("cpu"))
        self.tid = _nullable_ints(table.column("tid"))
        self.pid = _nullable_ints(table.column("pid"))
        # A light trace of one thread (event + ts only): per-thread rules see thread 1, but
        # that thread is the rules' assumption, not data: rows it writes keep a null tid.
        self.tid_assumed = bool(single_thread and self.n and not (self.tid >= 0).any())
        if self.tid_assumed:
            self.tid = np.ones(self.n, np.int64)
        ret = table.column("ret")
        self.ret_valid = pc.is_valid(ret).to_numpy(zero_copy_only=False)
        self.ret = _nullable_ints(ret, 0)
        if self.n:
            self.ev_code, self.ev_names = _dictionary(table.column("event"))
            self.proc_code, self.proc_names = _dictionary(table.column("procname"))
        else:
            self.ev_code, self.ev_names = np.zeros(0, np.int32), []
            self.proc_code, self.proc_names = np.zeros(0, np.int32), []
        self._payload = table.column("payload")
        self._cache: dict = {}
        parsed = [parse_syscall(name) for name in self.ev_names]
        self.code_kind = np.array([k for k, _ in parsed], dtype=np.int8)
        names = sorted({s for k, s in parsed if k})
        self.syscall_names = names
        index = {s: i for i, s in enumerate(names)}
        self.code_scid = np.array([index[s] if k else -1 for k, s in parsed], dtype=np.int32)
        self.generic_scid = index.get(GENERIC, -2)
        # Per syscall id (+1 slot for -1): exits of this name match any pending entry (old
        # LTTng `exit_syscall`, and raw_syscalls exits of unknown number such as
        # rt_sigreturn's `unknown_-1`).
        self.scid_generic = np.array([is_generic_name(s) for s in names] + [False], bool)

    # --- channels ------------------------------------------------------------------------
    @cached_property
    def has_cpu(self) -> bool:
        return bool(self.n) and bool((self.cpu >= 0).any())

    @cached_property
    def has_tid(self) -> bool:
        return bool(self.n) and bool((self.tid >= 0).any())

    @cached_property
    def has_pid(self) -> bool:
        return bool(self.n) and bool((self.pid >= 0).any())

    @cached_property
    def has_ret(self) -> bool:
        return bool(self.ret_valid.any())

    @cached_property
    def has_procname(self) -> bool:
        return bool(self.n) and bool((self.proc_code >= 0).any())

    @cached_property
    def has_payload(self) -> bool:
        return self._payload.null_count < self.n

    def has_channel(self, name: str) -> bool:
        if name in ("event", "ts"):
            return self.n > 0
        return getattr(self, f"has_{name}")

    # --- events --------------------------------------------------------------------------
    def code(self, name: str) -> int:
        try:
            return self.ev_names.index(name)
        except ValueError:
            return -1

    def has_event(self, name: str) -> bool:
        return self.code(name) >= 0

    def rows_of(self, *names: str) -> np.ndarray:
        """Row indices (ascending) whose event is one of `names`."""
        codes = [c for c in (self.code(n) for n in names) if c >= 0]
        if not codes:
            return np.zeros(0, np.int64)
        if len(codes) == 1:
            return np.flatnonzero(self.ev_code == codes[0])
        return np.flatnonzero(np.isin(self.ev_code, codes))

    @cached_property
    def kind(self) -> np.ndarray:
        """Per row: 0, ENTRY or EXIT."""
        return self.code_kind[self.ev_code] if self.n else np.zeros(0, np.int8)

    @cached_property
    def scid(self) -> np.ndarray:
        """Per row: syscall id (index into `syscall_names`), -1 for non-syscall events."""
        return self.code_scid[self.ev_code] if self.n else np.zeros(0, np.int32)

    def syscall_rows(self, names) -> np.ndarray:
        """Rows that are entries or exits of any of the syscall `names`."""
        ids = [i for i, s in enumerate(self.syscall_names) if s in names]
        if not ids:
            return np.zeros(0, np.int64)
        return np.flatnonzero(np.isin(self.scid, ids))

    # --- payload -------------------------------------------------------------------------
    def _decoded_code(self, code: int) -> tuple[np.ndarray, list[dict]]:
        key = ("rows", code)
        if key not in self._cache:
            rows = np.flatnonzero(self.ev_code == code)
            texts = self._payload.take(pa.array(rows)).to_pylist() if len(rows) else []
            dicts = []
            for row, text in zip(rows.tolist(), texts):
                try:
                    value = json.loads(text) if text else {}
                except json.JSONDecodeError:
                    raise TraceFormatError(self.source, f"row {row}",
                                           f"payload is not JSON: {text[:60]!r}") from None
                dicts.append(value if isinstance(value, dict) else {})
            self._cache[key] = (rows, dicts)
        return self._cache[key]

    def _rows_of_code(self, code: int) -> np.ndarray:
        key = ("code-rows", code)
        if key not in self._cache:
            self._cache[key] = np.flatnonzero(self.ev_code == code)
        return self._cache[key]

    def _json_lines(self, code: int):
        """The payloads of one event name as newline-delimited JSON bytes (cached)."""
        key = ("lines", code)
        if key not in self._cache:
            rows = self._rows_of_code(code)
            texts = pc.fill_null(self._payload.take(pa.array(rows)), "{}").combine_chunks()
            lines = pc.binary_join_element_wise(texts, pa.scalar("", pa.string()), "\n")
            offsets = lines.buffers()[1]
            start = int(np.frombuffer(offsets, np.int32, 1, lines.offset * 4)[0])
            end = int(np.frombuffer(offsets, np.int32, 1, (lines.offset + len(lines)) * 4)[0])
            self._cache[key] = lines.buffers()[2][start:end]
        return self._cache[key]

    def _read_json(self, code: int, schema: pa.Schema | None):
        data = self._json_lines(code)
        parse = (pa_json.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
                 if schema is not None else pa_json.ParseOptions())
        try:
            table = pa_json.read_json(
                pa.BufferReader(data), parse_options=parse,
                read_options=pa_json.ReadOptions(use_threads=False, block_size=max(1 << 20, len(data) + 1)))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None
        return table if table.num_rows == len(self._rows_of_code(code)) else None

    def _bulk_int_field(self, code: int, name: str):
        """Integer field `name` of every payload of one event name, parsed by pyarrow's JSON
        reader (one pass per event name for all its fields; 5x faster than json.loads per
        row). None when a value is not a plain int64 (then decode per row)."""
        key = ("inferred", code)
        if key not in self._cache:
            self._cache[key] = self._read_json(code, None)
        table = self._cache[key]
        if table is not None and name not in table.column_names:
            n = len(self._rows_of_code(code))
            return np.zeros(n, np.int64), np.zeros(n, bool)
        if table is None or not pa.types.is_integer(table.column(name).type):
            table = self._read_json(code, pa.schema([(name, pa.int64())]))
            if table is None:
                return None
        col = table.column(name)
        return (pc.fill_null(col, 0).to_numpy().astype(np.int64, copy=False),
                pc.is_valid(col).to_numpy(zero_copy_only=False))

    def field(self, events, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(values, valid) over all rows for the integer payload field `name` of `events`.

        Rows of other events, and rows whose field is absent or not an integer, are invalid.
        """
        events = (events,) if isinstance(events, str) else tuple(events)
        key = ("field", events, name)
        if key not in self._cache:
            values = np.zeros(self.n, np.int64)
            valid = np.zeros(self.n, bool)
            for event in events:
                code = self.code(event)
                if code < 0:
                    continue
                rows = self._rows_of_code(code)
                fast = self._bulk_int_field(code, name) if len(rows) else None
                if fast is not None:
                    got_values, got_valid = fast
                    values[rows[got_valid]] = got_values[got_valid]
                    valid[rows[got_valid]] = True
                    continue
                rows, dicts = self._decoded_code(code)
                got = [_to_int(d.get(name)) for d in dicts]
                ok = np.array([g is not None for g in got], bool)
                if ok.any():
                    values[rows[ok]] = [g for g in got if g is not None]
                    valid[rows[ok]] = True
            self._cache[key] = (values, valid)
        return self._cache[key]

    def exec_tids(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rows, tid after, tid before) of sched_process_exec events. LTTng before 2.3
        named these fields pid/old_pid (thread ids all the same)."""
        new, ok = self.field("sched_process_exec", "tid")
        old, ok_old = self.field("sched_process_exec", "old_tid")
        if not ok.any():
            new, ok = self.field("sched_process_exec", "pid")
            old, ok_old = self.field("sched_process_exec", "old_pid")
        rows = np.flatnonzero(ok)
        return rows, new[rows], np.where(ok_old[rows], old[rows], new[rows])

    def text_field(self, row: int, name: str):
        code = int(self.ev_code[row])
        rows, dicts = self._decoded_code(code)
        i = int(np.searchsorted(rows, row))
        return dicts[i].get(name) if i < len(rows) and rows[i] == row else None

    # --- helpers shared by rules --------------------------------------------------------
    def ts_before(self, row: int) -> int:
        """The timestamp of an event inserted just before `row`: halfway between the previous
        event and `row` (integer ns), or `row`'s own where there is no gap to split. Real
        kernel clocks almost never repeat a timestamp, so an insert at `row`'s time would add a
        zero gap that no real trace has."""
        ts = int(self.ts[row])
        if row == 0:
            return ts
        return ts - (ts - int(self.ts[row - 1])) // 2

    def memo(self, key, compute):
        """Cache a derived array (e.g. syscall pairing) for the other rules of one check."""
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]

    def row_info(self, row: int) -> dict:
        return {
            "row": int(self.origin[row]) if row < self.n else None,
            "ts": int(self.ts[row]),
            "tid": self.known_tid(row),
            "cpu": int(self.cpu[row]) if self.cpu[row] >= 0 else None,
            "event": self.ev_names[self.ev_code[row]],
        }

    def known_tid(self, row: int) -> int | None:
        """The row's tid as the trace has it (None when unknown or only assumed)."""
        return None if self.tid_assumed or self.tid[row] < 0 else int(self.tid[row])


def group_order(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Stable order of rows by `keys`, and a bool array 'same key as the previous in order'."""
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    same = np.zeros(len(order), bool)
    if len(order) > 1:
        same[1:] = sorted_keys[1:] == sorted_keys[:-1]
    return order, same


def thread_keys(tids: np.ndarray, rows: np.ndarray, stride: int) -> np.ndarray:
    """Sortable int64 keys ordering rows by (thread, row). Uses tid directly when the product
    fits in int64 (real tids are < 2^22), else the rank of the tid among the given ones."""
    tids = np.asarray(tids, np.int64)
    if len(tids) and (tids.min() < 0 or int(tids.max()) >= (1 << 62) // max(stride, 1)):
        tids = np.unique(tids, return_inverse=True)[1].astype(np.int64)
    return tids * stride + rows


def cpu_order(cpu: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """`rows` stably ordered by CPU (radix sort on small ints)."""
    keys = cpu[rows]
    if len(keys) and keys.max() < 32767:
        keys = keys.astype(np.int16)
    return rows[np.argsort(keys, kind="stable")]

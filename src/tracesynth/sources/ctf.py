"""LTTng kernel traces (CTF 1.8) → canonical rows, read with babeltrace2's `bt2` bindings.

Why not `bt2.TraceCollectionMessageIterator`: it always inserts babeltrace2's muxer, which
aborts on traces whose packets overlap in time (scp_src/scp_dest stop after ~11.7k events).
So the reader builds its own graph, ``src.ctf.fs`` → one sink input port per data stream,
pulls each stream lazily in small chunks, drops packet messages and merges the streams by
timestamp with a heap (stable: ties keep stream order, then in-stream order).

Decoding calls `bt2._native_bt` (the C layer under bt2's objects) through one decoder plan
per event class (member indexes, field kinds, names), built once; messages stay raw owned
pointers. bt2's object API costs ~17 µs per event; this path reads ~120k events/s whole.
Tied to bt2 2.0.x internals on purpose (Debian python3-bt2 2.0.4); tests pin the behaviour.

Thread attribution (no event context in LTTng's default kernel channel) follows Trace
Compass; see docs/sources-ctf.md and `ThreadState`.
"""

from __future__ import annotations

import collections
import heapq
import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from tracesynth.errors import TraceFormatError
from tracesynth.schema import SYSCALL_ENTRY_PREFIX, SYSCALL_EXIT_PREFIX
from tracesynth.sources.base import SourceReader
from tracesynth.sources.rows import RowBuffer

#: Messages pulled from one stream per graph step: bounds memory (streams × chunk).
CHUNK_MESSAGES = 4096
#: Linux TASK_COMM_LEN - 1: exec sets comm to the file's basename, truncated to this.
COMM_MAX = 15
#: Event-context fields used as-is when present (``lttng add-context -t tid -t pid ...``).
CONTEXT_IDENTITY = ("tid", "pid", "procname")
#: Payload member that carries a syscall's return value.
RET_FIELD = "ret"
UNKNOWN_SYSCALL_EXIT = SYSCALL_EXIT_PREFIX + "unknown"


def _bt2():
    """`bt2` is imported here only: the rest of TraceSynth must not need babeltrace2."""
    try:
        import bt2
        import bt2.native_bt  # noqa: F401  (the low-level module the hot loop uses)
    except ImportError as exc:  # pragma: no cover - depends on the host
        raise TraceFormatError(
            None, None, f"reading CTF needs babeltrace2's bt2 (apt install python3-bt2): {exc}"
        ) from None
    return bt2


# --- field decoding ---------------------------------------------------------------------


def _field_decoder(nbt, field_class) -> Callable[[Any], Any]:
    """A function field-pointer → JSON-able value, specialised on the field class once."""
    ftype = nbt.field_class_get_type(field_class)
    is_type = nbt.field_class_type_is
    if is_type(ftype, nbt.FIELD_CLASS_TYPE_UNSIGNED_INTEGER):  # also unsigned enums
        return nbt.field_integer_unsigned_get_value
    if is_type(ftype, nbt.FIELD_CLASS_TYPE_SIGNED_INTEGER):  # also signed enums
        return nbt.field_integer_signed_get_value
    if ftype == nbt.FIELD_CLASS_TYPE_STRING:
        # babeltrace2 2.0.4 leaves a recycled string field's old bytes in place when the new
        # string is empty (length 0): get_value then returns a stale string from an earlier
        # event (the babeltrace2 CLI prints it too). The length is right, so check it first.
        get_value, get_length = nbt.field_string_get_value, nbt.field_string_get_length
        return lambda f: get_value(f) if get_length(f) else ""
    if ftype == nbt.FIELD_CLASS_TYPE_BOOL:
        return lambda f: bool(nbt.field_bool_get_value(f))
    if ftype == nbt.FIELD_CLASS_TYPE_BIT_ARRAY:
        return nbt.field_bit_array_get_value_as_integer
    if ftype == nbt.FIELD_CLASS_TYPE_SINGLE_PRECISION_REAL:
        return nbt.field_real_single_precision_get_value
    if ftype == nbt.FIELD_CLASS_TYPE_DOUBLE_PRECISION_REAL:
        return nbt.field_real_double_precision_get_value
    if ftype == nbt.FIELD_CLASS_TYPE_STRUCTURE:
        members = _struct_plan(nbt, field_class)
        borrow = nbt.field_structure_borrow_member_field_by_index_const
        return lambda f: {name: dec(borrow(f, i)) for name, i, dec in members}
    if is_type(ftype, nbt.FIELD_CLASS_TYPE_ARRAY):
        element_class = nbt.field_class_array_borrow_element_field_class_const(field_class)
        element = _field_decoder(nbt, element_class)
        length = nbt.field_array_get_length
        borrow = nbt.field_array_borrow_element_field_by_index_const
        return lambda f: [element(borrow(f, i)) for i in range(length(f))]
    if is_type(ftype, nbt.FIELD_CLASS_TYPE_OPTION):
        inner = _field_decoder(nbt, nbt.field_class_option_borrow_field_class_const(field_class))

        def option(f):
            content = nbt.field_option_borrow_field_const(f)
            return None if content is None else inner(content)

        return option
    if is_type(ftype, nbt.FIELD_CLASS_TYPE_VARIANT):
        count = nbt.field_class_variant_get_option_count(field_class)
        options = [
            _field_decoder(
                nbt,
                nbt.field_class_variant_option_borrow_field_class_const(
                    nbt.field_class_variant_borrow_option_by_index_const(field_class, i)
                ),
            )
            for i in range(count)
        ]
        return lambda f: options[nbt.field_variant_get_selected_option_index(f)](
            nbt.field_variant_borrow_selected_option_field_const(f)
        )
    return lambda f: None  # a field kind CTF 1.8 cannot produce


def _struct_plan(nbt, struct_class) -> list[tuple[str, int, Callable]]:
    """(name, member index, decoder) per member; sequence-length members are left out
    (a list's length says the same thing, and CTF writers add them back)."""
    count = nbt.field_class_structure_get_member_count(struct_class)
    lengths: set[int] = set()
    plan = []
    for i in range(count):
        member = nbt.field_class_structure_borrow_member_by_index_const(struct_class, i)
        fc = nbt.field_class_structure_member_borrow_field_class_const(member)
        if nbt.field_class_get_type(fc) == nbt.FIELD_CLASS_TYPE_DYNAMIC_ARRAY_WITH_LENGTH_FIELD:
            length_path = nbt.field_class_array_dynamic_with_length_field_borrow_length_field_path_const
            path = length_path(fc)
            if nbt.field_path_get_item_count(path) >= 1:
                last = nbt.field_path_borrow_item_by_index_const(
                    path, nbt.field_path_get_item_count(path) - 1
                )
                if nbt.field_path_item_get_type(last) == nbt.FIELD_PATH_ITEM_TYPE_INDEX:
                    lengths.add(nbt.field_path_item_index_get_index(last))
        plan.append((nbt.field_class_structure_member_get_name(member), i, _field_decoder(nbt, fc)))
    return [entry for entry in plan if entry[1] not in lengths]


KIND_PLAIN, KIND_SYSCALL_EXIT, KIND_LEGACY_EXIT, KIND_LEGACY_ENTRY, KIND_SWITCH = range(5)


class EventPlan:
    """Everything about one event class that the hot loop would otherwise look up per event:
    canonical name, what the name implies (`kind`), payload and context decoders."""

    __slots__ = ("name", "kind", "exit_name", "payload", "context", "has_identity")

    def __init__(self, nbt, event_ptr, name: str, legacy_names: bool):
        self.kind = KIND_PLAIN
        self.exit_name = None
        if legacy_names and name == "exit_syscall":
            self.kind = KIND_LEGACY_EXIT
        elif legacy_names and (entry := _legacy_entry_name(name)) is not None:
            name = entry
            self.kind = KIND_LEGACY_ENTRY
            self.exit_name = entry.replace(SYSCALL_ENTRY_PREFIX, SYSCALL_EXIT_PREFIX, 1)
        elif name.startswith((SYSCALL_EXIT_PREFIX, "compat_" + SYSCALL_EXIT_PREFIX)):
            self.kind = KIND_SYSCALL_EXIT
        elif name == "sched_switch":
            self.kind = KIND_SWITCH
        self.name = name
        payload = nbt.event_borrow_payload_field_const(event_ptr)
        self.payload = (
            _struct_plan(nbt, nbt.field_borrow_class_const(payload)) if payload is not None else []
        )
        context = []
        for borrow in (
            nbt.event_borrow_common_context_field_const,
            nbt.event_borrow_specific_context_field_const,
        ):
            field = borrow(event_ptr)
            if field is not None:
                context.append((borrow, _struct_plan(nbt, nbt.field_borrow_class_const(field))))
        self.context = context
        members = {member for _, fields in context for member, _, _ in fields}
        self.has_identity = "tid" in members


def _decode_struct(nbt, field, plan) -> dict[str, Any]:
    borrow = nbt.field_structure_borrow_member_field_by_index_const
    return {name: dec(borrow(field, i)) for name, i, dec in plan}


# --- event naming -----------------------------------------------------------------------


def _legacy_syscall_names(tracer: str | None, major: int | None, minor: int | None) -> bool:
    """lttng-modules before 2.6 named syscall entries ``sys_<name>`` / ``compat_sys_<name>``
    and had one ``exit_syscall`` for every exit."""
    if tracer not in (None, "lttng-modules"):
        return False
    return major is None or (major, minor or 0) < (2, 6)


def _legacy_entry_name(name: str) -> str | None:
    if name.startswith("sys_"):
        return SYSCALL_ENTRY_PREFIX + name[4:]
    if name.startswith("compat_sys_"):
        return "compat_" + SYSCALL_ENTRY_PREFIX + name[11:]
    return None


# --- thread attribution -----------------------------------------------------------------


class ThreadState:
    """Who runs where, derived from scheduler and process events as Trace Compass does.

    `running[cpu]` is the tid switched in by the last ``sched_switch`` on that CPU (absent
    before the first switch: unknown, never guessed). `pid_of`/`comm_of` map tids to their
    tgid and command name, fed by statedump, fork, exec, exit and switch events.
    """

    __slots__ = ("running", "pid_of", "comm_of", "idle_comm")
    #: The only events `observe` learns from (the hot loop skips the call for the others).
    EVENTS = frozenset(
        {
            "sched_switch",
            "lttng_statedump_process_state",
            "sched_process_fork",
            "sched_process_exec",
            "sched_process_exit",
        }
    )

    def __init__(self):
        self.running: dict[int, int] = {}
        self.pid_of: dict[int, int] = {0: 0}
        self.comm_of: dict[int, str] = {}
        self.idle_comm: dict[int, str] = {}  # tid 0 is one idle thread per CPU

    def identity(self, cpu, tid) -> tuple[int | None, str | None]:
        if tid is None:
            return None, None
        if tid == 0:
            return 0, self.idle_comm.get(cpu)
        return self.pid_of.get(tid), self.comm_of.get(tid)

    def _name(self, cpu, tid, comm) -> None:
        if tid is None or not comm:
            return
        if tid == 0:
            self.idle_comm[cpu] = comm
        else:
            self.comm_of[tid] = comm

    def observe(self, event: str, cpu, payload: dict[str, Any], tid) -> int | None:
        """Update the state from one event; return the tid the event itself belongs to."""
        get = payload.get
        if event == "sched_switch":
            prev_tid, next_tid = get("prev_tid"), get("next_tid")
            self._name(cpu, prev_tid, get("prev_comm"))
            self._name(cpu, next_tid, get("next_comm"))
            if next_tid is not None and cpu is not None:
                self.running[cpu] = next_tid
            # The switch runs in the outgoing thread (what a tid context field would say).
            return prev_tid if prev_tid is not None else tid
        if event == "lttng_statedump_process_state":
            t = get("tid")
            if t is not None and t != 0:
                if get("pid") is not None:
                    self.pid_of[t] = get("pid")
                self._name(cpu, t, get("name"))
        elif event == "sched_process_fork":
            parent, child = get("parent_tid"), get("child_tid")
            if parent is not None and get("parent_pid") is not None:
                self.pid_of.setdefault(parent, get("parent_pid"))
            if child is not None:
                if get("child_pid") is not None:
                    self.pid_of[child] = get("child_pid")
                else:
                    self.pid_of.pop(child, None)  # thread or process: unknown, not guessed
                self._name(cpu, child, get("child_comm"))
        elif event == "sched_process_exec":
            t = get("tid", tid)
            filename = get("filename")
            if t is not None and filename:
                self._name(cpu, t, os.path.basename(filename)[:COMM_MAX])
        elif event == "sched_process_exit":
            self._name(cpu, get("tid"), get("comm"))
        return tid


class SyscallPairing:
    """Names old-style ``exit_syscall`` events after the entry they close, per thread.

    A pending entry on a CPU whose thread is still unknown is kept under the CPU and handed
    to the thread that the CPU's first ``sched_switch`` switches out.
    """

    __slots__ = ("pending", "unmatched")

    def __init__(self):
        self.pending: dict[Any, str] = {}
        self.unmatched = 0

    @staticmethod
    def _key(cpu, tid):
        return ("cpu", cpu) if tid is None else tid

    def enter(self, cpu, tid, syscall_exit_name: str) -> None:
        self.pending[self._key(cpu, tid)] = syscall_exit_name

    def exit(self, cpu, tid) -> str:
        name = self.pending.pop(self._key(cpu, tid), None)
        if name is None:
            self.unmatched += 1
            return UNKNOWN_SYSCALL_EXIT
        return name

    def switched_out(self, cpu, prev_tid) -> None:
        orphan = self.pending.pop(("cpu", cpu), None)
        if orphan is not None and prev_tid is not None:
            self.pending.setdefault(prev_tid, orphan)


# --- errors -----------------------------------------------------------------------------

_LOG_LINE_RE = re.compile(r" [EW] PLUGIN/\S+ \S+ \[\w+\] (.*)$")
_OFFSET_RE = re.compile(r"(?:packet-)?offset(?:-in-bytes)?=(\d+)")
_LINE_RE = re.compile(r"(?:at line|line[ =:]+)\s*(\d+)", re.I)
_STREAM_RE = re.compile(r"(?:stream|path|file)=\"?([^\s\",]+)")
_ADDR_RE = re.compile(r",?\s*[\w-]+-addr=0x[0-9a-fA-F]+")  # pointers mean nothing to a user
_QUOTED_PATH_RE = re.compile(r"[`'\"](/[^`'\"]+)[`'\"]")


class CtfFailure:
    """Where and why babeltrace2 gave up, from its error causes and (if needed) its log."""

    def __init__(self, causes: list[str], log: list[str]):
        self.causes = causes
        self.log = log
        text = log + causes
        self.file: Path | None = None
        self.offset: int | None = None
        self.line: int | None = None
        self.packet: int | None = None
        for entry in text:
            if self.offset is None and (m := _OFFSET_RE.search(entry)):
                self.offset = int(m.group(1))
                if (f := _STREAM_RE.search(entry)) is not None:
                    self.file = Path(f.group(1))
            if self.line is None and (m := _LINE_RE.search(entry)):
                self.line = int(m.group(1))
        if self.file is None:
            for entry in causes:  # innermost cause first: it names the stream file at fault
                if (m := _QUOTED_PATH_RE.search(entry)) is not None:
                    self.file = Path(m.group(1))
                    break
        specific = [e for e in log if "offset" in e or "line" in e] or log or causes
        detail = _ADDR_RE.sub("", specific[0]) if specific else "unreadable CTF"
        self.detail = re.sub(r":\s*,\s*", ": ", detail).rstrip(": ")

    @classmethod
    def from_error(cls, exc: Exception, log: list[str] | None = None) -> CtfFailure:
        try:
            causes = [" ".join(str(c.message).split()) for c in exc]  # bt2._Error: its causes
        except TypeError:
            causes = [" ".join(str(exc).split())]
        return cls([c for c in causes if c], log or [])

    def as_error(self, trace_dir: Path, shown_dir: Path, default: Path) -> TraceFormatError:
        file = self.file if self.file is not None and self.file != trace_dir else default
        try:
            file = shown_dir / file.relative_to(trace_dir)
        except ValueError:
            pass
        position: str | int | None = None
        if self.offset is not None:
            position = f"byte offset {self.offset}"
        elif self.packet is not None:
            position = f"packet index {self.packet}"
        elif self.line is not None:
            position = self.line
        detail = self.detail.replace(str(trace_dir), str(shown_dir))
        if len(detail) > 240:
            detail = detail[:237] + "..."
        return TraceFormatError(file, position, f"babeltrace2 cannot read this CTF trace: {detail}")


def _captured_log(bt2, trace_dir: Path) -> list[str]:
    """Re-run ``src.ctf.fs`` initialisation with logging on and capture its stderr lines.

    bt2's error causes say *which* file failed; only its log says at which offset or line.
    """
    import tempfile

    lines: list[str] = []
    with tempfile.TemporaryFile() as sink:
        saved = os.dup(2)
        try:
            sys.stderr.flush()
            os.dup2(sink.fileno(), 2)
            try:
                graph = bt2.Graph()
                fs = bt2.find_plugin("ctf").source_component_classes["fs"]
                graph.add_component(
                    fs, "diagnose", params={"inputs": [str(trace_dir)]},
                    logging_level=bt2.LoggingLevel.WARNING,
                )
            except bt2._Error:
                pass
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        sink.seek(0)
        for raw in sink.read().decode("utf-8", "replace").splitlines():
            if (m := _LOG_LINE_RE.search(raw)) is not None:
                lines.append(m.group(1).strip())
    return lines


# --- the graph --------------------------------------------------------------------------


class _StreamPuller:
    """State shared between the Python side and the sink component of one graph."""

    def __init__(self, n_ports: int):
        self.want = 0
        self.buffers = [collections.deque() for _ in range(n_ports)]
        self.done = [False] * n_ports
        self.errors: list[Exception | None] = [None] * n_ports


def _sink_class(bt2):
    nbt = sys.modules["bt2._native_bt"]
    get_range = nbt.bt2_self_component_port_input_get_msg_range
    status_ok = nbt.__BT_FUNC_STATUS_OK
    handle_status = sys.modules["bt2.utils"]._handle_func_status

    class _PullSink(bt2._UserSinkComponent):
        """Owns one message iterator per stream; each graph step fills one stream's buffer.

        Messages are kept as raw owned pointers, not bt2 message objects: creating and
        finalising a Python object per event cost ~20% of the reader's time. Whoever pops
        a pointer from a buffer owns its reference (see `_release`).
        """

        def __init__(self, config, params, puller):
            self._puller = puller
            for i in range(len(puller.buffers)):
                self._add_input_port(f"in{i}")

        def _user_graph_is_configured(self):
            self._iterators = [self._create_message_iterator(p) for p in self._input_ports.values()]

        def _user_consume(self):
            puller = self._puller
            i = puller.want
            buffer = puller.buffers[i]
            iterator_ptr = self._iterators[i]._ptr
            try:
                while len(buffer) < CHUNK_MESSAGES:
                    status, messages = get_range(iterator_ptr)
                    if status == status_ok:
                        buffer.extend(messages)
                    else:
                        handle_status(status, "cannot read the next CTF messages")
            except StopIteration:  # bt2.Stop: the stream is finished
                puller.done[i] = True
            except bt2.TryAgain:
                pass
            except bt2._Error as exc:  # kept for the reader; the graph itself stays usable
                puller.done[i] = True
                puller.errors[i] = exc

    return _PullSink


def _release(nbt, items) -> None:
    """Drop our references to raw message pointers that will not be decoded."""
    for item in items:
        nbt.message_put_ref(item[3] if isinstance(item, tuple) else item)


# --- the reader -------------------------------------------------------------------------


class CtfReader(SourceReader):
    format = "ctf"
    description = "LTTng kernel trace (CTF 1.8 directory), read with babeltrace2 (bt2)"

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        if path.is_dir():
            return (path / "metadata").is_file()
        # A CTF metadata file itself: packetized (magic 0x75D11D57, either byte order) or TSDL text.
        magic = (b"\x57\x1d\xd1\x75", b"\x75\xd1\x1d\x57")
        return head[:4] in magic or head.startswith(b"/* CTF 1.8")

    def __init__(self, path, *, lenient: bool = False):
        super().__init__(path, lenient=lenient)
        if self.path.is_file() and self.path.name == "metadata":
            self.path = self.path.parent
        self.trace_dir = self.path
        metadata = self.trace_dir / "metadata"
        if not metadata.is_file():
            raise TraceFormatError(self.trace_dir, None, "not a CTF trace: no 'metadata' file")
        if metadata.stat().st_size == 0:
            raise TraceFormatError(metadata, 0, "empty CTF metadata file")
        self.meta.extra["trace_name"] = self.trace_dir.name

    # --- graph -----------------------------------------------------------------------------
    def _build_graph(self):
        """``src.ctf.fs`` → our sink, one port per data stream. In lenient mode a stream file
        that stops indexing (truncated or corrupt packet) is cut before that packet in a
        scratch copy of the trace, and the graph is built again."""
        bt2 = _bt2()
        source_dir = self.trace_dir
        for _ in range(64):
            graph = bt2.Graph()
            try:
                fs = bt2.find_plugin("ctf").source_component_classes["fs"]
                source = graph.add_component(fs, "source", params={"inputs": [str(source_dir)]})
                break
            except bt2._Error as exc:
                failure = CtfFailure.from_error(exc, _captured_log(bt2, source_dir))
                if not (self.lenient and self._salvage(source_dir, failure)):
                    metadata = self.trace_dir / "metadata"
                    raise failure.as_error(source_dir, self.trace_dir, metadata) from None
                source_dir = self._scratch
        ports = list(source.output_ports.values())
        if not ports:
            raise TraceFormatError(self.trace_dir, None, "CTF trace has no data stream files")
        puller = _StreamPuller(len(ports))
        sink = graph.add_component(_sink_class(bt2), "sink", obj=puller)
        for i, port in enumerate(ports):
            graph.connect_ports(port, sink.input_ports[f"in{i}"])
        return bt2, graph, puller, [p.name for p in ports], source_dir

    def _salvage(self, source_dir: Path, failure: CtfFailure) -> bool:
        """Keep the packets of `failure.file` before `failure.offset`; False if impossible."""
        import tempfile

        bad = failure.file
        if bad is None or failure.offset is None:
            return False
        if bad.parent != source_dir or bad.name == "metadata":
            return False
        if self._scratch is None:
            self._scratch = Path(tempfile.mkdtemp(prefix="tracesynth-ctf-"))
            for entry in self.trace_dir.iterdir():
                if entry.is_file():  # the index/ folder is left out: cut files would contradict it
                    (self._scratch / entry.name).symlink_to(entry.resolve())
        target = self._scratch / bad.name
        original = self.trace_dir / bad.name
        target.unlink(missing_ok=True)
        with open(original, "rb") as src, open(target, "wb") as dst:
            remaining = failure.offset
            while remaining > 0:
                chunk = src.read(min(remaining, 1 << 20))
                if not chunk:
                    break
                dst.write(chunk)
                remaining -= len(chunk)
        if failure.offset == 0:
            target.unlink()
        self.meta.skipped_records += 1
        self.meta.extra.setdefault("skipped", []).append(
            str(failure.as_error(source_dir, self.trace_dir, original))
        )
        self.meta.extra["skipped_bytes"] = self.meta.extra.get("skipped_bytes", 0) + (
            original.stat().st_size - failure.offset
        )
        return True

    def _cleanup(self) -> None:
        if self._scratch is not None:
            import shutil

            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

    def _stream_messages(self, bt2, graph, puller, index: int):
        """One stream's events as (ts, stream index, cpu, owned message pointer), lazily."""
        nbt = sys.modules["bt2._native_bt"]  # the C extension: one call layer less
        from bt2 import message as bt2_message

        get_type = nbt.message_get_type
        put_ref = nbt.message_put_ref
        event_type = nbt.MESSAGE_TYPE_EVENT
        packet_type = nbt.MESSAGE_TYPE_PACKET_BEGINNING
        packet_end_type = nbt.MESSAGE_TYPE_PACKET_END
        borrow_snapshot = nbt.message_event_borrow_default_clock_snapshot_const
        ns_from_origin = nbt.clock_snapshot_get_ns_from_origin
        buffer = puller.buffers[index]
        popleft = buffer.popleft
        cpu = None
        packets = 0  # packets begun in this stream
        packet_open = False
        while True:
            if not buffer:
                if puller.done[index]:
                    break
                puller.want = index
                graph.run_once()
                continue
            ptr = popleft()
            kind = get_type(ptr)
            if kind == event_type:
                status, ts = ns_from_origin(borrow_snapshot(ptr))
                yield ts, index, cpu, ptr
            elif kind == packet_end_type:
                packet_open = False
                put_ref(ptr)
            elif kind == packet_type:
                packets += 1
                packet_open = True
                cpu = self._packet_cpu(nbt, ptr, cpu)
                put_ref(ptr)
            else:  # rare: wrap it (the wrapper takes over our reference)
                self._other_message(bt2, bt2_message._create_from_ptr(ptr), cpu)
        error = puller.errors[index]
        if error is not None:
            failure = CtfFailure.from_error(error)
            if failure.offset is None:  # bt2 names no offset here: say which packet failed
                failure.packet = packets - 1 if packet_open else packets
            port_name = self._port_names[index]
            shown = failure.as_error(self._source_dir, self.trace_dir, self._stream_file(port_name))
            if not self.lenient:
                raise shown
            self.meta.skipped_records += 1
            self.meta.extra.setdefault("skipped", []).append(str(shown))

    def _packet_cpu(self, nbt, packet_msg_ptr, previous):
        packet = nbt.message_packet_beginning_borrow_packet_const(packet_msg_ptr)
        context = nbt.packet_borrow_context_field_const(packet)
        if context is None:
            return previous
        field = nbt.field_structure_borrow_member_field_by_name_const(context, "cpu_id")
        if field is None:
            return previous
        cpu = _field_decoder(nbt, nbt.field_borrow_class_const(field))(field)
        self._cpus.add(cpu)
        return cpu

    def _stream_file(self, port_name: str) -> Path:
        """Ports are named "<uuid> | <stream class id> | <file path or stream id>"."""
        tail = Path(port_name.rsplit(" | ", 1)[-1])
        return tail if tail.is_absolute() else self._source_dir

    def _other_message(self, bt2, msg, cpu) -> None:
        if isinstance(msg, bt2._StreamBeginningMessageConst):
            if not self._trace_seen:
                self._trace_seen = True
                self._fill_meta(msg.stream)
        elif isinstance(msg, bt2._DiscardedEventsMessageConst):
            count = msg.count
            extra = self.meta.extra
            self.meta.lost_events += count or 0
            lost = extra.setdefault("lost_events_per_cpu", {})
            lost[str(cpu)] = lost.get(str(cpu), 0) + (count or 0)
            if count is None:  # the tracer knew it lost events, not how many
                extra["lost_events_uncounted"] = extra.get("lost_events_uncounted", 0) + 1
        elif isinstance(msg, bt2._DiscardedPacketsMessageConst):
            extra = self.meta.extra
            extra["discarded_packets"] = extra.get("discarded_packets", 0) + (msg.count or 1)

    def _fill_meta(self, stream) -> None:
        trace = stream.trace
        env = {str(k): (int(v) if hasattr(v, "__int__") and not isinstance(v, str) else str(v))
               for k, v in trace.environment.items()}
        meta = self.meta
        meta.tracer = env.get("tracer_name")
        parts = [env.get(k) for k in ("tracer_major", "tracer_minor", "tracer_patchlevel")]
        if parts[0] is not None:
            meta.tracer_version = ".".join(str(p if p is not None else 0) for p in parts)
        meta.kernel_version = env.get("kernel_release") or meta.kernel_version
        meta.hostname = env.get("hostname") or meta.hostname
        if env.get("tracesynth_workload"):
            meta.workload = str(env["tracesynth_workload"])
        if env.get("domain") is not None:
            meta.extra["domain"] = env["domain"]
        if trace.name:
            meta.extra["trace_name"] = str(trace.name)
        if trace.uuid is not None:
            meta.extra["uuid"] = str(trace.uuid)
        clock = stream.cls.default_clock_class
        if clock is not None:
            meta.clock_name = clock.name
            offset = clock.offset
            meta.clock_offset_ns = (
                offset.seconds * 1_000_000_000 + offset.cycles * 1_000_000_000 // clock.frequency
            )
            meta.extra["clock_frequency_hz"] = clock.frequency
        self._legacy = _legacy_syscall_names(
            meta.tracer,
            _as_int(env.get("tracer_major")),
            _as_int(env.get("tracer_minor")),
        )

    # --- rows ------------------------------------------------------------------------------
    def batches(self) -> Iterator[pa.RecordBatch]:
        self._scratch: Path | None = None
        try:
            yield from self._rows()
        finally:
            self._cleanup()

    def _rows(self) -> Iterator[pa.RecordBatch]:
        bt2, graph, puller, port_names, self._source_dir = self._build_graph()
        nbt = sys.modules["bt2._native_bt"]  # the C extension: one call layer less
        self._cpus: set[int] = set()
        self._trace_seen = False
        self._legacy = False
        self._port_names = port_names
        streams = [self._stream_messages(bt2, graph, puller, i) for i in range(len(port_names))]
        buffer = RowBuffer()
        append = buffer.append
        threads = ThreadState()
        pairing = SyscallPairing()
        plans: dict[int, EventPlan] = {}
        borrow_event = nbt.message_event_borrow_event_const
        borrow_class = nbt.event_borrow_class_const
        borrow_payload = nbt.event_borrow_payload_field_const
        borrow_member = nbt.field_structure_borrow_member_field_by_index_const
        class_name = nbt.event_class_get_name
        observe = threads.observe
        identity = threads.identity
        pid_of, comm_of = threads.pid_of, threads.comm_of
        state_events = ThreadState.EVENTS
        running = threads.running
        batch_rows = buffer.batch_rows
        put_ref = nbt.message_put_ref
        n_events = 0
        heap: list[tuple] = []
        try:
            # A k-way merge like heapq.merge, but one that can hand back the message
            # references still held in its heap if reading stops early.
            heap = [head for stream in streams if (head := next(stream, None)) is not None]
            heapq.heapify(heap)
            while heap:
                ts, index, cpu, ptr = heap[0]  # (ts, stream index) is unique: ties → stream order
                following = next(streams[index], None)
                if following is None:
                    heapq.heappop(heap)
                else:
                    heapq.heapreplace(heap, following)
                try:
                    event_ptr = borrow_event(ptr)
                    class_ptr = borrow_class(event_ptr)
                    plan = plans.get(int(class_ptr))
                    if plan is None:
                        plan = plans[int(class_ptr)] = EventPlan(
                            nbt, event_ptr, class_name(class_ptr), self._legacy
                        )
                    name = plan.name
                    if plan.payload:
                        payload_field = borrow_payload(event_ptr)
                        payload = {
                            n: dec(borrow_member(payload_field, i)) for n, i, dec in plan.payload
                        }
                    else:
                        payload = {}
                    if plan.context:
                        context = self._context_identity(nbt, plan, event_ptr)
                finally:
                    put_ref(ptr)
                ret = None
                tid = running.get(cpu)
                kind = plan.kind
                if kind:
                    if kind == KIND_SYSCALL_EXIT:
                        ret = payload.pop(RET_FIELD, None)
                    elif kind == KIND_LEGACY_EXIT:
                        name = pairing.exit(cpu, tid)
                        ret = payload.pop(RET_FIELD, None)
                    elif kind == KIND_LEGACY_ENTRY:
                        pairing.enter(cpu, tid, plan.exit_name)
                    elif kind == KIND_SWITCH and pairing.pending:
                        pairing.switched_out(cpu, payload.get("prev_tid"))
                if name in state_events:
                    tid = observe(name, cpu, payload, tid)
                if plan.context:
                    payload.update(context[3])  # other context fields, as context_<name>
                if plan.has_identity:
                    tid, pid, procname = context[0], context[1], context[2]
                elif tid is None:
                    pid = procname = None
                elif tid:
                    pid, procname = pid_of.get(tid), comm_of.get(tid)
                else:
                    pid, procname = identity(cpu, tid)
                append(ts, name, cpu, tid, pid, procname, ret, payload)
                n_events += 1
                if n_events % batch_rows == 0:
                    yield buffer.flush()
            yield from buffer.drain()
        finally:
            _release(nbt, heap)
            for stream in streams:
                stream.close()
            for pending in puller.buffers:
                _release(nbt, pending)
                pending.clear()
        self.meta.n_cpus = len(self._cpus) or len(port_names)
        self.meta.extra["events"] = n_events
        self.meta.extra["streams"] = len(port_names)
        if pairing.unmatched:
            self.meta.extra["unmatched_syscall_exits"] = pairing.unmatched

    @staticmethod
    def _context_identity(nbt, plan: EventPlan, event_ptr):
        """tid/pid/procname from event-context fields; -1 and "" mean unknown."""
        values: dict[str, Any] = {}
        for borrow, fields in plan.context:
            values.update(_decode_struct(nbt, borrow(event_ptr), fields))
        tid, pid, procname = (values.pop(k, None) for k in CONTEXT_IDENTITY)
        tid = None if tid is None or tid < 0 else tid
        pid = None if pid is None or pid < 0 else pid
        procname = procname or None
        extra = {f"context_{k}": v for k, v in values.items()}
        return tid, pid, procname, extra


def _as_int(value) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


__all__ = ["CtfReader", "ThreadState", "SyscallPairing"]

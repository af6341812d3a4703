"""Pass 2 of the CTF writer: a Python bt2 source component feeding ``sink.ctf.fs``, and the metadata fix.

- babeltrace2's own ``sink.ctf.fs`` does the encoding; we only feed it trace-IR messages from a
  Python source component, so the output is whatever a real CTF producer would write.
- The per-event hot loop creates messages and sets fields through bt2's SWIG extension
  (``bt2._native_bt``, what the public wrappers call), at about a tenth of the wrappers' cost
  (see `_EventWriter`); classes, streams and packets are built with the public API.
- ``sink.ctf.fs`` prefixes every user field name with ``_`` in the TSDL it writes; Trace
  Compass looks up the packet context field ``cpu_id`` by its exact name, so `fix_metadata`
  renames ``_cpu_id`` back once the sink has finished.

`bt2` is imported on first use only: importing the sinks must not need babeltrace2.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from tracesynth.errors import TraceFormatError, TraceSynthError
from tracesynth.schema import TraceMeta
from tracesynth.sinks.ctf.layout import (
    BOOL,
    DEFAULTS,
    DOUBLE,
    S64,
    S64_ARRAY,
    STRING,
    U64,
    U64_ARRAY,
    FieldLayout,
    event_fields,
)

#: Tracer identity written to the env block: a modern lttng-modules, so that readers
#: (babeltrace2, Trace Compass) apply none of their workarounds for old tracer bugs.
TRACER_NAME = "lttng-modules"
TRACER_VERSION = (2, 13, 0)
CLOCK_NAME = "monotonic"
NS_PER_S = 1_000_000_000
#: Events per CTF packet (per CPU stream); LTTng's sub-buffers hold a few thousand events.
EVENTS_PER_PACKET = 4096
#: Event context fields, in the order ``lttng add-context -k -t tid -t pid -t procname`` gives.
CONTEXT_FIELDS = ("tid", "pid", "procname")


# --- pass 2: the bt2 graph ----------------------------------------------------------------------


@dataclass
class _Plan:
    """Everything the bt2 source component needs: learned layouts, the spill, the metadata."""

    spill: Path
    meta: TraceMeta
    layouts: dict[str, list[FieldLayout]]
    cpus: list[int]
    offset_s: int
    last_ts: int
    error: BaseException | None = None  # an exception raised inside the graph, re-raised outside


def _environment(meta: TraceMeta) -> dict[str, str | int]:
    major, minor, patch = TRACER_VERSION
    env: dict[str, str | int] = {
        "domain": "kernel",
        "tracer_name": TRACER_NAME,
        "tracer_major": major,
        "tracer_minor": minor,
        "tracer_patchlevel": patch,
    }
    if meta.kernel_version:
        env["kernel_release"] = meta.kernel_version
    if meta.hostname:
        env["hostname"] = meta.hostname
    if meta.workload:
        env["tracesynth_workload"] = meta.workload
    return env


def _payload_class(trace_class, layout: list[FieldLayout]):
    """The payload structure of one event class, one member per `FieldLayout` (plus the
    length member in front of each dynamic array, as LTTng lays out sequences)."""

    def integer(signed: bool):
        if signed:
            return trace_class.create_signed_integer_field_class(64)
        return trace_class.create_unsigned_integer_field_class(64)

    payload = trace_class.create_structure_field_class()
    for member in layout:
        kind = member.kind
        if kind in (S64_ARRAY, U64_ARRAY):
            element = integer(kind == S64_ARRAY)
            if member.static_length is not None:
                fc = trace_class.create_static_array_field_class(element, member.static_length)
            else:
                length = trace_class.create_unsigned_integer_field_class(64)
                payload.append_member(member.length_name, length)
                fc = trace_class.create_dynamic_array_field_class(element, length)
        elif kind in (S64, U64):
            fc = integer(kind == S64)
        elif kind == DOUBLE:
            fc = trace_class.create_double_precision_real_field_class()
        elif kind == BOOL:
            fc = trace_class.create_bool_field_class()
        else:  # STRING, JSON
            fc = trace_class.create_string_field_class()
        payload.append_member(member.name, fc)
    return payload


class _EventWriter:
    """Fills one event class's payload from a row's fields through ``bt2._native_bt``.

    The public wrappers (``event.payload_field["fd"] = 3``) build a Python object per field
    and check types on every assignment: ~4 µs a field. The SWIG calls below do the same
    work in ~0.3 µs; the types were settled in pass 1, so the checks add nothing.
    """

    def __init__(self, native, event_class, layout: list[FieldLayout]):
        self.native = native
        self.class_ptr = event_class._ptr
        self.members: list[tuple[int, str, str, Any, bool]] = []  # index, key, kind, default, has length
        index = 0
        for member in layout:
            dynamic = member.kind in (S64_ARRAY, U64_ARRAY) and member.static_length is None
            if dynamic:
                index += 1  # the length member precedes the array
            self.members.append((index, member.key, member.kind, DEFAULTS[member.kind], dynamic))
            index += 1

    def fill(self, struct_ptr, fields: dict[str, Any]) -> None:
        nb = self.native
        borrow = nb.field_structure_borrow_member_field_by_index
        for index, key, kind, default, dynamic in self.members:
            value = fields.get(key)
            if value is None:
                value = default
            target = borrow(struct_ptr, index)
            if kind == S64:
                nb.field_integer_signed_set_value(target, value)
            elif kind == STRING:
                _set_string(nb, target, value)
            elif kind == U64:
                nb.field_integer_unsigned_set_value(target, value)
            elif kind in (S64_ARRAY, U64_ARRAY):
                if dynamic:
                    nb.field_integer_unsigned_set_value(borrow(struct_ptr, index - 1), len(value))
                    if nb.field_array_dynamic_set_length(target, len(value)):
                        raise MemoryError("cannot size a CTF sequence field")
                setter = nb.field_integer_signed_set_value if kind == S64_ARRAY else nb.field_integer_unsigned_set_value
                element = nb.field_array_borrow_element_field_by_index
                for position, item in enumerate(value):
                    setter(element(target, position), item)
            elif kind == DOUBLE:
                nb.field_real_double_precision_set_value(target, float(value))
            elif kind == BOOL:
                nb.field_bool_set_value(target, bool(value))
            else:  # JSON
                _set_string(nb, target, value if isinstance(value, str) else json.dumps(value, separators=(",", ":")))


def _set_string(nb, target, value: str) -> None:
    if nb.field_string_set_value(target, value.replace("\0", "") if "\0" in value else value):
        raise MemoryError("cannot set a CTF string field")


@cache
def _source_component_class():
    """The bt2 source component class, built on first use so that importing the sinks
    does not need bt2 (only writing CTF does)."""
    import bt2
    from bt2 import _native_bt as native_bt  # the C extension itself: no Python shim per call
    from bt2 import message as bt2_message

    class CanonicalTableIterator(bt2._UserMessageIterator):
        def __init__(self, config, port):
            self._state = port.user_data
            self._messages = self._generate(*self._state)

        def __next__(self):
            try:
                return next(self._messages)
            except StopIteration:
                raise
            except BaseException as exc:  # bt2 would flatten it into a generic error
                self._state[0].error = exc
                raise

        def _user_finalize(self):
            # The generator's frame refers back to this iterator; breaking the cycle lets the
            # trace objects die with the graph, which is when sink.ctf.fs writes the metadata.
            self._messages = None

        def _generate(self, plan: _Plan, streams: dict, writers: dict) -> Iterator:
            nb = native_bt
            offset_ns = plan.offset_s * NS_PER_S
            create_event = nb.message_event_create_with_packet_and_default_clock_snapshot
            borrow_event = nb.message_event_borrow_event
            borrow_context = nb.event_borrow_common_context_field
            borrow_payload = nb.event_borrow_payload_field
            borrow_member = nb.field_structure_borrow_member_field_by_index
            set_signed = nb.field_integer_signed_set_value
            event_message = bt2_message._EventMessage
            self_ptr = self._bt_ptr

            for stream in streams.values():
                yield self._create_stream_beginning_message(stream)
            open_packets: dict[int, list] = {}  # cpu → [packet, packet_ptr, events in it]
            row = -1
            try:
                for batch in pq.ParquetFile(plan.spill).iter_batches():
                    columns = batch.to_pydict()
                    for ts, cpu, tid, pid, procname, event, ret, payload in zip(
                        columns["ts"], columns["cpu"], columns["tid"], columns["pid"],
                        columns["procname"], columns["event"], columns["ret"], columns["payload"],
                    ):
                        row += 1
                        cpu = cpu or 0
                        cycles = ts - offset_ns
                        slot = open_packets.get(cpu)
                        if slot is None:
                            packet = streams[cpu].create_packet()
                            packet.context_field["cpu_id"] = cpu
                            slot = open_packets[cpu] = [packet, packet._ptr, 0]
                            yield self._create_packet_beginning_message(packet, cycles)
                        writer = writers[event]
                        message_ptr = create_event(self_ptr, writer.class_ptr, slot[1], cycles)
                        if message_ptr is None:
                            raise MemoryError("cannot create a bt2 event message")
                        message = event_message(message_ptr)
                        event_ptr = borrow_event(message_ptr)
                        context = borrow_context(event_ptr)
                        set_signed(borrow_member(context, 0), -1 if tid is None else tid)
                        set_signed(borrow_member(context, 1), -1 if pid is None else pid)
                        _set_string(nb, borrow_member(context, 2), procname or "")
                        writer.fill(borrow_payload(event_ptr), event_fields(ret, payload))
                        yield message
                        slot[2] += 1
                        if slot[2] == EVENTS_PER_PACKET:
                            yield self._create_packet_end_message(slot[0], cycles)
                            del open_packets[cpu]
            except (TypeError, ValueError, OverflowError) as exc:  # e.g. a lone surrogate in a string
                raise TraceFormatError(None, f"row {row}", f"cannot write this row to CTF ({exc})") from exc
            end = plan.last_ts - offset_ns
            for packet, _, _ in open_packets.values():
                yield self._create_packet_end_message(packet, end)
            for stream in streams.values():
                yield self._create_stream_end_message(stream)

    class CanonicalTableSource(bt2._UserSourceComponent, message_iterator_class=CanonicalTableIterator):
        """Turns the spilled canonical table into one CTF-ready trace (one stream per CPU)."""

        def __init__(self, config, params, plan: _Plan):
            trace_class = self._create_trace_class(assigns_automatic_stream_class_id=True)
            clock = self._create_clock_class(
                frequency=NS_PER_S,
                name=CLOCK_NAME,
                description="Monotonic Clock",
                offset=bt2.ClockClassOffset(plan.offset_s, 0),
                origin_is_unix_epoch=True,
            )
            packet_context = trace_class.create_structure_field_class()
            packet_context.append_member("cpu_id", trace_class.create_unsigned_integer_field_class(32))
            event_context = trace_class.create_structure_field_class()
            for name in CONTEXT_FIELDS:  # the writer below sets them by index, in this order
                fc = (
                    trace_class.create_string_field_class() if name == "procname"
                    else trace_class.create_signed_integer_field_class(64)
                )
                event_context.append_member(name, fc)
            stream_class = trace_class.create_stream_class(
                packet_context_field_class=packet_context,
                event_common_context_field_class=event_context,
                default_clock_class=clock,
                assigns_automatic_stream_id=False,
                supports_packets=True,
                packets_have_beginning_default_clock_snapshot=True,
                packets_have_end_default_clock_snapshot=True,
            )
            writers = {}
            for name, layout in plan.layouts.items():
                event_class = stream_class.create_event_class(
                    name=name, payload_field_class=_payload_class(trace_class, layout)
                )
                writers[name] = _EventWriter(native_bt, event_class, layout)
            trace = trace_class(environment=_environment(plan.meta))
            streams = {cpu: trace.create_stream(stream_class, id=cpu, name=f"channel0_{cpu}") for cpu in plan.cpus}
            self._add_output_port("out", (plan, streams, writers))

    return CanonicalTableSource


def _run_graph(plan: _Plan, out_dir: Path) -> None:
    import bt2

    graph = bt2.Graph()
    source = graph.add_component(_source_component_class(), "tracesynth", obj=plan)
    sink_class = bt2.find_plugin("ctf").sink_component_classes["fs"]
    sink = graph.add_component(
        sink_class, "ctf-writer", params={"path": str(out_dir), "assume-single-trace": True, "quiet": True}
    )
    graph.connect_ports(source.output_ports["out"], sink.input_ports["in"])
    try:
        graph.run()
    except bt2._Error as exc:
        if plan.error is not None:
            raise plan.error from None
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else "bt2 error"
        raise TraceSynthError(f"{out_dir}: babeltrace2 could not write CTF ({first_line})") from exc


# --- the metadata fix-up ------------------------------------------------------------------------

_PACKET_CONTEXT = re.compile(r"(packet\.context\s*:=\s*struct\s*\{)(.*?)(\}\s*align)", re.S)


def fix_metadata(metadata: Path) -> None:
    """Rename the packet context member ``_cpu_id`` (as ``sink.ctf.fs`` writes it) to
    ``cpu_id``, the exact name Trace Compass and LTTng use. babeltrace2 reads both, because
    CTF 1.8 readers strip one leading underscore."""
    text = metadata.read_text(encoding="utf-8")
    if not text.startswith("/* CTF 1.8 */"):
        raise TraceSynthError(f"{metadata}: unexpected CTF metadata layout (not plain TSDL text)")
    renamed = 0

    def rename(match: re.Match) -> str:
        nonlocal renamed
        body, count = re.subn(r"\b_cpu_id;", "cpu_id;", match.group(2))
        renamed += count
        return match.group(1) + body + match.group(3)

    text = _PACKET_CONTEXT.sub(rename, text)
    if not renamed and not re.search(r"\bcpu_id;", text):
        raise TraceSynthError(f"{metadata}: no cpu_id field in the packet context")
    metadata.write_text(text, encoding="utf-8")

"""`CtfReader`: LTTng kernel traces (CTF 1.8) → canonical rows (see the package docstring)."""

from __future__ import annotations

import heapq
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from tracesynth.errors import TraceFormatError
from tracesynth.sources.base import SourceReader
from tracesynth.sources.ctf.decode import (
    CONTEXT_IDENTITY,
    KIND_LEGACY_ENTRY,
    KIND_LEGACY_EXIT,
    KIND_SWITCH,
    KIND_SYSCALL_EXIT,
    RET_FIELD,
    EventPlan,
    _decode_struct,
    _field_decoder,
    _legacy_syscall_names,
)
from tracesynth.sources.ctf.failures import CtfFailure, _captured_log
from tracesynth.sources.ctf.graph import _bt2, _release, _sink_class, _StreamPuller
from tracesynth.sources.ctf.threads import SyscallPairing, ThreadState
from tracesynth.sources.rows import RowBuffer

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



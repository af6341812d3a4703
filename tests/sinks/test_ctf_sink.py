"""CTF sink: the output is an LTTng-kernel-like CTF trace that babeltrace2 (CLI and bt2) reads
back exactly, with ``cpu_id`` named as Trace Compass expects, and real traces survive
CTF → table → CTF → table unchanged."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pyarrow as pa
import pytest
from conftest import shared_trace

from tracesynth import Trace, TraceMeta
from tracesynth.errors import TraceFormatError
from tracesynth.schema import COLUMNS
from tracesynth.sinks import sink_for, write_trace
from tracesynth.sinks.ctf import JSON, S64, S64_ARRAY, STRING, U64, U64_ARRAY, CtfSink, LayoutCollector

bt2 = pytest.importorskip("bt2")
BABELTRACE2 = shutil.which("babeltrace2")
EPOCH_TS = 1_700_000_000_123_456_789  # realistic absolute ns: the clock offset must be exact


def read_with_bt2(path) -> tuple[list[dict], dict]:
    """Every event of a CTF trace as plain values, plus the trace environment (via bt2)."""
    events, env = [], {}
    for msg in bt2.TraceCollectionMessageIterator(str(path)):
        if type(msg) is not bt2._EventMessageConst:
            continue
        event = msg.event
        env = {k: (str(v) if isinstance(v, bt2._StringValueConst) else int(v)) for k, v in event.stream.trace.environment.items()}
        clock = msg.default_clock_snapshot
        events.append(
            {
                "ts": clock.ns_from_origin,
                "clock": (clock.clock_class.name, clock.clock_class.frequency),
                "name": event.name,
                "packet": {k: int(v) for k, v in event.packet.context_field.items()},
                "context": {k: (str(v) if isinstance(v, bt2._StringFieldConst) else int(v))
                            for k, v in event.common_context_field.items()},
                "payload": {k: _plain(v) for k, v in event.payload_field.items()},
            }
        )
    return events, env


def _plain(field):
    if isinstance(field, bt2._StringFieldConst):
        return str(field)
    if isinstance(field, bt2._RealFieldConst):
        return float(field)
    if isinstance(field, bt2._ArrayFieldConst):
        return [_plain(item) for item in field]
    return int(field)


@pytest.fixture
def epoch_trace(small_trace):
    """The 6-event fixture moved to a realistic epoch time, one event on no CPU (strace)."""
    events = small_trace.events
    ts = pa.array([EPOCH_TS + t for t in events.column("ts").to_pylist()], pa.int64())
    cpus = events.column("cpu").to_pylist()
    cpus[-1] = None
    table = events.set_column(0, "ts", ts).set_column(1, "cpu", pa.array(cpus, pa.int32()))
    return Trace(table, small_trace.meta)


def test_sink_registry_and_directory_flag():
    sink = sink_for("out", "ctf")
    assert isinstance(sink, CtfSink) and sink.directory
    assert isinstance(sink_for("synthetic.ctf"), CtfSink)  # a directory named like what it holds


def test_bt2_reads_back_every_field(epoch_trace, tmp_path):
    out = write_trace(epoch_trace, tmp_path / "trace", format="ctf")
    assert (out / "metadata").is_file()  # the directory itself is the trace
    events, env = read_with_bt2(out)

    assert env == {
        "domain": "kernel", "tracer_name": "lttng-modules", "tracer_major": 2, "tracer_minor": 13,
        "tracer_patchlevel": 0, "kernel_release": "6.1", "hostname": "box", "tracesynth_workload": "unit",
    }
    rows = epoch_trace.events.to_pylist()
    assert [e["ts"] for e in events] == [r["ts"] for r in rows]
    assert {e["clock"] for e in events} == {("monotonic", 1_000_000_000)}
    assert [e["name"] for e in events] == [r["event"] for r in rows]
    assert [e["packet"] for e in events] == [{"cpu_id": r["cpu"] or 0} for r in rows]
    assert events[2]["context"] == {"tid": -1, "pid": -1, "procname": ""}  # nulls
    assert events[3]["context"] == {"tid": 11, "pid": 11, "procname": "cat"}
    assert events[0]["payload"] == {"filename": "/etc/passwd, with comma", "flags": 0}
    assert events[1]["payload"] == {"ret": 3}  # canonical ret → payload field, like LTTng
    assert events[5]["payload"] == {"ret": 0}
    assert events[3]["payload"] == {"next_comm": "cat", "next_tid": 11, "prev_comm": "swapper/1", "prev_tid": 0}


def test_one_stream_per_cpu_and_null_cpu_goes_to_cpu0(epoch_trace, tmp_path):
    out = write_trace(epoch_trace, tmp_path / "trace", format="ctf")
    assert sorted(p.name for p in out.iterdir()) == ["channel0_0", "channel0_1", "metadata"]


def test_union_of_fields_types_and_defaults(tmp_path):
    payloads = [
        {"fd": 3, "path": "/a", "addr": 2**64 - 1, "args": [1, 2], "vals": [5, 6, 7], "mixed": 1, "nested": {"a": [1, "x"]},
         "ptrs": [2**63]},
        {"fd": -1, "late": 2.5, "addr": 7, "args": [3, 4], "vals": [], "mixed": "one", "flag": True},
        {"fd": 4, "path": "/b", "_seq_length": 1, "seq": [9], "args": [0, 0]},
    ]
    trace = Trace.from_pydict(
        {"ts": [10, 20, 30], "cpu": [0, 0, 0], "event": ["e", "e", "e"], "payload": [json.dumps(p) for p in payloads]},
        TraceMeta(),
    )
    collector = LayoutCollector()
    collector.observe(trace.events.to_batches()[0])
    layout = {m.key: m for m in collector.layouts()["e"]}
    assert {k: m.kind for k, m in layout.items()} == {
        "fd": S64, "path": STRING, "addr": U64, "args": S64_ARRAY, "vals": S64_ARRAY, "mixed": JSON,
        "nested": JSON, "late": "double", "flag": "bool", "seq": S64_ARRAY, "ptrs": U64_ARRAY,
    }
    assert layout["args"].static_length == 2  # always 2 long: a fixed-size array, like _args[6]
    assert layout["vals"].length_name == "_vals_length"
    assert "_seq_length" not in layout and layout["seq"].length_name == "_seq_length"  # reused

    events, _ = read_with_bt2(write_trace(trace, tmp_path / "t", format="ctf"))
    first, second, third = (e["payload"] for e in events)
    assert first == {"_seq_length": 0, "addr": 2**64 - 1, "args": [1, 2], "fd": 3, "flag": 0, "late": 0.0,
                     "mixed": "1", "nested": '{"a":[1,"x"]}', "path": "/a", "seq": [], "_vals_length": 3,
                     "vals": [5, 6, 7], "_ptrs_length": 1, "ptrs": [2**63]}
    assert second["mixed"] == "one" and second["flag"] == 1 and second["late"] == 2.5 and second["path"] == ""
    assert third["seq"] == [9] and third["_seq_length"] == 1 and third["addr"] == 0 and third["ptrs"] == []


def test_bad_rows_raise_typed_errors_and_leave_nothing(tmp_path):
    unsorted = Trace.from_pydict({"ts": [5, 3], "event": ["a", "b"]})
    with pytest.raises(TraceFormatError, match="row 1.*time order"):
        write_trace(unsorted, tmp_path / "t", format="ctf")
    not_object = Trace.from_pydict({"ts": [5], "event": ["a"], "payload": ["[1, 2]"]})
    with pytest.raises(TraceFormatError, match="row 0.*not a JSON object"):
        write_trace(not_object, tmp_path / "t", format="ctf")
    # Fails only inside the bt2 graph (pass 2), after sink.ctf.fs has created the directory.
    lone_surrogate = Trace.from_pydict({"ts": [5, 6], "event": ["a", "a"], "payload": ['{"s": "ok"}', '{"s": "\\ud800"}']})
    with pytest.raises(TraceFormatError, match="row 1.*cannot write"):
        write_trace(lone_surrogate, tmp_path / "t", format="ctf")
    assert list(tmp_path.iterdir()) == []


def test_empty_trace_is_a_valid_ctf_trace(tmp_path):
    out = write_trace(Trace.from_pydict({"ts": [], "event": []}), tmp_path / "t", format="ctf")
    events, _ = read_with_bt2(out)
    assert events == []


@pytest.mark.skipif(BABELTRACE2 is None, reason="babeltrace2 CLI not installed")
def test_babeltrace2_cli_counts_events_and_sees_cpu_id(tmp_path):
    trace = shared_trace("bug446190")
    out = write_trace(trace, tmp_path / "t", format="ctf")
    lines = subprocess.run([BABELTRACE2, str(out)], capture_output=True, text=True, check=True).stdout
    assert lines.count("\n") == len(trace) == 31556
    assert lines.startswith("[") and " lager kmem_kmalloc: { cpu_id = 1 }, { tid = " in lines.splitlines()[0]

    metadata = subprocess.run(
        [BABELTRACE2, "-o", "ctf-metadata", str(out)], capture_output=True, text=True, check=True
    ).stdout
    packet_context = re.search(r"packet\.context := struct \{(.*?)\} align", metadata, re.S).group(1)
    assert re.search(r"\scpu_id;", packet_context) and "_cpu_id" not in packet_context
    assert 'tracer_name = "lttng-modules";' in metadata and "tracer_major = 2;" in metadata


@pytest.mark.parametrize("name", ["flipping-endianness", "bug446190", "many-threads"])
def test_round_trip_is_identical(name, tmp_path):
    """CTF → table → CTF → table: every canonical column identical (ts, cpu, thread, event,
    ret, payload), including threads the reader attributed from sched_switch."""
    from tracesynth.sources import read_trace

    original = shared_trace(name)
    assert len(original) > 0
    out = write_trace(original, tmp_path / name, format="ctf")
    again = read_trace(out)
    assert again.meta.hostname == original.meta.hostname
    assert again.meta.kernel_version == original.meta.kernel_version
    for column in COLUMNS:
        assert again.events.column(column).equals(original.events.column(column)), column

"""ftrace text reader on real captures of one instance (see docs/sources-text.md for how).

The workload was ``sh -c 'cat /etc/hostname; cat /nonexistent-tracesynth; true'``, pid-filtered
with event-fork, recorded with syscalls:* (or raw_syscalls:*) and sched events.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from conftest import TEST_DATA
from tracesynth.errors import TraceFormatError
from tracesynth.schema import TraceMeta
from tracesynth.sources import detect_format, open_reader, read_trace
from tracesynth.sources.ftrace import FtraceReader, parse_ftrace_lines
from tracesynth.sources.ftrace_events import prev_state_code

FTRACE = TEST_DATA / "ftrace"
TRACE = FTRACE / "syscalls_trace.txt"  # tracefs `trace`, tgid + irq-flags columns
TRACE_NOIRQ = FTRACE / "syscalls_trace_noirq.txt"  # same buffer, neither column
REPORT = FTRACE / "syscalls_report.txt"  # trace-cmd report (µs)
REPORT_T = FTRACE / "syscalls_report_t.txt"  # trace-cmd report -t (ns)
RAW = FTRACE / "raw_syscalls_trace.txt"
RAW_REPORT = FTRACE / "raw_syscalls_report.txt"
LOST = FTRACE / "lost_trace_pipe.txt"
ALL = [TRACE, TRACE_NOIRQ, REPORT, REPORT_T, RAW, RAW_REPORT, LOST]

SHELL, CAT, CAT_MISSING = 5204, 5205, 5206  # tids in the syscalls:* capture


def frame(path):
    return read_trace(path).to_pandas()


def payloads(rows):
    return [json.loads(p) if isinstance(p, str) else {} for p in rows.payload]


def grep_count(pattern: str, path) -> int:
    out = subprocess.run(["grep", "-c", "-E", pattern, str(path)], capture_output=True, text=True)
    return int(out.stdout.strip())


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_every_event_line_becomes_one_row_in_time_order(path):
    df = frame(path)
    assert detect_format(path) == "ftrace"
    assert len(df) == grep_count(r"\[[0-9]{3}\] .*[0-9]+\.[0-9]{6,9}: ", path)
    assert df.ts.is_monotonic_increasing
    assert df.cpu.notna().all() and df.tid.notna().all() and df.procname.notna().all()


def test_tracefs_syscalls_decode_ret_and_args():
    df = frame(TRACE)
    cat = df[df.tid == CAT]
    entries = cat[cat.event == "syscall_entry_openat"]
    exits = cat[cat.event == "syscall_exit_openat"]
    assert len(entries) == len(exits) == grep_count(r"cat-5205 .*sys_openat\(", TRACE)
    assert set(exits.ret) == {4, -2}  # 0xfffffffffffffffe is -ENOENT
    args = payloads(entries)[0]
    assert args["dfd"] == -100 and args["flags"] == 0x80000 and isinstance(args["filename"], int)
    # the child starts inside vfork (its first event is vfork's exit), then every entry is
    # followed by its own exit, up to exit_group, which never returns
    seq = cat[cat.event.str.startswith("syscall_")].event.tolist()
    assert seq[0] == "syscall_exit_vfork" and seq[-1] == "syscall_entry_exit_group"
    for entry, exit_ in zip(seq[1:-1:2], seq[2:-1:2]):
        assert entry.replace("entry", "exit") == exit_
    assert exits.ret.notna().all() and entries.ret.isna().all()


def test_c_int_arguments_are_signed():
    from tracesynth.sources.ftrace_events import parse_syscall_args

    # wait4(-1, ...) is "any child": ftrace prints the int as 32-bit hex
    args = parse_syscall_args("upid: 0xffffffff, stat_addr: 0x7ffee16430cc, options: 0x00000000, ru: 0x00000000")
    assert args["upid"] == -1 and args["stat_addr"] == 0x7FFEE16430CC and args["options"] == 0
    assert parse_syscall_args("tgid: 0x1455, pid: 0x1455, sig: 0xf") == {"tgid": 0x1455, "pid": 0x1455, "sig": 15}


def test_fork_exec_exit_of_children_with_names_from_sched_events():
    df = frame(TRACE)
    fork = payloads(df[df.event == "sched_process_fork"])
    assert {(f["parent_tid"], f["child_tid"]) for f in fork} == {(SHELL, CAT), (SHELL, CAT_MISSING)}
    execs = df[df.event == "sched_process_exec"]
    assert [p["filename"] for p in payloads(execs)] == ["/usr/bin/sh", "/usr/bin/cat", "/usr/bin/cat"]
    exits = df[df.event == "sched_process_exit"]
    assert sorted(exits.tid) == [SHELL, CAT, CAT_MISSING]
    # Lines printed before cat's exec carry the prefix "cat-5205", but the child was still "sh".
    child = df[df.tid == CAT]
    exec_ts = child[child.event == "sched_process_exec"].ts.iloc[0]
    assert set(child[child.ts < exec_ts].procname) == {"sh"}
    assert set(child[child.ts >= exec_ts].procname) == {"cat"}
    assert (child.pid == CAT).all()


def test_sched_payloads_use_lttng_names():
    df = frame(TRACE)
    switch = payloads(df[df.event == "sched_switch"])[0]
    assert set(switch) == {"prev_comm", "prev_tid", "prev_prio", "prev_state",
                           "next_comm", "next_tid", "next_prio"}
    assert switch["prev_comm"] == "rec_ftrace.sh" and switch["prev_state"] == 256  # R+
    wake = payloads(df[df.event == "sched_wakeup"])[0]
    assert set(wake) == {"comm", "tid", "prio", "target_cpu"}
    exit_ = payloads(df[df.event == "sched_process_exit"])[0]
    assert exit_["group_dead"] is True and exit_["comm"] == "cat"
    assert prev_state_code("S") == 1 and prev_state_code("D") == 2 and prev_state_code("I") == 128


def test_tracecmd_report_matches_tracefs_text_of_same_buffer():
    tracefs, report, report_t = frame(TRACE), frame(REPORT), frame(REPORT_T)
    for other in (report, report_t):
        assert other.event.tolist() == tracefs.event.tolist()
        assert other.tid.tolist() == tracefs.tid.tolist()
        assert other.cpu.tolist() == tracefs.cpu.tolist()
        assert other.ret.fillna(0).tolist() == tracefs.ret.fillna(0).tolist()
    assert report.ts.tolist() == tracefs.ts.tolist()
    assert (report_t.ts % 1000 != 0).any()  # -t keeps the nanoseconds
    assert ((report_t.ts - tracefs.ts).abs() <= 500).all()  # µs text is rounded
    # the sched_switch/wakeup plugin forms decode to the same fields (but R+ prints as R)
    sw_fs, sw_rep = payloads(tracefs[tracefs.event == "sched_switch"]), payloads(
        report[report.event == "sched_switch"])
    for a, b in zip(sw_fs, sw_rep):
        assert {k: v for k, v in a.items() if k != "prev_state"} == {
            k: v for k, v in b.items() if k != "prev_state"}
    assert payloads(report[report.event == "sched_wakeup"]) == payloads(
        tracefs[tracefs.event == "sched_wakeup"])
    assert read_trace(REPORT).meta.extra["text_flavour"] == "trace-cmd-report"
    assert read_trace(REPORT_T).meta.extra["timestamp_resolution_ns"] == 1


def test_pid_from_tgid_column_else_derived_from_exec_and_vfork():
    with_tgid, without = frame(TRACE), frame(TRACE_NOIRQ)
    assert with_tgid.pid.notna().all()
    derived = without.pid.notna()
    # before the shell's exec nothing says which group it is in; afterwards exec/vfork do
    assert derived.sum() > 0.9 * len(without)
    assert (without.pid[derived] == with_tgid.pid[derived]).all()


def test_raw_syscalls_named_from_x86_64_table():
    df = frame(RAW)
    assert len(df[df.event == "syscall_entry_openat"]) == grep_count(r"sys_enter: NR 257 ", RAW)
    assert len(df[df.event == "syscall_exit_openat"]) == grep_count(r"sys_exit: NR 257 ", RAW)
    missing = df[(df.event == "syscall_exit_openat") & (df.ret == -2)]
    assert len(missing) == grep_count(r"sys_exit: NR 257 = -2$", RAW) > 0
    entry = payloads(df[df.event == "syscall_entry_openat"])[0]
    assert entry["id"] == 257 and entry["args"][0] == 0xFFFFFF9C
    report = frame(RAW_REPORT)
    assert report.event.tolist() == df.event.tolist()


def test_lost_events_counted_with_positions():
    reader = open_reader(LOST)
    rows = sum(b.num_rows for b in reader.batches())
    assert rows == 524
    assert reader.meta.lost_events == 168 + 924
    assert [p["line"] for p in reader.meta.extra["lost_event_positions"]] == [254, 423]


def test_parse_lines_api_keeps_caller_meta():
    meta = TraceMeta(source_format="ftrace", kernel_version="6.18.44", hostname="box")
    with open(TRACE) as fh:
        batches = list(parse_ftrace_lines(fh, "tracefs:fixture", meta))
    assert sum(b.num_rows for b in batches) == 720
    assert meta.kernel_version == "6.18.44" and meta.tracer == "ftrace" and meta.n_cpus == 2
    lines = ["# entries-in-buffer/entries-written: 2/10   #P:4",
             "  <idle>-0     [003] d.h1. 100.000001: irq_handler_entry: irq=25 name=virtio0",
             "  <idle>-0     [003] d.h1. 100.000002: my_event: some free text",
             "  x-7 [001] 100.000003: sys_enter: NR 9999 (0, 0, 0, 0, 0, 0)"]
    meta = TraceMeta()
    rows = [b.to_pylist() for b in parse_ftrace_lines(lines, "lines", meta)][0]
    assert meta.lost_events == 8 and meta.n_cpus == 4
    assert json.loads(rows[0]["payload"]) == {"irq": 25, "name": "virtio0"}
    assert rows[0]["tid"] == 0 and rows[0]["pid"] == 0 and rows[0]["procname"] is None
    assert json.loads(rows[1]["payload"]) == {"text": "some free text"}
    assert rows[2]["event"] == "syscall_entry_unknown_9999"


def test_malformed_line_is_an_error_unless_lenient(tmp_path):
    lines = TRACE.read_text().splitlines(keepends=True)
    bad = tmp_path / "bad.txt"
    bad.write_text("".join(lines[:20] + ["this is not ftrace\n"] + lines[20:]))
    with pytest.raises(TraceFormatError, match=r"bad\.txt:21: not an ftrace event line"):
        read_trace(bad)
    lenient = read_trace(bad, lenient=True)
    assert len(lenient) == 720 and lenient.meta.skipped_records == 1


def test_truncated_final_line_is_skipped_and_counted(tmp_path):
    text = TRACE.read_text()
    cut = tmp_path / "cut.txt"
    cut.write_text(text[: len(text) - 40])  # ends mid-line, no newline
    reader = FtraceReader(cut)
    rows = sum(b.num_rows for b in reader.batches())
    assert rows == 719 and reader.meta.skipped_records == 1
    assert reader.meta.extra["truncated_final_line"] == text.count("\n")


def test_sniff_claims_only_ftrace_text():
    for other in [TEST_DATA / "strace" / "sh_f_ttt_T.txt", TEST_DATA / "eventids" / "sh_syscalls.ids"]:
        assert not FtraceReader.sniff(other, other.read_bytes()[:8192])

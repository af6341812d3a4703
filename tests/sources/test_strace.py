"""strace reader on real logs of ``sh -c 'ls / >/dev/null; cat /etc/hostname;
cat /nonexistent-tracesynth 2>/dev/null; true'`` (see docs/sources-text.md for the commands)."""

from __future__ import annotations

import json
import subprocess

import pytest

from conftest import TEST_DATA
from tracesynth.errors import TraceFormatError
from tracesynth.sources import detect_format, read_trace
from tracesynth.sources.strace import StraceReader, split_args

STRACE = TEST_DATA / "strace"
TTT = STRACE / "sh_f_ttt_T.txt"  # strace -f -ttt -T -o FILE: bare pid column
TT_Y = STRACE / "sh_f_tt_T_y.txt"  # strace -f -tt -T -y -o FILE
PREFIX = STRACE / "sh_f_ttt_T_pidprefix.txt"  # strace -f -ttt -T 2>FILE: [pid N] prefixes
THREAD = STRACE / "python_thread.txt"  # python starting and joining one thread
KILLED = STRACE / "sh_killed.txt"  # sh -c 'sleep 5 & kill $!; wait'
ALL = [TTT, TT_Y, PREFIX, THREAD, KILLED]


def frame(path):
    return read_trace(path).to_pandas()


def payload(row) -> dict:
    return json.loads(row.payload) if isinstance(row.payload, str) else {}


def grep_count(pattern: str, path) -> int:
    out = subprocess.run(["grep", "-c", "-E", pattern, str(path)], capture_output=True, text=True)
    return int(out.stdout.strip())


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_counts_match_the_log_and_events_are_time_ordered(path):
    df = frame(path)
    assert detect_format(path) == "strace"
    calls = r"[0-9.:]+ [a-z_0-9]+\("
    assert (df.event.str.startswith("syscall_entry_")).sum() == grep_count(calls, path)
    exits = grep_count(r"\) += ", path)  # completed and resumed lines
    assert (df.event.str.startswith("syscall_exit_")).sum() == exits
    assert (df.event == "sched_process_exit").sum() == grep_count(r"\+\+\+ (exited|killed)", path)
    assert (df.event == "signal_deliver").sum() == grep_count(r" --- SIG", path)
    assert df.ts.is_monotonic_increasing
    assert df.tid.notna().all() and df.cpu.isna().all()


def test_openat_of_hostname_pairs_on_one_tid():
    df = frame(TTT)
    entries = [r for r in df[df.event == "syscall_entry_openat"].itertuples()
               if payload(r).get("filename") == "/etc/hostname"]
    assert len(entries) == 1 and payload(entries[0])["dfd"] == -100
    tid = entries[0].tid
    after = df[(df.tid == tid) & (df.ts >= entries[0].ts)]
    exit_ = after[after.event == "syscall_exit_openat"].iloc[0]
    assert exit_.ret >= 0 and exit_.procname == "cat"
    # the exit time is the entry time plus strace's -T duration (0.000032 s on that line)
    line = subprocess.run(["grep", "-F", '"/etc/hostname", O_RDONLY', str(TTT)],
                          capture_output=True, text=True).stdout
    duration_ns = round(float(line.rsplit("<", 1)[1].rstrip(">\n")) * 1e9)
    assert exit_.ts - entries[0].ts == duration_ns


def test_enoent_maps_to_minus_two_with_errno_name():
    df = frame(TTT)
    failed = df[(df.event == "syscall_exit_openat") & (df.ret == -2)]
    assert len(failed) == grep_count(r"openat\(.*= -1 ENOENT", TTT) > 0
    assert {payload(r)["errno"] for r in failed.itertuples()} == {"ENOENT"}
    access = df[df.event == "syscall_exit_access"].iloc[0]
    assert access.ret == -2  # access("/etc/ld.so.preload", R_OK) = -1 ENOENT
    exit_group = df[df.event == "syscall_exit_exit_group"]
    assert exit_group.ret.isna().all()  # "= ?"
    brk = df[df.event == "syscall_exit_brk"].iloc[0]
    assert brk.ret > 0x1000  # hex return


def test_fork_exec_exit_of_children():
    df = frame(TTT)
    vfork = df[df.event == "syscall_exit_vfork"]
    children = sorted(int(c) for c in vfork.ret)
    assert children == [7062, 7063, 7064]
    names = {tid: df[(df.tid == tid) & (df.event == "sched_process_exit")].procname.iloc[0]
             for tid in children}
    assert names == {7062: "ls", 7063: "cat", 7064: "cat"}
    codes = {int(r.tid): payload(r)["exit_code"] for r in df[df.event == "sched_process_exit"].itertuples()}
    assert codes == {7061: 0, 7062: 0, 7063: 0, 7064: 1}
    assert (df.pid == df.tid).all()  # processes, no threads
    # the child runs before vfork returns in the parent: it still inherits the shell's name
    first = df[df.tid == 7062].iloc[0]
    assert first.event == "syscall_entry_rt_sigprocmask" and first.procname == "sh"
    sigchld = df[df.event == "signal_deliver"]
    assert {payload(r)["sig"] for r in sigchld.itertuples()} == {17}
    assert set(sigchld.tid) == {7061}


def test_unfinished_and_resumed_are_merged_per_pid():
    df = frame(TTT)
    vfork_entries = df[(df.event == "syscall_entry_vfork") & (df.tid == 7061)]
    vfork_exits = df[(df.event == "syscall_exit_vfork") & (df.tid == 7061)]
    assert len(vfork_entries) == len(vfork_exits) == 3
    # 7061 1796029234.460910 vfork( <unfinished ...> ... <... vfork resumed>) = 7062 <0.000377>
    assert vfork_entries.ts.iloc[0] == 1796029234460910000
    assert vfork_exits.ts.iloc[0] == 1796029234460910000 + 377000
    clone = df[(df.event == "syscall_exit_clone")]
    assert len(clone) == 0


def test_y_paths_and_tt_clock():
    df = frame(TT_Y)
    meta = read_trace(TT_Y).meta
    assert meta.clock_name == "realtime-time-of-day"
    assert df.ts.iloc[0] == (9 * 3600 + 0 * 60 + 34) * 10**9 + 499576000  # 09:00:34.499576
    opened = [r for r in df[df.event == "syscall_exit_openat"].itertuples()
              if payload(r).get("ret_path") == "/etc/hostname"]
    assert len(opened) == 1 and opened[0].ret == 3
    reads = [payload(r) for r in df[df.event == "syscall_entry_read"].itertuples()]
    assert {"fd": 3, "fd_path": "/etc/hostname"}.items() <= next(
        p for p in reads if p.get("fd_path") == "/etc/hostname").items()


def test_pid_prefixed_stderr_log():
    df = frame(PREFIX)
    assert set(df.tid) == {7075, 7076, 7077, 7078}  # unprefixed lines are the first tracee's
    assert df[df.tid == 7075].procname.dropna().unique().tolist() == ["sh"]
    assert len(df) == len(frame(TTT))  # same workload, same number of events


def test_thread_joins_its_parents_group():
    df = frame(THREAD)
    thread = df[df.tid == 7162]
    assert len(thread) > 0 and (thread.pid == 7161).all() and (thread.procname == "python3").all()
    assert (df[df.tid == 7161].pid == 7161).all()


def test_killed_child_and_signals():
    df = frame(KILLED)
    killed = df[(df.event == "sched_process_exit") & (df.tid == 7257)].iloc[0]
    assert payload(killed)["signal"] == "SIGTERM"
    signals = {(int(r.tid), payload(r)["signame"], payload(r).get("code"))
               for r in df[df.event == "signal_deliver"].itertuples()}
    assert signals == {(7257, "SIGTERM", "SI_USER"), (7256, "SIGCHLD", "CLD_KILLED")}


def test_malformed_line_is_an_error_unless_lenient_and_truncation_is_tolerated(tmp_path):
    lines = TTT.read_text().splitlines(keepends=True)
    bad = tmp_path / "bad.txt"
    bad.write_text("".join(lines[:10] + ["7061  1796029234.458 garbage\n"] + lines[10:]))
    with pytest.raises(TraceFormatError, match=r"bad\.txt:11: not an strace line"):
        read_trace(bad)
    assert read_trace(bad, lenient=True).meta.skipped_records == 1
    cut = tmp_path / "cut.txt"
    cut.write_text("".join(lines[:-1]) + lines[-1][:15])
    reader = StraceReader(cut)
    rows = sum(b.num_rows for b in reader.batches())
    assert rows == len(frame(TTT)) - 1 and reader.meta.skipped_records == 1


def test_split_args_respects_quotes_and_brackets():
    assert split_args('"a, b", [1, 2], {x=1}', 3) == ['"a, b"', "[1, 2]", "{x=1}"]
    assert split_args('3</etc/hostname>, "abc", 4096', 2) == ["3</etc/hostname>", '"abc"']


def test_sniff_claims_only_strace():
    for other in [TEST_DATA / "ftrace" / "syscalls_trace.txt", TEST_DATA / "eventids" / "sh_syscalls.ids"]:
        assert not StraceReader.sniff(other, other.read_bytes()[:8192])


def test_interrupted_call_returns_the_kernel_restart_code():
    events = read_trace(TEST_DATA / "strace" / "sh_killed.txt").to_pandas()
    resumed = events[(events.event == "syscall_exit_rt_sigsuspend") & events.payload.str.contains("ERESTARTNOHAND")]
    assert len(resumed) == 1 and resumed.ret.iloc[0] == -514

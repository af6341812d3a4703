"""Event-id sequences: ids of the syscalls in the recorded strace log (x86_64 numbers), as one
id per line with a vocabulary, and as comma-separated windows of 32 without one."""

from __future__ import annotations

import pytest

from conftest import TEST_DATA
from tracesynth.errors import TraceFormatError
from tracesynth.sources import detect_format, read_trace
from tracesynth.sources.eventids import EventIdReader, load_vocab

IDS = TEST_DATA / "eventids" / "sh_syscalls.ids"  # + sh_syscalls.ids.vocab beside it
WINDOWS = TEST_DATA / "eventids" / "sh_syscalls_windows.txt"
STRACE_LOG = TEST_DATA / "strace" / "sh_f_ttt_T.txt"


def test_sequence_with_vocab_names_events():
    trace = read_trace(IDS)
    df = trace.to_pandas()
    lines = IDS.read_text().split()
    assert detect_format(IDS) == "eventids"
    assert len(df) == len(lines) == 487
    assert df.ts.tolist() == [i * 1000 for i in range(len(df))]
    assert df.event.iloc[0] == "syscall_entry_execve"  # id 59 in the .vocab file
    assert df[["cpu", "tid", "pid", "procname", "ret", "payload"]].isna().all().all()
    assert trace.meta.extra["layout"] == "sequence" and trace.meta.extra["vocab"].endswith(".vocab")
    # the ids were taken from the strace log: same syscalls, same order
    strace = read_trace(STRACE_LOG).to_pandas()
    assert df.event.tolist() == strace[strace.event.str.startswith("syscall_entry_")].event.tolist()


def test_windows_without_vocab():
    trace = read_trace(WINDOWS)
    df = trace.to_pandas()
    windows = WINDOWS.read_text().splitlines()
    assert detect_format(WINDOWS) == "eventids"
    assert len(df) == sum(len(w.split(",")) for w in windows) == 487
    assert trace.meta.extra["windows"] == len(windows) == 16
    assert df.event.iloc[0] == "event_59"
    assert df.payload.iloc[0] == '{"window":0}' and df.payload.iloc[-1] == '{"window":15}'
    assert (df.payload == '{"window":1}').sum() == 32


def test_builtin_syscall_vocab_matches_vocab_file():
    named = EventIdReader(WINDOWS, vocab="syscalls-x86_64")
    events = [e for b in named.batches() for e in b.column("event").to_pylist()]
    assert events == read_trace(IDS).to_pandas().event.tolist()
    assert load_vocab(str(IDS) + ".vocab")[257] == "syscall_entry_openat"


def test_sniff_refuses_other_text_and_bad_ids_fail(tmp_path):
    for other in [TEST_DATA / "strace" / "sh_f_ttt_T.txt", TEST_DATA / "ftrace" / "syscalls_trace.txt"]:
        assert not EventIdReader.sniff(other, other.read_bytes()[:8192])
    assert not EventIdReader.sniff(tmp_path / "x", b"ts,event\n1,2\n")
    bad = tmp_path / "bad.ids"
    bad.write_text("1\n2\nthree\n4\n")
    with pytest.raises(TraceFormatError, match=r"bad\.ids:3: expected integer event ids"):
        read_trace(bad, format="eventids")
    lenient = read_trace(bad, format="eventids", lenient=True)
    assert len(lenient) == 3 and lenient.meta.skipped_records == 1
    mixed = tmp_path / "mixed.ids"
    mixed.write_text("1\n2,3\n")
    with pytest.raises(TraceFormatError, match=r"mixed\.ids:2: expected one id per line"):
        read_trace(mixed)

from constraint_helpers import bug446190, build, call, dataset_runs, gzip_run, many_threads, sc  # noqa: F401
from tracesynth.constraints import check, repair

RULE = ["syscall-pairing"]


def codes(trace):
    report = check(trace, RULE, max_examples=20)
    return [(e["row"], e["reason"]) for e in report.rule("syscall-pairing").examples]


def test_real_traces_pair_every_syscall(many_threads, bug446190, dataset_runs):
    # many-threads: 78,086 exits incl. the clone children's first exits; bug446190: old
    # LTTng naming (sys_* / exit_syscall) mapped by the reader.
    for trace in [many_threads, bug446190, *dataset_runs.values()]:
        assert check(trace, RULE).per_rule == {"syscall-pairing": 0}


def test_trace_boundaries_are_not_violations():
    rows = [sc("read", "exit", ret=3), *call("write", 1), sc("futex", "entry")]
    assert codes(build(rows)) == []


def test_entry_while_in_flight_mismatch_orphan_and_ret_channel():
    rows = [sc("read", "entry"), sc("write", "entry"),          # 1: entry while read pending
            sc("close", "exit", ret=0),                          # 2: exit mismatches write
            *call("getpid", 1),
            sc("close", "exit", ret=0),                          # 5: orphan exit
            sc("open", "entry", ret=3), sc("open", "exit"),     # 6: entry with ret, 7: exit without
            *call("getpid", 1)]
    found = codes(build(rows))
    assert [r for r, _ in found] == [1, 2, 5, 6, 7]
    assert "in flight" in found[0][1] and "match" in found[1][1] and "no pending" in found[2][1]
    # A thread's last call may end without a return value (killed in it: strace's `= ?`).
    assert codes(build([*call("getpid", 1), sc("exit_group", "entry"), sc("exit_group", "exit")])) == []


def test_new_thread_starts_by_returning_from_clone():
    fork = {"event": "sched_process_fork", "tid": 1, "cpu": 0,
            "payload": {"parent_tid": 1, "child_tid": 2}}
    good = build([*call("clone", 2)[:1], fork, sc("clone", "exit", tid=1, ret=2),
                  sc("clone", "exit", tid=2, cpu=1, ret=0), *call("read", 3, tid=2, cpu=1)])
    assert codes(good) == []
    bad = build([fork, sc("read", "exit", tid=2, cpu=1, ret=3)])
    assert "clone/fork" in codes(bad)[0][1]


def test_nothing_after_exit_group_and_single_thread_variant():
    rows = [sc("exit_group", "entry"), sc("read", "entry")]
    assert "exit/exit_group" in codes(build(rows))[0][1]
    light = build([{"event": "syscall_entry_read"}, {"event": "syscall_entry_write"}])
    assert check(light, RULE).rule("syscall-pairing").status == "n/a"
    assert check(light, RULE, assume_single_thread=True).rule("syscall-pairing").count == 1


def exec_event(tid=1, old_tid=None):
    return {"event": "sched_process_exec", "tid": tid, "cpu": 0, "procname": "app",
            "payload": {"filename": "/bin/app", "tid": tid, "old_tid": tid if old_tid is None else old_tid}}


def test_exec_happens_inside_its_execve_call():
    """The kernel emits sched_process_exec inside the execve that asked for it, once. A
    generated start-up once read `>execve exec <execve exec >execve <execve`."""
    start = [sc("execve", "entry"), exec_event(), sc("execve", "exit", ret=0), *call("brk", 4096)]
    assert codes(build(start)) == []
    doubled = build([sc("execve", "entry"), exec_event(), sc("execve", "exit", ret=0), exec_event(),
                     sc("execve", "entry"), sc("execve", "exit", ret=-2)])
    found = codes(doubled)
    assert [r for r, _ in found] == [3] and "outside an execve" in found[0][1]
    out, log = repair(doubled, RULE)
    assert [(e["op"], e["row"]) for e in log] == [("drop", 3)] and not check(out, RULE).violated
    twice = build([sc("execve", "entry"), exec_event(), exec_event(), sc("execve", "exit", ret=0)])
    assert [r for r, _ in codes(twice)] == [2]
    after_other = build([*call("read", 1), exec_event(), *call("execve", 0)])
    assert [r for r, _ in codes(after_other)] == [2]
    # A trace boundary (the call entered before tracing), another thread's call in between,
    # and a non-leader thread's exec (entered on tid 2, the event on the leader's tid 1).
    assert codes(build([exec_event(), sc("execve", "exit", ret=0), *call("execve", 0)])) == []
    assert codes(build([sc("execve", "entry"), *call("read", 1, tid=2), exec_event(),
                        sc("execve", "exit", ret=0)])) == []
    assert codes(build([sc("execve", "entry", tid=2), exec_event(tid=1, old_tid=2)])) == []
    # A recording that traces exec events but not the execve syscall is not judged.
    assert codes(build([*call("read", 1), exec_event()])) == []


def test_repair_inserts_missing_halves_and_relabels_mismatches():
    rows = [sc("read", "entry"), sc("write", "entry"), sc("write", "exit", ret=1),
            *call("getpid", 1), sc("close", "exit", ret=0),
            sc("open", "entry"), sc("close", "exit", ret=0)]
    out, log = repair(build(rows), RULE)
    assert not check(out, RULE).violated
    ops = sorted((e["op"], e["row"]) for e in log)
    assert ops == [("insert", 1), ("insert", 5), ("set", 7)]
    assert repair(out, RULE)[1] == []
    # Inserted halves sit halfway in time between their neighbours: no zero gaps appear
    # (rows are 1,000 ns apart), which real kernel clocks almost never show.
    ts = out.events.column("ts").to_numpy()
    assert (ts[1:] > ts[:-1]).all()
    assert sorted(int(e["after"]["ts"]) for e in log if e["op"] == "insert") == [1500, 5500]


def test_light_trace_of_a_single_threaded_recording_is_paired_as_one_thread(gzip_run):
    """A light trace (event + ts) says nothing per thread, unless its metadata says it has one
    thread (the bundled recordings store scope.threads): then pairing applies globally."""
    from tracesynth import Trace, TraceMeta

    light_events = gzip_run.events.select(["ts", "event"])
    light = Trace(light_events, gzip_run.meta)
    assert gzip_run.meta.extra["scope"]["threads"] == 1
    assert check(light, RULE).rule("syscall-pairing").status == "ok"
    assert check(light, RULE, assume_single_thread=False).rule("syscall-pairing").status == "n/a"
    one_thread = TraceMeta(workload="gzip", extra={"threads": 1})
    shuffled = light_events.take([0, 1, 2, 3, 3, *range(4, len(light_events))])  # brk entered twice
    assert check(Trace(light_events.slice(1), one_thread), RULE).rule("syscall-pairing").count == 0
    assert check(Trace(shuffled, one_thread), RULE).rule("syscall-pairing").count >= 1


def test_repair_of_a_trace_without_return_values_adds_none():
    """Inserting an exit with a default return value into a light trace would make its ret
    channel "present", and every other exit would then lack one: 64 violations became 1,467
    edits on a generated light trace before this."""
    rows = [*call("read", None), sc("open", "entry"), sc("close", "entry"), *call("write", None), *call("read", None)]
    trace = build(rows)
    assert not trace.to_pandas()["ret"].notna().any()
    out, log = repair(trace, RULE)
    assert not check(out, RULE).violated
    assert [(e["op"], e["row"]) for e in log] == [("insert", 3), ("insert", 4)]  # open, close exits; nothing else
    assert not out.to_pandas()["ret"].notna().any()


def test_repairing_a_light_trace_leaves_its_tids_unknown(gzip_run):
    """The single-thread assumption is the rules' view, not data: rows the repair inserts into
    a light trace keep a null tid (a tid of 1 on them alone made later repair cycles, and the
    discriminative score, see a tid channel the model never produced)."""
    import numpy as np
    import pyarrow as pa

    from tracesynth import Trace

    light = gzip_run.events.select(["ts", "event"]).slice(0, 4000)
    exits = np.flatnonzero(np.char.startswith(np.array(light.column("event").to_pylist()), "syscall_exit_"))
    keep = np.setdiff1d(np.arange(light.num_rows), exits[::7])  # every 7th exit lost
    broken = Trace(light.take(pa.array(keep)), gzip_run.meta)
    assert check(broken, RULE).rule("syscall-pairing").count > 0
    out, log = repair(broken, RULE)
    assert any(e["op"] == "insert" for e in log)
    assert out.column("tid").null_count == len(out)
    assert check(out, RULE).rule("syscall-pairing").count == 0

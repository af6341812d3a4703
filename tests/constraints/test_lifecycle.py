from constraint_helpers import build, call, dataset_runs, many_threads, sc  # noqa: F401
from tracesynth.constraints import check, repair

RULE = ["thread-lifecycle"]


def fork(parent, child):
    return {"event": "sched_process_fork", "tid": parent, "cpu": 0,
            "payload": {"parent_tid": parent, "child_tid": child}}


def exit_(tid):
    return {"event": "sched_process_exit", "tid": tid, "cpu": 0, "payload": {"tid": tid}}


def free(tid, by=1):
    return {"event": "sched_process_free", "tid": by, "cpu": 0, "payload": {"tid": tid}}


def rows_of(trace):
    return [e["row"] for e in check(trace, RULE, max_examples=20).rule("thread-lifecycle").examples]


def test_real_traces_respect_thread_lifecycle(many_threads, dataset_runs):
    # many-threads creates and ends 8,000 threads (fork, exit, free, tid reuse).
    for trace in [many_threads, *dataset_runs.values()]:
        assert check(trace, RULE).per_rule == {"thread-lifecycle": 0}


def test_preexisting_threads_and_tid_reuse_are_fine():
    rows = [*call("read", 1, tid=5), exit_(5), {"event": "irq_handler_entry", "tid": 5, "cpu": 0},
            free(5), sc("clone", "entry"), fork(1, 5), sc("clone", "exit", ret=5),
            sc("clone", "exit", tid=5, ret=0), *call("read", 1, tid=5)]
    assert rows_of(build(rows)) == []


def test_activity_before_creation_after_exit_and_after_free():
    rows = [*call("read", 1, tid=7), sc("clone", "entry"), fork(1, 7), sc("clone", "exit", ret=7),
            exit_(2), *call("read", 1, tid=2),
            exit_(3), free(3), {"event": "irq_handler_entry", "tid": 3, "cpu": 0}]
    trace = build(rows)
    found = rows_of(trace)
    assert found == [0, 1, 6, 7, 10]
    out, log = repair(trace, RULE)
    assert not check(out, RULE).violated and len(log) == 4
    # thread 2 makes two syscalls after its exit: dropping the one exit is fewer edits
    assert sorted(e["row"] for e in log if e["op"] == "drop") == [0, 1, 5, 10]


def test_clone_return_value_must_be_the_forked_child():
    rows = [sc("clone", "entry"), fork(1, 9), sc("clone", "exit", ret=8), exit_(4)]
    trace = build(rows)
    assert rows_of(trace) == [2]
    out, log = repair(trace, RULE)
    assert log[0]["after"] == {"ret": 9} and not check(out, RULE).violated


def test_repair_drops_a_premature_exit_rather_than_everything_after_it():
    """Generated traces put a thread's exit in the middle of its life (a model that learned
    how traces end): dropping that one event beats dropping the rest of the thread, and repair
    must not ping-pong with pairing."""
    after = []
    for _ in range(30):
        after += [sc("read", "entry", tid=2), sc("read", "exit", tid=2, ret=5)]
    rows = [*call("read", 1, tid=2), exit_(2), *after, *call("getpid", 1, tid=3)]
    trace = build(rows)
    out, log = repair(trace)
    assert not check(out).violated
    assert [(e["rule"], e["op"], e["row"]) for e in log] == [("thread-lifecycle", "drop", 2)]
    assert len(out) == len(rows) - 1
    # one syscall after the exit: one edit either way; the syscall goes, the exit stays
    out, log = repair(build([*call("read", 1, tid=2), exit_(2), sc("read", "entry", tid=2)]))
    assert [e["row"] for e in log] == [3] and not check(out).violated
    strace_end = build([sc("exit_group", "entry", tid=4), sc("exit_group", "exit", tid=4), exit_(4)])
    assert not check(strace_end).violated  # `exit_group(0) = ?`: did not return

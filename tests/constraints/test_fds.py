from constraint_helpers import build, call, dataset_runs, many_threads, sc  # noqa: F401
from tracesynth.constraints import check, repair

RULE = ["fd-lifecycle"]


def rows_of(trace):
    return [e["row"] for e in check(trace, RULE, max_examples=9).rule("fd-lifecycle").examples]


def test_real_traces_use_only_open_descriptors(many_threads, dataset_runs):
    for trace in [many_threads, *dataset_runs.values()]:
        assert check(trace, RULE).per_rule == {"fd-lifecycle": 0}


def test_use_after_close_double_open_and_close_ebadf():
    rows = [*call("openat", 3), *call("close", 0, fd=3),
            *call("read", 10, fd=3, count=100),      # 5: success on closed fd 3
            *call("read", -9, fd=3, count=100),      # EBADF: the kernel said no, fine
            *call("openat", 4), *call("openat", 4),  # 11: fd 4 already open
            *call("close", -9, fd=4),                # 13: EBADF although open
            *call("write", 5, fd=9, count=5)]        # unknown fd 9 (open before the trace)
    trace = build(rows)
    assert rows_of(trace) == [5, 11, 13]
    out, log = repair(trace, RULE)
    assert [e["after"]["ret"] for e in log] == [-9, 3, 0]  # 3: the lowest free descriptor
    assert rows_of(out) == [] and repair(out, RULE)[1] == []


def test_concurrent_threads_and_opaque_calls_are_not_judged():
    rows = [*call("openat", 3), *call("close", 0, fd=3),
            sc("openat", "entry", tid=2, pid=1), sc("read", "entry", fd=3, count=1),
            sc("openat", "exit", tid=2, pid=1, ret=3), sc("read", "exit", ret=1),
            *call("close", 0, fd=3), *call("recvmsg", 1, fd=7), *call("read", 1, fd=3, count=1)]
    assert rows_of(build(rows)) == []
    assert check(build(rows[:4]), RULE).rule("fd-lifecycle").status == "ok"

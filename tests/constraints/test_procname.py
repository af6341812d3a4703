from constraint_helpers import build, call, dataset_runs, many_threads, sc  # noqa: F401
from tracesynth.constraints import check, repair

RULE = ["procname"]


def ev(tid, name, event="irq_handler_entry"):
    return {"event": event, "tid": tid, "cpu": 0, "procname": name}


def count(trace):
    return check(trace, RULE).rule("procname").count


def test_real_traces_rename_only_at_exec_or_comm_writes(many_threads, dataset_runs):
    # many-threads renames 8,000 threads through /proc/self/task/<tid>/comm (open + write
    # by the parent: pthread_setname_np) and execs genKernelTraces -> multithread.
    for trace in [many_threads, *dataset_runs.values()]:
        assert check(trace, RULE).per_rule == {"procname": 0}


def test_rename_without_exec_is_a_violation_and_repair_relabels_the_minority():
    rows = [*call("read", 1, procname="app"), ev(1, "app"), ev(1, "bogus"), ev(1, "app"),
            *call("read", 1, procname="app")]
    trace = build(rows)
    assert count(trace) == 2  # into bogus and back
    out, log = repair(trace, RULE)
    assert len(log) == 1 and log[0]["row"] == 3 and log[0]["after"] == {"procname": "app"}
    assert count(out) == 0 and repair(out, RULE)[1] == []


def test_exec_prctl_and_comm_file_allow_one_change():
    execve = [sc("execve", "entry", procname="sh", filename="/bin/ls"), ev(1, "sh"), ev(1, "ls"),
              sc("execve", "exit", ret=0, procname="ls")]
    prctl = [*call("prctl", 0, tid=2, procname="worker", option=15), ev(2, "renamed")]
    comm = [sc("openat", "entry", tid=3, procname="main", filename="/proc/self/task/4/comm"),
            sc("openat", "exit", tid=3, ret=5, procname="main"), ev(4, "a"), ev(4, "b")]
    assert count(build(execve + prctl + comm)) == 0
    twice = execve + [ev(1, "other")]
    assert count(build(twice)) == 1

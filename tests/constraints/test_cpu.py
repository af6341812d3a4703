import json

from constraint_helpers import build, dataset_runs, many_threads, switch  # noqa: F401
from tracesynth.constraints import check, repair

RULES = ["cpu-switch", "thread-migration"]


def ev(tid, cpu, event="irq_handler_entry"):
    return {"event": event, "tid": tid, "cpu": cpu}


def test_many_threads_shows_exclusive_cpus(many_threads):
    assert check(many_threads, RULES).per_rule == {"cpu-switch": 0, "thread-migration": 0}


def test_dataset_only_shows_lost_switch_ins_after_preemption(dataset_runs):
    """The bundled ftrace runs (recorded with ftrace's pid filter, scoped to the workload's
    process tree) show one kind of violation (0.14 per 1,000 events over all runs): a thread
    switched out (asleep or preempted), then switched out again with no switch back in
    recorded between; mostly the switch from the idle task right after it woke the thread.
    The kernel runs a thread only after a switch in: the recording lost it."""
    for trace in dataset_runs.values():
        report = check(trace, RULES, max_examples=100)
        assert report.rule("thread-migration").count == 0
        cpu = report.rule("cpu-switch")
        assert cpu.per_1000 < 5
        frame = trace.events.to_pandas()
        switches = frame[frame.event == "sched_switch"]
        payloads = [json.loads(p) for p in switches.payload]
        for example in cpu.examples:
            assert example["reason"] == "thread switched out although it was not running"
            tid = example["tid"]
            involved = [(row, p["prev_tid"] == tid) for row, p in zip(switches.index, payloads)
                        if tid in (p["prev_tid"], p["next_tid"]) and row <= example["row"]]
            assert involved[-1] == (example["row"], True) and involved[-2][1]  # out, out


def test_prev_tid_foreign_event_and_double_switch_in():
    rows = [switch(0, 5, cpu=0), ev(5, 0), switch(7, 0, cpu=0),   # 2: prev 7 but 5 was running
            switch(0, 6, cpu=1), ev(6, 1), ev(5, 1),                # 5: tid 5 on CPU 1 runs 6
            switch(6, 5, cpu=1)]                                    # 6: 5 still on CPU 0
    trace = build(rows)
    report = check(trace, ["cpu-switch"], max_examples=9)
    found = {e["row"]: e["reason"] for e in report.rule("cpu-switch").examples}
    assert sorted(found) == [2, 5, 6]
    assert "prev_tid" in found[2] and "not the one running" in found[5] and "still running" in found[6]
    out, log = repair(trace, RULES)
    assert not check(out, RULES).violated
    assert repair(out, RULES)[1] == []


def test_migration_without_switch_out_and_repair_moves_the_minority():
    rows = [switch(0, 5, cpu=0), ev(5, 0), ev(5, 1), ev(5, 0), ev(5, 0),
            switch(5, 0, cpu=0), ev(5, 1, "sched_switch")]
    trace = build(rows)
    report = check(trace, ["thread-migration"], max_examples=5)
    assert [e["row"] for e in report.rule("thread-migration").examples] == [2, 3]
    out, log = repair(trace, ["thread-migration"])
    assert [(e["row"], e["after"]) for e in log] == [(2, {"cpu": 0})]
    assert not check(out, ["thread-migration"]).violated


def test_needs_switch_events():
    trace = build([ev(5, 0), ev(5, 1)])
    assert check(trace, RULES).rule("thread-migration").status == "n/a"


def test_repair_restores_lost_switch_ins_with_one_insert_each(dataset_runs):
    for trace in dataset_runs.values():
        lost = check(trace, ["cpu-switch"]).rule("cpu-switch").count
        fixed, log = repair(trace)
        assert len(log) == lost
        assert all(e["op"] == "insert" and e["after"]["event"] == "sched_switch" for e in log)
        assert not check(fixed).violated


def test_double_switch_out_gets_the_missing_switch_in():
    rows = [switch(0, 5, cpu=0), ev(5, 0), switch(5, 0, cpu=0), ev(5, 0), ev(5, 0),
            switch(5, 0, cpu=0)]
    trace = build(rows)
    assert check(trace, ["cpu-switch"]).rule("cpu-switch").count == 1
    out, log = repair(trace, ["cpu-switch"])
    assert [(e["op"], e["row"]) for e in log] == [("insert", 3)]
    assert json.loads(log[0]["after"]["payload"])["next_tid"] == 5
    assert not check(out, ["cpu-switch"]).violated

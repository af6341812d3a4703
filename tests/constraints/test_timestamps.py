import numpy as np

from constraint_helpers import build, dataset_runs, many_threads  # noqa: F401 (fixtures)
from tracesynth.constraints import check, repair
from tracesynth.constraints.rules.timestamps import monotone_fix


def test_real_traces_have_ordered_timestamps(many_threads, dataset_runs):
    for trace in [many_threads, *dataset_runs.values()]:
        report = check(trace, ["timestamps", "timestamps-per-cpu"])
        assert report.per_rule == {"timestamps": 0, "timestamps-per-cpu": 0}


def test_backwards_timestamp_is_a_violation_globally_and_per_cpu():
    trace = build([{"event": "a", "cpu": 0, "ts": 10}, {"event": "b", "cpu": 1, "ts": 20},
                   {"event": "c", "cpu": 0, "ts": 15}, {"event": "d", "cpu": 0, "ts": 5}])
    report = check(trace, ["timestamps", "timestamps-per-cpu"])
    assert report.rule("timestamps").count == 2  # rows 2 (15 < 20) and 3 (5 < 15)
    assert [e["row"] for e in report.rule("timestamps").examples] == [2, 3]
    assert report.rule("timestamps-per-cpu").count == 1  # on CPU 0 only 5 < 15 goes back
    assert report.violated


def test_light_trace_checks_timestamps_and_marks_the_rest_not_applicable():
    trace = build([{"event": "a", "ts": 3}, {"event": "b", "ts": 2}])
    report = check(trace)
    assert report.rule("timestamps").status == "violated"
    statuses = {r.name: r.status for r in report.rules if r.name != "timestamps"}
    assert set(statuses.values()) == {"n/a"}
    assert "lacks cpu" in report.rule("timestamps-per-cpu").reason


def test_repair_lowers_a_single_spike_with_one_edit():
    ts = np.array([10, 20, 9999, 30, 40, 50])
    fixed = monotone_fix(ts)
    assert (np.diff(fixed) >= 0).all()
    assert (fixed != ts).sum() == 1
    trace = build([{"event": "e", "ts": int(t), "cpu": 0} for t in ts])
    out, log = repair(trace)
    assert len(log) == 1 and log[0]["op"] == "set" and log[0]["row"] == 2
    assert not check(out).violated


def test_repair_raises_a_single_dip_with_one_edit():
    ts = np.array([10, 20, 30, 1, 40, 50])
    fixed = monotone_fix(ts)
    assert (fixed != ts).sum() == 1 and fixed[3] == 30

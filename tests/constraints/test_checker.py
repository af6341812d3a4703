import pytest

from constraint_helpers import build, call, many_threads, sc  # noqa: F401
from tracesynth.constraints import all_rules, check
from tracesynth.errors import ConfigError


def test_every_rule_is_documented_and_names_its_channels():
    names = [r.name for r in all_rules()]
    assert len(names) == len(set(names)) >= 9
    channels = {"event", "ts", "tid", "cpu", "ret", "procname", "payload", "pid"}
    for rule in all_rules():
        assert rule.explanation and "\n" not in rule.explanation
        assert set(rule.channels) <= channels


def test_many_threads_checks_clean_with_every_rule_applicable(many_threads):
    report = check(many_threads)
    assert report.violations == 0 and not report.violated
    assert {r.status for r in report.rules} == {"ok"}
    assert report.events == 240_644


def test_report_counts_rates_examples_and_json():
    rows = [sc("read", "entry"), sc("write", "entry"), *call("close", 5)]
    report = check(build(rows))
    pairing = report.rule("syscall-pairing")
    assert pairing.count == 2 and pairing.per_1000 == pytest.approx(500.0)  # write, close
    assert pairing.examples[0] == {"row": 1, "ts": 2000, "tid": 1, "cpu": 0,
                                   "event": "syscall_entry_write", "reason": pairing.examples[0]["reason"]}
    data = report.to_dict()
    assert data["per_rule"]["return-values"] == 1 and data["violated"] is True
    assert "fd-lifecycle" not in data["per_rule"] or data["per_rule"]["fd-lifecycle"] == 0


def test_rule_selection():
    trace = build([{"event": "a", "ts": 2}, {"event": "b", "ts": 1}])
    assert [r.name for r in check(trace, "timestamps,procname").rules] == ["timestamps", "procname"]
    with pytest.raises(ConfigError, match="unknown rule"):
        check(trace, ["no-such-rule"])


def test_empty_trace_is_not_applicable_everywhere():
    report = check(build([]))
    assert {r.status for r in report.rules} == {"n/a"} and not report.violated


def test_payload_that_is_not_json_is_a_format_error():
    from tracesynth.errors import TraceFormatError

    trace = build([{"event": "sched_switch", "cpu": 0, "tid": 1, "payload": "prev_tid=1 next_tid=2"}])
    with pytest.raises(TraceFormatError, match=r"\(row 0\): payload is not JSON"):
        check(trace)

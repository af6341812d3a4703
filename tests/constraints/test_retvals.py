from constraint_helpers import bug446190, build, call, dataset_runs, many_threads  # noqa: F401
from tracesynth.constraints import check, repair
from tracesynth.constraints.rules.retvals import ret_ok
from tracesynth.constraints import syscall_table as sct
import numpy as np

RULE = ["return-values"]


def test_real_traces_return_values_in_domain(many_threads, bug446190, dataset_runs):
    # bug446190 is a 32-bit ARM kernel: mmap2 addresses above 2 GiB show sign-extended.
    for trace in [many_threads, bug446190, *dataset_runs.values()]:
        assert check(trace, RULE).per_rule == {"return-values": 0}


def test_domains():
    cls = np.array([sct.ZERO, sct.ZERO, sct.FD, sct.FD, sct.ADDR, sct.ADDR, sct.NONNEG, sct.ANY,
                    sct.NORETURN, sct.ERRONLY, sct.COUNT])
    ret = np.array([0, 5, 3, 1 << 30, 0x7F0000001000, 0x7F0000001001, -5000, -5000, 0, -4, 10])
    count = np.array([-1] * 10 + [5])
    assert ret_ok(cls, ret, count).tolist() == [True, False, True, False, True, False, False,
                                                True, False, True, False]


def test_constructed_violations_and_repair():
    rows = [*call("close", 7), *call("open", -5000), *call("read", 100, count=10, fd=3),
            *call("mmap", 12345), *call("getpid", 42),
            {"event": "syscall_entry_exit_group", "tid": 1, "cpu": 0},
            {"event": "syscall_exit_exit_group", "tid": 1, "cpu": 0, "ret": 0}]
    trace = build(rows)
    report = check(trace, RULE, max_examples=10)
    assert [e["row"] for e in report.rule("return-values").examples] == [1, 3, 5, 7, 11]
    out, log = repair(trace, RULE)
    assert not check(out, RULE).violated
    after = {e["row"]: (e["after"] or {}).get("ret") for e in log}
    assert after[1] == 0 and after[3] == sct.EINVAL and after[5] == 10 and after[7] == 12288
    assert repair(out, RULE)[1] == []

from constraint_helpers import build, call, dataset_runs, many_threads, sc, switch  # noqa: F401
from tracesynth.constraints import check, repair
from tracesynth.constraints.corrupt import corrupt


def mangle(trace, k, seed):
    """Break a real trace the ways a generator does (see tracesynth.constraints.corrupt)."""
    return corrupt(trace, k, seed)


def test_mangled_real_trace_repairs_clean_with_few_edits(many_threads):
    part = many_threads.slice(0, 60_000)
    broken = mangle(part, k=40, seed=3)
    before = check(broken)
    assert before.violated and before.rule("syscall-pairing").count >= 30
    fixed, log = repair(broken)
    assert not check(fixed).violated
    assert len(log) <= 5 * 40 * 5  # 200 corruptions, a bounded number of edits each
    assert {"op", "row", "rule", "before", "after"} <= set(log[0])
    assert repair(fixed)[1] == []  # idempotent


def test_clean_real_trace_needs_no_edits(many_threads):
    fixed, log = repair(many_threads)
    assert log == [] and len(fixed) == len(many_threads)


def test_constructed_mess_repairs_clean_and_logs_original_rows():
    rows = [switch(0, 1, cpu=0), sc("read", "entry"), sc("write", "exit", ret=3),
            {"event": "irq_handler_entry", "tid": 1, "cpu": 0, "procname": "zzz", "ts": 10},
            *call("close", 7), sc("open", "exit", ret=-7000),
            {"event": "sched_process_exit", "tid": 1, "cpu": 0, "payload": {"tid": 1}},
            *call("read", 3, count=9, fd=0)]
    trace = build(rows)
    fixed, log = repair(trace)
    assert check(trace).violated and not check(fixed).violated
    assert all(e["row"] is None or 0 <= e["row"] < len(trace) for e in log)
    assert repair(fixed)[1] == []


def test_generator_output_repairs_clean(dataset_runs):
    """A baseline generator's raw output breaks many rules at once (switch payloads copied
    out of context, descriptors reused...): repair still ends clean and is idempotent."""
    from tracesynth.generators.markov import Markov

    real = dataset_runs["gzip"] if "gzip" in dataset_runs else next(iter(dataset_runs.values()))
    synthetic = Markov(order=4, random_state=0).fit(real).sample(20_000, seed=1)
    before = check(synthetic)
    assert before.violated
    fixed, log = repair(synthetic)
    assert not check(fixed).violated
    assert len(log) < 2 * before.violations
    assert fixed.meta.workload == synthetic.meta.workload
    assert repair(fixed)[1] == []


def test_repair_ends_on_a_trace_without_coherent_scheduling():
    """An order-8 Markov chain interleaves scimark's two threads and CPUs with no coherent
    scheduling; fixes there kept re-inserting the switches a drop removed, and repair never
    ended. It must end, check clean and be idempotent."""
    import time

    import tracesynth.datasets as datasets
    from tracesynth.constraints import check, repair
    from tracesynth.generators.markov import Markov

    real = [datasets.load("scimark", run=r) for r in (1, 2)]
    synthetic = Markov(order=8, random_state=0).fit(real).sample(6000, seed=0)
    start = time.perf_counter()
    fixed, edits = repair(synthetic)
    assert time.perf_counter() - start < 120
    assert edits and not any(check(fixed).per_rule.values())
    assert repair(fixed)[1] == []

"""Validity measures that need no thread ids: serial syscalls out of one-at-a-time order."""

import pyarrow as pa

import tracesynth.datasets as datasets
from tracesynth.schema import Trace
from tracesynth.evaluation.validity import serial_breaks


def test_serial_breaks_judge_light_traces_against_the_real_runs_order():
    train = [datasets.load("pybench", run=r) for r in (1, 2)]
    held_out = datasets.load("pybench", run=3)
    real = serial_breaks(train, [held_out])
    assert real["syscalls"] > 20 and real["per_1k"] == 0.0 and real["events"] == len(held_out)
    # Stripped of its thread ids and with every 50th serial entry's exit dropped, the same
    # run breaks the order where the exits went missing.
    events = held_out.events.column("event").to_pylist()
    exits = [i for i, e in enumerate(events) if e.startswith("syscall_exit_") and e != "syscall_exit_poll"]
    gone = set(exits[::50])
    table = held_out.events.take([i for i in range(len(events)) if i not in gone])
    table = table.set_column(table.schema.get_field_index("tid"), "tid", pa.nulls(len(table), pa.int64()))
    broken = serial_breaks(train, [Trace(table, held_out.meta)])
    assert broken["per_1k"] > 1000.0 * 0.5 * len(gone) / len(table)

"""Which syscalls the real runs never overlap: learnt from the bundled runs themselves."""

import numpy as np
import pytest

import tracesynth.datasets as datasets
from tracesynth.encoding.serial import MIN_CALLS, overlaps, serial_syscalls


def _events(workload, run):
    return datasets.load(workload, run=run).events.column("event").to_numpy(zero_copy_only=False)


def _overlaps(events, names) -> int:
    """Brute force: serial syscall events that break one-at-a-time order given the previous."""
    last, count = None, 0
    for e in events:
        for prefix, kind in (("syscall_entry_", 1), ("syscall_exit_", 2)):
            if e.startswith(prefix) and e[len(prefix):] in names:
                call = (kind, e[len(prefix):])
                count += last is not None and (kind == last[0] or (kind == 2 and call[1] != last[1]))
                last = call
    return count


@pytest.mark.parametrize("workload", ["stream", "pybench"])
def test_training_runs_never_overlap_what_is_learnt_and_the_held_out_run_agrees(workload):
    train = [_events(workload, 1), _events(workload, 2)]
    serial = serial_syscalls(train)
    assert serial and all(_overlaps(run, set(serial)) == 0 for run in train)
    assert _overlaps(_events(workload, 3), set(serial)) == 0
    every = {e.split("_", 2)[2] for run in train for e in run if e.startswith("syscall_")}
    # Each syscall left out breaks the order with the chosen ones in a training run, or is too
    # rare to judge.
    for name in every - set(serial):
        calls = sum(int(e.endswith("_" + name) and e.startswith("syscall_entry_")) for run in train for e in run)
        joined = set(serial) | {name}
        assert _overlaps(train[0], joined) + _overlaps(train[1], joined) > 0 or calls < MIN_CALLS, name


def test_stream_write_is_serial_and_futex_is_not():
    serial = serial_syscalls([_events("stream", 1), _events("stream", 2)])
    assert "write" in serial and "futex" not in serial  # STREAM's threads wait on futexes together


def test_pybench_parent_poll_and_child_execve_are_left_out():
    serial = serial_syscalls([_events("pybench", 1), _events("pybench", 2)])
    assert "poll" not in serial and "execve" not in serial  # the parent polls while a child starts
    assert {"read", "openat", "mmap", "newfstatat"} <= set(serial)


def test_pybench_serial_syscalls_cover_nearly_all_its_calls():
    serial = set(serial_syscalls([_events("pybench", 1), _events("pybench", 2)]))
    calls = [e.split("_", 2)[2] for e in _events("pybench", 3) if e.startswith("syscall_")]
    assert np.mean([c in serial for c in calls]) > 0.99


def test_rules_of_alternation():
    e, x = "syscall_entry_", "syscall_exit_"
    calls = [e + "read", x + "read"] * MIN_CALLS
    assert serial_syscalls([calls]) == ["read"]
    assert serial_syscalls([[x + "read"] + calls]) == ["read"]  # begun before recording began
    assert serial_syscalls([calls[:-2]]) == []  # too few calls to judge
    assert serial_syscalls([calls, calls[:2] + [e + "read"] + calls[2:]]) == []  # overlaps in one run
    assert serial_syscalls([[e + "exit_group"] * 8]) == []  # never returns
    assert serial_syscalls([["sched_switch", None, *calls]]) == ["read"]
    # write is entered while read is pending in one place: one of the two has to go (ties: by name).
    both = [e + "write", x + "write"] * MIN_CALLS + calls
    assert serial_syscalls([both]) == ["read", "write"]
    assert serial_syscalls([both + [e + "read", e + "write", x + "write", x + "read"]]) == ["write"]


def test_overlaps_counts_what_the_brute_force_counts():
    # build's held-out run breaks its training runs' alternation now and then (parallel jobs).
    serial = serial_syscalls([_events("build", 1), _events("build", 2)])
    held_out = _events("build", 3)
    broken, total = overlaps(held_out, serial)
    assert broken == _overlaps(held_out, set(serial)) > 0
    assert total == sum(e.split("_", 2)[2] in set(serial) for e in held_out if e.startswith("syscall_"))

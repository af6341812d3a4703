"""Shared fixtures: where the real traces live, and small canonical traces built in code."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_CTF = Path(os.environ.get("TRACESYNTH_SHARED_CTF", REPO.parent / "shared" / "data" / "ctf"))
TEST_DATA = REPO / "tests" / "data"


def ctf_trace(name: str) -> Path:
    path = SHARED_CTF / name
    if not (path / "metadata").exists():
        pytest.skip(f"shared LTTng trace {name} not found at {path}")
    return path


@functools.lru_cache(maxsize=None)
def _load_shared(name: str):
    import tracesynth

    return tracesynth.load(SHARED_CTF / name, format="ctf")


def shared_trace(name: str):
    """A shared LTTng trace read once per test session (callers must not mutate it)."""
    ctf_trace(name)  # skips when the trace is absent
    return _load_shared(name)


@pytest.fixture
def small_trace():
    """A hand-made 6-event trace covering every column, including nulls and payloads."""
    from tracesynth import Trace, TraceMeta

    return Trace.from_pydict(
        {
            "ts": [1000, 1500, 1600, 2500, 2600, 4000],
            "cpu": [0, 0, 1, 1, 0, 0],
            "tid": [10, 10, None, 11, 10, 10],
            "pid": [10, 10, None, 11, 10, 10],
            "procname": ["bash", "bash", None, "cat", "bash", "bash"],
            "event": [
                "syscall_entry_openat",
                "syscall_exit_openat",
                "irq_handler_entry",
                "sched_switch",
                "syscall_entry_close",
                "syscall_exit_close",
            ],
            "ret": [None, 3, None, None, None, 0],
            "payload": [
                '{"filename":"/etc/passwd, with comma","flags":0}',
                None,
                '{"irq":1,"name":"i8042"}',
                '{"next_comm":"cat","next_tid":11,"prev_comm":"swapper/1","prev_tid":0}',
                '{"fd":3}',
                None,
            ],
        },
        TraceMeta(source_format="test", workload="unit", hostname="box", kernel_version="6.1"),
    )

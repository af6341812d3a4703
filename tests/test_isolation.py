"""A crash inside a C decoder becomes a one-line error and leaves no temporary output."""

from __future__ import annotations

import os
import signal

import pytest

from tracesynth.errors import TraceFormatError, TraceSynthError
from tracesynth.fileio import TMP_PREFIX
from tracesynth.isolation import run_isolated


def _crash(target):
    (target.parent / f"{TMP_PREFIX}0123456789ab-{target.name}").write_text("half")
    os.kill(os.getpid(), signal.SIGSEGV)


def _fail():
    raise TraceFormatError("in.ctf", 12, "bad packet")


def test_child_crash_is_reported_and_cleaned(tmp_path):
    target = tmp_path / "out.parquet"
    with pytest.raises(TraceFormatError, match=r"in\.ctf: the decoder crashed \(SIGSEGV\)"):
        run_isolated(_crash, (target,), source="in.ctf", target=target)
    assert list(tmp_path.iterdir()) == []


def test_child_error_and_result_cross_over():
    with pytest.raises(TraceSynthError, match=r"in\.ctf:12: bad packet"):
        run_isolated(_fail, (), source="in.ctf", target=__import__("pathlib").Path("/nonexistent/x"))
    assert run_isolated(lambda a, b: [a, b], ("x", 2), source="s", target=None) == ["x", 2]

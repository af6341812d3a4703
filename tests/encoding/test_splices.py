"""The span splice's table of training runs (encoding/splices.py): what it keeps, for which
workloads, and its safetensors round trip."""

from __future__ import annotations

import numpy as np
import pytest

import tracesynth.datasets as ds
from tracesynth.encoding.splices import RunTable
from tracesynth.encoding.trace_encoder import TraceEncoder


def test_fit_keeps_each_run_whole_for_the_workloads_asked():
    a, b = np.arange(10), np.arange(5) + 3
    table = RunTable.fit([("w", a, a * 2), ("w", b, b), ("v", a, a)], workloads=["w"])
    assert table.knows("w") and not table.knows("v")
    (c1, g1), (c2, g2) = table.runs("w")
    assert np.array_equal(c1, a) and np.array_equal(g1, a * 2) and np.array_equal(c2, b) and np.array_equal(g2, b)
    back = RunTable.from_arrays(table.to_arrays())
    assert [np.array_equal(x, y) for (x, _), (y, _) in zip(back.runs("w"), table.runs("w"))] == [True, True]
    with pytest.raises(ValueError, match="3 event codes but 2 gaps"):
        RunTable.fit([("w", a[:3], a[:2])])
    arrays = table.to_arrays()
    del arrays["gaps/w"]
    with pytest.raises(ValueError, match="incomplete"):
        RunTable.from_arrays(arrays)


def test_encoder_keeps_runs_only_where_they_share_most_long_spans():
    tar = [ds.load("tar", r).slice(0, 20000) for r in (1, 2)]
    for t in tar:
        t.meta.workload = "tar"
    encoder = TraceEncoder("light").fit(tar)
    assert encoder.copies.natural["tar"] < 0.4 and not encoder.splices.knows("tar")

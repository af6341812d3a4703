"""The start-up table on real runs: each training run's first events, every channel, kept and
saved with the model; the seed picks the run."""

from __future__ import annotations

import numpy as np
import pytest

import tracesynth.datasets as ds
from tracesynth.encoding.startups import STARTUP_EVENTS, StartupTable
from tracesynth.encoding.trace_encoder import TraceEncoder


@pytest.fixture(scope="module")
def sqlite():
    runs = [ds.load("sqlite", r) for r in (1, 2)]
    return TraceEncoder("full").fit(runs), runs


def test_each_training_run_begins_as_recorded(sqlite):
    encoder, runs = sqlite
    table = encoder.startups
    assert table.knows("sqlite") and not table.knows("gzip") and all(len(r["event"]) == STARTUP_EVENTS for r in table.runs["sqlite"])
    assert [table.chosen("sqlite", seed) for seed in range(5)] == [0, 1, 0, 1, 0]  # the runs in turn
    for seed, run in ((0, runs[0]), (1, runs[1]), (2, runs[0]), (7, runs[1])):
        start = table.pick("sqlite", seed, 300)
        assert set(start) == set(encoder.channels) and all(len(v) == 300 for v in start.values())
        assert list(encoder.event.decode(start["event"])) == run.events.column("event").to_pylist()[:300]
        whole = encoder.encode(run)  # the start of the whole run's codes, gaps included
        assert all(np.array_equal(start[ch], whole[ch][:300]) for ch in ("event", "dt", "cpu", "ret", "procname"))
        # threads as a window holds them: slots in order of first appearance, not real tids
        assert np.array_equal(start["tid"], encoder.tid.slot_window(whole["tid"][:300])[0])
        assert 1 <= start["tid"].max() <= encoder.tid.slots < whole["tid"][:300].min()
    # the two runs begin alike but not identically (the scheduler interleaves differently)
    a, b = table.pick("sqlite", 0, 256)["event"], table.pick("sqlite", 1, 256)["event"]
    assert a[0] == b[0] and not np.array_equal(a, b)
    with pytest.raises(KeyError):
        table.pick("gzip", 0, 10)


def test_short_runs_are_kept_whole_and_empty_ones_not_at_all(sqlite):
    encoder, runs = sqlite
    short = runs[0].slice(0, 40)
    table = StartupTable.fit([("a", encoder.startup_codes(short)), ("b", encoder.startup_codes(runs[0].slice(0, 0)))])
    assert [len(r["event"]) for r in table.runs["a"]] == [40] and not table.knows("b")
    assert len(table.pick("a", 3, 100)["event"]) == 40


def test_arrays_round_trip_and_damage_is_refused(sqlite):
    encoder, _ = sqlite
    table = encoder.startups
    back = StartupTable.from_arrays(table.to_arrays())
    for seed in (0, 1):
        a, b = table.pick("sqlite", seed, STARTUP_EVENTS), back.pick("sqlite", seed, STARTUP_EVENTS)
        assert a.keys() == b.keys() and all(np.array_equal(a[ch], b[ch]) for ch in a)
    arrays = table.to_arrays()
    arrays["event/sqlite/0"] = arrays["event/sqlite/0"][:10]
    with pytest.raises(ValueError, match="different lengths"):
        StartupTable.from_arrays(arrays)
    arrays = table.to_arrays()
    del arrays["event/sqlite/0"], arrays["dt/sqlite/0"], arrays["tid/sqlite/0"], arrays["cpu/sqlite/0"]
    del arrays["ret/sqlite/0"], arrays["procname/sqlite/0"]
    with pytest.raises(ValueError, match="not numbered"):
        StartupTable.from_arrays(arrays)
    with pytest.raises(ValueError, match="bad start-up entry"):
        StartupTable.from_arrays({"event/sqlite": np.zeros(3, dtype=np.int64)})


def test_the_model_directory_keeps_the_table(sqlite, tmp_path):
    from tracesynth.model.checkpoint import load_model, save_checkpoint
    from tracesynth.model.config import SIZES, ModelConfig
    from tracesynth.model.denoiser import Denoiser

    encoder, _ = sqlite
    model = Denoiser(ModelConfig(context=64, vocab_sizes=encoder.vocab_sizes(), n_workloads=len(encoder.workloads),
                                 **SIZES["tiny"]))
    save_checkpoint(tmp_path / "m", model, encoder, None)
    loaded = load_model(tmp_path / "m")[1].startups
    assert np.array_equal(loaded.pick("sqlite", 1, 500)["event"], encoder.startups.pick("sqlite", 1, 500)["event"])
    (tmp_path / "m" / "startups.safetensors").unlink()  # a model saved before the table: none
    assert load_model(tmp_path / "m")[1].startups is None

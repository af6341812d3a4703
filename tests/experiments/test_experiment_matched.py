"""`evaluation.synthetic_events: train`: beside its held-out-size trace, a cell samples one trace
per training run, as long as that run; the next-event predictor of `tstr_matched` learns from
those, and every other figure is that of a run without them."""

from __future__ import annotations

import pandas as pd
import pytest

import tracesynth.datasets as ds
from tracesynth.experiments.config import load_config
from tracesynth.experiments.results import COLUMNS, render_markdown
from tracesynth.experiments.runner import Split, load_split, matched_lengths, run_experiment, trace_seed
from tracesynth.generators.markov import Markov

CONFIG = """
name: matched
data: {workloads: [stream], train_runs: [1, 2], test_runs: [3], max_train_events: 3000, max_test_events: 1200}
grid: {channels: [light], contexts: [64], constraints: [none], seeds: [0]}
tracesynth: {train_steps: 2, batch_events: 256, size: tiny, sample_steps: 2, device: cpu}
peers:
  - {name: markov, params: {order: 2}}
evaluation: {seeds: 1, quick: true, synthetic_events: SIDE}
"""

# every figure but timings and the training-size set's own
SAME = ["tstr", "trtr", "tstr_trtr", "tstr_latency", "disc_512", "disc_events_512", "violations_per_1k",
        "copy_rate_256", "unseen_8gram", "repeats", "startup_edits", "event_jsd", "events_synthetic", "events_test"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    if "stream" not in ds.workloads():
        pytest.skip("bundled dataset not present")
    root = tmp_path_factory.mktemp("matched")
    frames = {}
    for side in ("train", "test"):
        (root / f"{side}.yaml").write_text(CONFIG.replace("SIDE", side))
        counts = run_experiment(load_config(root / f"{side}.yaml"), root / side)
        assert counts == {"cells": 2, "skipped": 0, "ok": 2, "error": 0}
        frames[side] = pd.read_csv(root / side / "results.csv").set_index("generator")
    return root, frames


class _Runs:
    """Stand-ins for traces where only their length is read."""

    def __init__(self, *lengths):
        self.traces = [list(range(n)) for n in lengths]


def test_a_matched_cell_samples_the_training_set_s_shape():
    assert matched_lengths(Split(_Runs(500, 300).traces, _Runs(400).traces)) == [500, 300]


def test_each_trace_of_a_cell_has_its_own_seed_and_the_first_is_the_cell_s():
    seeds = {(seed, i): trace_seed(seed, i) for seed in range(4) for i in range(3)}
    assert all(seeds[(seed, 0)] == seed for seed in range(4))
    assert len(set(seeds.values())) == len(seeds)  # no trace repeats another cell's or trace's seed
    assert trace_seed(2, 1) == trace_seed(2, 1)


def test_cells_sample_the_training_size_and_score_tstr_on_all_of_it(runs):
    _root, frames = runs
    matched = frames["train"]
    assert (matched["events_train"] == 6000).all() and (matched["events_test"] == 1200).all()
    assert (matched["events_synthetic"] == 1200).all() and (matched["events_matched"] == 6000).all()
    assert (matched["matched_events_per_s"] > 0).all()
    assert matched["tstr_matched"].between(0, 1).all()
    assert (matched["tstr_trtr_matched"] - matched["tstr_matched"] / matched["trtr"]).abs().max() < 1e-12
    assert (matched["tstr_matched"] != matched["tstr"]).all()  # five times the data: another predictor


def test_the_matched_figure_is_the_predictor_trained_on_one_trace_per_training_run(runs):
    """The Markov cell's `tstr_matched`, recomputed from its two training-size traces (seeds
    trace_seed(0, 1) and trace_seed(0, 2), 3,000 events each: the training runs' lengths)."""
    from tracesynth.evaluation.runner import next_event_tstr

    root, frames = runs
    config = load_config(root / "train.yaml")
    split = load_split(config, "stream")
    chain = Markov(order=2, random_state=0).fit(split.train)
    traces = [chain.sample(len(run), workload="stream", seed=trace_seed(0, i + 1))
              for i, run in enumerate(split.train)]
    expected = next_event_tstr(split.train, split.test, traces, seeds=1)["mean"]
    assert frames["train"].loc["markov", "tstr_matched"] == pytest.approx(expected, abs=1e-12)


def test_every_other_figure_is_that_of_a_held_out_size_run(runs):
    _root, frames = runs
    plain, matched = frames["test"], frames["train"]
    assert plain[["tstr_matched", "tstr_trtr_matched", "events_matched"]].isna().all().all()
    pd.testing.assert_frame_equal(matched.loc[plain.index, SAME], plain[SAME])


def test_results_md_shows_both_sizes_side_by_side(runs):
    root, _frames = runs
    md = (root / "train" / "results.md").read_text()
    assert "a training-size set beside (one trace per training run, as long as that run)" in md
    table = md[md.index("## TSTR at training size"):]
    row = next(line for line in table.splitlines() if line.startswith("| stream | markov |"))
    assert row.split(" | ")[2:4] == ["1200", "6000"]
    assert "## TSTR at training size" not in (root / "test" / "results.md").read_text()


def test_the_folds_table_gets_a_training_size_row():
    rows = [dict(generator="markov", workload="build", fold=fold, seed=0, status="ok", error="", tstr=0.7,
                 trtr=0.8, tstr_trtr=0.875, tstr_matched=0.8, tstr_trtr_matched=1.0, events_synthetic=100,
                 events_matched=500) for fold in "123"]
    md = render_markdown(pd.DataFrame(rows, columns=COLUMNS).astype({"fold": object}))
    part = md[md.index("TSTR/TRTR at training size:"):]
    assert "| build | markov | 1.000 | 1.000 | 1.000 | 1.000 | 1.000 |" in part
    assert "| build | markov | 100 | 500 | 0.875 ± 0.000 | 1.000 ± 0.000 | 0.125 ± 0.000 | 0.800 ± 0.000 |" in md

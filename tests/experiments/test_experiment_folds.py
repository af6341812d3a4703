"""`data.folds: leave-one-out`: every run held out once, each fold with its own models, its own
cells and its own column in the results; older single-split runs pair with the matching fold."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch

import tracesynth.datasets as ds
from tracesynth.errors import ConfigError
from tracesynth.experiments.compare import compare, load_results
from tracesynth.experiments.config import ExperimentConfig, Fold, folds, load_config
from tracesynth.experiments.grid import TRACESYNTH, enumerate_cells, model_groups
from tracesynth.experiments.imported import plan_imports
from tracesynth.experiments.results import COLUMNS, fill_fold, read_csv
from tracesynth.experiments.runner import load_split, run_experiment
from tracesynth.model.checkpoint import read_model_info
from tracesynth.model.config import SIZES, ModelConfig, TrainConfig
from tracesynth.model.provenance import data_mismatch
from tracesynth.model.train import train

GRID = {"channels": ["light"], "contexts": [64], "constraints": ["none"], "seeds": [0]}

CONFIG = """
name: folds
data: {workloads: [stream], train_runs: [1, 2], test_runs: [3], folds: leave-one-out,
       max_train_events: 3000, max_test_events: 1200}
grid: {channels: [light], contexts: [64], constraints: [none], seeds: [0, 1], retrain_per_seed: false}
tracesynth: {train_steps: 2, batch_events: 256, size: tiny, sample_steps: 2, device: cpu}
peers:
  - {name: markov, params: {order: 2}}
evaluation: {seeds: 1, quick: true}
"""


# --- config and grid ---------------------------------------------------------------------------
def test_leave_one_out_holds_every_run_out_once():
    config = ExperimentConfig.from_dict({"data": {"train_runs": [1, 3], "test_runs": [2], "folds": "leave-one-out"}})
    assert folds(config.data) == [Fold("1", (2, 3), (1,)), Fold("2", (1, 3), (2,)), Fold("3", (1, 2), (3,))]
    # without folds: the one split, unlabelled (its cell ids stay what they were)
    assert folds(ExperimentConfig.from_dict({}).data) == [Fold("", (1, 2), (3,))]
    # with folds, the two lists are the pool of runs: an overlap is no leak
    overlapping = ExperimentConfig.from_dict({"data": {"train_runs": [1, 2], "test_runs": [2, 3],
                                                       "folds": "leave-one-out"}})
    assert [f.label for f in folds(overlapping.data)] == ["1", "2", "3"]


@pytest.mark.parametrize("data, words", [
    ({"folds": "k-fold"}, "data.folds: expected leave-one-out (or null for one split), got 'k-fold'"),
    ({"folds": "leave-one-out", "train_runs": [2], "test_runs": [2]}, "data.folds: leave-one-out needs two runs"),
    ({"folds": True}, "data.folds: expected a string or null"),
])
def test_bad_folds_name_the_key(data, words):
    with pytest.raises(ConfigError) as err:
        ExperimentConfig.from_dict({"data": data}, "x.yaml")
    assert str(err.value).startswith("x.yaml: ") and words in str(err.value)


def test_each_fold_trains_its_own_models_and_names_its_cells():
    config = ExperimentConfig.from_dict({"data": {"folds": "leave-one-out"}, "grid": {**GRID, "seeds": [0, 1],
                                                                                      "retrain_per_seed": False},
                                         "peers": [{"name": "markov"}]})
    cells = enumerate_cells(config, ["gzip"])
    assert len(cells) == 3 * 2 * 2
    assert cells[0].cell_id == "tracesynth__gzip__light__ctx64__none__fold1__seed0"
    assert cells[1].cell_id == "markov__gzip__fold1__seed0"
    trained = [(model_id, group) for model_id, group in model_groups(cells) if group[0].generator == TRACESYNTH]
    assert [m for m, _ in trained] == [f"tracesynth__gzip__light__ctx64__fold{f}__seed0" for f in "123"]
    assert all(sorted(c.seed for c in group) == [0, 1] for _, group in trained)  # seeds share their fold's model


def test_load_split_takes_a_fold_and_refuses_an_unknown_one():
    if "stream" not in ds.workloads():
        pytest.skip("bundled dataset not present")
    config = ExperimentConfig.from_dict({"data": {"workloads": ["stream"], "folds": "leave-one-out",
                                                  "max_train_events": 100, "max_test_events": 100}})
    split = load_split(config, "stream", "2")
    assert [t.meta.run for t in split.train] == ["1", "3"] and [t.meta.run for t in split.test] == ["2"]
    with pytest.raises(ConfigError, match="no fold '' in this config; its folds: 1, 2, 3"):
        load_split(config, "stream")


# --- end to end --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def folds_run(tmp_path_factory):
    if "stream" not in ds.workloads():
        pytest.skip("bundled dataset not present")
    root = tmp_path_factory.mktemp("folds")
    (root / "folds.yaml").write_text(CONFIG)
    config = load_config(root / "folds.yaml")
    counts = run_experiment(config, root / "out")
    return config, root / "out", counts


def test_every_fold_trains_on_the_other_runs_and_is_scored_on_its_own(folds_run):
    config, out, counts = folds_run
    assert counts == {"cells": 12, "skipped": 0, "ok": 12, "error": 0}
    for fold in "123":
        model = out / "models" / f"tracesynth__stream__light__ctx64__fold{fold}__seed0"
        recorded = read_model_info(model)["state"]["data"]
        assert data_mismatch(recorded, load_split(config, "stream", fold).train) is None
        other = "1" if fold != "1" else "2"
        assert data_mismatch(recorded, load_split(config, "stream", other).train) is not None
    frame = pd.read_csv(out / "results.csv", dtype={"fold": str})
    assert sorted(frame["fold"].unique()) == ["1", "2", "3"]
    assert (frame.groupby("fold").size() == 4).all()  # TraceSynth and markov, two seeds each
    md = (out / "results.md").read_text()
    assert "Folds: leave-one-out over runs [1, 2, 3]" in md and "## Folds" in md
    row = next(line for line in md.splitlines() if line.startswith("| stream | tracesynth (light, 64, none) |"))
    assert row.count("|") == 2 + 3 + 2 + 1  # workload, generator, three folds, mean, worst
    assert "disc 2048 − floor:" in md  # 1,200-event held-out runs: no 2048-event windows to score
    # resumable per fold: nothing runs again
    assert run_experiment(config, out, resume=True)["skipped"] == 12


def test_an_older_single_split_run_pairs_with_its_fold(folds_run, tmp_path):
    _config, out, _counts = folds_run
    # a run of the same settings with run 3 held out, written before results had a `fold` column
    older = tmp_path / "older"
    older.mkdir()
    frame = read_csv(out / "results.csv")
    frame = frame[frame["fold"] == "3"].drop(columns=["fold"])
    frame.to_csv(older / "results.csv", index=False)
    (older / "run.json").write_text(json.dumps({"config": {"data": {"train_runs": [1, 2], "test_runs": [3]}}}))
    assert set(load_results(older)["fold"]) == {"3"}
    result = compare(load_results(older), load_results(out), ["tstr"])
    assert "fold" in result.keys and len(result.pairs) == 4
    assert (result.pairs["tstr_a"] == result.pairs["tstr_b"]).all()


def test_the_folds_table_scores_windows_on_event_types_where_cells_have_it():
    from tracesynth.experiments.results import render_markdown

    rows = [dict(generator=g, workload="build", channels="light" if g == "tracesynth" else "", context=4096,
                 constraints="guided", fold=fold, seed=seed, status="ok", error="", tstr_trtr=ratio,
                 disc_2048=0.9, disc_floor_2048=0.6, disc_events_2048=events, disc_events_floor_2048=0.5)
            for g, events in (("tracesynth", 0.8), ("markov", 0.6)) for fold in "123" for seed, ratio in
            ((0, 0.9), (1, 1.0))]
    md = render_markdown(pd.DataFrame(rows, columns=COLUMNS).astype({"fold": object}))
    table = md[md.index("disc 2048, event types − floor:"):]
    assert "| build | markov | 0.100 ± 0.000 | 0.100 ± 0.000 | 0.100 ± 0.000 | 0.100 | 0.100 |" in table
    assert "| build | tracesynth (light, 4096, guided) | 0.950 ± 0.635 |" in md  # TSTR/TRTR of fold 1


def test_fill_fold_leaves_a_frame_with_folds_alone():
    frame = pd.DataFrame([{col: None for col in COLUMNS}]).assign(fold="2")
    config = {"data": {"train_runs": [1, 2], "test_runs": [3]}}
    assert fill_fold(frame, config)["fold"].tolist() == ["2"]
    assert fill_fold(frame.assign(fold=""), config)["fold"].tolist() == ["3"]
    assert fill_fold(frame.assign(fold=""), {"data": {**config["data"], "folds": "leave-one-out"}})["fold"].tolist() == [""]


def test_imported_models_are_matched_to_their_fold_by_training_traces(folds_run, tmp_path):
    config, _out, _counts = folds_run
    torch.set_num_threads(1)
    for fold in "123":  # the same seed and shape three times: only the training traces differ
        train(load_split(config, "stream", fold).train, tmp_path / "gpu" / f"model-{fold}", channels="light",
              model_config=ModelConfig(context=64, **SIZES["tiny"]),
              train_config=TrainConfig(steps=2, batch_size=4, seed=0, device="cpu", val_every=2, checkpoint_every=2))
    cells = enumerate_cells(config, ["stream"])
    plan = plan_imports(cells, tmp_path / "run", tmp_path / "gpu",
                        lambda cell: load_split(config, cell.workload, cell.fold))
    assert {model_id: candidate.path.name for model_id, candidate, _w, _c in plan} == {
        f"tracesynth__stream__light__ctx64__fold{f}__seed0": f"model-{f}" for f in "123"}

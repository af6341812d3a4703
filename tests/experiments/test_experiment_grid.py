"""Grid enumeration: every combination once, constraint modes sharing one model."""

from __future__ import annotations

from pathlib import Path

from tracesynth.experiments.config import ExperimentConfig, load_config
from tracesynth.experiments.grid import TRACESYNTH, enumerate_cells, model_groups

REPO = Path(__file__).resolve().parents[2]
WORKLOADS = ["build", "fileio", "gzip", "pybench", "scimark", "sqlite", "stream", "tar"]


def test_default_grid_counts():
    config = load_config(REPO / "experiments" / "default.yaml")
    cells = enumerate_cells(config, WORKLOADS)
    ours = [c for c in cells if c.generator == TRACESYNTH]
    assert len(ours) == 8 * 2 * 4 * 3 * 3
    assert len(cells) - len(ours) == 8 * 3 * len(config.peers)
    assert len({c.cell_id for c in cells}) == len(cells)
    groups = model_groups(cells)
    # one trained model per (workload, channels, context, seed), shared by the 3 constraint modes
    trained = [g for g in groups if g[1][0].generator == TRACESYNTH]
    assert len(trained) == 8 * 2 * 4 * 3
    assert all(sorted(c.constraints for c in cells_) == ["guided", "none", "repair"] for _, cells_ in trained)
    assert all(len({c.model_id for c in cells_}) == 1 for _, cells_ in groups)


def test_cells_are_grouped_and_ids_are_stable():
    config = ExperimentConfig.from_dict({"grid": {"channels": ["light"], "contexts": [256, 1024],
                                                  "constraints": ["none", "repair"], "seeds": [3]},
                                         "peers": [{"name": "markov", "label": "markov8", "params": {"order": 8}}]})
    cells = enumerate_cells(config, ["gzip"])
    assert [c.cell_id for c in cells] == [
        "tracesynth__gzip__light__ctx256__none__seed3",
        "tracesynth__gzip__light__ctx256__repair__seed3",
        "tracesynth__gzip__light__ctx1024__none__seed3",
        "tracesynth__gzip__light__ctx1024__repair__seed3",
        "markov8__gzip__seed3",
    ]
    assert cells[0].model_id == cells[1].model_id != cells[2].model_id
    # adjacent: a model's cells are consecutive in the enumeration
    ids = [c.model_id for c in cells]
    assert [m for i, m in enumerate(ids) if i == 0 or ids[i - 1] != m] == [g for g, _ in model_groups(cells)]


def test_custom_channel_list_gets_a_file_safe_id():
    config = ExperimentConfig.from_dict({"grid": {"channels": ["event,dt,tid"], "contexts": [256],
                                                  "constraints": ["none"], "seeds": [0]}})
    (cell,) = enumerate_cells(config, ["tar"])
    assert cell.cell_id == "tracesynth__tar__event-dt-tid__ctx256__none__seed0"


def test_seeds_can_share_one_trained_model():
    grid = {"channels": ["light"], "contexts": [4096], "constraints": ["none", "guided"], "seeds": [0, 1, 2]}
    each = enumerate_cells(ExperimentConfig.from_dict({"grid": grid}), ["gzip"])
    shared = enumerate_cells(ExperimentConfig.from_dict({"grid": {**grid, "retrain_per_seed": False}}), ["gzip"])
    assert len(model_groups(each)) == 3
    ((model_id, cells),) = model_groups(shared)  # one training, six sampled cells
    assert model_id == "tracesynth__gzip__light__ctx4096__seed0" and len(cells) == 6
    assert sorted(c.seed for c in cells) == [0, 0, 1, 1, 2, 2] and {c.training_seed for c in cells} == {0}
    # cell ids (one result file per sampling seed) do not change
    assert [c.cell_id for c in shared] == [c.cell_id for c in each]

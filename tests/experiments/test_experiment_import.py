"""`tracesynth experiment --models`: models trained elsewhere are matched to the grid by what they
are and by the traces they were trained on, then sampled instead of training."""

from __future__ import annotations

import dataclasses
import json

import pandas as pd
import pytest
import torch

import tracesynth.datasets as ds
from tracesynth.cli import main
from tracesynth.errors import ConfigError
from tracesynth.experiments.config import load_config
from tracesynth.experiments.runner import load_split, run_experiment
from tracesynth.model.config import SIZES, ModelConfig, TrainConfig
from tracesynth.model.train import train

CONFIG = """
name: imported
data: {workloads: [stream], train_runs: [1, 2], test_runs: [3], max_train_events: 3000, max_test_events: 1000}
grid: {channels: [light], contexts: [64], constraints: [none], seeds: [0]}
tracesynth: {train_steps: 2, batch_events: 256, size: tiny, sample_steps: 2, device: cpu}
peers: []
evaluation: {seeds: 1, quick: true}
"""


def _train(traces, out, seed=0, **train_kw):
    torch.set_num_threads(1)
    settings = dict(steps=3, batch_size=4, seed=seed, device="cpu", val_every=3, checkpoint_every=3,
                    ema=0.99) | train_kw  # averaged: training.safetensors must stay behind on import
    train(traces, out, channels="light", model_config=ModelConfig(context=64, **SIZES["tiny"]),
          train_config=TrainConfig(**settings))


@pytest.fixture(scope="module")
def elsewhere(tmp_path_factory):
    """A config, its training split, and a folder of models 'trained elsewhere': `stream` on the
    split's training traces (3 steps, where the config would train 2), and one of another seed."""
    if "stream" not in ds.workloads():
        pytest.skip("bundled dataset not present")
    root = tmp_path_factory.mktemp("import")
    config_file = root / "imported.yaml"
    config_file.write_text(CONFIG)
    config = load_config(config_file)
    split = load_split(config, "stream")
    _train(split.train, root / "gpu" / "stream")
    _train(split.train, root / "other-seed" / "stream", seed=1)
    return config_file, config, split, root


def test_imported_models_are_sampled_instead_of_trained(elsewhere, capsys):
    config_file, _config, _split, root = elsewhere
    out = root / "out"
    assert main(["experiment", str(config_file), "-o", str(out), "--models", str(root / "gpu")]) == 0
    log = " ".join(capsys.readouterr().err.split())
    assert "tracesynth__stream__light__ctx64__seed0 ← " in log and "3 steps on cpu; training traces match the split's" in log, log
    info = json.loads((out / "models" / "tracesynth__stream__light__ctx64__seed0" / "experiment.json").read_text())
    assert info["train_steps"] == 3 and info["trained_on"] == "cpu" and info["imported_from"].endswith("gpu/stream")
    state = json.loads((root / "gpu" / "stream" / "state.json").read_text())
    assert info["train_seconds"] == pytest.approx(state["seconds"]) and info["params"] > 0
    assert (root / "gpu" / "stream" / "training.safetensors").exists()  # resume-only files stay behind
    for name in ("optimizer.safetensors", "training.safetensors"):
        assert not (out / "models" / "tracesynth__stream__light__ctx64__seed0" / name).exists()
    frame = pd.read_csv(out / "results.csv")
    assert list(frame["status"]) == ["ok"] and list(frame["train_steps"]) == [3]  # the import's, not the config's 2
    assert "--models" in (out / "COMMAND.md").read_text()
    # A resumed run finds it in place.
    assert main(["experiment", str(config_file), "-o", str(out), "--resume", "--models", str(root / "gpu")]) == 0
    assert "already in models/" in capsys.readouterr().err


def test_a_model_of_other_training_traces_is_refused_before_anything_runs(elsewhere, tmp_path):
    _config_file, config, split, root = elsewhere
    held_out = load_split(config, "stream").test  # trained on the test run: it would look brilliant
    _train([held_out[0], split.train[1]], tmp_path / "leaky" / "stream")
    with pytest.raises(ConfigError, match=r"trained on other traces than the experiment's training split "
                                          r"\(training trace 1 differs in events: 1000 there, 3000 here\)"):
        run_experiment(config, tmp_path / "out", models_from=tmp_path / "leaky")
    assert not (tmp_path / "out").exists()  # refused before the results directory was made


def test_a_model_validated_on_the_held_out_run_is_refused(elsewhere, tmp_path):
    _config_file, config, split, root = elsewhere
    whole_run = ds.load("stream", 3).slice(0, 2000).with_meta(workload="stream")  # the split cuts it at 1000
    torch.set_num_threads(1)
    train(split.train, tmp_path / "chosen" / "stream", channels="light", val_traces=[whole_run],
          model_config=ModelConfig(context=64, **SIZES["tiny"]),
          train_config=TrainConfig(steps=3, batch_size=4, device="cpu", val_every=3, checkpoint_every=3))
    with pytest.raises(ConfigError, match=r"validated on the experiment's held-out run \(stream, run 3\)"):
        run_experiment(config, tmp_path / "out", models_from=tmp_path / "chosen")
    assert not (tmp_path / "out").exists()


def test_a_grid_model_without_a_match_is_named_with_what_was_offered(elsewhere, tmp_path):
    _config_file, config, _split, root = elsewhere
    with pytest.raises(ConfigError, match=r"stream, light, context 64, seed 0: no model in .*other-seed\. "
                                          r"Offered: .*stream; event,dt; context 64; seed 1"):
        run_experiment(config, tmp_path / "out", models_from=root / "other-seed")
    with pytest.raises(ConfigError, match="no model directory there"):
        run_experiment(config, tmp_path / "out2", models_from=tmp_path)
    assert main(["experiment", str(root / "imported.yaml"), "-o", str(tmp_path / "o3"),
                 "--models", str(tmp_path / "missing")]) == 2


def test_a_model_saved_before_fingerprints_is_checked_by_its_first_trace(elsewhere, tmp_path):
    _config_file, config, split, root = elsewhere
    old = tmp_path / "old" / "stream"
    _train(split.train, old)
    state = json.loads((old / "state.json").read_text())
    del state["data"], state["device"]
    (old / "state.json").write_text(json.dumps(state))
    lines = []
    run_experiment(config, tmp_path / "out", models_from=old, on_message=lines.append)
    assert "first training trace matches the split's (saved before training data was recorded)" in lines[0]
    info = json.loads((tmp_path / "out" / "models" / "tracesynth__stream__light__ctx64__seed0" /
                       "experiment.json").read_text())
    assert info["trained_on"] == "not recorded"
    encoder = json.loads((old / "encoder.json").read_text())
    encoder["start_ts"]["stream"] += 1
    (old / "encoder.json").write_text(json.dumps(encoder))
    with pytest.raises(ConfigError, match="its first stream training trace began at"):
        run_experiment(config, tmp_path / "out-again", models_from=old)


def test_a_keep_best_config_imports_the_best_validated_weights_where_they_were_kept(elsewhere, tmp_path):
    _config_file, config, split, root = elsewhere
    kept = tmp_path / "kept" / "stream"
    _train(split.train, kept, steps=6, val_every=1, keep_best=True, lr=0.05)
    best_step = json.loads((kept / "best" / "state.json").read_text())["step"]
    config = dataclasses.replace(config, tracesynth=dataclasses.replace(config.tracesynth, keep_best=True))
    lines = []
    run_experiment(config, tmp_path / "out", models_from=kept, on_message=lines.append)
    assert f"best-validated weights, step {best_step}" in lines[0]
    model = tmp_path / "out" / "models" / "tracesynth__stream__light__ctx64__seed0"
    info = json.loads((model / "experiment.json").read_text())
    assert info["best_step"] == best_step and info["train_steps"] == 6  # the run's steps, the best's weights
    assert (model / "model.safetensors").read_bytes() == (kept / "best" / "model.safetensors").read_bytes()
    assert list(pd.read_csv(tmp_path / "out" / "results.csv")["best_step"]) == [best_step]
    # Without a best/ the last weights come, and it says so.
    lines.clear()
    run_experiment(config, tmp_path / "out2", models_from=root / "gpu", on_message=lines.append)
    assert "no best/ kept: its last weights" in lines[0]

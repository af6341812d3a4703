"""Experiment configs: the shipped YAMLs load; mistakes name the file and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracesynth.errors import ConfigError
from tracesynth.experiments.config import ExperimentConfig, load_config, train_steps

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", sorted(p.name for p in (REPO / "experiments").glob("*.yaml")))
def test_shipped_configs_load(name):
    config = load_config(REPO / "experiments" / name)
    assert config.grid.seeds
    # plain dataclasses: a JSON round trip gives the same config back
    again = ExperimentConfig.from_dict(config.to_dict())
    assert again == config


def test_default_config_is_the_issue_grid():
    config = load_config(REPO / "experiments" / "default.yaml")
    assert config.grid.channels == ["light", "full"]
    assert config.grid.contexts == [256, 1024, 4096, 16384]
    assert config.grid.constraints == ["none", "repair", "guided"]
    assert {p.name for p in config.peers} >= {"markov", "ar", "par", "dgan"}


def _write(tmp_path, text: str) -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("text, key, words", [
    ("grid:\n  contexs: [256]\n", "grid.contexs", "unknown key"),
    ("grid:\n  contexts: [256, big]\n", "grid.contexts[1]", "expected an integer"),
    ("grid:\n  contexts: [250]\n", "grid.contexts[0]", "multiple of 16"),
    ("grid:\n  constraints: [none, fix]\n", "grid.constraints[1]", "'fix'"),
    ("grid:\n  channels: [light, colour]\n", "grid.channels[1]", "colour"),
    ("grid:\n  seeds: [0, 0]\n", "grid.seeds", "duplicates"),
    ("data:\n  test_runs: [2]\n", "data.test_runs", "also training runs"),
    ("data:\n  max_test_events: 0\n", "data.max_test_events", "positive"),
    ("tracesynth:\n  train_steps: 2.5\n", "tracesynth.train_steps", "expected an integer"),
    ("tracesynth:\n  size: huge\n", "tracesynth.size", "huge"),
    ("tracesynth:\n  start_rate: 1.5\n", "tracesynth.start_rate", "in [0, 1]"),
    ("tracesynth:\n  spread: -1\n", "tracesynth.spread", "0 (off) or positive"),
    ("tracesynth:\n  tid_temperature: 0\n", "tracesynth.tid_temperature", "positive"),
    ("tracesynth:\n  temperature: -0.5\n", "tracesynth.temperature", "positive"),
    ("tracesynth:\n  support_rounds: -1\n", "tracesynth.support_rounds", "0 (off) or positive"),
    ("tracesynth:\n  copy_rounds: -3\n", "tracesynth.copy_rounds", "0 (off) or positive"),
    ("tracesynth:\n  guide_rounds: -1\n", "tracesynth.guide_rounds", "0 (off) or positive"),
    ("tracesynth:\n  ngram_weight: -0.5\n", "tracesynth.ngram_weight", "0 (off) or positive"),
    ("tracesynth:\n  ngram_rounds: 0\n", "tracesynth.ngram_rounds", "1 or more"),
    ("tracesynth:\n  prefix_fraction: 1.0\n", "tracesynth.prefix_fraction", "in [0, 1)"),
    ("tracesynth:\n  start_steps: 0\n", "tracesynth.start_steps", "at least 1"),
    ("tracesynth:\n  splice: 8\n", "tracesynth.splice", "anchor of at least 16 events"),
    ("tracesynth:\n  splice_walk: 1\n", "tracesynth.splice_walk", "piece of at least 2 events"),
    ("tracesynth:\n  splice_walk_context: 1\n", "tracesynth.splice_walk_context", "match of at least 2 events"),
    ("tracesynth:\n  splice_walk_drift: -64\n", "tracesynth.splice_walk_drift", "0 (the splice's)"),
    ("tracesynth:\n  phase_events: -1\n", "tracesynth.phase_events", "0 (no trace-phase embedding) or positive"),
    ("tracesynth:\n  cadence: sometimes\n", "tracesynth.cadence", "true, false or auto"),
    ("tracesynth:\n  cadence: 2\n", "tracesynth.cadence", "expected true/false or a string"),
    ("tracesynth:\n  ngram_order: 65\n", "tracesynth.ngram_order", "1-64"),
    ("tracesynth:\n  serial_guide: maybe\n", "tracesynth.serial_guide", "true"),
    ("tracesynth:\n  prior_from: -1\n", "tracesynth.prior_from", "0 (every event) or more"),
    ("tracesynth:\n  train_precision: fp16\n", "tracesynth.train_precision", "auto, fp32, bf16"),
    ("tracesynth:\n  sample_precision: half\n", "tracesynth.sample_precision", "auto, fp32, bf16"),
    ("peers:\n  - name: gan\n", "peers[0].name", "unknown peer"),
    ("peers:\n  - name: markov\n  - name: markov\n", "peers", "distinct"),
    ("evaluation:\n  predictor: gru\n", "evaluation.predictor", "quick"),
    ("evaluation:\n  synthetic_events: all\n", "evaluation.synthetic_events", "expected test or train, got 'all'"),
    ("grid: [1, 2]\n", "grid", "expected a mapping"),
    ("nmae: x\n", "nmae", "unknown key"),
])
def test_bad_config_names_file_and_key(tmp_path, text, key, words):
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    message = str(err.value)
    assert message.startswith(f"{path}: {key}:"), message
    assert words in message
    assert "\n" not in message


def test_cadence_takes_a_switch_or_auto(tmp_path):
    for text, value in (("true", True), ("false", False), ("auto", "auto")):
        assert load_config(_write(tmp_path, f"tracesynth:\n  cadence: {text}\n")).tracesynth.cadence == value


def test_yaml_syntax_error_names_the_line(tmp_path):
    path = _write(tmp_path, "name: x\ngrid:\n  contexts: [256\n  seeds: [0]\n")
    with pytest.raises(ConfigError, match=rf"^{path}:\d+: not valid YAML"):
        load_config(path)


def test_missing_file_and_non_mapping(tmp_path):
    with pytest.raises(ConfigError, match="cannot read experiment config"):
        load_config(tmp_path / "absent.yaml")
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_config(_write(tmp_path, "- a\n- b\n"))


def test_peers_only_grid_and_budget(tmp_path):
    config = load_config(_write(tmp_path, "grid: {channels: [], contexts: [], constraints: []}\n"
                                          "peers: [{name: markov, params: {order: 2}}]\n"))
    assert config.peers[0].params == {"order": 2}
    with pytest.raises(ConfigError, match="grid.contexts: is empty"):
        load_config(_write(tmp_path, "grid: {contexts: []}\n"))
    assert train_steps(config, 0.5) == round(config.tracesynth.train_steps * 0.5)
    assert train_steps(config, 1e-9) == 1
    with pytest.raises(ConfigError, match="--budget must be positive"):
        train_steps(config, 0)

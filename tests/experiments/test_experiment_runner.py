"""The runner end to end on a real bundled workload at tiny sizes: cells run, results appear,
a failing peer records its error, a second run refuses to mix, --resume skips finished cells."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pandas as pd
import pytest

import tracesynth
import tracesynth.datasets as ds
from tracesynth.cli import main
from tracesynth.errors import ConfigError
from tracesynth.experiments.config import load_config
from tracesynth.experiments.runner import run_experiment

CONFIG = """
name: tiny
data: {workloads: [stream], train_runs: [1, 2], test_runs: [3], max_train_events: 3000, max_test_events: 1500}
grid: {channels: [light], contexts: [64], constraints: [none, repair], seeds: [0]}
tracesynth: {train_steps: 2, batch_events: 256, size: tiny, sample_steps: 2, device: cpu, keep_best: true}
peers:
  - {name: markov, params: {order: 2}}
  - {name: copy, params: {chunk_length: 256}}
  - {name: resample, params: {piece: 64}}
  - {name: markov, label: broken, params: {order: 0}}
evaluation: {seeds: 1, quick: true}
"""


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    if "stream" not in ds.workloads():
        pytest.skip("bundled dataset not present")
    root = tmp_path_factory.mktemp("experiment")
    config_file = root / "tiny.yaml"
    config_file.write_text(CONFIG)
    out = root / "out"
    phases = []
    counts = run_experiment(load_config(config_file), out, on_progress=lambda p, c, d: phases.append((p, c, d)))
    return config_file, out, counts, phases


def test_cells_run_and_results_are_written(finished_run):
    _config, out, counts, phases = finished_run
    assert counts == {"cells": 6, "skipped": 0, "ok": 5, "error": 1}
    # the two constraint modes share one trained model: trained once, saved once
    assert [p for p, c, d in phases if p == "train" and c.generator == "tracesynth"] == ["train"]
    assert len(list((out / "models").iterdir())) == 1
    frame = pd.read_csv(out / "results.csv")
    assert len(frame) == 6
    ok = frame[frame["status"] == "ok"]
    assert ok["tstr"].between(0, 1).all() and ok["trtr"].between(0, 1).all()
    assert (ok["events_synthetic"] == 1500).all()
    repair = ok[(ok["generator"] == "tracesynth") & (ok["constraints"] == "repair")]
    assert repair["edits_per_1k"].notna().all()
    # keep_best: validated at both steps, the best one's weights sampled and said
    assert set(ok[ok["generator"] == "tracesynth"]["best_step"]) <= {1, 2}
    info = json.loads((out / "models" / "tracesynth__stream__light__ctx64__seed0" / "experiment.json").read_text())
    assert info["best_step"] in (1, 2)
    broken = frame[frame["generator"] == "broken"].iloc[0]
    assert broken["status"] == "error" and "order must be a positive integer" in broken["error"]
    assert pd.isna(broken["tstr"])  # no number for a failed cell
    md = (out / "results.md").read_text()
    assert "order must be a positive integer" in md and "## Peers, side by side" in md
    assert (out / "plots" / "peers.png").stat().st_size > 1000
    # how OpenMP threads waited moves the speed column by a third: recorded and said
    policy = json.loads((out / "run.json").read_text())["environment"]["omp_wait_policy"]
    assert f"(OpenMP wait policy: {policy})" in md


def test_second_run_refuses_to_mix_and_resume_skips(finished_run):
    config_file, out, _counts, _phases = finished_run
    config = load_config(config_file)
    with pytest.raises(ConfigError, match="--resume"):
        run_experiment(config, out)
    markov_cell = out / "cells" / "markov__stream__seed0.json"
    before = {p.name: p.stat().st_mtime_ns for p in (out / "cells").glob("*.json")}
    markov_cell.unlink()
    phases = []
    counts = run_experiment(config, out, resume=True, on_progress=lambda p, c, d: phases.append((p, c.cell_id)))
    # finished cells skipped; the deleted one and the failed one run again; no retraining
    assert counts == {"cells": 6, "skipped": 4, "ok": 1, "error": 1}
    assert not any(p == "train" and cid.startswith("tracesynth") for p, cid in phases)
    after = {p.name: p.stat().st_mtime_ns for p in (out / "cells").glob("*.json")}
    for name in before:
        if name not in ("markov__stream__seed0.json", "broken__stream__seed0.json"):
            assert after[name] == before[name], name
    assert json.loads(markov_cell.read_text())["status"] == "ok"
    with pytest.raises(ConfigError, match="different config or budget"):
        run_experiment(config, out, resume=True, budget=2.0)


def test_a_run_started_before_a_setting_existed_still_resumes(finished_run):
    config_file, out, _counts, _phases = finished_run
    config = load_config(config_file)
    saved = (out / "run.json").read_text()
    try:
        run = json.loads(saved)
        del run["config"]["tracesynth"]["sample_precision"]  # as a run.json written before the key existed
        (out / "run.json").write_text(json.dumps(run))
        assert run_experiment(config, out, resume=True)["skipped"] == 5
        run["config"]["tracesynth"]["lr"] = 0.5  # a setting that differs still refuses
        (out / "run.json").write_text(json.dumps(run))
        with pytest.raises(ConfigError, match="different config or budget"):
            run_experiment(config, out, resume=True)
    finally:
        (out / "run.json").write_text(saved)


def test_cli_report_only_and_errors(finished_run, capsys, monkeypatch):
    config_file, out, _counts, _phases = finished_run
    (out / "results.md").unlink()
    assert main(["experiment", str(config_file), "-o", str(out), "--report-only"]) == 0
    assert (out / "results.md").exists()
    from tracesynth.cli.experiment import write_command_record

    monkeypatch.chdir(out)  # not a git checkout: the record still names the commit of the code that ran
    text = write_command_record(out, config_file, 0.5, True).read_text()
    assert f"tracesynth experiment {config_file} -o {out} --budget 0.5 --resume" in text
    source = Path(tracesynth.__file__).parent
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=source).stdout
    if head.strip():
        assert f"git {head.strip()}" in text
    assert "torch" in text and "sdv" in text
    bad = config_file.parent / "bad.yaml"
    bad.write_text("grid:\n  seeds: [zero]\n")
    assert main(["experiment", str(bad), "-o", str(out / "x")]) == 2
    err = capsys.readouterr().err
    assert f"{bad}: grid.seeds[0]: expected an integer" in err.replace("\n", "")


def test_config_sampling_settings_apply_to_saved_models(finished_run):
    """Sampling settings in the config reach a model loaded from models/, not only a new one,
    so an ablation of the sampler can reuse trained models."""
    from dataclasses import replace

    from tracesynth.experiments.grid import enumerate_cells
    from tracesynth.experiments.runner import _trained_tracesynth

    config_file, out, _counts, _phases = finished_run
    config = load_config(config_file)
    cell = next(c for c in enumerate_cells(config, ["stream"]) if c.generator == "tracesynth")
    never = lambda *a: pytest.fail("a saved model must not be retrained")  # noqa: E731
    saved, _, _ = _trained_tracesynth(config, cell, 2, None, out, never)
    assert (saved.spread, saved.tid_temperature, saved.prefix_fraction, saved.temperature) == (4, 0.5, 0.25, 1.0)
    for spread, tid_temperature, prefix, start, temperature, splice, walk, match, drift, aligned in (
            (0, 1.0, 0.0, 1, 0.8, 0, 0, 0, 0, False), (9, 0.3, 0.125, 64, 1.2, 64, 32, 16, 64, True)):
        config.tracesynth = replace(config.tracesynth, spread=spread, tid_temperature=tid_temperature,
                                    prefix_fraction=prefix, start_steps=start, temperature=temperature,
                                    splice=splice, splice_walk=walk, splice_walk_context=match, splice_walk_drift=drift,
                                    splice_walk_aligned=aligned)
        loaded, _, _ = _trained_tracesynth(config, cell, 2, None, out, never)
        assert (loaded.spread, loaded.tid_temperature, loaded.prefix_fraction, loaded.start_steps,
                loaded.temperature, loaded.splice, loaded.splice_walk, loaded.splice_walk_context,
                loaded.splice_walk_drift, loaded.splice_walk_aligned) == (spread, tid_temperature, prefix, start,
                                                                          temperature, splice, walk, match, drift,
                                                                          aligned)
    assert saved.precision == "fp32"  # sampling precision: the default unless the config sets it
    config.tracesynth = replace(config.tracesynth, sample_precision="bf16", train_precision="fp32", ngram_order=5)
    loaded, _, _ = _trained_tracesynth(config, cell, 2, None, out, never)
    assert loaded.precision == "bf16"
    assert loaded.encoder_.ngrams.k == 8  # a training setting: the saved model keeps its tables
    from tracesynth.experiments.runner import _tracesynth

    fresh = _tracesynth(config, cell, 2)
    assert (fresh.train_precision, fresh._configs()[1].precision, fresh.precision) == ("fp32", "fp32", "bf16")
    assert fresh._configs()[1].ngram_order == 5
    assert fresh._configs()[0].trace_phases == 64  # the model's phase embedding unless the config says
    config.tracesynth = replace(config.tracesynth, phase_events=0)
    assert _tracesynth(config, cell, 2)._configs()[0].trace_phases == 0
    config.tracesynth = replace(config.tracesynth, phase_events=2048)
    assert _tracesynth(config, cell, 2)._configs()[0].trace_phase_events == 2048


def test_cli_run_logs_a_line_per_cell(finished_run, capsys):
    """Under nohup or CI (stderr not a terminal) the run still says what it is doing, cell by cell."""
    config_file, out, _counts, _phases = finished_run
    (out / "cells" / "markov__stream__seed0.json").unlink()
    capsys.readouterr()
    main(["experiment", str(config_file), "-o", str(out), "--resume"])
    lines = [line[11:].split(" · ")[0] for line in capsys.readouterr().err.splitlines() if line.startswith("[")]
    assert "skip: tracesynth__stream__light__ctx64__none__seed0 1/6 17%" in lines, lines
    assert lines.index("train: markov__stream__seed0 2/6 33%") < lines.index("done: markov__stream__seed0 3/6 50%")
    assert any(line.startswith("error: broken__stream__seed0") for line in lines), lines

"""TraceSynth cells sampled in a child process (`experiments.sampling_process`): the child's
OpenMP threads start without the parent's PASSIVE policy, it draws the trace the parent would
draw, errors come back named, and the experiment uses it exactly when the passive policy was
TraceSynth's own choice."""

from __future__ import annotations

import json
import os

import pytest

import tracesynth.datasets as ds
from tracesynth import runtime
from tracesynth.experiments.config import load_config
from tracesynth.experiments.runner import run_experiment
from tracesynth.experiments.sampling_process import SamplingProcess
from tracesynth.generators.diffusion import TraceSynth

CONFIG = """
name: child
data: {workloads: [stream], train_runs: [1, 2], test_runs: [3], max_train_events: 3000, max_test_events: 1200}
grid: {channels: [light], contexts: [64], constraints: [guided], seeds: [0, 1]}
tracesynth: {train_steps: 2, batch_events: 256, size: tiny, sample_steps: 2, device: cpu}
peers: []
evaluation: {seeds: 1, quick: true}
"""


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    if "stream" not in ds.workloads():
        pytest.skip("bundled dataset not present")
    real = [ds.load("stream", r).slice(0, 3000) for r in (1, 2)]
    generator = TraceSynth(context=64, size="tiny", train_steps=2, batch_size=4, sample_steps=2, device="cpu",
                           constraints="guided").fit(real)
    return generator, generator.save(tmp_path_factory.mktemp("child") / "model")


def test_the_child_draws_what_this_process_draws_with_its_own_wait_policy(model_dir, monkeypatch):
    generator, directory = model_dir
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    here = generator.generate(700, "stream", 3, constraints="guided")
    with SamplingProcess(threads=1) as child:
        assert child._pool.apply(os.getenv, ("OMP_WAIT_POLICY",)) is None  # libgomp's default there
        assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"  # and left as it was here
        trace, seconds = child.generate(directory, generator.get_params(), 700, "stream", 3, "guided")
        assert seconds > 0
        assert trace.to_pandas()["event"].tolist() == here.to_pandas()["event"].tolist()
        assert trace.meta.extra.get("constraints") == "guided"  # the trace's metadata comes back too
        with pytest.raises(RuntimeError, match="ConfigError: unknown workload 'gzip'"):
            child.generate(directory, {}, 10, "gzip", 0, "none")


def test_the_experiment_samples_in_a_child_only_where_passive_was_its_own_choice(tmp_path, monkeypatch):
    if "stream" not in ds.workloads():
        pytest.skip("bundled dataset not present")
    config_file = tmp_path / "child.yaml"
    config_file.write_text(CONFIG)
    events = {}
    for own in (True, False):
        monkeypatch.setattr(runtime, "_PASSIVE_SET_HERE", own)
        monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
        out = tmp_path / f"own-{own}"
        assert run_experiment(load_config(config_file), out)["ok"] == 2
        env = json.loads((out / "run.json").read_text())["environment"]
        assert env["omp_wait_policy"] == "PASSIVE"
        assert ("child process" in env["sampling_wait_policy"]) is own
        metrics = [json.loads(c.read_text())["metrics"] for c in sorted((out / "cells").glob("*.json"))]
        assert all(m["sample_seconds"] > 0 for m in metrics)
        # what the traces score, timings aside: the same traces either way
        events[own] = [(m["events_synthetic"], m["tstr"], m["unseen_8gram"], m["startup_edits"]) for m in metrics]
    assert events[True] == events[False] and [e[0] for e in events[True]] == [1200, 1200]


def test_where_no_child_can_start_the_cells_are_sampled_here(tmp_path, monkeypatch):
    if "stream" not in ds.workloads():
        pytest.skip("bundled dataset not present")
    import tracesynth.experiments.sampling_process as sampling_process

    def refuse(threads):
        raise OSError("[Errno 38] Function not implemented")  # what SemLock says without /dev/shm

    monkeypatch.setattr(sampling_process, "SamplingProcess", refuse)
    monkeypatch.setattr(runtime, "_PASSIVE_SET_HERE", True)
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    config_file = tmp_path / "child.yaml"
    config_file.write_text(CONFIG)
    with pytest.warns(RuntimeWarning, match="sampling in this process .* no child process"):
        assert run_experiment(load_config(config_file), tmp_path / "out")["ok"] == 2

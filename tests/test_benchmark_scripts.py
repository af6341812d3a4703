"""The scripts in benchmarks/ are run by hand, seldom and long: each must at least import
against today's package (a renamed function would otherwise surface only the next time someone
measures). Importing runs nothing: every script works under `if __name__ == "__main__"`."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPTS = sorted(p.name for p in BENCHMARKS.glob("*.py"))
HELPERS = {"model_dirs.py", "refit_args.py"}  # imported by the scripts, not run


@pytest.mark.parametrize("name", SCRIPTS)
def test_a_benchmark_script_imports_and_has_a_main(name, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # scripts import their sibling helpers
    spec = importlib.util.spec_from_file_location(f"benchmark_{Path(name).stem}", BENCHMARKS / name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if name not in HELPERS:
        assert callable(getattr(module, "main", None)), f"{name}: no main()"
        assert module.__doc__, f"{name}: no docstring saying what it measures"


def test_holdout_rotation_reads_the_published_headline(capsys, monkeypatch):
    """The rotation table on the committed headline run (held out: run 3, Markov-8 beside):
    the README's figures come back, and a folder without run.json is a one-line error."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import holdout_rotation

    results = BENCHMARKS / "results"
    assert holdout_rotation.main([str(results / "experiments-defaults-run3")]) == 0
    out = capsys.readouterr().out
    assert "| mean | 0.978 | 0.978 | — |" in out  # TraceSynth's TSTR/TRTR, README's headline
    assert "| gzip | 0.80 (0.87) |" in out  # Markov-8's disc@512 on event types (floor)
    assert "held out 3: TSTR/TRTR mean 0.978 over 8 workloads (bar 0.98), lowest build 0.884" in out
    # the previous headline with the peers run's Markov-8
    assert holdout_rotation.main([str(results / "experiments-guide-rounds-ngram"),
                                  str(results / "experiments-peers-sequence")]) == 0
    out = capsys.readouterr().out
    assert "| mean | 0.984 | 0.984 | — |" in out and "| gzip | 0.78 (0.87) |" in out
    assert holdout_rotation.main([str(results / "support")]) == 2
    assert "no run.json" in capsys.readouterr().err
    # a run of one workload given first stands in for that workload's cells, the rest stay
    assert holdout_rotation.main([str(results / "experiments-closers-run3"),
                                  str(results / "experiments-guide-rounds-ngram")]) == 0
    out = capsys.readouterr().out
    assert "| fileio | 1.014 | 1.014 | — |" in out and "| gzip | 1.000 | 1.000 | — |" in out
    assert "experiments-closers-run3 (6 cells, 6 seeds: fileio); " in out


def test_phase_alignment_tells_fixed_phases_from_drifting_ones(capsys, monkeypatch):
    """fio's runs switch from writing to reading at the same place (same-block blocks agree far
    better than shifted ones); build's compile units drift apart between runs (about as well)."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import numpy as np
    import phase_alignment

    assert phase_alignment.main(["--workloads", "fileio,build"]) == 0
    rows = {line.split()[0]: float(line.split()[3]) for line in capsys.readouterr().out.splitlines()[1:]}
    assert rows["fileio"] < 0.5 and rows["build"] > 0.8
    steady = np.array(["a", "b"] * 4096)  # the same run twice: every block equals its own
    assert phase_alignment.alignment([steady, steady.copy()], 64, 0, 64)[0] == 0.0
    assert phase_alignment.main(["--workloads", "fileio", "--skip", "70"]) == 2
    assert "runs too short" in capsys.readouterr().err

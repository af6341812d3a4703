"""The scripts in benchmarks/ are run by hand, seldom and long: each must at least import
against today's package (a renamed function would otherwise surface only the next time someone
measures). Importing runs nothing: every script works under `if __name__ == "__main__"`."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPTS = sorted(p.name for p in BENCHMARKS.glob("*.py"))
HELPERS = {"model_dirs.py"}  # imported by the scripts, not run


@pytest.mark.parametrize("name", SCRIPTS)
def test_a_benchmark_script_imports_and_has_a_main(name, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # scripts import their sibling helpers
    spec = importlib.util.spec_from_file_location(f"benchmark_{Path(name).stem}", BENCHMARKS / name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if name not in HELPERS:
        assert callable(getattr(module, "main", None)), f"{name}: no main()"
        assert module.__doc__, f"{name}: no docstring saying what it measures"

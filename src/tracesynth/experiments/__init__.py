"""Experiments: grids of train → generate → evaluate cells, peers side by side, published results.

    tracesynth experiment experiments/smoke.yaml -o out/smoke

config.py (YAML → dataclasses), grid.py (cells), runner.py (resumable execution), results.py
(results.csv / results.md / plots), peers.py (peer generators behind the Generator interface).
See docs/experiments.md.
"""

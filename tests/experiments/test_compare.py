"""`tracesynth compare`: two experiment runs paired cell for cell, on made-up cells whose
figures are known and on two committed runs (the same models sampled with 4 and 1 guide rounds)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from tracesynth.cli import main
from tracesynth.errors import ConfigError
from tracesynth.experiments.compare import compare, load_results, parse_conditions, render_markdown, select
from tracesynth.experiments.results import COLUMNS, ci95

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
FOUR_ROUNDS, ONE_ROUND = RESULTS / "experiments-light4096-ngram", RESULTS / "experiments-guide-rounds-ngram"
CONTEXTS = RESULTS / "experiments-context-ngram"  # one run, contexts 256 and 16384


def _frame(rows: list[dict]) -> pd.DataFrame:
    base = dict(generator="tracesynth", channels="light", context=4096, constraints="guided", status="ok", error="")
    frame = pd.DataFrame([{**base, **row} for row in rows])
    for col in COLUMNS:
        if col not in frame:
            frame[col] = None
    return frame[COLUMNS]


A_VALUES = {"sqlite": [0.90, 0.94, 0.92], "tar": [0.95, 0.93, 0.97]}
B_VALUES = {"sqlite": [0.85, 0.90, 0.89], "tar": [0.95, 0.94, 0.96]}


def _runs(**b_overrides):
    a = _frame([dict(workload=w, seed=s, disc_512=v, tstr_trtr=0.98) for w, vs in A_VALUES.items()
                for s, v in enumerate(vs)])
    b = _frame([dict(workload=w, seed=s, disc_512=v, tstr_trtr=0.99, **b_overrides) for w, vs in B_VALUES.items()
                for s, v in enumerate(vs)])
    return a, b


def test_each_workload_gets_its_paired_difference_and_the_mean_an_interval_over_workloads():
    a, b = _runs()
    result = compare(a, b, ["disc_512", "tstr_trtr"])
    assert len(result.pairs) == 6 and result.differing == {}
    sqlite = result.row("sqlite", "disc_512")
    diffs = [bv - av for av, bv in zip(A_VALUES["sqlite"], B_VALUES["sqlite"])]
    mean, half, n = ci95(diffs)
    assert (sqlite["n"], sqlite["diff"], sqlite["half"]) == (3, pytest.approx(mean), pytest.approx(half))
    assert sqlite["a"] == pytest.approx(0.92) and sqlite["b"] == pytest.approx(0.88)
    tar = result.row("tar", "disc_512")
    overall = result.row("mean", "disc_512")
    assert overall["n"] == 2  # workloads, not pairs
    assert overall["diff"] == pytest.approx((sqlite["diff"] + tar["diff"]) / 2)
    assert overall["half"] == pytest.approx(ci95([sqlite["diff"], tar["diff"]])[1])
    md = render_markdown(result)
    # sqlite's interval leaves out zero (bold), tar's does not
    assert "| sqlite | 0.920 → 0.880 (**-0.040 ± " in md
    assert "| tar | 0.950 → 0.950 (+0.000 ± " in md and "**+0.000" not in md
    assert "6 pairs over 2 workloads (sqlite 3, tar 3)" in md
    # every pair differs alike (one measurement repeated): no interval, not bold
    assert result.row("tar", "tstr_trtr")["half"] is None and "| 0.980 → 0.990 (+0.010) |" in md


def test_a_key_column_that_differs_is_what_is_compared():
    a, b = _runs(context=256)
    result = compare(a, b, ["disc_512"], name_a="ctx4096", name_b="ctx256")
    assert result.differing == {"context": ([4096], [256])}
    assert "context" not in result.keys and len(result.pairs) == 6
    assert "Compared: context 4096 → 256." in render_markdown(result)


def test_settings_from_the_runs_configs_are_named():
    a, b = _runs()
    configs = ({"name": "x", "tracesynth": {"guide_rounds": 4, "lr": 0.002}},
               {"name": "y", "tracesynth": {"guide_rounds": 1, "lr": 0.002, "self_condition": True}})
    md = render_markdown(compare(a, b, ["disc_512"], configs=configs))
    assert "Compared: `tracesynth.guide_rounds` 4 → 1; `tracesynth.self_condition` unset → True." in md


def test_against_a_peer_tracesynths_settings_are_not_named():
    """A peers-only run records the TraceSynth defaults it never used; beside a peer, only the
    generator and the other settings differ."""
    a, b = _runs(generator="resample")
    configs = ({"name": "x", "tracesynth": {"splice": 64}, "evaluation": {"seeds": 1}},
               {"name": "y", "tracesynth": {"splice": 0}, "evaluation": {"seeds": 3}})
    md = render_markdown(compare(a, b, ["disc_512"], configs=configs))
    assert "Compared: generator tracesynth → resample; `evaluation.seeds` 1 → 3." in md


def test_failed_cells_do_not_pair_and_missing_columns_say_so():
    a, b = _runs()
    b.loc[b.index[0], ["status", "disc_512"]] = ["error", None]
    result = compare(a, b, ["disc_512", "repeats"])
    assert result.row("sqlite", "disc_512")["n"] == 2 and len(result.pairs) == 5
    assert result.row("mean", "repeats")["n"] == 0
    md = render_markdown(result)
    assert "Not in both runs: repeats" in md and "| —" in md


def test_runs_that_cannot_pair_are_refused_with_the_reason():
    a, b = _runs()
    with pytest.raises(ConfigError, match="unknown metric 'disc'"):
        compare(a, b, ["disc"])
    with pytest.raises(ConfigError, match="no cell of A pairs with one of B"):
        compare(a, b.assign(seed=b["seed"] + 10), ["disc_512"])
    several = pd.concat([b.assign(context=256), b.assign(context=16384)])
    with pytest.raises(ConfigError, match=r"B: several cells pair with workload=sqlite, seed=0.*\(context 16384, 256\)"):
        compare(a, several, ["disc_512"])


def test_the_committed_guide_rounds_runs_pair_up_through_the_cli(tmp_path, capsys):
    out, plot = tmp_path / "report.md", tmp_path / "forest.png"
    assert main(["compare", str(FOUR_ROUNDS), str(ONE_ROUND / "results.csv"), "-m", "tstr_trtr",
                 "-m", "disc_512", "-o", str(out), "--plot", str(plot)]) == 0
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and not list(tmp_path.glob(".tracesynth-tmp-*"))
    printed = capsys.readouterr().out
    assert printed == out.read_text()
    assert printed.startswith("# experiments-light4096-ngram → experiments-guide-rounds-ngram\n")
    assert "`tracesynth.guide_rounds` unset → 1" in printed
    assert "48 pairs over 8 workloads" in printed
    # the same models and seeds: TSTR/TRTR within 0.005 per workload (README, Results)
    result = compare(load_results(FOUR_ROUNDS), load_results(ONE_ROUND), ["tstr_trtr"])
    assert all(abs(r) <= 0.005 for r in result.rows["diff"])
    assert json.loads((ONE_ROUND / "run.json").read_text())["config"]["tracesynth"]["guide_rounds"] == 1


def test_a_missing_run_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["compare", str(tmp_path / "nope"), str(ONE_ROUND)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "nope: no such results file" in err
    bad = tmp_path / "results.csv"
    bad.write_text("")
    assert main(["compare", str(bad), str(ONE_ROUND)]) == 2
    assert "results.csv" in capsys.readouterr().err


def test_where_splits_one_runs_grid_into_the_two_sides_of_a_comparison():
    a, b = _runs(context=256)
    grid = pd.concat([a, b])  # one run holding both contexts
    assert parse_conditions(["context=256", "workload=sqlite,tar"]) == {"context": "256", "workload": "sqlite,tar"}
    small, large = select(grid, {"context": "256"}), select(grid, {"context": "4096"})
    result = compare(large, small, ["disc_512"])
    assert result.differing == {"context": ([4096], [256])} and len(result.pairs) == 6
    assert len(select(grid, {"workload": "sqlite, tar", "seed": "0"})) == 4
    with pytest.raises(ConfigError, match=r"^grid: no cell with context=512 \(its cells have context 256, 4096\)$"):
        select(grid, {"context": "512"}, "grid")
    for bad, message in (("context", "expected KEY=VALUE"), ("ctx=256", "'ctx' is not a key column"),
                         ("context=", "expected KEY=VALUE")):
        with pytest.raises(ConfigError, match=message):
            parse_conditions([bad])
    with pytest.raises(ConfigError, match="context is given twice"):
        parse_conditions(["context=256", "context=4096"])


def test_a_committed_run_compared_with_itself_through_the_cli(capsys):
    assert main(["compare", str(CONTEXTS), "--where-a", "context=256", "--where-b", "context=16384",
                 "--where", "workload=scimark,tar", "-m", "disc_2048"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("# experiments-context-ngram [context=256] → experiments-context-ngram [context=16384]\n")
    assert "Compared: context 256 → 16384." in printed and "8 pairs over 2 workloads (scimark 4, tar 4)" in printed
    # itself, unsplit: refused; a value no cell has: the message keeps its [brackets] (not read as markup)
    assert main(["compare", str(CONTEXTS)]) == 2
    assert "needs --where-a/--where-b" in capsys.readouterr().err
    assert main(["compare", str(CONTEXTS), "--where-a", "context=512", "--where-b", "context=256"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "experiments-context-ngram [context=512]: no cell with context=512 (its cells have context 256, 16384)" in err
    assert main(["compare", str(CONTEXTS), "--where", "context=256", "--where-a", "context=256"]) == 2
    assert "give context one way" in capsys.readouterr().err

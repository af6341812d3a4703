"""results.md from a fixed results.csv: the findings tables, CIs over seeds, peers, failures."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracesynth.experiments.results import ci95, read_csv, render_markdown, write_plots

DATA = Path(__file__).parent / "data" / "results.csv"
T_975_1 = 12.706204736  # t quantile for 2 seeds (1 degree of freedom)


def _row(md: str, *starts: str) -> str:
    """The table row whose first cells are `starts`."""
    prefix = "| " + " | ".join(starts) + " |"
    rows = [line for line in md.splitlines() if line.startswith(prefix)]
    assert len(rows) == 1, (prefix, rows)
    return rows[0]


@pytest.fixture(scope="module")
def markdown():
    frame = read_csv(DATA)
    run = {"config": {"name": "fixture", "data": {"train_runs": [1, 2], "test_runs": [3]}}, "budget": 0.5,
           "train_steps": 150}
    return render_markdown(frame, run)


def test_ci95():
    mean, half, n = ci95([0.5, 0.7])
    assert (mean, n) == (pytest.approx(0.6), 2)
    assert half == pytest.approx(T_975_1 * 0.1414213562 / 2 ** 0.5, rel=1e-6)
    assert ci95([0.4]) == (0.4, None, 1)
    assert ci95([None, float("nan")]) == (None, None, 0)


def test_header_and_light_vs_full(markdown):
    assert markdown.startswith("# Experiment results: fixture")
    assert "Cells: 15 (14 finished, 1 failed). Seeds: 0, 1. Budget: 0.5" in markdown
    # per-seed ratios 0.5/0.6 and 0.7/0.7 → mean 0.917, half-width t·s/√2
    ratios = [0.5 / 0.6, 1.0]
    half = T_975_1 * abs(ratios[1] - ratios[0]) / 2 ** 0.5 / 2 ** 0.5
    row = _row(markdown, "stream", "256")
    assert f"| {sum(ratios) / 2:.3f} ± {half:.3f} |" in row
    # training time light/full: 10/20 and 12/24 → 0.50 exactly; sampling: 500/1000 → 0.50
    assert "| 0.50 ± 0.00 | 0.50 ± 0.00 |" in row
    # over both contexts: TSTR ratios 0.833, 1.0, 1.0, 1.1 → 0.983 ≥ 0.98; training cost 0.50 ≤ 0.5
    assert ("Target (light within 2% of full at half the cost or less): **met** "
            "(TSTR ratio 0.983, training cost ratio 0.50; full's own TSTR averages 0.650") in markdown


def test_context_gain_and_constraints(markdown):
    row = _row(markdown, "stream", "light", "0.600 ± 1.271")  # TSTR@256 over seeds 0.5, 0.7
    gains = [0.6 / 0.5 - 1, 0.77 / 0.7 - 1]
    half = T_975_1 * abs(gains[0] - gains[1]) / 2 ** 0.5 / 2 ** 0.5
    assert f"| {sum(gains) / 2:.3f} ± {half:.3f} |" in row
    assert row.rstrip().endswith("| not run | not run |")  # no 16384 in this grid
    row = _row(markdown, "stream", "light", "256", "—", "11.0 ± 12.7")  # violations none: 10, 12
    diffs = [0.05, 0.02]
    half = T_975_1 * abs(diffs[0] - diffs[1]) / 2 ** 0.5 / 2 ** 0.5
    assert f"| 0.0 ± 0.0 | {sum(diffs) / 2:.3f} ± {half:.3f} | not run | not run | 3.0 ± 0.0 |" in row


def test_split_peers_and_failures(markdown):
    # gzip is I/O-bound, stream compute-bound: light/256/none TSTR/TRTR per workload
    stream = (0.5 / 0.9 + 0.7 / 0.9) / 2
    gzip = (0.81 / 0.9 + 0.72 / 0.9) / 2
    row = _row(markdown, "tracesynth", "light", "256", "none", f"{stream:.3f}")
    assert row.endswith(f"| {stream:.3f} | {gzip:.3f} | {(stream + gzip) / 2:.3f} | stream {stream:.3f} | NOT met |")
    assert "| stream | tracesynth (light, 4096, none) |" in markdown  # peers compared with ctx ≤ 4096
    assert _row(markdown, "stream", "markov").startswith("| stream | markov | 0.810 ± 0.127 |")
    failed = _row(markdown, "stream", "dgan")
    assert "failed: train: PeerUnavailable: dgan: gretel-synthetics is not installed" in failed
    assert "## Cells that did not run" in markdown


def test_plots(tmp_path):
    paths = write_plots(read_csv(DATA), tmp_path)
    assert sorted(p.name for p in paths) == ["context_vs_tstr.png", "light_vs_full.png", "peers.png",
                                             "repair_effect.png"]
    for path in paths:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_grid_of_one_constraints_mode_still_gets_its_findings():
    # the context ablation samples `guided` only: the findings compare those cells
    frame = read_csv(DATA)
    ours = frame["generator"] == "tracesynth"
    guided_only = frame[~ours | (frame["constraints"] == "none")].copy()
    guided_only.loc[guided_only["generator"] == "tracesynth", "constraints"] = "guided"
    md = render_markdown(guided_only, {"config": {"name": "guided only"}})
    assert "### Context gain (constraints guided)" in md
    assert "Not in this grid (needs contexts 256" not in md


def test_discriminative_table_counts_what_told_cells_apart():
    frame = read_csv(DATA)  # written before the column existed: read as empty, shown as "—"
    assert (frame["disc_tell_512"] == "").all()
    cells = (frame["generator"] == "tracesynth") & (frame["channels"] == "light") & (frame["context"] == 256) \
        & (frame["constraints"] == "none")
    frame.loc[cells, "disc_tell_512"] = ["distinct 16-grams per event", "hashed 1-3-gram mix",
                                         "distinct 16-grams per event", ""]
    frame.loc[cells, "repeats"] = [0.3, 0.32, 0.28, 0.3]  # the events in repeated spans, beside real's
    frame.loc[cells, "repeats_real"] = 0.8
    run = {"config": {"name": "fixture", "data": {"train_runs": [1, 2], "test_runs": [3]}}, "budget": 0.5,
           "train_steps": 150}
    markdown = render_markdown(frame, run)
    row = _row(markdown, "tracesynth", "light", "256", "none", "0.700 ± 0.000")
    assert row.endswith("| 0.800 ± 0.000 | distinct 16-grams per event (2), hashed 1-3-gram mix (1) |")
    assert "| 0.300 ± 0.0" in row
    # a results file from before the columns: empty, shown as "—"
    assert _row(markdown, "tracesynth", "light", "4096", "none", "0.700 ± 0.000").endswith("| — | — | — |")


def test_tracesynth_table_shows_the_start_up_beside_the_held_out_run():
    frame = read_csv(DATA)  # written before the start-up columns: shown as "—"
    run = {"config": {"name": "fixture", "data": {"train_runs": [1, 2], "test_runs": [3]}}, "budget": 0.5,
           "train_steps": 150}
    assert "| — | " in _row(render_markdown(frame, run), "stream", "light", "256", "none")
    cells = (frame["generator"] == "tracesynth") & (frame["workload"] == "stream") & (frame["channels"] == "light") \
        & (frame["context"] == 256) & (frame["constraints"] == "none")
    frame.loc[cells, "startup_edits"] = [2.0, 4.0]
    frame.loc[cells, "startup_edits_real"] = 31.0
    row = _row(render_markdown(frame, run), "stream", "light", "256", "none")
    assert f"| 3.0 ± {T_975_1 * 1.0:.1f} (31) |" in row  # mean ± t·sd/√n of 2 and 4, then the held-out run's
    assert "| — | " in row  # no cadence columns in this file either
    frame.loc[cells, "cadence_octaves"] = [0.5, 0.7]
    frame.loc[cells, "cadence_octaves_real"] = 0.08
    row = _row(render_markdown(frame, run), "stream", "light", "256", "none")
    assert f"| 0.60 ± {T_975_1 * 0.1:.2f} (0.08) |" in row  # t·sd/√n of 0.5 and 0.7


def test_a_peers_only_run_claims_no_training_budget():
    frame = read_csv(DATA)
    peers = frame[frame["generator"] != "tracesynth"]
    run = {"config": {"name": "peers only"}, "budget": 1.0, "train_steps": 300}
    md = render_markdown(peers, run)
    assert "Peers only: no TraceSynth cell, so no training budget." in md and "train steps per model" not in md

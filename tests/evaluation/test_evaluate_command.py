"""`tracesynth baseline` and `tracesynth evaluate` through the real CLI entry point."""

from __future__ import annotations

import json
import re

import tracesynth
from evaluation.constructed import chain_trace
from tracesynth.cli import main
from tracesynth.evaluation.report import repeats_advice


def test_baseline_then_evaluate_writes_a_self_contained_report(tmp_path, capsys):
    train, test = tmp_path / "train.parquet", tmp_path / "test.jsonl"
    chain_trace(10_000, seed=1).save(train)
    chain_trace(9000, seed=2).save(test)  # 34 windows of 512: enough for a discriminative score
    outputs = {}
    for kind, extra in (("markov", ["--order", "2"]), ("copy", ["--chunk", "1024"])):
        outputs[kind] = tmp_path / f"{kind}.parquet"
        assert main(["baseline", kind, str(train), "-n", "9000", "--seed", "3", "-o", str(outputs[kind]), *extra]) == 0
        synthetic = tracesynth.load(outputs[kind])
        assert len(synthetic) == 9000 and synthetic.meta.workload == "unit"
        assert synthetic.meta.extra["generator"] == kind

    report_dir = tmp_path / "report"
    capsys.readouterr()
    assert main(["evaluate", "--train", str(train), "--test", str(test), "--synthetic", str(outputs["copy"]),
                 "-o", str(report_dir), "--seeds", "1", "--quick"]) == 0
    out = capsys.readouterr().out
    assert "TSTR/TRTR" in out
    report = json.loads((report_dir / "report.json").read_text())
    assert report["workloads"]["unit"]["headline"]["privacy_flagged"] is True  # copy is flagged
    # what gives the windows away: the strongest feature, named in the terminal and the HTML
    tells = report["workloads"]["unit"]["long_range"]["discriminative"]["synthetic_vs_real"]["512"]["tells"]
    assert " ".join(f"strongest single tell: {tells[0]['feature']}".split()) in " ".join(out.split())
    html = (report_dir / "report.html").read_text()
    assert "What tells synthetic windows from real ones" in html and html.count(tells[-1]["feature"]) >= 1
    # exact repeats in events, synthetic beside real: a chain of 8 events repeats few 33-event spans
    repeats = report["workloads"]["unit"]["long_range"]["synthetic_vs_real"]["repeats"]
    assert repeats["span"] == 33 and 0 <= repeats["candidate"] < 0.2 and 0 <= repeats["reference"] < 0.2
    assert "events in a 33-event span repeated within 512" in html
    assert f"events in a repeated 33-event span: synthetic {repeats['candidate']:.3f}" in " ".join(out.split())
    # the start: the copy baseline's first chunk is a training chunk, not the training run's start
    start = report["workloads"]["unit"]["fidelity"]["startup"]
    assert start["synthetic"]["events"] == 256 and len(start["synthetic"]["edits"]["per_trace"]) == 1
    assert report["workloads"]["unit"]["headline"]["startup_edits"] == start["synthetic"]["edits"]["mean"]
    assert report["workloads"]["unit"]["headline"]["startup_edits_real"] == start["real_test"]["edits"]["mean"]
    assert "edits from a training run's first 256 events" in html
    assert (f"unit: the first 256 events are {start['synthetic']['edits']['mean']:.1f} edits from the nearest "
            f"training run's (held-out run: {start['real_test']['edits']['mean']:.1f})") in " ".join(out.split())
    # cadence: recurring events' gaps, beside a training run's, in the headline, HTML and terminal
    cadence = report["workloads"]["unit"]["long_range"]["synthetic_vs_real"]["cadence"]
    assert cadence["events"] and report["workloads"]["unit"]["headline"]["cadence_octaves"] == cadence["mean_octaves"]
    assert report["workloads"]["unit"]["headline"]["cadence_octaves_real"] is not None
    assert "Cadence: gaps between a recurring event" in html
    assert f"unit: recurring events' gaps are {cadence['mean_octaves']:.2f} octaves" in " ".join(out.split())
    assert len(re.findall(r"src='data:image/png;base64,", html)) == 3
    assert not re.search(r"(src|href)=['\"]https?:", html)  # nothing fetched from elsewhere
    assert not list(report_dir.glob(".tracesynth-tmp-*"))


def test_bad_requests_exit_nonzero_with_one_line(tmp_path, capsys):
    train = tmp_path / "train.parquet"
    chain_trace(2000, seed=1).with_meta(workload=None).save(train)
    out = tmp_path / "x.parquet"
    assert main(["baseline", "gan", str(train), "-n", "10", "-o", str(out)]) != 0
    assert main(["baseline", "markov", str(train), "-n", "0", "-o", str(out)]) != 0
    assert not out.exists()
    assert main(["evaluate", "--train", str(train), "--test", str(train), "--synthetic", str(train),
                 "-o", str(tmp_path / "r")]) != 0
    err = capsys.readouterr().err
    assert "unknown baseline 'gan'" in err and "workload label" in err
    assert not (tmp_path / "r" / "report.json").exists()


def test_the_repeat_shares_say_when_self_conditioning_is_worth_a_try():
    # plain models' shares against real's (docs/model.md, "Self-conditioning")
    assert "`train --self-condition` raises it" in repeats_advice(0.32, 0.84)      # sqlite: it helped
    assert "`train --self-condition` raises it" in repeats_advice(0.11, 0.38)      # pybench: it helped
    assert repeats_advice(0.42, 0.51) == repeats_advice(0.76, 0.93) == ""     # tar, stream: it did not
    assert "too regular" in repeats_advice(0.94, 0.67)                        # scimark: it hurt
    assert "docs/tuning.md" in repeats_advice(0.32, 0.84) and "docs/tuning.md" in repeats_advice(0.94, 0.67)
    assert repeats_advice(0.01, 0.1) == repeats_advice(0.5, None) == ""       # real runs barely repeat


def test_baseline_resample_walks_a_real_run(tmp_path, capsys):
    import tracesynth.datasets as ds

    run = ds.datasets_dir() / "sqlite" / "run1.parquet"
    out = tmp_path / "resample.parquet"
    assert main(["baseline", "resample", str(run), "-n", "5000", "--piece", "64", "--context", "32", "--drift", "128",
                 "--seed", "2", "-o", str(out)]) == 0
    synthetic = tracesynth.load(out)
    assert len(synthetic) == 5000 and synthetic.meta.workload == "sqlite"
    assert synthetic.meta.extra["generator"] == "resample" and synthetic.meta.extra["piece"] in (64, 32)
    assert synthetic.meta.extra["context"] == 32 and synthetic.meta.extra["drift"] == 128
    err = " ".join(capsys.readouterr().err.split())  # the console wraps long lines
    assert "jumps after 32 matching events, within 128 of its place in the run;" in err
    assert main(["baseline", "resample", str(run), "-n", "3000", "--context", "16", "--drift", "64", "--aligned",
                 "-o", str(out)]) == 0
    assert tracesynth.load(out).meta.extra["aligned"] is True
    assert "within 64 of its place in the run, the nearest place in each run;" in " ".join(capsys.readouterr().err.split())
    assert main(["baseline", "resample", str(run), "-n", "3000", "--context", "16", "--drift", "64", "--aligned-shared",
                 "-o", str(out)]) == 0
    assert tracesynth.load(out).meta.extra["aligned"] == "shared"
    assert "the nearest place in each run where two runs or more hold one;" in " ".join(capsys.readouterr().err.split())
    assert main(["baseline", "resample", str(run), "-n", "10", "--aligned", "--aligned-shared",
                 "-o", str(tmp_path / "y.csv")]) != 0
    assert "choose --aligned or --aligned-shared, not both" in capsys.readouterr().err
    assert synthetic.column("tid").null_count == 5000  # light unless told
    assert main(["baseline", "resample", str(run), "-n", "10", "--channels", "all", "-o", str(tmp_path / "x.csv")]) != 0
    assert "resample: channels must be 'light' or 'full'" in capsys.readouterr().err
    assert not (tmp_path / "x.csv").exists()

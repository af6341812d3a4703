"""`tracesynth train` / `generate` end to end on a small real run: train, resume, generate, read back."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import shared_trace

import tracesynth
from tracesynth.cli import main

TINY = ["--size", "tiny", "--context", "64", "--batch-size", "4", "--device", "cpu"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("cli-model")
    data = root / "bug.parquet"
    shared_trace("bug446190").slice(0, 3000).with_meta(workload="bug").save(data)
    model = root / "model"
    assert main(["train", str(data), "-o", str(model), "--channels", "full", "--steps", "6",
                 "--val-every", "3", "--checkpoint-every", "3", "--seed", "1", "--start-rate", "0.5", "--phase-events", "512", "--ngram-order", "12", "--no-self-condition",
                 "--val-fraction", "0.2", *TINY]) == 0
    return data, model


def test_train_writes_a_checkpoint_and_resume_continues(trained, capsys):
    data, model = trained
    state = json.loads((model / "state.json").read_text())
    assert state["step"] == 6 and [s for s, _ in state["val_loss"]] == [3, 6]
    assert '"start_rate": 0.5' in (model / "config.json").read_text()
    assert '"trace_phase_events": 512' in (model / "config.json").read_text()
    capsys.readouterr()
    assert main(["train", str(data), "-o", str(model), "--steps", "9", "--resume", *TINY]) == 0
    state = json.loads((model / "state.json").read_text())
    assert state["step"] == 9 and len(state["train_loss"]) == 9
    kept = json.loads((model / "config.json").read_text())["train"]
    assert (kept["ngram_order"], kept["val_fraction"]) == (12, 0.2)  # kept on resume
    # stderr is not a terminal here: progress comes as plain lines a log file keeps
    log = capsys.readouterr().err
    assert "train 9/9 100% loss" in log and "ev/s" in log, log
    assert "trained 9 steps in " in log and " s (fp32), validation" in log, log  # auto: fp32 on a CPU


def test_train_keep_best_and_patience_stop_a_run_and_generate_from_the_best(trained, tmp_path, capsys):
    data, _ = trained
    model = tmp_path / "model"
    # A learning rate too small to move the loss: the first validation stays the best.
    assert main(["train", str(data), "-o", str(model), "--steps", "40", "--val-every", "2", "--lr", "1e-9",
                 "--keep-best", "--patience", "2", "--seed", "1", *TINY]) == 0
    log = " ".join(capsys.readouterr().err.split())  # paths may wrap
    assert "trained 6 steps in " in log, log
    assert "stopped early: no better validation loss in the 2 validations after step 2" in log, log
    assert f"at step 2 → {model / 'best'}" in log, log
    assert json.loads((model / "best" / "state.json").read_text())["step"] == 2
    out = tmp_path / "from-best.parquet"
    assert main(["generate", str(model / "best"), "-n", "200", "-o", str(out), "--seed", "0"]) == 0
    assert len(tracesynth.load(out)) == 200
    capsys.readouterr()
    assert main(["generate", str(model), "-n", "100", "-o", str(tmp_path / "last.parquet"), "--seed", "0"]) == 0
    log = " ".join(capsys.readouterr().err.split())
    assert "note: sampling the last weights (step 6, validation " in log and f"{model / 'best'} holds step 2's" in log
    assert main(["train", str(data), "-o", str(tmp_path / "m2"), "--patience", "-1", *TINY]) == 2
    capsys.readouterr()
    assert main(["train", str(data), "-o", str(tmp_path / "m2"), "--patience", "2", "--val-every", "0", *TINY]) == 2
    assert "--patience counts validations: it needs --val-every N" in capsys.readouterr().err
    assert not (tmp_path / "m2").exists()


@pytest.mark.parametrize("suffix", ["parquet", "csv", "jsonl"])
def test_generate_writes_a_readable_canonical_trace(trained, tmp_path, suffix):
    _, model = trained
    out = tmp_path / f"synthetic.{suffix}"
    assert main(["generate", str(model), "-n", "300", "--steps", "4", "--seed", "3", "--temperature", "0.9",
                 "--start-temperature", "0.5", "--spread", "2", "--tid-temperature", "0.7", "--constraints", "none",
                 "--start-steps", "6", "-o", str(out)]) == 0
    back = tracesynth.load(out).to_pandas()
    assert len(back) == 300 and back["ts"].is_monotonic_increasing
    assert back["tid"].notna().any() and back["cpu"].notna().any() and back["event"].notna().all()
    assert tracesynth.load(out).meta.workload == "bug"


def test_generate_support_rounds_zero_is_the_sampler_without_the_corrector(trained, tmp_path):
    """The model carries its 8-gram table; --support-rounds 0 samples without it, and the
    default (8 rounds) leaves no more unseen 8-grams in a window than it found."""
    from tracesynth.model.checkpoint import load_model

    _, model = trained
    _, encoder, _, _ = load_model(model)
    assert (model / "support.safetensors").exists() and encoder.support.grams["bug"].size
    assert (model / "copies.safetensors").exists() and encoder.copies.spans["bug"].size
    traces = {}
    for rounds in ("0", "8"):
        out = tmp_path / f"r{rounds}.parquet"
        assert main(["generate", str(model), "-n", "64", "--steps", "4", "--seed", "2", "--constraints", "none",
                     "--support-rounds", rounds, "-o", str(out)]) == 0
        traces[rounds] = encoder.encode(tracesynth.load(out))["event"]
    novel = {r: encoder.support.novel(codes, "bug").sum() for r, codes in traces.items()}
    assert novel["8"] <= novel["0"]


def test_generate_prefix_fraction_sets_how_many_windows_a_trace_takes(trained, tmp_path, monkeypatch):
    """--prefix-fraction reaches the window-by-window sampler: 160 events of a 64-event model
    take fewer windows with no overlap (64 new events each) than with half of each repeated."""
    from tracesynth.sampling import pipeline

    _, model = trained
    windows, real = {}, pipeline.sample_window

    def counting(*args, **kwargs):
        windows[current] = windows.get(current, 0) + 1
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline, "sample_window", counting)
    for current in ("0", "0.5"):
        out = tmp_path / f"p{current}.parquet"
        assert main(["generate", str(model), "-n", "160", "--steps", "2", "--constraints", "none",
                     "--prefix-fraction", current, "-o", str(out)]) == 0
        assert len(tracesynth.load(out)) == 160
    assert windows["0"] < windows["0.5"], windows


def test_generate_reports_unseen_8grams_and_copied_spans(trained, tmp_path, capsys):
    from tracesynth.model.checkpoint import load_model

    _, model = trained
    capsys.readouterr()
    assert main(["generate", str(model), "-n", "64", "--steps", "4", "--constraints", "none",
                 "-o", str(tmp_path / "s.parquet")]) == 0
    repeats, support, copies = capsys.readouterr().err.strip().splitlines()[-3:]
    assert support.startswith("support corrector: ") and "8-grams unseen in training" in support, support
    encoder = load_model(model)[1]
    runs = ", ".join(f"{v:.2f}" for v in encoder.repeat_shares["bug"])
    assert repeats.startswith("repeats: ") and "of events in a 33-event span that recurs within 512 events " \
        f"(training runs: {runs})" in repeats, repeats
    table = encoder.copies
    state = "4 rounds" if table.applies("bug") else "off (real runs share most long spans)"
    assert copies.startswith(f"copy guard: {state}; 256-event spans copied from training "), copies
    assert copies.endswith(f"(a training run from the others: {table.natural['bug']:.2%})"), copies
    assert main(["generate", str(model), "-n", "64", "--steps", "4", "--constraints", "none", "--copy-rounds", "0",
                 "-o", str(tmp_path / "s.parquet")]) == 0
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("copy guard: off")


def test_generate_says_what_the_cadence_scaffold_found(trained, tmp_path, capsys):
    import tracesynth.datasets as ds

    _, model = trained
    capsys.readouterr()
    for flag in ("--cadence", "--no-cadence"):
        assert main(["generate", str(model), "-n", "64", "--steps", "2", "--constraints", "none", flag,
                     "-o", str(tmp_path / "s.parquet")]) == 0
        lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith("cadence scaffold: ")]
        # 3,000 events of one LTTng run: nothing recurs 16 times at a steady gap of 128 or more
        assert lines == ["cadence scaffold: no steady rhythm in bug's training runs"], lines
    data = tmp_path / "fileio.parquet"
    ds.load("fileio", 1).slice(0, 12000).with_meta(workload="fileio").save(data)
    assert main(["train", str(data), "-o", str(tmp_path / "f"), "--steps", "2", "--seed", "1", *TINY]) == 0
    # by default ("auto") a plain gap rhythm is the model's: 12,000 events hold no file switch
    for i, (flags, state) in enumerate((([], "auto, off (no rhythm with closers; --cadence to place them)"),
                                        (["--cadence"], "on"), (["--no-cadence"], "off (--cadence to place them)"))):
        capsys.readouterr()
        out = tmp_path / f"f{i}.parquet"
        assert main(["generate", str(tmp_path / "f"), "-n", "3000", "--steps", "2", *flags, "-o", str(out)]) == 0
        (line,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith("cadence scaffold: ")]
        assert line.startswith(f"cadence scaffold: {state}; syscall_entry_fdatasync every 5"), line
        assert "events in training, here " in line, line


def test_generate_start_anchor_begins_with_the_training_start_up_and_says_so(trained, tmp_path, capsys):
    data, model = trained
    real = tracesynth.load(data).to_pandas()
    capsys.readouterr()
    notes = {}
    for flags in ((), ("--start-anchor", "24"), ("--start-anchor", "100"), ("--start-anchor", "0")):
        out = tmp_path / f"a{''.join(flags[1:])}.parquet"
        assert main(["generate", str(model), "-n", "300", "--steps", "2", "--seed", "3", "--constraints", "none",
                     *flags, "-o", str(out)]) == 0
        notes[flags[1:]] = next(x for x in capsys.readouterr().err.splitlines() if x.startswith("start-up anchor: "))
        frame = tracesynth.load(out).to_pandas()
        if flags[1:] == ("24",):  # every channel of a full model: event types, CPUs, process names
            for column in ("event", "cpu", "procname"):
                assert frame[column].tolist()[:24] == real[column].tolist()[:24], column
            assert frame["event"].tolist()[24:] != real["event"].tolist()[24:300]
    assert notes[()] == notes[("0",)] == ("start-up anchor: off (--start-anchor N begins the trace with a training "
                                          "run's first N events)")
    assert notes[("24",)] == ("start-up anchor: the first 24 events are training run 1 of 1's (event types and "
                              "classes; times and thread ids drawn)")
    assert notes[("100",)].startswith("start-up anchor: the first 32 events ")  # half the 64-event window at most
    assert main(["generate", str(model), "-n", "30", "--start-anchor", "-2", "-o", str(tmp_path / "x.parquet")]) == 2
    assert "--start-anchor must be >= 0, got -2" in capsys.readouterr().err
    assert not (tmp_path / "x.parquet").exists()


def test_generate_splice_says_why_it_is_off_and_rejects_a_short_anchor(trained, tmp_path, capsys):
    _, model = trained
    capsys.readouterr()
    notes = {}
    for flags in ((), ("--splice", "64")):
        assert main(["generate", str(model), "-n", "120", "--steps", "2", "--constraints", "none", *flags,
                     "-o", str(tmp_path / "s.parquet")]) == 0
        notes[flags] = next(x for x in capsys.readouterr().err.splitlines() if x.startswith("span splice: "))
    assert notes[()].startswith("span splice: off (--splice 64 puts training's events")
    # this fixture's model has all six channels: the splice replaces event types and gaps only
    assert notes[("--splice", "64")] == ("span splice: off (it applies to models of event types and gaps "
                                         "only: --channels light)")
    assert main(["generate", str(model), "-n", "30", "--splice", "8", "-o", str(tmp_path / "x.parquet")]) == 2
    assert "--splice must be 0 (off) or an anchor of at least 16 events, got 8" in capsys.readouterr().err
    assert not (tmp_path / "x.parquet").exists()
    assert main(["generate", str(model), "-n", "30", "--splice", "64", "--splice-walk", "-4",
                 "-o", str(tmp_path / "x.parquet")]) == 2
    assert "--splice-walk must be 0 (no walk) or a piece of at least 2 events, got -4" in capsys.readouterr().err
    assert not (tmp_path / "x.parquet").exists()
    for flag, value, said in (("--splice-walk-context", "1", "--splice-walk-context must be 0 (the splice's anchor) "
                                                             "or a match of at least 2 events, got 1"),
                              ("--splice-walk-drift", "-64", "--splice-walk-drift must be 0 (the splice's) "
                                                             "or a number of events, got -64")):
        assert main(["generate", str(model), "-n", "30", "--splice", "64", flag, value,
                     "-o", str(tmp_path / "x.parquet")]) == 2
        assert said in capsys.readouterr().err
        assert not (tmp_path / "x.parquet").exists()


def test_generate_ngram_weight_uses_the_saved_counts_and_says_so(trained, tmp_path, capsys):
    from tracesynth.model.checkpoint import load_model

    _, model = trained
    assert (model / "ngrams.safetensors").exists()
    ngrams = load_model(model)[1].ngrams
    assert ngrams.knows("bug") and ngrams.k == 12  # train --ngram-order 12
    traces, notes = {}, {}
    # 64 events: all before event 100, which --prior-from 100 leaves to the network
    for weight, rounds, start in (("0", "1", ()), ("1", "4", ()), ("50", "2", ()), ("50", "1", ("--prior-from", "100"))):
        key = weight + "".join(start)
        out = tmp_path / f"w{key}.parquet"
        capsys.readouterr()
        assert main(["generate", str(model), "-n", "64", "--steps", "4", "--seed", "2", "--constraints", "none",
                     "--support-rounds", "0", "--copy-rounds", "0", "--ngram-weight", weight,
                     "--ngram-rounds", rounds, *start, "-o", str(out)]) == 0
        notes[key] = next(line for line in capsys.readouterr().err.splitlines() if line.startswith("n-gram prior"))
        traces[key] = tracesynth.load(out).to_pandas()["event"].tolist()
    assert notes["0"] == "n-gram prior: off (--ngram-weight 0)"
    assert notes["1"].startswith("n-gram prior: weight 1, 4 parts a step ") and "up to 12 decided" in notes["1"]
    assert notes["1"].endswith("on each side)")
    assert notes["50"].startswith("n-gram prior: weight 50, 2 parts a step ")
    assert notes["50--prior-from100"].endswith("on each side, from event 100 of the trace on)")
    assert traces["0"] != traces["50"]  # the same seed draws other events once the counts weigh in
    assert traces["0"] == traces["50--prior-from100"]  # the start-up is the network's alone (one part a step,
    # as at weight 0: with several, the parts reveal in another order)


def test_generate_precision_is_reported_and_fp32_and_bf16_are_each_seeded(trained, tmp_path, capsys):
    from tracesynth.model.precision import resolve_precision

    _, model = trained
    events, notes = {}, {}
    for precision in ("fp32", "bf16", "auto", "fp32"):
        out = tmp_path / f"{precision}.parquet"
        capsys.readouterr()
        assert main(["generate", str(model), "-n", "128", "--steps", "4", "--seed", "4", "--constraints", "none",
                     "--precision", precision, "-o", str(out)]) == 0
        notes[precision] = next(line for line in capsys.readouterr().err.splitlines()
                                if line.startswith("network precision"))
        trace = tracesynth.load(out)
        assert trace.meta.extra["precision"] == resolve_precision(precision, "cpu")
        runs = events.setdefault(precision, [])
        runs.append(trace.to_pandas()["event"].tolist())
    assert notes["fp32"] == "network precision: fp32 (--precision fp32)"
    assert notes["bf16"] == "network precision: bf16 (--precision bf16)"
    assert notes["auto"] == f"network precision: {resolve_precision('auto', 'cpu')} (--precision auto)"
    assert events["fp32"][0] == events["fp32"][1]  # same seed, same trace
    capsys.readouterr()
    assert main(["generate", str(model), "-n", "10", "--precision", "fp16", "-o", str(tmp_path / "x.parquet")]) == 2
    assert "precision must be one of auto, fp32, bf16" in capsys.readouterr().err
    assert not (tmp_path / "x.parquet").exists()


def test_generate_with_repair_and_guided(trained, tmp_path):
    _, model = trained
    out = tmp_path / "repaired.parquet"
    assert main(["generate", str(model), "-n", "200", "--steps", "4", "--constraints", "repair", "-o", str(out)]) == 0
    assert len(tracesynth.load(out)) == 200
    from tracesynth.constraints import ConstraintGuide

    code = main(["generate", str(model), "-n", "200", "--steps", "4", "-o", str(tmp_path / "guided.parquet")])
    has_guide = callable(getattr(ConstraintGuide, "violating_positions", None))
    assert code == (0 if has_guide else 2)  # guided is the default; without a guide: a clear error


def test_bad_requests_fail_with_one_line_errors(trained, tmp_path, capsys):
    data, model = trained
    capsys.readouterr()
    assert main(["generate", str(model), "-n", "10", "--workload", "nope", "-o", str(tmp_path / "x.parquet")]) == 2
    assert "unknown workload" in capsys.readouterr().err
    assert main(["generate", str(model), "-n", "10", "-o", str(tmp_path / "x.weird")]) == 2
    assert main(["generate", str(tmp_path), "-n", "10", "-o", str(tmp_path / "x.parquet")]) == 2
    assert main(["generate", str(model), "-n", "10", "--start-temperature", "0", "-o", str(tmp_path / "x.parquet")]) == 2
    assert "--start-temperature must be positive" in capsys.readouterr().err
    assert main(["generate", str(model), "-n", "10", "--start-steps", "0", "-o", str(tmp_path / "x.parquet")]) == 2
    assert "--start-steps must be >= 1" in capsys.readouterr().err
    assert main(["generate", str(model), "-n", "10", "--spread", "-1", "-o", str(tmp_path / "x.parquet")]) == 2
    assert "--spread must be >= 0" in capsys.readouterr().err
    assert main(["generate", str(model), "-n", "10", "--tid-temperature", "-1", "-o", str(tmp_path / "x.parquet")]) == 2
    assert "--tid-temperature must be positive" in capsys.readouterr().err
    assert main(["generate", str(model), "-n", "10", "--support-rounds", "-1", "-o", str(tmp_path / "x.parquet")]) == 2
    assert "--support-rounds must be >= 0" in capsys.readouterr().err
    assert main(["generate", str(model), "-n", "10", "--copy-rounds", "-2", "-o", str(tmp_path / "x.parquet")]) == 2
    assert "--copy-rounds must be >= 0" in capsys.readouterr().err
    assert main(["generate", str(model), "-n", "10", "--guide-rounds", "-1", "-o", str(tmp_path / "x.parquet")]) == 2
    assert "--guide-rounds must be >= 0" in capsys.readouterr().err
    assert main(["generate", str(model), "-n", "10", "--ngram-weight", "-1", "-o", str(tmp_path / "x.parquet")]) == 2
    assert "--ngram-weight must be >= 0" in capsys.readouterr().err
    assert main(["generate", str(model), "-n", "10", "--ngram-rounds", "0", "-o", str(tmp_path / "x.parquet")]) == 2
    assert "--ngram-rounds must be >= 1" in capsys.readouterr().err
    assert main(["generate", str(model), "-n", "10", "--prefix-fraction", "1", "-o", str(tmp_path / "x.parquet")]) == 2
    assert "--prefix-fraction must be in [0, 1), got 1.0" in capsys.readouterr().err
    assert main(["generate", str(model), "-n", "10", "--self-condition", "-o", str(tmp_path / "x.parquet")]) == 2
    assert "trained without self-conditioning" in capsys.readouterr().err
    assert main(["train", "no-such-thing", "-o", str(tmp_path / "m")]) == 2
    assert main(["train", str(data), "-o", str(tmp_path / "m"), "--ngram-order", "0"]) == 2
    assert not (tmp_path / "m").exists()
    assert main(["train", str(data), "-o", str(tmp_path / "m"), "--channels", "event,colour"]) == 2
    assert not (tmp_path / "x.parquet").exists()


def test_a_self_conditioned_model_samples_with_its_estimates_or_without(trained, tmp_path):
    """`train --self-condition` saves it in the config; `generate` feeds the estimates back by
    default (seeded), and `--no-self-condition` samples the same model without them."""
    data, _ = trained
    model = tmp_path / "sc"
    assert main(["train", str(data), "-o", str(model), "--channels", "light", "--steps", "6", "--seed", "1",
                 "--self-condition", *TINY]) == 0
    assert json.loads((model / "config.json").read_text())["model"]["self_condition"] is True
    traces = {}
    for name, flags in {"on": [], "again": [], "off": ["--no-self-condition"]}.items():
        out = tmp_path / f"{name}.parquet"
        assert main(["generate", str(model), "-n", "200", "--steps", "4", "--seed", "2", "--constraints", "none",
                     *flags, "-o", str(out)]) == 0
        traces[name] = tracesynth.load(out).to_pandas()[["ts", "event"]]
    assert traces["on"].equals(traces["again"])
    assert not traces["on"].equals(traces["off"])
    assert tracesynth.load(tmp_path / "on.parquet").meta.extra["self_condition"] is True
    assert tracesynth.load(tmp_path / "off.parquet").meta.extra["self_condition"] is False


def test_light_model_of_a_multi_threaded_workload_reports_its_serial_syscalls(tmp_path, capsys):
    import tracesynth.datasets as ds

    data = tmp_path / "pybench.parquet"
    ds.load("pybench", 1).slice(0, 3000).with_meta(workload="pybench").save(data)
    model = tmp_path / "model"
    assert main(["train", str(data), "-o", str(model), "--steps", "4", "--seed", "1", *TINY]) == 0
    capsys.readouterr()
    out = tmp_path / "s.parquet"
    assert main(["generate", str(model), "-n", "300", "--steps", "4", "-o", str(out)]) == 0
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("serial guide: ") and "syscalls the training runs never overlap" in line, line
    assert main(["generate", str(model), "-n", "300", "--steps", "4", "--no-serial-guide", "--guide-rounds", "0",
                 "-o", str(out)]) == 0
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("copy guard: ")


def test_train_validates_on_a_separate_run_and_info_names_it(trained, tmp_path, capsys):
    data, _ = trained
    other = tmp_path / "later.parquet"
    shared_trace("bug446190").slice(3000, 1500).with_meta(workload="bug").save(other)
    model = tmp_path / "m"
    assert main(["train", str(data), "-o", str(model), "--steps", "4", "--val-every", "2", "--keep-best",
                 "--val-data", str(other), *TINY]) == 0
    log = " ".join(capsys.readouterr().err.split())
    assert "validation " in log and "nats/event on 1 separate trace" in log, log
    assert json.loads((model / "config.json").read_text())["train"]["val_fraction"] == 0.0  # trains on all of data
    assert main(["info", str(model)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "on 1 separate validation trace" in out and "validation traces │ bug 1,500 events" in out, out
    assert main(["train", str(data), "-o", str(model), "--steps", "6", "--resume", *TINY]) == 2
    assert "validated on other traces than these (validated on 1 traces, here 0)" in capsys.readouterr().err
    assert main(["train", str(data), "-o", str(tmp_path / "m2"), "--val-data", str(data), *TINY]) == 2
    assert "is also training trace 1" in capsys.readouterr().err and not (tmp_path / "m2").exists()


def test_info_describes_a_model_directory(trained, tmp_path, capsys):
    data, model = trained
    capsys.readouterr()
    assert main(["info", str(model)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "(model)" in out and "channels │ event, dt, tid, cpu, ret, procname" in out, out
    assert "workloads │ bug" in out and "context 64 events" in out, out
    assert "s on cpu, fp32" in out and "on the held-out last 20% of each trace" in out, out
    assert "training traces │ bug 3,000 events" in out and "resumable │ yes" in out, out
    assert main(["info", "--json", str(model)]) == 0
    described = json.loads(capsys.readouterr().out)[str(model)]["model"]
    assert described["workloads"] == ["bug"] and described["params"] > 0 and described["steps"] >= 6
    assert described["training_traces"][0]["events"] == 3000 and described["device"] == "cpu"
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.json").write_text("{")
    (tmp_path / "broken" / "model.safetensors").write_bytes(b"")
    (tmp_path / "broken" / "encoder.json").write_text("{}")
    assert main(["info", str(tmp_path / "broken")]) == 2
    assert "model.safetensors: not a readable safetensors file" in capsys.readouterr().err
    (tmp_path / "broken" / "model.safetensors").write_bytes((model / "model.safetensors").read_bytes())
    assert main(["info", str(tmp_path / "broken")]) == 2
    assert "config.json (line 1, column 2): not valid JSON" in " ".join(capsys.readouterr().err.split())


def test_train_no_runs_keeps_no_training_run_and_the_sampler_says_why(tmp_path, capsys):
    """A model to share: `--no-runs` leaves the splice's and the start-up anchor's tables (the only
    verbatim training sequences a model holds) out; info and generate say so."""
    import tracesynth.datasets as ds

    data = [tmp_path / f"sqlite{run}.parquet" for run in (1, 2)]  # two runs that share long spans
    for run, path in zip((1, 2), data):
        ds.load("sqlite", run).slice(0, 4000).with_meta(workload="sqlite").save(path)
    kept, bare = tmp_path / "kept", tmp_path / "bare"
    for out, flags in ((kept, []), (bare, ["--no-runs"])):
        assert main(["train", *map(str, data), "-o", str(out), "--channels", "light", "--steps", "2", "--seed", "1",
                     *flags, *TINY]) == 0
    assert (kept / "splices.safetensors").exists() and (kept / "startups.safetensors").exists()
    assert not (bare / "splices.safetensors").exists() and not (bare / "startups.safetensors").exists()
    assert json.loads((bare / "config.json").read_text())["train"]["keep_runs"] is False
    capsys.readouterr()
    assert main(["info", str(bare)]) == 0
    assert "not kept (train --no-runs)" in " ".join(capsys.readouterr().out.split())
    assert main(["generate", str(bare), "-n", "300", "--steps", "2", "--constraints", "none", "--splice", "64",
                 "--start-anchor", "64", "-o", str(tmp_path / "s.parquet")]) == 0
    err = capsys.readouterr().err
    assert "span splice: off (model trained with --no-runs: it holds no training run to splice from)" in err
    assert "start-up anchor: off (trained with --no-runs)" in err

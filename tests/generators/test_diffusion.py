"""TraceSynth (the diffusion generator): conformance with a tiny config, save/load, channels."""

from __future__ import annotations

import pytest
import torch
from evaluation.constructed import chain_trace
from generators.conformance import check_generator

from tracesynth.errors import ConfigError
from tracesynth.generators.diffusion import TraceSynth

TINY = dict(context=64, size="tiny", train_steps=20, batch_size=4, sample_steps=4)


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


@pytest.mark.parametrize("channels", ["light", "full"])
def test_conformance(channels):
    check_generator(lambda seed: TraceSynth(channels=channels, random_state=seed, **TINY),
                    [chain_trace(6000, seed=1)])


def test_save_load_round_trip(tmp_path):
    gen = TraceSynth(channels="full", random_state=3, **TINY).fit([chain_trace(3000, seed=2)])
    before = gen.sample(300, seed=1)
    gen.save(tmp_path / "model")
    loaded = TraceSynth.load(tmp_path / "model", device="cpu")
    assert loaded.get_params()["channels"] == "full" and loaded.workloads_ == gen.workloads_
    assert loaded.sample(300, seed=1).events.equals(before.events)


def test_keep_best_samples_the_best_validated_weights_not_the_last():
    from model.toy_traces import drifting_trace

    from tracesynth.model.train import WindowSource, validation_loss

    settings = dict(channels="light", context=32, size="tiny", train_steps=24, batch_size=4, lr=3e-2)
    best = TraceSynth(keep_best=True, **settings).fit([drifting_trace()])
    last = TraceSynth(**settings).fit([drifting_trace()])
    state = best.state_
    assert [s for s, _ in state.val_loss] == list(range(2, 25, 2)) and state.best_step < 24
    source = WindowSource(best.encoder_, [drifting_trace()], 32, best.train_config_.val_fraction, 0, 0.0)
    held_out = validation_loss(best.model_, source, best.train_config_, torch.device("cpu"))
    assert held_out == pytest.approx(state.best_val_loss, abs=1e-6)
    assert held_out < validation_loss(last.model_, source, best.train_config_, torch.device("cpu")) - 1
    assert last.state_.val_loss == [] and best.get_params()["keep_best"]


def test_foreign_generator_settings_in_a_saved_model_name_state_json(tmp_path):
    import json

    from tracesynth.errors import TraceFormatError

    TraceSynth(channels="light", **TINY).fit([chain_trace(1500, seed=2)]).save(tmp_path / "model")
    state_path = tmp_path / "model" / "state.json"
    state = json.loads(state_path.read_text())
    state["generator"]["warp_speed"] = 9  # a setting this version does not have
    state_path.write_text(json.dumps(state))
    with pytest.raises(TraceFormatError, match="state.json: its generator settings .*warp_speed"):
        TraceSynth.load(tmp_path / "model", device="cpu")


def test_full_model_fills_every_channel_light_leaves_them_null():
    train = chain_trace(3000, seed=2)
    full = TraceSynth(channels="full", **TINY).fit([train]).sample(500).to_pandas()
    light = TraceSynth(channels="light", **TINY).fit([train]).sample(500).to_pandas()
    for column in ("tid", "cpu"):
        if train.to_pandas()[column].notna().any():
            assert full[column].notna().any(), column
        assert light[column].isna().all(), column


def test_bad_options_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="size"):
        TraceSynth(size="huge").fit([chain_trace(500)])
    with pytest.raises(ConfigError, match="constraints"):
        TraceSynth(constraints="maybe", **TINY).fit([chain_trace(500)])
    with pytest.raises(ConfigError, match="not a TraceSynth model"):
        TraceSynth.load(tmp_path)


def test_light_model_of_a_one_thread_workload_is_checked_as_one_thread():
    import tracesynth.datasets as ds
    from tracesynth.constraints import check

    real = ds.load("scimark", 1).slice(0, 3000).with_meta(workload="scimark")
    gen = TraceSynth(channels="light", **TINY).fit([real])
    assert gen.single_thread()  # other tasks' sched events do not count, syscalls come from one
    raw = gen.generate(400, "scimark", seed=0, constraints="none")
    assert raw.meta.extra["threads"] == 1
    rules = {r.name: r for r in check(raw).rules}
    assert rules["syscall-pairing"].status != "n/a"  # the rule is applied, not skipped
    fixed = gen.generate(400, "scimark", seed=0, constraints="repair")
    assert len(fixed) == 400 and all(r.count == 0 for r in check(fixed).rules)


def test_phase_events_option_sets_or_removes_the_trace_phase_embedding():
    from tracesynth.model.config import ModelConfig

    assert TraceSynth()._configs()[0].trace_phases == ModelConfig().trace_phases > 0
    assert TraceSynth(phase_events=0)._configs()[0].trace_phases == 0
    assert TraceSynth(phase_events=256)._configs()[0].trace_phase_events == 256
    assert TraceSynth(phase_events=256).get_params()["phase_events"] == 256
    with pytest.raises(ConfigError, match="phase length"):
        TraceSynth(phase_events=-1)._configs()


def test_light_model_of_a_multi_threaded_workload_is_guided_on_its_serial_syscalls(tmp_path):
    import tracesynth.datasets as ds
    from tracesynth.encoding.serial import overlaps

    real = ds.load("pybench", 1).slice(0, 6000).with_meta(workload="pybench")
    gen = TraceSynth(channels="light", **TINY).fit([real])
    assert not gen.single_thread()  # pybench's children make syscalls too
    serial = gen.serial_syscalls("pybench")
    assert {"read", "newfstatat", "openat"} <= set(serial) and "wait4" not in serial
    assert overlaps(real.events.column("event").to_numpy(zero_copy_only=False), serial)[0] == 0
    gen.save(tmp_path / "m")
    assert TraceSynth.load(tmp_path / "m", device="cpu").serial_syscalls("pybench") == serial
    gen.serial_guide = False
    assert gen.serial_syscalls("pybench") == []
    gen.serial_guide = True
    broken = {mode: overlaps(gen.generate(2000, "pybench", seed=0, constraints=mode).events.column("event")
                             .to_numpy(zero_copy_only=False), serial)[0] for mode in ("none", "guided")}
    assert broken["guided"] < 0.8 * broken["none"], broken  # a 20-step model, 4 sampling steps
    full = TraceSynth(channels="full", **TINY).fit([real])
    assert full.serial_syscalls("pybench") == []  # thread ids: the per-thread rule pairs them


def test_span_splice_puts_training_events_into_slips_and_is_undone_where_it_would_copy_more():
    import numpy as np

    import tracesynth.datasets as ds
    from tracesynth.schema import Trace

    runs = [ds.load("sqlite", r).slice(0, 20000).with_meta(workload="sqlite") for r in (1, 2)]
    gen = TraceSynth(channels="light", splice=64, **TINY).fit(runs)
    assert gen.splices("sqlite") and not TraceSynth(channels="light", **TINY).fit(runs).splices("sqlite")
    full = TraceSynth(channels="full", splice=64, **TINY).fit(runs)
    assert not full.splices("sqlite") and full.encoder_.splices is None  # event types and gaps only: no runs kept

    def slipped(trace, n=6000, every=400):  # every 400th event doubled: what sampled traces get wrong
        frame = trace.slice(0, n).to_pandas()[["ts", "event"]]
        frame = frame.loc[np.repeat(frame.index, np.where(np.arange(n) % every == every - 1, 2, 1))].reset_index(drop=True)
        return Trace.from_pandas(frame, trace.meta)

    # run 3's first 6,000 events, their slips fixed from their own phase of the training runs,
    # copy 0.73 of one run's spans (over the bound, 0.63 + 0.10): fixed by length from anywhere
    # instead. From event 14,000 the phase's fix stays under it (0.46).
    run3 = ds.load("sqlite", 3).with_meta(workload="sqlite")
    first = gen._splice(slipped(run3), "sqlite", 0, 6000).meta.extra["splice"]
    assert first["kept"] and first["by_phase"] is False
    held_out = run3.slice(14000, 20000)
    out = gen._splice(slipped(held_out), "sqlite", 0, 6000)
    info = out.meta.extra["splice"]
    assert info["kept"] and info["by_phase"] and info["stretches"] >= 10 and 0 < info["events_from_training"] < 3000
    assert len(out) == 6000 and info["copy_share_256_one_run"] <= info["training_runs_least_share"] + 0.10
    frame = out.to_pandas()
    assert (np.diff(frame["ts"]) >= 0).all() and frame["tid"].isna().all()
    assert frame["event"].iloc[:64].tolist() == held_out.slice(0, 64).to_pandas()["event"].tolist()  # the first anchor
    # a training run with slips, spliced without the walk, is that run again: more copying than
    # the runs do between themselves (0.75 against 0.63 + 0.10), so the trace is left as sampled
    assert (gen.splice_walk, gen.splice_walk_context, gen.splice_walk_drift) == (384, 16, 64)  # the defaults
    gen.splice_walk = 0
    again = gen._splice(slipped(runs[0]), "sqlite", 0, 6000)
    assert again.meta.extra["splice"]["kept"] is False and "above the least one training run has of another" in again.meta.extra["splice"]["why"]
    assert again.to_pandas()["event"].tolist() == slipped(runs[0]).to_pandas()["event"].tolist()[:6000]
    # with the walk, the two slips whose fix would rejoin run 1 for over 1,023 events are walked
    # elsewhere in training instead, which copies less of run 1 (0.72): under the bound, kept
    gen.splice_walk, gen.splice_walk_context, gen.splice_walk_drift = 128, 0, 0  # the walk as published
    walked = gen._splice(slipped(runs[0]), "sqlite", 0, 6000).meta.extra["splice"]
    assert walked["kept"] and walked["walked"] >= 1 and walked["walk_piece"] == 128
    assert walked["copy_share_256_one_run"] <= walked["training_runs_least_share"] + 0.10
    assert (walked["walk_context"], walked["walk_drift"], walked["walk_aligned"]) == (64, 0, False)  # as published
    gen.splice_walk_context, gen.splice_walk_drift, gen.splice_walk_aligned = 16, 64, True
    short = gen._splice(slipped(runs[0]), "sqlite", 0, 6000).meta.extra["splice"]
    assert (short["walk_context"], short["walk_drift"], short["walk_aligned"]) == (16, 64, True)
    gen.splice_walk_context, gen.splice_walk_drift, gen.splice_walk_aligned = 0, 0, False
    # a slip every 1,000 events: the trace copies more than the bound as sampled, and no pass is tried
    close = gen._splice(slipped(runs[0], every=1000), "sqlite", 0, 6000).meta.extra["splice"]
    assert close["kept"] is False and "as sampled" in close["why"] and "by_phase" not in close
    # through generate: the length asked, seeded
    a, b = gen.generate(700, "sqlite", seed=4), gen.generate(700, "sqlite", seed=4)
    assert len(a) == 700 and "splice" in a.meta.extra
    assert a.to_pandas()["event"].tolist() == b.to_pandas()["event"].tolist()
    with pytest.raises(ConfigError, match="splice"):
        TraceSynth(splice=8)
    with pytest.raises(ConfigError, match="splice_walk_context must be 0"):
        TraceSynth(splice=64, splice_walk_context=1)
    with pytest.raises(ConfigError, match="splice_walk_drift must be 0"):
        TraceSynth(splice=64, splice_walk_drift=-64)


def test_a_splice_over_the_bound_walks_in_shorter_pieces_then_not_then_by_length(monkeypatch):
    """The passes `_splice` tries while the trace copies more than the bound; where a pass left
    nothing to walk (no stretch unmatched, none walked), the other phase passes would splice the
    same and are skipped."""
    import numpy as np

    import tracesynth.datasets as ds
    import tracesynth.sampling.span_splice as span_splice
    from tracesynth.sampling.span_splice import SpliceResult

    runs = [ds.load("sqlite", r).slice(0, 20000).with_meta(workload="sqlite") for r in (1, 2)]
    gen = TraceSynth(channels="light", splice=64, **TINY).fit(runs)
    assert gen._splice_passes() == [(True, 384), (True, 192), (True, 96), (True, 48), (True, 0), (False, 0)]
    copy = gen._splice_training("sqlite").runs[0]  # a result that is training run 1: over the bound
    for walked, unmatched, passes in ((1, 0, gen._splice_passes()), (0, 2, gen._splice_passes()),
                                      (0, 0, [(True, 384), (False, 0)])):
        calls = []

        def fake(codes, gaps, training, rng, k, phase, walk, walk_context, walk_drift, walk_aligned, walked=walked,
                 unmatched=unmatched, calls=calls):
            calls.append((phase, walk))
            return SpliceResult(copy[0][:7000], copy[1][:7000], 3, unmatched, [], walked)

        monkeypatch.setattr(span_splice, "splice", fake)
        trace = ds.load("sqlite", 3).slice(0, 6000).with_meta(workload="sqlite")
        info = gen._splice(trace, "sqlite", 0, 6000).meta.extra["splice"]
        assert calls == passes and info["kept"] is False and info["by_phase"] is False
    gen.splice_walk = 0
    assert gen._splice_passes() == [(True, 0), (False, 0)]

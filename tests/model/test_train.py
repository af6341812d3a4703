"""Training: reproducible seeds, atomic safetensors checkpoints, exact resume, DDP = single process."""

from __future__ import annotations

import dataclasses
import json
import os
import socket

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp
from safetensors.torch import load_file

from toy_traces import drifting_trace, periodic_trace
from tracesynth.errors import ConfigError
from tracesynth.model.checkpoint import load_model
from tracesynth.model.config import SIZES, ModelConfig, TrainConfig
from tracesynth.encoding import TraceEncoder
from tracesynth.model.train import TrainCallbacks, WindowSource, train, validations_since_best


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)  # tiny models: threads only add contention on a shared machine


def _cfgs(steps=8, **train_kw):
    # Weight averaging on (not the default): the resume and checkpoint tests cover its files too.
    return (ModelConfig(context=32, **SIZES["tiny"]),
            TrainConfig(steps=steps, batch_size=4, lr=3e-3, val_every=4, checkpoint_every=4,
                        **({"ema": 0.99} | train_kw)))


def _weights(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _same(a, b):
    return all(torch.equal(a[k], b[k]) for k in a)


def test_same_seed_same_model_different_seed_different_model():
    mc, tc = _cfgs(4)
    a, _, sa = train([periodic_trace()], None, channels="full", model_config=mc, train_config=tc)
    b, _, sb = train([periodic_trace()], None, channels="full", model_config=mc, train_config=tc)
    c, _, _ = train([periodic_trace()], None, channels="full", model_config=mc,
                    train_config=TrainConfig(**{**tc.to_dict(), "seed": 1}))
    assert _same(_weights(a), _weights(b)) and sa.train_loss == sb.train_loss
    assert not _same(_weights(a), _weights(c))


def test_checkpoint_is_safetensors_and_json_and_round_trips(tmp_path):
    mc, tc = _cfgs(4)
    model, encoder, state = train([periodic_trace()], tmp_path / "m", channels="full", model_config=mc, train_config=tc)
    files = sorted(p.name for p in (tmp_path / "m").iterdir())
    assert files == ["cadence.safetensors", "config.json", "copies.safetensors", "encoder.json", "model.safetensors",
                     "ngrams.safetensors", "optimizer.safetensors", "startups.safetensors", "state.json",
                     "support.safetensors", "training.safetensors"]
    assert not list(tmp_path.glob(".tracesynth-tmp-*"))  # nothing half-written left behind
    assert json.loads((tmp_path / "m" / "state.json").read_text())["step"] == 4
    assert state.val_loss and state.val_loss[-1][0] == 4
    loaded, enc2, tc2, _ = load_model(tmp_path / "m")
    assert tc2 == tc and enc2.to_json() == encoder.to_json()
    assert enc2.support.k == encoder.support.k and enc2.support.grams.keys() == encoder.support.grams.keys()
    assert all(np.array_equal(enc2.support.grams[w], g) for w, g in encoder.support.grams.items())
    assert enc2.copies.spans.keys() == encoder.copies.spans.keys()
    assert all(np.array_equal(enc2.copies.spans[w], h) for w, h in encoder.copies.spans.items())
    assert all(np.array_equal(enc2.copies.nexts[w], v) for w, v in encoder.copies.nexts.items())
    assert enc2.ngrams.tables.keys() == encoder.ngrams.tables.keys()
    assert all(np.array_equal(enc2.ngrams.tables[key].counts, table.counts)
               for key, table in encoder.ngrams.tables.items())
    assert _same(_weights(model), {k: v for k, v in load_file(str(tmp_path / "m" / "model.safetensors")).items()})
    codes = {ch: torch.randint(0, v, (1, 32)) for ch, v in loaded.config.vocab_sizes.items()}
    t, w = torch.tensor([0.5]), torch.tensor([0])
    with torch.no_grad():
        assert torch.equal(model.eval().hidden(codes, t, w), loaded.hidden(codes, t, w))


def test_the_saved_weights_are_the_moving_average_of_the_optimizers(tmp_path):
    """model.safetensors holds the EMA of the weights the optimizer updates (kept beside it in
    training.safetensors for --resume): the first step's weights, then a lerp towards each
    step's with the warmed-up decay. Averaging does not change what the optimizer does."""
    decay = 0.9
    mc, tc = _cfgs(6, ema=decay)
    tc.checkpoint_every = 1
    saved = {}

    def snapshot(step):
        saved[step] = (load_file(str(tmp_path / "m" / "model.safetensors")),
                       load_file(str(tmp_path / "m" / "training.safetensors")))

    average, _, _ = train([periodic_trace()], tmp_path / "m", channels="light", model_config=mc, train_config=tc,
                          callbacks=TrainCallbacks(on_checkpoint=snapshot))
    assert _same(saved[1][0], saved[1][1])  # the average starts at the first step's weights
    for step in range(2, 7):
        weight = 1 - min(decay, (1 + step) / (10 + step))
        for key, value in saved[step][0].items():
            expected = saved[step - 1][0][key].lerp(saved[step][1][key], weight)
            torch.testing.assert_close(value, expected, rtol=0, atol=1e-6)
    assert _same(_weights(average), saved[6][0]) and not _same(saved[6][0], saved[6][1])
    last, _, _ = train([periodic_trace()], tmp_path / "plain", channels="light", model_config=mc,
                       train_config=dataclasses.replace(tc, ema=0.0))
    assert _same(_weights(last), saved[6][1])  # the same optimizer trajectory, not averaged
    assert not (tmp_path / "plain" / "training.safetensors").exists()
    with pytest.raises(ConfigError, match=r"EMA decay must be in \[0, 1\)"):
        dataclasses.replace(tc, ema=1.0).validate()


def test_a_damaged_hash_table_is_refused_naming_the_file(tmp_path):
    from safetensors.numpy import load_file as load_arrays
    from safetensors.numpy import save_file as save_arrays

    from tracesynth.errors import ConfigError

    mc, tc = _cfgs(2)
    train([periodic_trace()], tmp_path / "m", channels="light", model_config=mc, train_config=tc)
    path = tmp_path / "m" / "copies.safetensors"
    arrays = load_arrays(str(path))
    key = next(k for k, v in arrays.items() if k.startswith("spans/") and len(v) > 1)
    arrays[key] = arrays[key][::-1].copy()  # the sampler binary-searches these: order matters
    save_arrays(arrays, str(path))
    with pytest.raises(ConfigError, match=f"copies.safetensors: {key} is not sorted"):
        load_model(tmp_path / "m")


def _damage_json(path, edit):
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


@pytest.mark.parametrize("name,damage,says", [
    ("model.safetensors", lambda p: p.write_bytes(p.read_bytes()[:100]), "not a readable safetensors file"),
    ("ngrams.safetensors", lambda p: p.write_bytes(b"\x00" * 16), "not a readable safetensors file"),
    ("config.json", lambda p: p.write_text('{"model": {\n  "context": 32,,\n}'),
     r"config.json \(line 2, column 17\): not valid JSON"),
    ("config.json", lambda p: _damage_json(p, lambda c: c["model"].update(d_local=c["model"]["d_local"] * 2)),
     "model.safetensors: weights do not fit config.json's network"),
    ("config.json", lambda p: _damage_json(p, lambda c: c["model"].update(colour="blue")),
     "config.json: .*unexpected keyword argument 'colour'"),
    ("encoder.json", lambda p: _damage_json(p, lambda e: e.pop("event")), "encoder.json: missing key 'event'"),
    ("state.json", lambda p: p.write_text("[1, 2]"), "state.json: holds a JSON list, not an object"),
])
def test_a_damaged_model_directory_is_refused_naming_the_file(tmp_path, name, damage, says):
    """A truncated, hand-edited or foreign file in a model directory gives one line naming the
    file (and for JSON the line and column), never a library traceback."""
    from tracesynth.errors import TraceFormatError

    mc, tc = _cfgs(1)
    train([periodic_trace()], tmp_path / "m", channels="light", model_config=mc, train_config=tc)
    damage(tmp_path / "m" / name)
    with pytest.raises(TraceFormatError, match=says) as raised:
        load_model(tmp_path / "m")
    assert "\n" not in str(raised.value) and "model directory is damaged" in str(raised.value)


class _Killed(Exception):
    pass


def _straight_and_resumed(tmp_path, mc, tc, resume_cfg, make_trace=periodic_trace, kill_at=4):
    """An uninterrupted run (in tmp_path/a), and the same run killed after its step-`kill_at`
    checkpoint and resumed with `resume_cfg` (in tmp_path/b): (straight model, its state,
    resumed model, its state)."""
    straight, _, s_state = train([make_trace()], tmp_path / "a", channels="light", model_config=mc, train_config=tc)

    def kill(step):
        if step == kill_at:
            raise _Killed

    with pytest.raises(_Killed):
        train([make_trace()], tmp_path / "b", channels="light", model_config=mc, train_config=tc,
              callbacks=TrainCallbacks(on_checkpoint=kill))
    resumed, _, r_state = train([make_trace()], tmp_path / "b", model_config=mc, train_config=resume_cfg,
                                resume=True)
    return straight, s_state, resumed, r_state


def test_resume_after_a_kill_continues_exactly(tmp_path):
    mc, tc = _cfgs(8)
    straight, s_state, resumed, r_state = _straight_and_resumed(tmp_path, mc, tc, tc)
    assert r_state.step == 8
    assert r_state.train_loss == s_state.train_loss
    assert _same(_weights(straight), _weights(resumed))


def test_a_resumed_run_keeps_the_precision_it_began_with(tmp_path):
    mc, tc = _cfgs(8, precision="fp32")
    asked = TrainConfig(**{**tc.to_dict(), "precision": "bf16"})
    straight, _, resumed, state = _straight_and_resumed(tmp_path, mc, tc, asked)
    assert state.precision == "fp32" and _same(_weights(straight), _weights(resumed))


def test_a_model_records_its_training_traces_and_resume_refuses_others(tmp_path):
    mc, tc = _cfgs(4)
    train([periodic_trace()], tmp_path / "m", channels="light", model_config=mc, train_config=tc)
    state = json.loads((tmp_path / "m" / "state.json").read_text())
    assert state["device"] == "cpu" and len(state["data"]) == 1
    assert state["data"][0]["events"] == 960 and state["data"][0]["workload"] == "toy"
    with pytest.raises(ConfigError, match=r"--resume: .* was trained on other traces than these "
                                          r"\(training trace 1 differs in last ts"):
        train([drifting_trace()], tmp_path / "m", model_config=mc, train_config=_cfgs(8)[1], resume=True)


def test_resume_without_checkpoint_is_a_config_error(tmp_path):
    mc, tc = _cfgs(2)
    with pytest.raises(ConfigError, match="no checkpoint"):
        train([periodic_trace()], tmp_path / "none", model_config=mc, train_config=tc, resume=True)
    train([periodic_trace()], tmp_path / "m", channels="light", model_config=mc, train_config=tc)
    (tmp_path / "m" / "training.safetensors").unlink()  # e.g. a model packed for sampling only
    with pytest.raises(ConfigError, match="no training.safetensors .* to resume from"):
        train([periodic_trace()], tmp_path / "m", model_config=mc, train_config=tc, resume=True)


def _overfitting(steps=24, **train_kw):
    """Configs under which the toy model is best-validated at step 4 of `drifting_trace()`, then
    worse at every validation after (measured: 3.66, 4.97, 6.48, ... nats/event)."""
    mc, tc = _cfgs(steps)
    return mc, dataclasses.replace(tc, lr=3e-2, **train_kw)


def test_keep_best_keeps_the_weights_of_the_lowest_validation_loss(tmp_path):
    mc, tc = _overfitting(keep_best=True)
    at_checkpoint = {}

    def snapshot(step):
        at_checkpoint[step] = load_file(str(tmp_path / "m" / "model.safetensors"))

    model, encoder, state = train([drifting_trace()], tmp_path / "m", channels="light", model_config=mc,
                                  train_config=tc, callbacks=TrainCallbacks(on_checkpoint=snapshot))
    losses = dict(state.val_loss)
    assert state.best_step == 4 == min(losses, key=losses.get) and state.step == 24
    assert losses[24] > losses[4] + 1  # it did overfit: the last weights are not the best
    best = tmp_path / "m" / "best"
    assert sorted(p.name for p in best.iterdir()) == ["cadence.safetensors", "config.json", "copies.safetensors",
                                                      "encoder.json", "model.safetensors", "ngrams.safetensors",
                                                      "splices.safetensors", "startups.safetensors", "state.json",
                                                      "support.safetensors"]  # no optimizer; a light model's runs
    assert _same(load_file(str(best / "model.safetensors")), at_checkpoint[4])
    assert not _same(load_file(str(best / "model.safetensors")), at_checkpoint[24])
    loaded, enc2, _, best_state = load_model(best)
    assert best_state["step"] == 4 and enc2.to_json() == encoder.to_json()
    assert json.loads((tmp_path / "m" / "state.json").read_text())["best_step"] == 4
    assert not list((tmp_path / "m").glob(".tracesynth-tmp-*"))
    # A fresh run into the same directory without --keep-best does not leave the old best behind.
    train([drifting_trace()], tmp_path / "m", channels="light", model_config=mc,
          train_config=dataclasses.replace(tc, steps=4, keep_best=False))
    assert not best.exists()


def test_keep_best_survives_a_kill_and_resume(tmp_path):
    mc, tc = _overfitting(steps=12, keep_best=True)
    _, straight, _, resumed = _straight_and_resumed(tmp_path, mc, tc, tc, make_trace=drifting_trace, kill_at=8)
    assert resumed.best_step == straight.best_step == 4 and resumed.best_val_loss == straight.best_val_loss
    assert _same(load_file(str(tmp_path / "a" / "best" / "model.safetensors")),
                 load_file(str(tmp_path / "b" / "best" / "model.safetensors")))


def test_patience_stops_a_run_that_no_longer_improves_and_it_stays_stopped(tmp_path):
    mc, tc = _overfitting(steps=40, patience=2)
    _, _, state = train([drifting_trace()], tmp_path / "m", channels="light", model_config=mc, train_config=tc)
    assert state.stopped_early and state.step == 12 and [s for s, _ in state.val_loss] == [4, 8, 12]
    assert validations_since_best(state) == 2 and not (tmp_path / "m" / "best").exists()
    saved = json.loads((tmp_path / "m" / "state.json").read_text())
    assert saved["step"] == 12 and saved["stopped_early"] is True  # the checkpoint is the stopping step's
    again = train([drifting_trace()], tmp_path / "m", model_config=mc, train_config=tc, resume=True)[2]
    assert again.stopped_early and again.step == 12 and len(again.train_loss) == 12


def test_the_held_out_tail_is_never_trained_on_and_val_fraction_0_trains_on_every_event():
    trace = drifting_trace()  # 960 events
    encoder = TraceEncoder("light").fit([trace])

    def last_trained_event(source):
        return max(int(offsets.max()) + 32 for offsets in (source.batch_with_offsets(step, 8)[2] for step in range(200)))

    held = WindowSource(encoder, [trace], 32, 0.1, seed=0)
    assert held.val_heldout and held.train_end.tolist() == [864]
    assert last_trained_event(held) <= 864 and int(held.validation(4)[2].min()) >= 864
    everything = WindowSource(encoder, [trace], 32, 0.0, seed=0)
    assert not everything.val_heldout and everything.train_end.tolist() == [960]
    assert last_trained_event(everything) > 900  # the tail is trained on; validation reads training windows
    with pytest.raises(ConfigError, match=r"validation fraction must be in \[0, 0.5\], not 0.7"):
        TrainConfig(val_fraction=0.7).validate()


def test_separate_validation_traces_are_validated_on_recorded_and_required_on_resume(tmp_path):
    mc, tc = _cfgs(8, keep_best=True, val_fraction=0.0)  # no tail held out: the other run validates
    trace, other = drifting_trace(), periodic_trace()
    model, encoder, state = train([trace], tmp_path / "m", channels="light", model_config=mc, train_config=tc,
                                  val_traces=[other])
    assert state.val_heldout and [s for s, _ in state.val_loss] == [4, 8] and state.best_step in (4, 8)
    saved = json.loads((tmp_path / "m" / "state.json").read_text())
    assert [f["events"] for f in saved["data"]] == [960] and saved["val_data"][0]["ts_sha256"] != saved["data"][0]["ts_sha256"]
    # validation windows lie evenly through the separate run, training windows anywhere in the training one
    source = WindowSource(encoder, [trace], 32, 0.0, seed=0, val_traces=[other])
    codes, _, offsets = source.validation(4)
    assert offsets.tolist() == [int((k + 0.5) / 4 * (960 - 32)) for k in range(4)]
    expected = encoder.window(encoder.encode(other), int(offsets[1]), 32)[0]
    assert np.array_equal(codes["event"][1].numpy(), expected["event"])
    # resume needs the same validation runs
    with pytest.raises(ConfigError, match=r"validated on other traces than these \(validated on 1 traces, here 0\)"):
        train([trace], tmp_path / "m", model_config=mc, train_config=dataclasses.replace(tc, steps=12), resume=True)
    again = train([trace], tmp_path / "m", model_config=mc, train_config=dataclasses.replace(tc, steps=12),
                  resume=True, val_traces=[other])[2]
    assert [s for s, _ in again.val_loss] == [4, 8, 12]
    # a training run as its own validation, or a workload the model does not know: refused
    with pytest.raises(ConfigError, match="validation trace 1 .* is also training trace 1"):
        train([trace], None, channels="light", model_config=mc, train_config=tc, val_traces=[trace])
    with pytest.raises(ConfigError, match="validation trace of workload 'other': the training traces' workloads are toy"):
        train([trace], None, channels="light", model_config=mc, train_config=tc,
              val_traces=[periodic_trace(workload="other")])


def test_keeping_the_best_needs_held_out_windows_and_periodic_validation():
    mc, tc = _overfitting(keep_best=True)
    with pytest.raises(ConfigError, match="held-out validation windows: no training trace has a 10% tail of 32"):
        train([periodic_trace(n=96)], None, channels="light", model_config=mc, train_config=tc)
    with pytest.raises(ConfigError, match="needs periodic validation"):
        dataclasses.replace(tc, val_every=0).validate()
    with pytest.raises(ConfigError, match="patience must be >= 0"):
        dataclasses.replace(tc, patience=-1).validate()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ddp_worker(rank, world, port, out, self_condition):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
    torch.set_num_threads(1)
    mc, tc = _cfgs(6, keep_best=True)
    mc.self_condition = self_condition
    tc.device = "cpu"
    _, _, state = train([periodic_trace()], None, channels="full", model_config=mc, train_config=tc)
    if rank == 0:
        with open(out, "w") as fh:
            json.dump({"train_loss": state.train_loss, "val_loss": state.val_loss, "best": state.best_step}, fh)
    torch.distributed.barrier()  # both ranks done before gloo tears down (a SIGABRT at exit otherwise, rarely)
    torch.distributed.destroy_process_group()


@pytest.mark.parametrize("self_condition", [False, True])
def test_ddp_two_gloo_processes_match_single_process(tmp_path, self_condition):
    """Also self-conditioned: each process estimates its own windows, as one process would."""
    mc, tc = _cfgs(6, keep_best=True)  # validation agreed on across processes (all-reduced)
    mc.self_condition = self_condition
    _, _, single = train([periodic_trace()], None, channels="full", model_config=mc, train_config=tc)
    out = tmp_path / "ddp.json"
    mp.spawn(_ddp_worker, args=(2, _free_port(), str(out), self_condition), nprocs=2, join=True)
    ddp = json.loads(out.read_text())
    assert [s for s, _ in ddp["train_loss"]] == [s for s, _ in single.train_loss]
    np.testing.assert_allclose([v for _, v in ddp["train_loss"]], [v for _, v in single.train_loss],
                               rtol=2e-3, atol=2e-3)
    assert [s for s, _ in ddp["val_loss"]] == [s for s, _ in single.val_loss] == [4, 6]
    np.testing.assert_allclose([v for _, v in ddp["val_loss"]], [v for _, v in single.val_loss], rtol=2e-3)
    assert ddp["best"] == single.best_step


def test_bf16_training_follows_fp32_and_stays_seeded():
    """bf16 autocast (opt-in on CPU, auto on CUDA) tracks fp32's losses on the same data and
    seed, and is as reproducible; an unknown precision is refused up front."""
    data = [periodic_trace(600)]
    losses = {}
    for precision in ("fp32", "bf16", "bf16"):
        model_cfg, train_cfg = _cfgs(steps=12, precision=precision)
        _, _, state = train(data, None, channels="light", model_config=model_cfg, train_config=train_cfg)
        assert state.precision == precision  # kept in state.json: what the model was trained in
        losses.setdefault(precision, []).append(np.array(state.train_loss))
    fp32, (bf16, again) = losses["fp32"][0], losses["bf16"]
    assert np.array_equal(bf16, again)
    assert np.isfinite(bf16).all() and not np.array_equal(bf16, fp32)  # bf16 really ran
    assert np.abs(bf16 - fp32).max() < 0.05 * np.abs(fp32).max()
    with pytest.raises(ConfigError, match="precision must be one of auto, fp32, bf16"):
        train(data, None, channels="light", model_config=_cfgs()[0], train_config=_cfgs(precision="fp64")[1])


def test_self_conditioned_training_is_seeded_and_learns_to_read_its_estimates():
    """Half the windows see the model's own first-pass estimate: the run stays reproducible,
    the zero-initialised estimate map learns, and the model saves and loads with it."""
    mc, tc = _cfgs(12)
    mc.self_condition = True
    a, _, sa = train([periodic_trace()], None, channels="light", model_config=mc, train_config=tc)
    b, _, sb = train([periodic_trace()], None, channels="light", model_config=mc, train_config=tc)
    assert _same(_weights(a), _weights(b)) and sa.train_loss == sb.train_loss
    assert all(layer.weight.abs().sum() > 0 for layer in a.self_cond.values())
    plain, _, sp = train([periodic_trace()], None, channels="light", model_config=_cfgs(12)[0], train_config=tc)
    assert plain.self_cond is None and sp.train_loss != sa.train_loss


def test_self_conditioned_training_and_sampling_run_under_bf16_autocast():
    """bf16 autocast (auto on CUDA) maps the estimates in bf16; their sum stays in fp32."""
    from tracesynth.sampling import generate

    mc, tc = _cfgs(3, precision="bf16")
    mc.self_condition = True
    model, encoder, state = train([periodic_trace()], None, channels="light", model_config=mc, train_config=tc)
    assert state.precision == "bf16" and np.isfinite([v for _, v in state.train_loss]).all()
    assert len(generate(model, encoder, 40, "toy", steps=4, seed=0, precision="bf16")) == 40


def test_self_conditioned_model_round_trips_through_its_checkpoint(tmp_path):
    mc, tc = _cfgs(4)
    mc.self_condition = True
    model, _, _ = train([periodic_trace()], tmp_path / "m", channels="light", model_config=mc, train_config=tc)
    loaded, _, _, _ = load_model(tmp_path / "m", "cpu")
    assert loaded.config.self_condition and _same(_weights(model), _weights(loaded))

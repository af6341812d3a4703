"""`tracesynth info MODEL`: a model directory described from its JSON and safetensors headers."""

from __future__ import annotations

import json

import torch
from toy_traces import drifting_trace

from tracesynth.model.checkpoint import load_model
from tracesynth.model.config import SIZES, ModelConfig, TrainConfig
from tracesynth.model.denoiser import parameter_count
from tracesynth.model.summary import summarize_model, summary_rows
from tracesynth.model.train import train


def test_a_model_is_described_without_loading_it_and_an_old_one_says_what_it_lacks(tmp_path):
    torch.set_num_threads(1)
    tc = TrainConfig(steps=40, batch_size=4, lr=3e-2, val_every=4, checkpoint_every=4, keep_best=True, patience=2,
                     ema=0.99)
    train([drifting_trace()], tmp_path / "m", channels="light", model_config=ModelConfig(context=32, **SIZES["tiny"]),
          train_config=tc)
    s = summarize_model(tmp_path / "m")
    model = load_model(tmp_path / "m")[0]
    assert s.params == parameter_count(model) and s.channels == ["event", "dt"] and s.workloads == ["toy"]
    assert (s.steps, s.target_steps, s.best[0], s.stopped_early) == (12, 40, 4, True)
    assert s.best_dir == str(tmp_path / "m" / "best") and s.device == "cpu" and s.optimizer_state
    assert s.training_traces[0]["events"] == 960
    rows = dict(summary_rows(s))
    assert rows["trained"].startswith("12 steps of 40, ") and "on cpu, fp32; stopped early" in rows["trained"]
    assert f"best {s.best[1]:.3f} at step 4" in rows["loss (nats/event)"]
    assert s.ema == 0.99 and rows["weights"] == "moving average over training, decay 0.99 (about the last 100 steps)"
    assert rows["training traces"].startswith("toy 960 events, ")
    assert "training start-ups (start-up anchor)" in s.tables and "n-gram counts (sampling prior)" in s.tables
    # A model saved before the device, the fingerprints and the best were kept.
    state = json.loads((tmp_path / "m" / "state.json").read_text())
    for key in ("device", "data", "best_step", "best_val_loss", "stopped_early"):
        del state[key]
    (tmp_path / "m" / "state.json").write_text(json.dumps(state))
    old = summarize_model(tmp_path / "m")
    assert old.best[0] == 4 and abs(old.best[1] - s.best[1]) < 1e-4  # from the validation history
    rows = dict(summary_rows(old))
    assert "(device not recorded)" in rows["trained"]
    assert rows["training traces"] == "not recorded (saved before 2026-12-04)"
    (tmp_path / "m" / "training.safetensors").unlink()  # what resume needs beside the average
    assert not summarize_model(tmp_path / "m").optimizer_state

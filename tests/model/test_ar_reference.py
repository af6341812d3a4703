"""The benchmark's autoregressive reference: same size as the denoiser, generates, learns."""

from __future__ import annotations

import torch

from tracesynth.model.ar_reference import matched_reference
from tracesynth.model.config import ModelConfig, size_config
from tracesynth.model.denoiser import Denoiser, parameter_count


def test_reference_matches_size_and_generates():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    vocab = {"event": 50, "dt": 202}
    target = parameter_count(Denoiser(ModelConfig(vocab_sizes=vocab, **size_config("small", list(vocab)))))
    ar = matched_reference(vocab, target)
    assert abs(parameter_count(ar) - target) / target < 0.2
    codes = {c: torch.randint(0, v, (2, 64)) for c, v in vocab.items()}
    assert torch.isfinite(ar.loss(codes))
    prompt = {c: v[:1, :40] for c, v in codes.items()}
    out = ar.generate(prompt, 30, context=48, generator=torch.Generator().manual_seed(0))  # wraps the ring buffer
    assert all(out[c].shape == (1, 30) and (out[c] < v).all() for c, v in vocab.items())
    # Cached generation equals a full recomputation while the context is not yet exceeded.
    with torch.no_grad():
        cached = ar.generate(prompt, 1, context=64, generator=torch.Generator().manual_seed(1))
        logits = ar.heads["ch_event"](ar.forward(prompt)[:, -1])
        again = torch.multinomial(torch.softmax(logits[0], -1), 1, generator=torch.Generator().manual_seed(1))
    assert cached["event"].item() == again.item()

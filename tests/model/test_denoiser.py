"""The denoiser's hand-written fast paths compute what the library modules they stand for do."""

from __future__ import annotations

import pytest
import torch

from tracesynth.model.config import ModelConfig, size_config
from tracesynth.model.denoiser import Denoiser, LocalBlock


@pytest.mark.parametrize("dilation", [1, 2, 4, 8])
def test_shifted_sum_is_the_depthwise_convolution_forwards_and_backwards(dilation):
    torch.manual_seed(dilation)
    block = LocalBlock(16, 7, dilation, 2)
    x = torch.randn(3, 96, 16, requires_grad=True)
    library = block.conv(x.transpose(1, 2)).transpose(1, 2)
    shifted = block._shifted_conv(x)
    assert torch.allclose(library, shifted, atol=1e-5)
    g_library = torch.autograd.grad(library.square().sum(), [x, block.conv.weight, block.conv.bias])
    g_shifted = torch.autograd.grad(shifted.square().sum(), [x, block.conv.weight, block.conv.bias])
    assert all(torch.allclose(a, b, atol=1e-4) for a, b in zip(g_library, g_shifted))


@pytest.mark.parametrize("dilation", [1, 8])
def test_channels_last_route_is_the_depthwise_convolution(dilation):
    """Sampling's route (no transposing copies) computes the library convolution; on this
    machine's oneDNN kernel bit for bit, which keeps sampled traces unchanged."""
    torch.manual_seed(dilation)
    block = LocalBlock(64, 7, dilation, 2)
    x = torch.randn(2, 512, 64)
    with torch.no_grad():
        library = block.conv(x.transpose(1, 2)).transpose(1, 2)
        routed = block._channels_last_conv(x)
    assert routed.shape == library.shape and routed.is_contiguous()
    assert torch.allclose(library, routed, atol=1e-6)


def test_training_and_sampling_paths_of_a_block_agree():
    """With gradients (training, CPU) the block takes the shifted sum, without (sampling) the
    library kernel: the same function either way."""
    torch.manual_seed(0)
    block = LocalBlock(16, 7, 4, 2)
    x = torch.randn(2, 64, 16)
    with torch.no_grad():
        sampling = block(x)
    assert torch.allclose(block(x), sampling, atol=1e-5)


def test_downsample_as_a_linear_map_is_the_strided_convolution():
    torch.manual_seed(0)
    model = Denoiser(ModelConfig(context=256, vocab_sizes={"event": 20, "dt": 30},
                                 **size_config("tiny", ["event", "dt"])))
    x = torch.randn(2, 256, model.config.d_local)
    library = model.down(x.transpose(1, 2)).transpose(1, 2)
    assert library.shape == (2, 256 // model.config.downsample, model.config.d_global)
    assert torch.allclose(model._downsample(x), library, atol=1e-5)


@pytest.mark.parametrize("size", ["tiny", "small", "medium"])
def test_features_at_some_positions_are_those_of_the_whole_window(size):
    """Sampling asks for the masked positions' features only; they must be the whole window's
    at those positions, for a few rows, many, the edges, and a model of each size. (On this
    project's machines they are bit-identical, and sampled traces with them: a short request
    is padded so that its matrix product takes the kernel a long one does; which kernel a CPU
    picks for how many rows is the BLAS library's business, so the test asks for float
    closeness, and `benchmarks/bench_revisions.py` checks the traces.)"""
    torch.manual_seed(1)
    config = ModelConfig(context=512, vocab_sizes={"event": 20, "dt": 30}, **size_config(size, ["event", "dt"]))
    model = Denoiser(config).eval()
    codes = {ch: torch.randint(0, v + 1, (2, 512)) for ch, v in config.vocab_sizes.items()}
    t, labels, offset = torch.tensor([0.3, 0.3]), torch.tensor([0, config.n_workloads]), torch.tensor([0, 0])
    with torch.inference_mode():
        whole = model.hidden(codes, t, labels, offset=offset)
        for n in (1, 3, 15, 16, 40, 300, 511):
            positions = torch.sort(torch.randperm(512)[:n]).values
            positions[0] = 0 if n % 2 else 511
            positions = torch.unique(positions)
            some = model.hidden(codes, t, labels, offset=offset, positions=positions)
            assert some.shape == (2, len(positions), config.d_local)
            assert torch.allclose(some, whole[:, positions], atol=1e-5, rtol=0), n


def test_self_conditioning_starts_as_a_no_op_and_reads_estimates_where_they_are():
    """The estimate map is zero-initialised (a fresh model computes what one without it does);
    once trained, an estimate moves the input at its own position and nowhere else; a model
    configured without it takes no estimates."""
    torch.manual_seed(2)
    config = ModelConfig(context=64, vocab_sizes={"event": 12, "dt": 9}, self_condition=True,
                         **size_config("tiny", ["event", "dt"]))
    model = Denoiser(config).eval()
    codes = {ch: torch.randint(0, v + 1, (2, 64)) for ch, v in config.vocab_sizes.items()}
    t, labels = torch.tensor([0.5, 0.5]), torch.tensor([0, 0])
    probs = torch.softmax(torch.randn(3, 12), -1)
    estimates = {"event": (torch.tensor([0, 1, 1]), torch.tensor([5, 5, 40]), probs),
                 "dt": (torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long), torch.zeros(0, 9))}
    with torch.inference_mode():
        before = model.hidden(codes, t, labels)
        fed = model.self_cond_input(estimates, (2, 64))
        assert torch.equal(model.hidden(codes, t, labels, self_cond=fed), before)
    torch.nn.init.normal_(model.self_cond["ch_event"].weight)
    with torch.inference_mode():
        fed = model.self_cond_input(estimates, (2, 64))
    assert fed.shape == (2, 64, config.d_local)
    moved = fed.abs().sum(-1) > 0
    assert moved.nonzero().tolist() == [[0, 5], [1, 5], [1, 40]]
    assert torch.allclose(fed[1, 40], model.self_cond["ch_event"](probs[2]))
    plain = Denoiser(ModelConfig(context=64, vocab_sizes={"event": 12, "dt": 9}, **size_config("tiny", ["event", "dt"])))
    assert plain.self_cond is None and plain.self_cond_input(estimates, (2, 64)) is None

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

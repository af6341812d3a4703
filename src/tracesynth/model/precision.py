"""The number format the denoiser's network runs in: fp32, or bf16 autocast.

`auto` (training's default) means bf16 autocast on a CUDA device that supports it, fp32 on a
CPU; `bf16` asks for it anywhere. On a CPU with native bf16 instructions (x86 AVX512-BF16 or
AMX, Arm BF16) a training step of the default light model takes 0.77-0.84x the fp32 time, but
a whole default training run only 0.93x (encoding, n-gram tables, validation and checkpoints do
not speed up), and the quality measured was level within the seeds' spread: on CPUs bf16 is
opt-in, and the default keeps training what fp32 trains; sampling (one window a call) gains
0-6% (docs/model.md, "Precision"). On a CPU without those instructions bf16 is emulated
and slower than fp32: `cpu_has_native_bf16` tells which, from /proc/cpuinfo, since PyTorch has
no public query for it (`torch.backends.mkldnn` reports whether oneDNN can *run* bf16,
emulation included).

When sampling, only the network's body runs under autocast: its features come back as fp32 and
the output heads, the softmax and the draws see full precision, so a logit is not rounded to
bf16's 8 bits of mantissa before it is sampled. Training computes its loss in fp32.
"""

from __future__ import annotations

import contextlib
import functools
from pathlib import Path

import torch

from tracesynth.errors import ConfigError
from tracesynth.model.config import PRECISIONS
# CPU flags (/proc/cpuinfo "flags" on x86, "Features" on Arm) that mean bf16 arithmetic in hardware.
NATIVE_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})


@functools.lru_cache(maxsize=1)
def cpu_has_native_bf16(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether this machine's CPU does bf16 arithmetic in hardware (Linux: its cpuinfo flags)."""
    try:
        text = Path(cpuinfo).read_text(errors="replace")
    except OSError:
        return False
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() in ("flags", "features"):
            return bool(NATIVE_BF16_FLAGS & set(value.split()))
    return False


def resolve_precision(precision: str, device: torch.device | str) -> str:
    """`fp32` or `bf16` for a requested precision on a device (`auto`: bf16 on CUDA devices that
    support it, else fp32)."""
    if precision not in PRECISIONS:
        raise ConfigError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
    if precision != "auto":
        return precision
    if torch.device(device).type == "cuda" and torch.cuda.is_bf16_supported():
        return "bf16"
    return "fp32"


def autocast(precision: str, device: torch.device | str):
    """A context in which the network runs at `precision` (already resolved: fp32 or bf16)."""
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(torch.device(device).type, dtype=torch.bfloat16)

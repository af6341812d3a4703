"""The number format the denoiser's network runs in when sampling: fp32, or bf16 autocast.

Sampling spends about half its time in the network (the rest in the n-gram prior, the draws and
the guide), and on a CPU with native bf16 instructions (x86 AVX512-BF16 or AMX, Arm BF16) a bf16
forward of the light model at context 4096 takes ~0.65 of the fp32 time. The output heads stay
in fp32: the network's features come back as fp32 and the heads, the softmax and the draws see
full precision, so a logit is not rounded to bf16's 8 bits of mantissa before it is sampled.
`auto` picks bf16 only where the hardware runs it natively: emulated bf16 (AVX512 without
BF16) is slower than fp32.

PyTorch has no public query for native CPU bf16 (`torch.backends.mkldnn` reports whether
oneDNN can *run* bf16, emulation included), so on Linux the CPU flags are read from
/proc/cpuinfo; elsewhere `auto` means fp32 on CPU.
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
    """`fp32` or `bf16` for a requested precision on a device (`auto`: bf16 where native)."""
    if precision not in PRECISIONS:
        raise ConfigError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
    if precision != "auto":
        return precision
    device = torch.device(device)
    if device.type == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp32"
    return "bf16" if device.type == "cpu" and cpu_has_native_bf16() else "fp32"


def autocast(precision: str, device: torch.device | str):
    """A context in which the network runs at `precision` (already resolved: fp32 or bf16)."""
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(torch.device(device).type, dtype=torch.bfloat16)

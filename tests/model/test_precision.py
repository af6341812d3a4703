"""Precision: auto is bf16 on CUDA only; native CPU bf16 is read from the CPU's flags."""

from __future__ import annotations

import pytest
import torch

from tracesynth.errors import ConfigError
from tracesynth.model.precision import autocast, cpu_has_native_bf16, resolve_precision

X86_FLAGS = "fpu vme avx2 avx512f avx512bw avx512vl"


def _cpuinfo(tmp_path, line: str) -> str:
    path = tmp_path / "cpuinfo"
    path.write_text(f"processor\t: 0\nmodel name\t: test\n{line}\n\nprocessor\t: 1\n{line}\n")
    return str(path)


@pytest.mark.parametrize(("line", "native"), [
    (f"flags\t\t: {X86_FLAGS} avx512_bf16 avx512_vnni", True),   # AMD Zen 4, Intel Cooper Lake
    (f"flags\t\t: {X86_FLAGS} amx_bf16 amx_tile", True),         # Intel Sapphire Rapids
    (f"flags\t\t: {X86_FLAGS}", False),                          # AVX512 without BF16: emulated, slower
    ("Features\t: fp asimd bf16 i8mm sve", True),                  # Arm v8.6+
    ("Features\t: fp asimd", False),
])
def test_native_bf16_is_read_from_the_cpu_flags(tmp_path, line, native):
    assert cpu_has_native_bf16.__wrapped__(_cpuinfo(tmp_path, line)) is native


def test_no_cpuinfo_means_no_native_bf16(tmp_path):
    assert cpu_has_native_bf16.__wrapped__(str(tmp_path / "missing")) is False


def test_auto_is_fp32_on_cpu_and_explicit_choices_stand():
    assert resolve_precision("fp32", "cpu") == "fp32"
    assert resolve_precision("bf16", "cpu") == "bf16"
    assert resolve_precision("auto", "cpu") == "fp32"  # opt-in on CPUs, native bf16 or not
    with pytest.raises(ConfigError, match="precision must be one of auto, fp32, bf16"):
        resolve_precision("fp16", "cpu")


def test_autocast_runs_matmuls_in_bf16_and_fp32_leaves_them_alone():
    a = torch.randn(8, 8)
    with autocast("bf16", "cpu"):
        assert (a @ a).dtype == torch.bfloat16
    with autocast("fp32", "cpu"):
        assert (a @ a).dtype == torch.float32

"""tracesynth.runtime: the CLI's process settings take effect, and a user's own choice wins."""

import os
import subprocess
import sys

from tracesynth import runtime


def test_malloc_keeps_freed_memory_on_glibc():
    # This machine's C library is glibc (Debian); mallopt accepts both settings.
    assert runtime.keep_freed_memory() is True


def test_users_malloc_environment_wins(monkeypatch):
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "0")
    assert runtime.keep_freed_memory() is False
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_")
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=65536")
    assert runtime.keep_freed_memory() is False


def _child(code: str, env: dict[str, str]) -> str:
    clean = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    out = subprocess.run([sys.executable, "-c", code], env={**clean, **env}, capture_output=True,
                         text=True, check=True)
    return out.stdout.strip()


def test_cli_sets_passive_threads_before_torch_is_loaded():
    code = ("import os, sys, tracesynth.cli; "
            "print(os.environ.get('OMP_WAIT_POLICY'), 'torch' in sys.modules)")
    assert _child(code, {}) == "PASSIVE False"
    assert _child(code, {"OMP_WAIT_POLICY": "ACTIVE"}) == "ACTIVE False"

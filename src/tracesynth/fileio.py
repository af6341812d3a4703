"""Atomic output: write to a temporary sibling, rename into place only on success.

A reader never sees a half-written file or CTF directory, and a failed command leaves
nothing behind (the brief's "no partial output" rule).
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

TMP_PREFIX = ".tracesynth-tmp-"


@contextmanager
def atomic_path(path: str | Path, directory: bool = False) -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it to `path` when the block succeeds.

    With ``directory=True`` the temporary path is created as an empty directory (for CTF
    traces, which are folders). An existing target is replaced only after success.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f"{TMP_PREFIX}{uuid.uuid4().hex[:12]}-{target.name}"
    if directory:
        tmp.mkdir()
    try:
        yield tmp
        if target.is_dir() and not target.is_symlink():
            old = target.parent / f".tracesynth-tmp-old-{uuid.uuid4().hex[:12]}"
            os.replace(target, old)
            os.replace(tmp, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, target)
    except BaseException:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)
        raise



def final_name(tmp: Path) -> str:
    """The file name a temporary path from `atomic_path` will be renamed to."""
    name = tmp.name
    if name.startswith(TMP_PREFIX):
        return name[len(TMP_PREFIX) + 13 :]
    return name

"""The trained models a benchmark runs on: the `tracesynth__W__...` directories of a results
directory's `models/` (what `tracesynth experiment` writes), shared by the scripts that take
`--models`."""

from __future__ import annotations

import sys
from pathlib import Path


def model_dirs(models: Path, workloads: str | None) -> list[Path] | None:
    """Model directories under `models` (only those of the comma-separated `workloads`, if
    given), sorted; None after a one-line error on stderr when there are none."""
    if not models.is_dir():
        print(f"{models}: not a directory of model directories", file=sys.stderr)
        return None
    wanted = set(workloads.split(",")) if workloads else None
    dirs = sorted(d for d in models.iterdir() if d.is_dir() and d.name.startswith("tracesynth__"))
    if wanted:
        dirs = [d for d in dirs if d.name.split("__")[1] in wanted]
    if not dirs:
        print(f"{models}: no tracesynth__* model directories" + (f" for {workloads}" if wanted else ""),
              file=sys.stderr)
        return None
    return dirs

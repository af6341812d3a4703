"""TraceSynth: learn from real Linux kernel traces, generate realistic synthetic ones.

    import tracesynth
    trace = tracesynth.load("../shared/data/ctf/many-threads")   # any supported format
    trace.events.to_pandas().head()
    trace.save("many-threads.parquet")
"""

from __future__ import annotations

from pathlib import Path

from tracesynth.errors import ConfigError, TraceFormatError, TraceSynthError
from tracesynth.schema import COLUMNS, SCHEMA, Trace, TraceMeta

__version__ = "0.1.0"


def load(path: str | Path, format: str | None = None, *, lenient: bool = False,
         workload: str | None = None) -> Trace:
    """Read a trace in any supported format (auto-detected) into a `Trace`."""
    from tracesynth.sources import read_trace

    return read_trace(path, format, lenient=lenient, workload=workload)


__all__ = [
    "COLUMNS",
    "SCHEMA",
    "ConfigError",
    "Trace",
    "TraceFormatError",
    "TraceMeta",
    "TraceSynthError",
    "load",
    "__version__",
]

"""Format auto-detection: look at the path and its first bytes, ask each reader in turn.

Order matters: binary and structured formats first, the permissive text formats (event-id
sequences) last.
"""

from __future__ import annotations

from pathlib import Path

from tracesynth.errors import TraceFormatError, UnknownFormatError
from tracesynth.sources.base import SourceReader

HEAD_BYTES = 8192


def registry() -> dict[str, type[SourceReader]]:
    """Format name → reader class, in detection order."""
    from tracesynth.sources import ctf, eventids, ftrace, strace, tables

    readers = [
        ctf.CtfReader,
        tables.ParquetReader,
        tables.JsonlReader,
        tables.CsvReader,
        strace.StraceReader,
        ftrace.FtraceReader,
        eventids.EventIdReader,
    ]
    return {r.format: r for r in readers}


def read_head(path: Path) -> bytes:
    if path.is_dir():
        return b""
    with open(path, "rb") as fh:
        return fh.read(HEAD_BYTES)


def detect_format(path: str | Path) -> str:
    path = Path(path)
    if not path.exists():
        raise TraceFormatError(path, None, "no such file or directory")
    head = read_head(path)
    if path.is_file() and not head:
        raise TraceFormatError(path, 0, "empty file")
    for name, reader in registry().items():
        if reader.sniff(path, head):
            return name
    # A file named like a format (a corrupt or mislabelled export, usually) is told what its
    # content lacks for that format rather than "unknown format".
    named = [r for r in registry().values() if path.suffix.lower() in r.suffixes]
    if path.is_dir():
        kind = "directory is not a CTF trace (no 'metadata' file)"
    elif named:
        kind = f"named .{named[0].format} but not {named[0].format} data: {named[0].lacks}"
    else:
        kind = "unknown format"
    raise UnknownFormatError(path, None, f"{kind}; pass --format ({', '.join(registry())})")

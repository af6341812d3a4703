"""The reader interface every source format implements.

A reader is constructed on a path, fills `meta` (some fields only once reading finishes, such
as `skipped_records` or `lost_events`), and yields canonical record batches from `batches()`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pyarrow as pa

from tracesynth.errors import TraceFormatError
from tracesynth.schema import TraceMeta


class SourceReader(ABC):
    #: Format name used by ``--format`` and recorded in ``TraceMeta.source_format``.
    format: ClassVar[str] = ""
    #: One line for ``tracesynth formats``.
    description: ClassVar[str] = ""
    #: File suffixes that announce this format, and what `sniff` finds missing when a file so
    #: named is none of the formats (detection says that instead of "unknown format").
    suffixes: ClassVar[tuple[str, ...]] = ()
    lacks: ClassVar[str] = ""

    def __init__(self, path: str | Path, *, lenient: bool = False):
        self.path = Path(path)
        self.lenient = lenient
        if not self.path.exists():
            raise TraceFormatError(self.path, None, "no such file or directory")
        self.meta = TraceMeta(source_format=self.format, source_path=str(self.path))

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        """Cheap yes/no: does `path` (whose first bytes are `head`) look like this format?"""
        return False

    @abstractmethod
    def batches(self) -> Iterator[pa.RecordBatch]:
        """Yield canonical record batches in timestamp order."""

    def skip_or_raise(self, position: str | int | None, message: str) -> None:
        """In lenient mode count a bad record and go on; otherwise stop with a clear error."""
        if self.lenient:
            self.meta.skipped_records += 1
            return
        raise TraceFormatError(self.path, position, message)

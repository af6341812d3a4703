"""The writer interface every output format implements.

A sink writes canonical record batches into a path that `write_batches` has made temporary;
the rename into place happens only after the sink returns, so outputs are never partial.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import ClassVar

import pyarrow as pa

from tracesynth.schema import TraceMeta

MetaArg = TraceMeta | Callable[[], TraceMeta]


def resolve_meta(meta: MetaArg) -> TraceMeta:
    return meta() if callable(meta) else meta


class SinkWriter(ABC):
    format: ClassVar[str] = ""
    description: ClassVar[str] = ""
    #: File suffixes that select this sink when no format is given.
    suffixes: ClassVar[tuple[str, ...]] = ()
    #: True when the output is a directory (CTF).
    directory: ClassVar[bool] = False

    @abstractmethod
    def write(self, batches: Iterable[pa.RecordBatch], meta: MetaArg, path: Path) -> int:
        """Write all batches to `path`; return the number of events written."""

"""Event-id sequences, the form many published trace datasets use → canonical rows.

Two layouts, told apart by the first data line:

* one integer id per line: a single sequence;
* windows: each line holds several ids separated by commas and/or whitespace (``3,5,5,6`` or
  ``3 5 5 6``); a line is one window, its index (0-based, blank lines not counted) goes into
  the payload as ``{"window": i}``. A first line with a single id means the first layout.

Names: ``event_<id>``, unless a vocabulary maps ids to names: the file ``<file>.vocab`` next to
the input, or the `vocab` argument. A vocabulary is text, one ``<id> <name>`` (or
``<id>,<name>``) per line, ``#`` comments allowed; a line with a name alone gets the line's
0-based index among name lines as its id. The special vocabulary ``"syscalls-x86_64"`` names
ids as x86_64 syscall entries (``syscall_entry_<name>``). Names are used verbatim, so a
vocabulary in LTTng naming yields events the rest of TraceSynth understands.

The datasets carry no time, thread or CPU: ts is synthetic, event index × 1000 ns
(`SYNTHETIC_STEP_NS`, over the whole file, windows included); cpu/tid/pid/procname are null.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa

from tracesynth.errors import TraceFormatError
from tracesynth.schema import SYSCALL_ENTRY_PREFIX
from tracesynth.sources.base import SourceReader
from tracesynth.sources.rows import RowBuffer

SYNTHETIC_STEP_NS = 1000
SYSCALL_VOCAB = "syscalls-x86_64"

_SEPARATORS = re.compile(r"[,\s]+")
_DATA_LINE = re.compile(rb"\s*\d+(?:\s*[,\s]\s*\d+)*\s*,?\s*")


def vocab_path(path: Path) -> Path:
    return path.with_name(path.name + ".vocab")


def load_vocab(source: str | Path) -> dict[int, str]:
    """Read a vocabulary file (see the module docstring) or the built-in syscall table."""
    if str(source) == SYSCALL_VOCAB:
        from tracesynth.sources.syscalls_x86_64 import SYSCALL_NAMES

        return {nr: SYSCALL_ENTRY_PREFIX + name for nr, name in SYSCALL_NAMES.items()}
    path = Path(source)
    if not path.is_file():
        raise TraceFormatError(path, None, "vocabulary file not found")
    vocab: dict[int, str] = {}
    index = 0
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            text = line.strip()
            if not text or text.startswith("#"):
                continue
            parts = [p for p in re.split(r"[,\s]+", text, maxsplit=1) if p]
            if len(parts) == 2 and parts[0].lstrip("-").isdigit():
                vocab[int(parts[0])] = parts[1].strip()
            elif len(parts) == 1 and not parts[0].isdigit():
                vocab[index] = parts[0]
            else:
                raise TraceFormatError(
                    path, lineno, f"expected '<id> <name>' or '<name>', got {text!r}"
                )
            index += 1
    return vocab


class EventIdReader(SourceReader):
    format = "eventids"
    description = "integer event ids: one per line, or one comma/space separated window per line"

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        # Every complete line of the head must be ids only: nothing else is that plain.
        lines = head.splitlines()
        if len(head) == 8192 and len(lines) > 1:
            lines = lines[:-1]  # the head may end mid-line
        data = [ln for ln in lines if ln.strip()]
        return bool(data) and all(_DATA_LINE.fullmatch(ln) for ln in data)

    def __init__(self, path, *, lenient: bool = False, vocab: str | Path | None = None):
        super().__init__(path, lenient=lenient)
        self.meta.tracer = "eventids"
        self.meta.clock_name = "synthetic-index"
        source = vocab if vocab is not None else vocab_path(self.path)
        self.vocab: dict[int, str] = {}
        if vocab is not None or vocab_path(self.path).is_file():
            self.vocab = load_vocab(source)
            self.meta.extra["vocab"] = str(source)

    def name_of(self, event_id: int, cache: dict[int, str]) -> str:
        name = cache.get(event_id)
        if name is None:
            name = cache[event_id] = self.vocab.get(event_id) or f"event_{event_id}"
        return name

    def batches(self) -> Iterator[pa.RecordBatch]:
        buf = RowBuffer()
        names: dict[int, str] = {}
        windowed: bool | None = None
        window = 0
        index = 0
        with open(self.path, encoding="utf-8", errors="replace", newline="") as fh:
            for lineno, line in enumerate(fh, 1):
                text = line.strip()
                if not text:
                    continue
                tokens = [t for t in _SEPARATORS.split(text) if t]
                try:
                    ids = [int(t) for t in tokens]
                except ValueError:
                    if not line.endswith("\n"):
                        self.meta.skipped_records += 1
                        self.meta.extra["truncated_final_line"] = lineno
                        continue
                    self.skip_or_raise(lineno, f"expected integer event ids, got {text[:60]!r}")
                    continue
                if windowed is None:
                    windowed = len(ids) > 1 or "," in text
                    self.meta.extra["layout"] = "windows" if windowed else "sequence"
                elif not windowed and len(ids) != 1:
                    self.skip_or_raise(lineno, f"expected one id per line, got {len(ids)}")
                    continue
                payload = {"window": window} if windowed else None
                for event_id in ids:
                    name = self.name_of(event_id, names)
                    buf.append(index * SYNTHETIC_STEP_NS, name, payload=payload)
                    index += 1
                    if buf.full():
                        yield buf.flush()
                window += 1
        if windowed:
            self.meta.extra["windows"] = window
        yield from buf.drain()

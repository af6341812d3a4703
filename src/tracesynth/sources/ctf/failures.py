"""Where and why babeltrace2 gave up: one-line errors with file and offset."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from tracesynth.errors import TraceFormatError

_LOG_LINE_RE = re.compile(r" [EW] PLUGIN/\S+ \S+ \[\w+\] (.*)$")
_OFFSET_RE = re.compile(r"(?:packet-)?offset(?:-in-bytes)?=(\d+)")
_LINE_RE = re.compile(r"(?:at line|line[ =:]+)\s*(\d+)", re.I)
_STREAM_RE = re.compile(r"(?:stream|path|file)=\"?([^\s\",]+)")
_ADDR_RE = re.compile(r",?\s*[\w-]+-addr=0x[0-9a-fA-F]+")  # pointers mean nothing to a user
_QUOTED_PATH_RE = re.compile(r"[`'\"](/[^`'\"]+)[`'\"]")


class CtfFailure:
    """Where and why babeltrace2 gave up, from its error causes and (if needed) its log."""

    def __init__(self, causes: list[str], log: list[str]):
        self.causes = causes
        self.log = log
        text = log + causes
        self.file: Path | None = None
        self.offset: int | None = None
        self.line: int | None = None
        self.packet: int | None = None
        for entry in text:
            if self.offset is None and (m := _OFFSET_RE.search(entry)):
                self.offset = int(m.group(1))
                if (f := _STREAM_RE.search(entry)) is not None:
                    self.file = Path(f.group(1))
            if self.line is None and (m := _LINE_RE.search(entry)):
                self.line = int(m.group(1))
        if self.file is None:
            for entry in causes:  # innermost cause first: it names the stream file at fault
                if (m := _QUOTED_PATH_RE.search(entry)) is not None:
                    self.file = Path(m.group(1))
                    break
        specific = [e for e in log if "offset" in e or "line" in e] or log or causes
        detail = _ADDR_RE.sub("", specific[0]) if specific else "unreadable CTF"
        self.detail = re.sub(r":\s*,\s*", ": ", detail).rstrip(": ")

    @classmethod
    def from_error(cls, exc: Exception, log: list[str] | None = None) -> CtfFailure:
        try:
            causes = [" ".join(str(c.message).split()) for c in exc]  # bt2._Error: its causes
        except TypeError:
            causes = [" ".join(str(exc).split())]
        return cls([c for c in causes if c], log or [])

    def as_error(self, trace_dir: Path, shown_dir: Path, default: Path) -> TraceFormatError:
        file = self.file if self.file is not None and self.file != trace_dir else default
        try:
            file = shown_dir / file.relative_to(trace_dir)
        except ValueError:
            pass
        position: str | int | None = None
        if self.offset is not None:
            position = f"byte offset {self.offset}"
        elif self.packet is not None:
            position = f"packet index {self.packet}"
        elif self.line is not None:
            position = self.line
        detail = self.detail.replace(str(trace_dir), str(shown_dir))
        if len(detail) > 240:
            detail = detail[:237] + "..."
        return TraceFormatError(file, position, f"babeltrace2 cannot read this CTF trace: {detail}")


def _captured_log(bt2, trace_dir: Path) -> list[str]:
    """Re-run ``src.ctf.fs`` initialisation with logging on and capture its stderr lines.

    bt2's error causes say *which* file failed; only its log says at which offset or line.
    """
    import tempfile

    lines: list[str] = []
    with tempfile.TemporaryFile() as sink:
        saved = os.dup(2)
        try:
            sys.stderr.flush()
            os.dup2(sink.fileno(), 2)
            try:
                graph = bt2.Graph()
                fs = bt2.find_plugin("ctf").source_component_classes["fs"]
                graph.add_component(
                    fs, "diagnose", params={"inputs": [str(trace_dir)]},
                    logging_level=bt2.LoggingLevel.WARNING,
                )
            except bt2._Error:
                pass
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        sink.seek(0)
        for raw in sink.read().decode("utf-8", "replace").splitlines():
            if (m := _LOG_LINE_RE.search(raw)) is not None:
                lines.append(m.group(1).strip())
    return lines

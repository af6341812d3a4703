"""Typed errors with one-line messages that say where the problem is and what to do.

The CLI prints ``str(error)`` on one line and exits non-zero; Python callers catch the type.
"""

from __future__ import annotations

from pathlib import Path


class TraceSynthError(Exception):
    """Base of every error TraceSynth raises on purpose (bad input, bad state, bad config)."""

    exit_code = 2


class TraceFormatError(TraceSynthError):
    """Input that cannot be read: names the file and the line (or byte offset) at fault."""

    def __init__(self, path: str | Path | None, position: str | int | None, message: str):
        self.path = str(path) if path is not None else None
        self.position = position
        self.message = message
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = self.path or "<input>"
        if isinstance(self.position, int):
            where += f":{self.position}"
        elif self.position:
            where += f" ({self.position})"
        return f"{where}: {self.message}"


class UnknownFormatError(TraceFormatError):
    """Auto-detection found no reader for the input."""


class ConfigError(TraceSynthError):
    """A user-supplied option or config value is invalid."""


class RecordError(TraceSynthError):
    """Recording with ftrace is impossible here (not root, no tracefs, busy...)."""

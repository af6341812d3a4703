"""What a rule is: a named kernel invariant, the channels it reads, a vectorized check that
returns the violating rows, and a repair that proposes the fewest edits it can.

Rules never mutate a trace. `check` returns `Findings` (rows + a reason code per row);
`repair` turns findings into `Edit`s that `constraints.repair` applies and re-checks.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np

from tracesynth.constraints.view import TraceView


@dataclass
class Findings:
    """Violating rows (ascending) with a reason code each; `reasons` maps code → text."""

    rows: np.ndarray
    codes: np.ndarray
    reasons: dict[int, str]

    @classmethod
    def empty(cls) -> Findings:
        return cls(np.zeros(0, np.int64), np.zeros(0, np.int8), {})

    @classmethod
    def of(cls, parts: list[tuple[np.ndarray, int]], reasons: dict[int, str]) -> Findings:
        """Merge (rows, code) parts, ordering by row; a row keeps its first code."""
        rows = [np.asarray(r, np.int64) for r, _ in parts if len(r)]
        if not rows:
            return cls(np.zeros(0, np.int64), np.zeros(0, np.int8), reasons)
        codes = [np.full(len(r), c, np.int8) for r, c in parts if len(r)]
        all_rows = np.concatenate(rows)
        all_codes = np.concatenate(codes)
        order = np.argsort(all_rows, kind="stable")
        all_rows, all_codes = all_rows[order], all_codes[order]
        keep = np.ones(len(all_rows), bool)
        keep[1:] = all_rows[1:] != all_rows[:-1]
        return cls(all_rows[keep], all_codes[keep], reasons)

    def __len__(self) -> int:
        return len(self.rows)

    def reason(self, i: int) -> str:
        return self.reasons.get(int(self.codes[i]), "violation")


@dataclass
class Edit:
    """One change to a trace. `row` is the current row index while repairing (the row an
    insert goes before); the edit log rewrites it to the original row number."""

    op: str  # "set", "drop" or "insert"
    row: int
    rule: str
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "row": self.row, "rule": self.rule,
                "before": self.before, "after": self.after}


class Rule(ABC):
    """Base class. Subclasses set the class attributes and implement `find` (and `fix`)."""

    name: str = ""
    explanation: str = ""
    channels: tuple[str, ...] = ("event", "ts")
    #: Events the trace must record for the rule to mean anything (any one of them).
    needs_events: tuple[str, ...] = ()

    def not_applicable(self, view: TraceView) -> str | None:
        """Why the rule cannot be checked on this trace, or None when it can."""
        if view.n == 0:
            return "empty trace"
        missing = [c for c in self.channels if not view.has_channel(c)]
        if missing:
            return "trace lacks " + ", ".join(missing)
        if self.needs_events and not any(view.has_event(e) for e in self.needs_events):
            return "trace records none of " + ", ".join(self.needs_events)
        return self.unmet_precondition(view)

    def unmet_precondition(self, view: TraceView) -> str | None:
        """A rule-specific reason it cannot be checked, asked once the generic checks (channels,
        events) passed; None when it can."""
        return None

    @abstractmethod
    def find(self, view: TraceView) -> Findings:
        """The violating rows of `view` (vectorized; no per-row Python on the hot path)."""

    def fix(self, view: TraceView, found: Findings) -> list[Edit]:
        """Default repair: drop the violating rows."""
        return [Edit("drop", int(r), self.name) for r in found.rows]

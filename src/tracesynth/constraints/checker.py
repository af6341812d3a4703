"""`check(trace)`: run every applicable rule and report, per rule, ok / violated / n/a with the
violation count, the rate per 1,000 events, and the first examples with their positions."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from tracesynth.constraints.rules import select_rules
from tracesynth.constraints.view import TraceView
from tracesynth.schema import Trace

OK, VIOLATED, NOT_APPLICABLE = "ok", "violated", "n/a"


@dataclass
class RuleResult:
    name: str
    explanation: str
    channels: list[str]
    status: str
    count: int = 0
    per_1000: float = 0.0
    reason: str | None = None  # why n/a
    examples: list[dict] = field(default_factory=list)


@dataclass
class CheckReport:
    """Per-rule results for one trace. `per_rule` maps checked rule name → violation count."""

    events: int
    rules: list[RuleResult]
    source: str | None = None

    @property
    def per_rule(self) -> dict[str, int]:
        return {r.name: r.count for r in self.rules if r.status != NOT_APPLICABLE}

    @property
    def violations(self) -> int:
        return sum(r.count for r in self.rules)

    @property
    def violated(self) -> bool:
        return any(r.status == VIOLATED for r in self.rules)

    @property
    def per_1000(self) -> float:
        return 1000.0 * self.violations / self.events if self.events else 0.0

    def rule(self, name: str) -> RuleResult:
        return next(r for r in self.rules if r.name == name)

    def to_dict(self) -> dict:
        return {"source": self.source, "events": self.events, "violations": self.violations,
                "per_1000": self.per_1000, "violated": self.violated,
                "per_rule": self.per_rule, "rules": [asdict(r) for r in self.rules]}


def check_view(view: TraceView, rules=None, max_examples: int = 5) -> CheckReport:
    results = []
    for rule in select_rules(rules):
        base = dict(name=rule.name, explanation=rule.explanation, channels=list(rule.channels))
        reason = rule.not_applicable(view)
        if reason:
            results.append(RuleResult(**base, status=NOT_APPLICABLE, reason=reason))
            continue
        found = rule.find(view)
        examples = [{**view.row_info(int(r)), "reason": found.reason(i)}
                    for i, r in enumerate(found.rows[:max_examples])]
        count = len(found)
        results.append(RuleResult(**base, status=VIOLATED if count else OK, count=count,
                                  per_1000=1000.0 * count / view.n, examples=examples))
    return CheckReport(view.n, results)


def single_threaded(trace: Trace, assume: bool | None) -> bool:
    """Whether a trace without thread ids may be read as one thread: as told, or (None) when
    its metadata says it has one thread (`extra.threads`, or a recording's `extra.scope.threads`)."""
    if assume is not None:
        return bool(assume)
    extra = trace.meta.extra or {}
    threads = extra.get("threads", (extra.get("scope") or {}).get("threads"))
    return threads == 1


def check(trace: Trace, rules=None, *, max_examples: int = 5,
          assume_single_thread: bool | None = None) -> CheckReport:
    """Check `trace` against the rules (all, or the names in `rules`). A trace without thread
    ids is read as one thread when `assume_single_thread` (None: when its metadata says so)."""
    view = TraceView(trace, single_thread=single_threaded(trace, assume_single_thread))
    report = check_view(view, rules, max_examples)
    report.source = trace.meta.source_path
    return report


def violating_rows(view: TraceView, rules=None) -> np.ndarray:
    """All rows that break any applicable rule (used by repair's last resort)."""
    parts = [rule.find(view).rows for rule in select_rules(rules) if not rule.not_applicable(view)]
    return np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.int64)

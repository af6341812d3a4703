"""Validity: kernel-semantics rule violations per 1,000 events, when the rule engine exists.

The rules live in `tracesynth.constraints` (built apart). This hook calls
``tracesynth.constraints.check(trace)`` when it is importable and reports
``{"available": False, "reason": ...}`` otherwise — never a made-up number.

The checker's report is read as a mapping rule name → violation count, taken from (in order)
a `counts` / `per_rule` attribute or key, or `to_dict()`, or the report itself if it is a mapping.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tracesynth.schema import Trace


def _rule_counts(report) -> dict[str, int] | None:
    for name in ("per_rule", "counts", "violations_by_rule"):
        value = report.get(name) if isinstance(report, Mapping) else getattr(report, name, None)
        if callable(value):
            value = value()
        if isinstance(value, Mapping):
            return {str(k): int(v) for k, v in value.items()}
    if hasattr(report, "to_dict"):
        return _rule_counts(report.to_dict())
    if isinstance(report, Mapping) and all(isinstance(v, int) for v in report.values()):
        return {str(k): int(v) for k, v in report.items()}
    return None


def violations_per_1000(traces: Sequence[Trace]) -> dict:
    try:
        from tracesynth.constraints import check
    except ImportError as exc:
        return {"available": False, "reason": f"rule engine not available ({exc})"}
    totals: dict[str, int] = {}
    events = 0
    for trace in traces:
        counts = _rule_counts(check(trace))
        if counts is None:
            return {"available": False, "reason": "constraints.check() returned a report without per-rule counts"}
        for rule, count in counts.items():
            totals[rule] = totals.get(rule, 0) + count
        events += len(trace)
    per_rule = {rule: 1000.0 * count / max(events, 1) for rule, count in sorted(totals.items())}
    return {"available": True, "events": events, "per_rule": per_rule,
            "total": 1000.0 * sum(totals.values()) / max(events, 1)}


def serial_breaks(real_train: Sequence[Trace], traces: Sequence[Trace]) -> dict:
    """Events of the syscalls the real training runs make one at a time (`encoding.serial`)
    that break that order, per 1,000 events. Judged on event order alone, so it applies to a
    trace without thread ids (a `light` trace of a multi-threaded workload, where `check` has
    no syscall rule to apply) as to any other."""
    from tracesynth.encoding.serial import overlaps, serial_syscalls

    def names(trace: Trace):
        return trace.events.column("event").to_numpy(zero_copy_only=False)

    serial = serial_syscalls(names(t) for t in real_train)
    broken = judged = events = 0
    for trace in traces:
        b, n = overlaps(names(trace), serial)
        broken, judged, events = broken + b, judged + n, events + len(trace)
    return {"syscalls": len(serial), "events": events, "serial_events": judged,
            "per_1k": 1000.0 * broken / max(events, 1)}

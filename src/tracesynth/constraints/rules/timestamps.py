"""Time only moves forward: globally (the trace is one merged stream) and on each CPU (a
CPU's ring buffer is written in order)."""

from __future__ import annotations

import numpy as np

from tracesynth.constraints.rules.base import Edit, Findings, Rule
from tracesynth.constraints.view import TraceView, cpu_order


def _descents(ts: np.ndarray) -> np.ndarray:
    return np.flatnonzero(ts[1:] < ts[:-1]) + 1


def monotone_fix(ts: np.ndarray) -> np.ndarray:
    """A non-decreasing copy of `ts` changing few values: at each descent, lower an isolated
    spike or raise an isolated dip (whichever leaves no new descent); clamp what remains."""
    ts = ts.copy()
    n = len(ts)
    for _ in range(3):
        downs = _descents(ts)
        if not len(downs):
            return ts
        for i in downs.tolist():
            if ts[i] >= ts[i - 1]:
                continue
            before = ts[i - 2] if i >= 2 else None
            after = ts[i + 1] if i + 1 < n else None
            lower_spike_ok = before is None or before <= ts[i]
            raise_dip_ok = after is None or ts[i - 1] <= after
            if lower_spike_ok and (not raise_dip_ok or (after is not None and ts[i - 1] > after)):
                ts[i - 1] = before if before is not None else ts[i]
            else:
                ts[i] = ts[i - 1]
    return np.maximum.accumulate(ts)


class TimestampsGlobal(Rule):
    name = "timestamps"
    explanation = "timestamps never decrease along the trace"
    channels = ("event", "ts")

    def find(self, view: TraceView) -> Findings:
        return Findings.of([(_descents(view.ts), 1)], {1: "timestamp earlier than the previous event's"})

    def fix(self, view: TraceView, found: Findings) -> list[Edit]:
        fixed = monotone_fix(view.ts)
        changed = np.flatnonzero(fixed != view.ts)
        return [Edit("set", int(r), self.name, {"ts": int(view.ts[r])}, {"ts": int(fixed[r])})
                for r in changed]


class TimestampsPerCpu(Rule):
    name = "timestamps-per-cpu"
    explanation = "timestamps never decrease among the events of one CPU"
    channels = ("event", "ts", "cpu")

    def _by_cpu(self, view: TraceView) -> np.ndarray:
        return cpu_order(view.cpu, np.flatnonzero(view.cpu >= 0))

    def find(self, view: TraceView) -> Findings:
        order = self._by_cpu(view)
        cpus, ts = view.cpu[order], view.ts[order]
        bad = np.flatnonzero((ts[1:] < ts[:-1]) & (cpus[1:] == cpus[:-1])) + 1
        return Findings.of([(order[bad], 1)], {1: "timestamp earlier than the previous event on this CPU"})

    def fix(self, view: TraceView, found: Findings) -> list[Edit]:
        order = self._by_cpu(view)
        cpus = view.cpu[order]
        edits = []
        bounds = np.flatnonzero(np.diff(cpus)) + 1
        for part in np.split(order, bounds):
            fixed = monotone_fix(view.ts[part])
            for j in np.flatnonzero(fixed != view.ts[part]):
                r = int(part[j])
                edits.append(Edit("set", r, self.name, {"ts": int(view.ts[r])}, {"ts": int(fixed[j])}))
        return edits

"""Which events recur at a steady pace in the training traces, per workload: the cadence table.

Real fileio syncs every 256 writes: `syscall_entry_fdatasync` comes back every 520-583 events
(523 nine times in ten) for 59 syncs in a row. A default model does not count that far: its
syncs come every 14-1,674 events (median 364), and every workload has one such rhythm off
(stream's result writes every 1,136 events against 1,670, pybench's child processes every
1,366 against 2,008; docs/model.md, Known limits; `evaluation.longrange.compare_cadence`).
Sampler settings did not help: the network does not count hundreds of events. A gap table does:
the sampler's cadence scaffold (`sampling.cadence_scaffold`) places the next occurrence of such
an event at a gap drawn from training and lets the model fill in the rest around it (infilling).

An event type is an *anchor* of a workload when, over its training runs,
- it recurs at least `MIN_GAPS` times (gaps between consecutive occurrences within one run),
- its median gap is at least `MIN_GAP` events: shorter rhythms are within the network's and the
  n-gram prior's reach (gzip's 34-event file loop, tar's 12-event close: cadence within 0.2
  octaves of real without help),
- it is steady: the 90th percentile gap is at most `STEADY` times the 10th.
Event types that recur together (the entry and exit of one call, pybench's two dozen events of
one child process) are one rhythm: among types with counts and median gaps within 10% of each
other only the steadiest is an anchor (among types as steady, the one the others follow: a
call's entry), the model places the others around it; those that keep a narrow offset from it in training (the exit of a sync, 5-88
events after its entry) are its members: the model draws them, once per anchor, within that
offset of one (`sampling.cadence_scaffold`). Kept per anchor: the training gaps between the 5th and 95th percentile (the scaffold
draws from them) and the length of each training phase, in occurrences: a phase ends at a gap
over `PAUSE` times the longest steady one, or with the trace (fileio: 60 syncs, then it reads
its files back with none). The scaffold draws a phase's length from them and then lets the
model go on or stop by itself. Kept too: the events that close every `period`-th occurrence of
a phase (`Rhythm.closers`; fio finishes a file every 20 syncs with an `fsync` right after the
sync's exit, then the file's `close` and the next one's `openat`, three times a run: a network
does not count to 20 syncs, and the call is too rare to be drawn) with the layout of each
training occurrence; the scaffold puts them (`settle`).

Event types only, kept with the model in `cadence.safetensors` (safetensors, never pickle). A
model saved before this table existed has none: no scaffold.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

MIN_GAPS = 16   # recurrences in training before a rhythm counts (the evaluation's CADENCE_MIN_GAPS)
MIN_GAP = 128   # median gap, in events, below which the model keeps the rhythm by itself
STEADY = 1.5    # 90th / 10th percentile gap at most this: a rhythm, not a phase
PAUSE = 2.0     # a gap longer than this many times the longest steady gap ends a phase
LEAD = 32       # events before an anchor whose types are kept (`Rhythm.before`)
REACH = 128     # a member keeps within this many events of its anchor in training


@dataclass(frozen=True)
class Rhythm:
    """One anchor event of one workload: the gaps the scaffold draws from (and the range they
    span), how many times it recurs in a row in training before a pause, and the events that
    recur with it at a narrow offset (the scaffold keeps them near its anchors)."""

    event: int
    gaps: np.ndarray    # int64, sorted: training gaps between the 5th and 95th percentile
    phases: np.ndarray  # int64: occurrences in each training phase (a run ended by a pause or the trace)
    # int64 [k, 3]: events that recur with the anchor at a narrow offset (its syscall's exit):
    # event, lowest and highest offset from the nearest anchor occurrence in training
    members: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), dtype=np.int64))
    # per member that follows the anchor (lowest offset > 0): the events training has between
    # an anchor and it (fileio: the scheduler events while the sync blocks); None for the others
    between: tuple = ()
    # int64, sorted: the events training has among the LEAD before the anchor (None: not known)
    before: np.ndarray | None = None
    # Events that close every `period`-th occurrence of a phase (fileio: `fsync`, the file's
    # `close`, the next one's `openat` after every 20th sync), in the order they come (int64 [k]; none: period 0),
    # and one row per training occurrence (int64 [n, k + 1]): how far the first of them follows
    # the anchor's last member (the sync's exit; the anchor itself where it has none), then each
    # one's offset from the first.
    period: int = 0
    closers: np.ndarray = field(default_factory=lambda: _no_closers()[1])
    layouts: np.ndarray = field(default_factory=lambda: _no_closers()[2])

    def inside(self, k: int) -> np.ndarray | None:
        return self.between[k] if k < len(self.between) else None

    @property
    def has_closers(self) -> bool:
        """Whether events close every `period`-th occurrence of a phase (fileio's fsync)."""
        return bool(self.period) and len(self.closers) > 0

    @property
    def low(self) -> int:
        return int(self.gaps[0])

    @property
    def high(self) -> int:
        return int(self.gaps[-1])


def _phases(gaps: np.ndarray, pause: float) -> list[int]:
    """Occurrences per phase of one trace whose consecutive occurrences are `gaps` apart: a
    gap longer than `pause` starts a new phase."""
    breaks = np.flatnonzero(gaps > pause)
    edges = np.concatenate([[-1], breaks, [len(gaps)]])
    return np.diff(edges).tolist()


def _nearest(points: np.ndarray, to: np.ndarray) -> np.ndarray:
    """Signed offset of each of `points` from the nearest of `to` (both sorted, `to` not empty)."""
    i = np.clip(np.searchsorted(to, points), 1, len(to)) - 1
    j = np.minimum(i + 1, len(to) - 1)
    before, after = points - to[i], points - to[j]
    return np.where(np.abs(before) <= np.abs(after), before, after)


def _offsets(member: list[np.ndarray], anchor: list[np.ndarray]) -> np.ndarray:
    """Signed offset of each member occurrence from the nearest anchor occurrence, all runs."""
    out = [_nearest(m, a) for m, a in zip(member, anchor) if len(m) and len(a)]
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def _between(runs: list[np.ndarray], anchor: list[np.ndarray], member: list[np.ndarray], reach: int) -> np.ndarray:
    """The events training has between an anchor occurrence and the next member occurrence
    within `reach` events after it."""
    seen: set[int] = set()
    for codes, a, m in zip(runs, anchor, member):
        if not len(a) or not len(m):
            continue
        nxt = np.searchsorted(m, a, side="right")
        for start, k in zip(a.tolist(), nxt.tolist()):
            if k < len(m) and m[k] - start <= reach:
                seen.update(codes[start + 1:m[k]].tolist())
    return np.array(sorted(seen), dtype=np.int64)


def _no_closers() -> tuple[int, np.ndarray, np.ndarray]:
    """(period, closers, layouts) of a rhythm without closers."""
    return 0, np.zeros(0, dtype=np.int64), np.zeros((0, 1), dtype=np.int64)


def _ordinals(where: np.ndarray, pause: float) -> np.ndarray:
    """Each occurrence's place in its phase (1, 2, ...; a gap over `pause` starts a new phase)."""
    if not len(where):
        return np.zeros(0, dtype=np.int64)
    starts = np.concatenate([[True], np.diff(where) > pause])
    index = np.arange(len(where))
    return index - np.maximum.accumulate(np.where(starts, index, 0)) + 1


def _closers(runs: list[np.ndarray], where: list[np.ndarray], pause: float, gap: int,
             members: list[np.ndarray]) -> tuple[int, np.ndarray, np.ndarray]:
    """(period, closer events in order, layouts) of an anchor (`Rhythm.closers`): the event
    types that come within `REACH` events after exactly the anchor occurrences whose place in
    their phase is a multiple of one period (2 or more), after every such occurrence, at a
    narrow offset; the period is that of the ones with at least half of their own occurrences
    there. `members`: positions of the anchor's members per run (the layout counts from the
    last one before the closers)."""
    anchors = [(c, int(a), int(k), m) for c, w, m in zip(runs, where, members)
               for a, k in zip(w.tolist(), _ordinals(w, pause).tolist())]
    if len(anchors) < 4:
        return _no_closers()
    reach = [c[a + 1:a + REACH + 1] for c, a, _, _ in anchors]
    ordinal = np.array([k for _, _, k, _ in anchors])
    found = []  # (event, offsets of its first occurrence after each closing anchor)
    for event in np.unique(np.concatenate(reach)).tolist():
        near = np.array([bool((r == event).any()) for r in reach])
        if near.sum() < 2:
            continue
        period = int(ordinal[near].min())
        closing = ordinal % period == 0
        if period < 2 or not np.array_equal(near, closing):
            continue
        offsets = np.array([int(np.argmax(r == event)) + 1 for r, n in zip(reach, near) if n])
        if offsets.max() - offsets.min() >= gap / 2:
            continue
        own = 2 * near.sum() >= sum(int((c == event).sum()) for c in runs)  # mostly there
        found.append((event, period, offsets, own))
    # The period is set by closers that occur mostly there (fileio's fsync); events common
    # elsewhere that follow exactly those occurrences too come along (the file's close and the
    # next one's openat). Without the first kind, none: stream's and scimark's last result
    # write of a run is followed by its exit calls, an end of trace, not a period.
    periods = {f[1] for f in found if f[3]}
    if len(periods) != 1:
        return _no_closers()
    period = periods.pop()
    found = [f for f in found if f[1] == period]
    found.sort(key=lambda f: (np.median(f[2]), f[0]))
    first = np.min([f[2] for f in found], axis=0)  # offset of the first closer after each closing anchor
    layouts = []
    for i, (_, a, _, m) in enumerate(x for x in anchors if x[2] % period == 0):
        lead = m[(m > a) & (m < a + first[i])]
        after = int(first[i] - (lead.max() - a)) if len(lead) else int(first[i])
        layouts.append([after] + [int(f[2][i] - first[i]) for f in found])
    if any(np.any(np.diff(row[1:]) < 1) for row in layouts):  # closers in no steady order
        return _no_closers()
    events = np.array([f[0] for f in found], dtype=np.int64)
    return period, events, np.array(layouts, dtype=np.int64)


def _rhythm(runs: list[np.ndarray], group: list[tuple]) -> Rhythm:
    """The rhythm of a group of event types that recur together (`CadenceTable.fit`'s `found`
    rows, steadiest first). Its anchor is the steadiest; among types as steady (within 1%),
    the one the others follow (a call's entry, not its exit), so its members come after it.
    Members: the others that stay within `REACH` events of the anchor, at a narrow offset."""
    steadiest = [f for f in group if f[0] <= 1.01 * group[0][0]]

    def followed(f) -> float:  # mean offset of the other steadiest types from this one
        others = [_offsets(g[6], f[6]) for g in steadiest if g is not f]
        return float(np.mean(np.concatenate(others))) if others and sum(map(len, others)) else 0.0
    anchor = max(steadiest, key=lambda f: (followed(f), -f[1]))
    _, event, _, _, kept, phases, where = anchor
    lead = [c[np.clip(p[:, None] - np.arange(1, LEAD + 1), 0, None)] for c, p in zip(runs, where) if len(p)]
    before = np.unique(np.concatenate([x.ravel() for x in lead])).astype(np.int64)
    members, between, member_at = [], [], [np.zeros(0, dtype=np.int64) for _ in runs]
    for f in group:
        if f is anchor:
            continue
        offsets = _offsets(f[6], where)
        if len(offsets) and np.abs(offsets).max() <= REACH and offsets.max() - offsets.min() < kept[0] / 2:
            members.append([f[1], int(offsets.min()), int(offsets.max())])
            between.append(_between(runs, where, f[6], int(offsets.max())) if offsets.min() > 0 else None)
            member_at = [np.union1d(m, p) for m, p in zip(member_at, f[6])]
    period, closers, layouts = _closers(runs, where, PAUSE * kept[-1], int(kept[0]), member_at)
    return Rhythm(int(event), kept, phases, np.array(members, dtype=np.int64).reshape(-1, 3), tuple(between), before,
                  period, closers, layouts)


class CadenceTable:
    """The anchors of each workload (`Rhythm` per anchor event)."""

    def __init__(self, rhythms: dict[str, list[Rhythm]] | None = None):
        self.rhythms: dict[str, list[Rhythm]] = {w: list(r) for w, r in (rhythms or {}).items()}

    @classmethod
    def fit(cls, sequences: Iterable[tuple[str, np.ndarray]]) -> CadenceTable:
        """`sequences`: (workload, event codes of one trace) pairs; gaps never cross traces."""
        parts: dict[str, list[np.ndarray]] = {}
        for workload, codes in sequences:
            parts.setdefault(workload, []).append(np.asarray(codes, dtype=np.int64))
        rhythms: dict[str, list[Rhythm]] = {}
        for w, runs in parts.items():
            found = []  # (spread, event, count, median, gaps, phases, positions per run)
            for event in np.unique(np.concatenate(runs + [np.zeros(0, np.int64)])).tolist():
                where = [np.flatnonzero(c == event) for c in runs]
                per_run = [np.diff(p) for p in where]
                gaps = np.concatenate(per_run)
                if len(gaps) < MIN_GAPS:
                    continue
                q05, q10, q50, q90, q95 = np.quantile(gaps, [0.05, 0.10, 0.50, 0.90, 0.95])
                if q50 < MIN_GAP or q90 > STEADY * q10:
                    continue
                kept = np.sort(gaps[(gaps >= q05) & (gaps <= q95)]).astype(np.int64)
                phases = [n for g in per_run if len(g) for n in _phases(g, PAUSE * kept[-1]) if n >= 2]
                found.append((q90 / q10, event, len(gaps), q50, kept, np.array(phases or [2], dtype=np.int64),
                              where))
            groups: list[list[tuple]] = []  # event types that recur together, steadiest first
            for f in sorted(found, key=lambda f: (f[0], f[1])):
                _, _, count, median = f[:4]
                for g in groups:
                    c, m = g[0][2], g[0][3]
                    if abs(count - c) <= 0.1 * c and abs(median - m) <= 0.1 * m:
                        g.append(f)
                        break
                else:
                    groups.append([f])
            for group in groups:
                rhythms.setdefault(w, []).append(_rhythm(runs, group))
        return cls(rhythms)

    def of(self, workload: str) -> list[Rhythm]:
        return self.rhythms.get(workload, [])

    def to_arrays(self) -> dict[str, np.ndarray]:
        arrays: dict[str, np.ndarray] = {}
        for w, rhythms in self.rhythms.items():
            for i, r in enumerate(rhythms):
                arrays[f"gaps/{w}/{i}"] = r.gaps.astype(np.int64)
                arrays[f"phases/{w}/{i}"] = r.phases.astype(np.int64)
                arrays[f"members/{w}/{i}"] = r.members.astype(np.int64).reshape(-1, 3)
                for j, inside in enumerate(r.between):
                    if inside is not None:
                        arrays[f"between/{w}/{i}/{j}"] = inside.astype(np.int64)
                arrays[f"anchor/{w}/{i}"] = np.array([r.event], dtype=np.int64)
                if r.before is not None:
                    arrays[f"before/{w}/{i}"] = r.before.astype(np.int64)
                if r.has_closers:
                    arrays[f"period/{w}/{i}"] = np.array([r.period], dtype=np.int64)
                    arrays[f"closers/{w}/{i}"] = r.closers.astype(np.int64)
                    arrays[f"layouts/{w}/{i}"] = r.layouts.astype(np.int64)
        arrays["version"] = np.array([1], dtype=np.int64)
        return arrays

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> CadenceTable:
        rhythms: dict[str, dict[int, Rhythm]] = {}
        for key, value in arrays.items():
            if not key.startswith("anchor/"):
                continue
            w, _, i = key.split("/", 1)[1].rpartition("/")
            if (not w or not i.isdigit() or f"gaps/{w}/{i}" not in arrays or f"phases/{w}/{i}" not in arrays
                    or len(value) != 1):
                raise ValueError(f"bad cadence entry {key!r}")
            gaps = np.asarray(arrays[f"gaps/{w}/{i}"], dtype=np.int64)
            if not len(gaps) or np.any(np.diff(gaps) < 0) or gaps[0] < 1:
                raise ValueError(f"gaps/{w}/{i} must be sorted positive gaps")
            phases = np.asarray(arrays[f"phases/{w}/{i}"], dtype=np.int64)
            if not len(phases) or phases.min() < 2:
                raise ValueError(f"phases/{w}/{i} must count two or more occurrences each")
            members = np.asarray(arrays.get(f"members/{w}/{i}", np.zeros((0, 3))), dtype=np.int64)
            if members.ndim != 2 or members.shape[1] != 3 or np.any(members[:, 1] > members[:, 2]):
                raise ValueError(f"members/{w}/{i} must be rows of (event, lowest, highest offset)")
            between = tuple(np.asarray(arrays[f"between/{w}/{i}/{j}"], dtype=np.int64)
                            if f"between/{w}/{i}/{j}" in arrays else None for j in range(len(members)))
            before = arrays.get(f"before/{w}/{i}")
            period, closers, layouts = _closers_from(arrays, f"{w}/{i}")
            rhythms.setdefault(w, {})[int(i)] = Rhythm(int(value[0]), gaps, phases, members, between,
                                                       None if before is None else np.asarray(before, dtype=np.int64),
                                                       period, closers, layouts)
        return cls({w: [r[i] for i in sorted(r)] for w, r in rhythms.items()})


def _closers_from(arrays: dict[str, np.ndarray], key: str) -> tuple[int, np.ndarray, np.ndarray]:
    """A rhythm's (period, closers, layouts) from `CadenceTable.to_arrays`' entries; none in a
    table saved before closers existed."""
    if f"closers/{key}" not in arrays:
        return _no_closers()
    closers = np.asarray(arrays[f"closers/{key}"], dtype=np.int64)
    period = np.asarray(arrays.get(f"period/{key}", np.zeros(0)), dtype=np.int64)
    layouts = np.asarray(arrays.get(f"layouts/{key}", np.zeros((0, 0))), dtype=np.int64)
    if (closers.ndim != 1 or not len(closers) or period.shape != (1,) or period[0] < 2 or layouts.ndim != 2
            or layouts.shape[0] < 1 or layouts.shape[1] != len(closers) + 1 or np.any(layouts[:, 0] < 1)
            or np.any(layouts[:, 1] != 0) or np.any(np.diff(layouts[:, 1:], axis=1) < 1)):
        raise ValueError(f"closers/{key} must come with a period of 2 or more and one layout row per "
                         f"occurrence (a positive lead, then each closer's offset from the first, rising)")
    return int(period[0]), closers, layouts

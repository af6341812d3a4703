"""The cadence scaffold: a workload's steady rhythms placed by a gap table, the rest by the model.

The network does not count hundreds of events: fileio's syncs, one every 518-583 events in real
runs, come every 14-1,674 events in its traces (`encoding.cadence`). Masked diffusion fills in
any pattern of known events, so the scaffold decides where the next occurrences of each anchor
event go and clamps them there before a window is drawn: the next one a gap after the last,
the gap drawn from the training gaps (a renewal process with training's own gap distribution).
The model draws everything around them (the writes before a sync, the scheduler events while
it blocks, its exit). The anchor is ruled out at the window's other free positions, and the
events that recur with it (`Rhythm.members`: the sync's exit) everywhere but within their
training offsets of an anchor (its zone), so the model adds none of its own in between: an
exit alone would be repaired into another sync. A member the model draws twice in one zone
(two exits for one sync) is removed, and one drawn after an event training never has between
the anchor and it (a write inside the sync) is moved before that event (`settle`). An anchor
whose place in its phase is a multiple of the rhythm's period gets the rhythm's closers
(`Rhythm.closers`: fileio's `fsync` after every 20th sync) where the model drew none: put after
its last member at a training occurrence's layout, the events inside and just after them drawn
again around them.

Where a rhythm is, is the model's call: the scaffold only continues one the trace already has.
A window drawn without the scaffold in which the model starts a rhythm (an anchor after none,
or after a pause) is drawn again with the scaffold from that first anchor on (`restart`): the
start-up and each phase begin where the model puts them. A phase lasts as many occurrences as
a training phase drawn at its start (fileio: 20-40 syncs), or ends earlier where the model has
gone on to something else before an anchor (`out_of_phase`: events training never has before
it, as reads before a sync); after it the anchor is free, and the model decides: where it stops (fileio reads its files back, with no sync), the rhythm stops;
where it puts the anchor again, the window is drawn again with a new phase that continues the
rhythm from its last occurrence.

State is per generated trace (last occurrence, occurrences the phase has left, the next one
already drawn); every draw comes from a seeded generator, so the same seed gives the same trace.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tracesynth.encoding.cadence import LEAD, PAUSE, REACH, Rhythm

ROOM = 8  # events after a closer put into a window that are drawn again around it
MODES = (True, False, "auto")  # the `cadence` setting's values


def scaffolded(rhythms: list[Rhythm], cadence: bool | str) -> list[Rhythm]:
    """The rhythms the scaffold places under a `cadence` setting: every one (True), none
    (False), or, with "auto", those with closers (`Rhythm.closers`: events at every period-th
    occurrence, a count the network cannot keep; fileio's file switch every 20 syncs). A plain
    gap rhythm the model keeps about as well itself: placing stream's, scimark's and pybench's
    changed TSTR/TRTR by -0.007..+0.005 in three folds, at 1.1-1.8x the sampling time
    (docs/model.md, "Cadence scaffold")."""
    if cadence not in MODES or not isinstance(cadence, (bool, str)):
        raise ValueError(f"cadence must be true, false or 'auto', got {cadence!r}")
    if cadence == "auto":
        return [r for r in rhythms if r.has_closers]
    return list(rhythms) if cadence else []


@dataclass
class Plan:
    """What one window is drawn with: anchors to clamp (window position -> event code) and, per
    anchor or member event, the free positions it may not take; `zones`: per member event, each
    anchor's window position and the range [lo, hi) where one of it belongs; `inside`: per
    member, the events training has between an anchor and it (None: no such rule). Per scaffolded anchor, `left`: occurrences
    its phase has after this window, `pending`: the next one, where it lies beyond the window."""

    places: dict[int, int] = field(default_factory=dict)
    bans: dict[int, np.ndarray] = field(default_factory=dict)
    zones: dict[int, list[tuple[int, int, int]]] = field(default_factory=dict)
    inside: dict[int, np.ndarray | None] = field(default_factory=dict)
    left: dict[int, int] = field(default_factory=dict)
    pending: dict[int, int] = field(default_factory=dict)
    # Per scaffolded anchor, how many occurrences its phase has in all (the place of each in
    # its phase decides where closers go); the anchors to close in this window: (window
    # position, member events, closer events, layout: `Rhythm.layouts` row drawn for it)
    total: dict[int, int] = field(default_factory=dict)
    closing: list[tuple[int, tuple, np.ndarray, np.ndarray]] = field(default_factory=list)
    # Per scaffolded anchor, the window position its phase begins at in this window (the
    # model's first anchor after a pause; the window's first free position for a phase that goes
    # on): closers are banned from there on, not in the start-up before (the loader's openat)
    begin: dict[int, int] = field(default_factory=dict)

    def copy(self) -> Plan:
        return Plan(dict(self.places), dict(self.bans), dict(self.zones), dict(self.inside), dict(self.left),
                    dict(self.pending), dict(self.total), list(self.closing), dict(self.begin))

    def ban_list(self) -> list[tuple[int, np.ndarray]]:
        return list(self.bans.items())


class CadenceScaffold:
    """The rhythms of one workload while one trace is generated, window after window."""

    def __init__(self, rhythms: list[Rhythm], seed: int):
        self.rhythms = list(rhythms)
        self.rng = np.random.default_rng([int(seed), 0xCADE])
        self.last: dict[int, int | None] = {r.event: None for r in self.rhythms}
        self.left = {r.event: 0 for r in self.rhythms}  # occurrences the current phase has left
        self.pending: dict[int, int | None] = {r.event: None for r in self.rhythms}
        self.total = {r.event: 0 for r in self.rhythms}  # occurrences of the current phase in all

    def _draw(self, rhythm: Rhythm) -> int:
        return int(rhythm.gaps[self.rng.integers(len(rhythm.gaps))])

    def plan(self, offset: int, start: int, length: int) -> Plan:
        """The window whose first event is the trace's `offset`-th, `start` of its `length`
        events known (the previous window's tail): the phases that go on through it."""
        plan = Plan()
        for r in self.rhythms:
            at = self.pending[r.event]
            if self.left[r.event] > 0 and at is not None:
                plan.total[r.event] = self.total[r.event]
                self._schedule(plan, r, max(at, offset + start), self.left[r.event], offset, start, length)
        return plan

    def restart(self, plan: Plan, codes: np.ndarray, offset: int, start: int) -> Plan | None:
        """After a window drawn with `plan`: a new plan if the model put an anchor in it that
        `plan` did not place (None if not). After a pause (or none before) a new phase begins
        at the model's first one; otherwise the model went on with a rhythm whose phase had
        ended (before or in this window), and a new phase continues it from its last occurrence."""
        length = len(codes)
        started = []
        for r in self.rhythms:
            ban = plan.bans.get(r.event)
            if ban is not None and plan.left.get(r.event, 0) > 0:
                continue  # a phase all through the window
            own = np.asarray(codes) == r.event
            own[:start] = False
            last = self.last[r.event]
            if ban is not None:  # the phase ended in this window: the model's anchors after it
                placed = [p for p, e in plan.places.items() if e == r.event]
                own[placed] = False
                last = offset + max(placed) if placed else last
            where = np.flatnonzero(own)
            if len(where):
                started.append((r, offset + int(where[0]), last))
        if not started:
            return None
        new = plan.copy()
        for r, first, last in started:
            beats = int(r.phases[self.rng.integers(len(r.phases))])
            if last is None or first - last > PAUSE * r.high:
                new.total[r.event] = beats
                self._schedule(new, r, first + self._draw(r), beats - 1, offset, start, length, first=first)
            else:  # no pause: training's phase goes on, and so does the count its closers keep
                new.total[r.event] = plan.total.get(r.event, self.total[r.event]) + beats
                self._schedule(new, r, max(last + self._draw(r), offset + start), beats, offset, start, length)
        return new

    def observe(self, plan: Plan, codes: np.ndarray, offset: int, start: int) -> None:
        """Record the window as drawn (with `plan`): each anchor's last occurrence and phase."""
        codes = np.asarray(codes)
        for r in self.rhythms:
            where = np.flatnonzero(codes[start:] == r.event)
            if len(where):
                self.last[r.event] = offset + start + int(where[-1])
            self.left[r.event] = plan.left.get(r.event, 0)
            self.pending[r.event] = plan.pending.get(r.event)
            self.total[r.event] = plan.total.get(r.event, self.total[r.event])

    @staticmethod
    def settle(plan: Plan, codes: np.ndarray, start: int) -> tuple[np.ndarray, dict[int, int]] | None:
        """Where the model drew an anchor's members wrong or left a closing anchor unclosed, the
        window's events rearranged: an index per position into the window as drawn (negative:
        drawn again) and the events put at some of those ({position: event}: their other
        channels drawn again), or None where nothing is wrong. Members first
        (`_settle_members`), then closers (`_close`)."""
        codes = np.asarray(codes)
        members = CadenceScaffold._settle_members(plan, codes, start)
        index, put = members if members is not None else (np.arange(len(codes)), {})
        closed = CadenceScaffold._close(plan, codes, index, put, start)
        return members if closed is None else closed

    @staticmethod
    def _close(plan: Plan, codes: np.ndarray, index: np.ndarray, put: dict[int, int],
               start: int) -> tuple[np.ndarray, dict[int, int]] | None:
        """The closers of each closing anchor the model left without (`Plan.closing`), put into
        the window as settled so far (`index`, `put`) at the layout drawn for it: the first a
        layout's lead after the anchor's last member (fileio's `fsync` right after the 20th
        sync's exit), the others at their offsets from it, the events between them and the
        `ROOM` after them drawn again (what follows moves down, the window's last events drop).
        None where every closing anchor is closed or a layout does not fit in the free part."""
        if not plan.closing:
            return None
        length = len(codes)
        settled = np.where(index >= 0, codes[np.clip(index, 0, None)], -1)
        for p, event in put.items():
            settled[p] = event
        at = {int(i): p for p, i in enumerate(index.tolist()) if i >= 0}  # drawn position -> settled one
        inserts = []
        for anchor, members, closers, layout in plan.closing:
            a = at.get(anchor)
            if a is None:
                continue
            reach = settled[a + 1:a + REACH + 1]
            if np.isin(closers, reach).all():
                continue  # the model closed it itself
            firsts = [a + 1 + int(np.argmax(reach == m)) for m in members if (reach == m).any()]
            q = (max(firsts) if firsts else a) + int(layout[0])
            span = int(layout[-1]) + 1
            if q >= start and q + span + ROOM <= length:
                inserts.append((q, span, dict(zip((q + layout[1:]).tolist(), closers.tolist()))))
        if not inserts:
            return None
        # Each position of the new window: ("s", settled position), ("c", event put) or ("f",): drawn again
        layout_of = [("s", p) for p in range(length)]
        for q, span, events in sorted(inserts, key=lambda x: -x[0]):
            block = [("c", events[p]) if p in events else ("f",) for p in range(q, q + span)]
            layout_of[q:q] = block
            for p in range(q + span, q + span + ROOM):
                layout_of[p] = ("f",)
        layout_of = layout_of[:length]
        new_index = np.full(length, -1, dtype=np.int64)
        new_put = {}
        for p, item in enumerate(layout_of):
            if item[0] == "s":
                new_index[p] = index[item[1]] if index[item[1]] >= 0 else (-2 if item[1] in put else -1)
                if item[1] in put:
                    new_put[p] = put[item[1]]
            elif item[0] == "c":
                new_index[p], new_put[p] = -2, int(item[1])
        return new_index, new_put

    @staticmethod
    def _settle_members(plan: Plan, codes: np.ndarray, start: int) -> tuple[np.ndarray, dict[int, int]] | None:
        """Where the model drew an anchor's members wrong, the window's events rearranged
        (`settle`'s index and puts), or None where nothing is wrong. In each zone the first member stays and any other is removed (two
        exits for one sync; what follows moves up one, the window's last position is drawn
        again). A member that follows its anchor belongs before the first event training
        never has between them: where the model put it after one (a sync's exit after the
        next write), it moves there, and what lay between moves down one; where the model put
        none, one is put there, and what follows moves down one (the last event drops)."""
        codes = np.asarray(codes)
        edits = []  # (first position it changes, kind, from, to)
        for event, zones in plan.zones.items():
            inside = plan.inside.get(event)
            for anchor, lo, hi in zones:
                hits = (np.flatnonzero(codes[lo:hi] == event) + lo).tolist()
                keep = hits[0] if hits else None
                if inside is not None and anchor >= 0 and (keep is None or keep >= start):
                    span = codes[anchor + 1:hi if keep is None else keep]
                    alien = np.flatnonzero(~np.isin(span, inside))
                    q = anchor + 1 + int(alien[0]) if len(alien) else None
                    if q is not None and q >= start and (keep is not None or len(codes) - 1 not in plan.places):
                        # moved there, or (none drawn) put there, what follows moving down one
                        # (an anchor further on too: a gap one event longer)
                        edits.append((q, "move", keep, q) if keep is not None else (q, "put", event, q))
                edits.extend((h, "drop", h, h) for h in hits[1:] if h >= start)
        if not edits:
            return None
        index = np.arange(len(codes))
        put = {}  # event codes of the inserted positions, by their mark in `index`
        for _, kind, source, target in sorted(edits, reverse=True):
            if kind == "move":
                moved = index[source]
                index[target + 1:source + 1] = index[target:source].copy()
                index[target] = moved
            elif kind == "put":
                mark = -2 - len(put)
                put[mark] = source
                index[target + 1:] = index[target:-1].copy()
                index[target] = mark
            else:
                index[source:-1] = index[source + 1:].copy()
                index[-1] = -1
        return index, {int(p): put[int(index[p])] for p in np.flatnonzero(index <= -2)}

    def _schedule(self, plan: Plan, rhythm: Rhythm, at: int, left: int, offset: int, start: int,
                  length: int, first: int | None = None) -> None:
        """Place `rhythm`'s occurrences from trace index `at` (the next one) while its phase
        has `left` and the window lasts; `first`: an occurrence the model placed (kept). Then
        the bans, its members' zones and the phase."""
        end = offset + length
        plan.begin[rhythm.event] = start if first is None else max(start, first - offset)
        if first is not None:
            self._place(plan, first - offset, rhythm.event, length)
        while at < end and left > 0:
            position = self._place(plan, at - offset, rhythm.event, length)
            if position is None:
                break
            place = plan.total.get(rhythm.event, 0) - left + 1  # its place in the phase
            if rhythm.period and place > 0 and place % rhythm.period == 0:
                if position + self._closing_room(rhythm) > length:
                    # no room for its closers in this window: it goes first in the next one
                    del plan.places[position]
                    at = offset + position
                    break
                self._close_at(plan, rhythm, position)
            left -= 1
            at = offset + position + self._draw(rhythm)
        self._settle_phase(plan, rhythm, at, left, offset, start, length)

    def _settle_phase(self, plan: Plan, rhythm: Rhythm, at: int, left: int, offset: int, start: int,
                      length: int) -> None:
        """The bans, members' zones and phase of `rhythm` from the anchors `plan` places."""
        anchors = sorted(p for p, e in plan.places.items() if e == rhythm.event)
        last = self.last[rhythm.event]
        near = sorted(set(anchors + ([last - offset] if last is not None else [])))
        free_from = length  # where the phase is over, the anchor and its members are free
        plan.pending.pop(rhythm.event, None)
        if left <= 0:
            free_from = max(start, near[-1] + rhythm.low) if near else start
        else:
            plan.pending[rhythm.event] = at
        plan.left[rhythm.event] = max(left, 0)
        ban = np.zeros(length, dtype=bool)
        ban[start:free_from] = True
        ban[anchors] = False
        plan.bans[rhythm.event] = ban
        if rhythm.has_closers:  # the scaffold puts them (`settle`), the model draws none
            closer_ban = np.zeros(length, dtype=bool)  # one array for all: bans are only read
            closer_ban[max(start, plan.begin.get(rhythm.event, start)):free_from] = True
            plan.bans.update(dict.fromkeys(rhythm.closers.tolist(), closer_ban))
        for k, (event, lowest, highest) in enumerate(rhythm.members.tolist()):
            # A member that follows its anchor may come right after it: a lower bound only made
            # the model fill the first events with scheduler ping-pong (fileio, docs/model.md).
            reach = min(lowest, 1) if lowest > 0 else lowest
            zones = [(a, max(0, a + reach), min(length, a + highest + 1)) for a in near]
            zones = [(a, lo, hi) for a, lo, hi in zones if lo < hi]
            ban = np.zeros(length, dtype=bool)
            ban[start:free_from] = True
            for _, lo, hi in zones:
                ban[lo:hi] = False
            plan.bans[event] = ban
            plan.zones[event] = zones
            plan.inside[event] = rhythm.inside(k)

    def out_of_phase(self, plan: Plan, codes: np.ndarray, offset: int, start: int) -> Plan | None:
        """After a window drawn with `plan`: where the model went on to something else before
        a placed anchor (over a quarter of the `LEAD` events before it are of types training
        never has there: fileio's sync among reads, once it reads its files back), a plan whose
        phase ends before that anchor (None where every anchor fits). A stray event or two
        does not end a phase."""
        codes = np.asarray(codes)
        new = None
        for r in self.rhythms:
            if r.before is None:
                continue
            placed = sorted(p for p, e in plan.places.items() if e == r.event and p >= start)
            wrong = [p for p in placed if p >= LEAD and (~np.isin(codes[p - LEAD:p], r.before)).mean() > 0.25]
            if not wrong:
                continue
            new = new or plan.copy()
            for p in placed:
                if p >= wrong[0]:
                    del new.places[p]
            new.closing = [c for c in new.closing if c[0] in new.places]
            kept = [p for p in placed if p < wrong[0]]
            if kept and self._closes_phases(r) and kept[-1] not in [c[0] for c in new.closing]:
                # every training phase ends on a closing occurrence (fileio: its file is closed
                # before it reads the files back): so does one the model ends early
                self._close_at(new, r, kept[-1])
            self._settle_phase(new, r, 0, 0, offset, start, len(codes))
        return new

    def _close_at(self, plan: Plan, rhythm: Rhythm, position: int) -> None:
        """The anchor at window `position` gets `rhythm`'s closers, at a training layout."""
        layout = rhythm.layouts[self.rng.integers(len(rhythm.layouts))]
        plan.closing.append((position, tuple(rhythm.members[:, 0].tolist()), rhythm.closers, layout))

    @staticmethod
    def _closing_room(rhythm: Rhythm) -> int:
        """Window positions a closing anchor needs after it: its members' reach, the closers'
        longest layout and the `ROOM` drawn again after them (`_close`)."""
        reach = int(rhythm.members[:, 2].max()) if len(rhythm.members) else 0
        return reach + int(rhythm.layouts[:, 0].max()) + int(rhythm.layouts[:, -1].max()) + 1 + ROOM

    @staticmethod
    def _closes_phases(rhythm: Rhythm) -> bool:
        """Whether every training phase of `rhythm` ends on a closing occurrence."""
        return bool(rhythm.period) and bool(np.all(rhythm.phases % rhythm.period == 0))

    @staticmethod
    def _place(plan: Plan, position: int, event: int, length: int) -> int | None:
        """Clamp `event` at window `position`, or the next position nothing else holds; None
        past the window's end."""
        while position in plan.places and plan.places[position] != event:
            position += 1
        if position >= length:
            return None
        plan.places[position] = event
        return position

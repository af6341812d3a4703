"""The copy guard: edits that break event spans copied verbatim from training, the way real runs vary.

Two real runs of tar share long stretches, but an independent run copies almost none of its
256-event spans from the others: somewhere in every stretch one of them has an interrupt, a
page fault or a switch the other has not. A model trained on two runs replays their start-up
instead (`encoding.copies`). The guard finds each copied 256-gram of a window and, at the last
branch point inside it whose edit stays within what training has, makes one of three edits:

- insert an event that training has after the same 7 events (an extra interrupt),
- replace the event by another such event,
- delete the event, where training goes on with the next one after those 7 events,

An insertion or deletion shifts the events after it up to the next known one (a cadence
scaffold anchor, `sampling.cadence_scaffold`; the window's end where none follows), so anchors
stay where the scaffold put them: the position next to that known one (after an insertion, the
event moved up to it; after a deletion, the hole) is drawn again by the model.

The guard keeps only edits after which every event 8-gram around the edit occurs in training
(`encoding.support`): the edit is a variation training itself shows, not a slip. Among those it
draws one with the odds training gives each branch (how often the 7 events are followed by the
event the edit puts there). One edit breaks all the copied spans that contain it (greedy
stabbing, latest point first), so a window needs about one edit per 256 copied events. The sampler applies the edits and redraws the other
channels of the edited events (time, thread, ...) with the model (`sampling.sampler`).

This is table-driven on purpose: asked to redraw a few events at a branch point with the copied
event ruled out, the 3000-step tar model put the same continuation back and left unseen 8-grams
behind (docs/model.md, "Copy guard").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracesynth.encoding.copies import SpanTable
from tracesynth.encoding.support import EventSupport
from tracesynth.evaluation.windows import kgram_hashes


@dataclass(frozen=True)
class Edit:
    kind: str  # "insert" (before `position`), "replace" or "delete"
    position: int
    event: int = -1  # the inserted or new event code (-1 for a deletion)
    until: int | None = None  # an insertion's or deletion's shift ends before this known event (None: the window's end)


class CopyGuard:
    """A span table and an 8-gram support table, seen through one workload."""

    def __init__(self, spans: SpanTable, support: EventSupport, workload: str):
        self.spans, self.support, self.workload = spans, support, workload

    def copied(self, codes: np.ndarray) -> np.ndarray:
        """bool per span start: the span occurs in a training trace."""
        return self.spans.copied(codes, self.workload)

    def plan(self, codes: np.ndarray, free: np.ndarray, rng: np.random.Generator) -> list[Edit]:
        """Edits (right to left) that break every copied span they can; `free[i]`: event i may
        change. Insertions and deletions shift what follows up to the next event that may not
        (`Edit.until`): they need every later event free, or the next known one more than
        `support.k` events away, so that the grams checked around the edit are the ones it leaves."""
        codes = np.asarray(codes, dtype=np.int64)
        n, span = len(codes), self.spans.span
        starts = np.nonzero(self.copied(codes))[0]
        if not len(starts):
            return []
        inside = np.zeros(n + 1, dtype=np.int64)  # events inside some copied span
        np.add.at(inside, starts, 1)
        np.add.at(inside, starts + span, -1)
        branch = self.spans.branch_points(codes, self.workload) & free & (np.cumsum(inside)[:n] > 0)
        options = self._options(codes, np.nonzero(branch)[0], _shift_ends(free, self.support.k))
        edits: list[Edit] = []
        last = -1
        for s0 in starts:
            if last >= s0:  # an edit already inside this span
                continue
            for p in np.nonzero(branch[s0:min(s0 + span, n)])[0][::-1] + s0:
                if int(p) in options:
                    valid, weight = options[int(p)]
                    weight = np.asarray(weight, dtype=np.float64)
                    edits.append(valid[int(rng.choice(len(valid), p=weight / weight.sum()))])
                    last = int(p)
                    break
        return edits[::-1]

    def _options(self, codes: np.ndarray, positions: np.ndarray,
                 ends: np.ndarray) -> dict[int, tuple[list[Edit], list[int]]]:
        """The edits at each of `positions` that leave no unseen 8-gram around them, with how
        often training takes the branch each one takes (its weight in the draw); `ends[p]`: where
        a shift from p ends (`_shift_ends`). All candidates are hashed in one call: a window has
        thousands of branch points."""
        k, lead = self.support.k, self.spans.branch - 1
        contexts = self.spans.contexts.get(self.workload)
        if contexts is None or not len(positions):
            return {}
        nexts, counts = self.spans.nexts[self.workload], self.spans.counts[self.workload]
        context_hashes = kgram_hashes(codes[:-1], lead)[positions - lead]
        lo, hi = np.searchsorted(contexts, context_hashes, "left"), np.searchsorted(contexts, context_hashes, "right")
        candidates: list[Edit] = []
        weights: list[int] = []  # how often training takes the branch the edit takes
        locals_: list[np.ndarray] = []
        for p, a, b in zip(positions.tolist(), lo.tolist(), hi.tolist()):
            before, here, after = codes[max(0, p - k + 1):p], codes[p], codes[p + 1:p + k]
            end, followers, times = int(ends[p]), nexts[a:b], counts[a:b]
            shift, until = end >= 0, (end if end < len(codes) else None)
            for event, n_times in zip(followers.tolist(), times.tolist()):
                if event == here:
                    continue
                candidates.append(Edit("replace", p, event))
                locals_.append(np.concatenate([before, [event], after]))
                weights.append(n_times)
                if shift:
                    candidates.append(Edit("insert", p, event, until))
                    locals_.append(np.concatenate([before, [event, here], after[:-1]]))
                    weights.append(n_times)
            if shift and len(after) and after[0] in followers:
                candidates.append(Edit("delete", p, until=until))
                locals_.append(np.concatenate([before, after]))
                weights.append(int(times[followers == after[0]][0]))
        if not candidates:
            return {}
        lengths = np.array([len(x) for x in locals_])
        offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        novel = self.support.novel(np.concatenate(locals_).astype(np.int64), self.workload)
        seen_novel = np.concatenate([[0], np.cumsum(novel)])
        grams = np.maximum(lengths - k + 1, 0)  # each candidate's own grams (not the ones across)
        bad = seen_novel[offsets + grams] - seen_novel[offsets]
        out: dict[int, tuple[list[Edit], list[int]]] = {}
        for edit, weight, n_bad in zip(candidates, weights, bad.tolist()):
            if n_bad == 0:
                edits, ws = out.setdefault(edit.position, ([], []))
                edits.append(edit)
                ws.append(weight)
        return out


def _shift_ends(free: np.ndarray, k: int) -> np.ndarray:
    """Per position, where an insertion or deletion there ends its shift: the window's length
    where every later event is free, the next known event where that is more than `k` events
    away, else -1 (no shift: the grams next to the known event would change unchecked)."""
    free = np.asarray(free, dtype=bool)
    n, at = len(free), np.arange(len(free))
    known_from = np.flip(np.minimum.accumulate(np.flip(np.where(free, n, at))))  # next known at or after i
    after = np.append(known_from[1:], n)  # next known after i
    ends = np.where((after == n) | (after - at > k), after, -1)
    ends[~free] = -1
    return ends

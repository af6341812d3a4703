"""Span splice: where a sampled trace leaves its training runs' grammar, put training's own events.

The model's traces of a deterministic workload follow the workload's loop with a slip every ~60
events (sqlite: a doubled `pread64`, eight `fcntl` where the loop has six), and a window
classifier reads those slips: 11% of a sampled sqlite trace's event 8-grams occur in no training
run, none of a held-out run's (docs/model.md, "What the window classifier reads"). Redrawing them
with the network (the support corrector) or bridging them with order-7 paths through training
leaves the windows as easy to tell (0.93): the branch choices around a slip stay out of turn.

The splice replaces each such stretch with what training actually did there. A position is
*covered* when a 64-event span of the trace that contains it occurs verbatim in a training run and
no 8-gram through it is unseen. Each uncovered stretch, with its 64 events either side as anchors,
is matched against the training runs: wherever the left anchor occurs and the right anchor follows
in the same run, the events between them are a candidate (per left anchor, the paths closest to
the stretch's length). The ones from the same part of their run as the stretch is of the trace
come first (`PHASE`: a run changes as it goes, and an iteration from elsewhere brings its phase;
none further than `MAX_DRIFT` from the stretch's place), then the closest in length, the run
least taken from, the seed's draw; the first that makes no verbatim training run over
`MAX_COPY` events with what already matches around it takes the stretch's place, with its gaps
(a splice beside a stretch the model copied would join them; `MAX_COPY` is under the run at which
the evaluation flags a trace). Where the anchors around a
stretch occur nowhere in that order, the stretch grows by 8 events at a time, left and right in
turn, up to `MAX_COPY` events with the anchors; where that finds none, anchors half as long are
tried, down to `MIN_ANCHOR`. The sampled trace decides which iterations follow which and where
the trace goes; training supplies each iteration whole.

Where no anchors match at all (most of a pybench or build trace: stretches thousands of events
long), `walk` fills the stretch from training piece by piece: from where its left anchor occurs,
at least half of `walk` events, then event by event a draw among the places in training where the
last 64 events occur (near the same phase), until the draw goes on differently from the piece's
own run, from there; so on until a place where the right anchor follows. Every 64-event span of
the result occurs in training, as 92-96% of a held-out run's do (a pybench or build trace as
sampled: 12-14%), and no verbatim copy is long.

What it costs is copying: a spliced trace holds more of training's long spans (sqlite 256-gram
copy share 0.05 -> 0.59 with run 3 held out, against 0.88 for that independent real run). So it
runs only where real runs share most of their long spans (the copy guard's `SHARED_SPANS`, from
the other side), and where the splice would make a trace copy more of one training run than the
least one training run shares with another, plus 0.10, `TraceSynth` walks in shorter pieces,
then not at all, then splices by length from anywhere (`phase=False`: phase aligns a trace with
one run), and failing that leaves it as sampled. Event types and gaps only: it applies to models
of those two channels (`light`).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

import numpy as np

from tracesynth.evaluation.windows import in_sorted, kgram_hashes

ANCHOR = 64  # events of verbatim training either side of a spliced stretch
MIN_ANCHOR = 16  # a stretch whose anchors occur nowhere in training tries anchors half as long, down to this
# Candidates are ranked by how far from the stretch's own place they sit in their training run, in
# steps of this many events, before their length: a run changes as it goes (sqlite's 512-event
# windows hold 3.70 bits of event entropy in a run's first quarter, 3.16 in its last), and an
# iteration from elsewhere in the run brings that other phase with it (docs/model.md, "Span splice").
PHASE = 256
# Ranked by phase, a candidate may still sit far from the stretch's place where the anchors occur
# only there: sqlite's 150-300-event pwrite64 bursts come late in a run (13 per training run), and
# a sampled trace whose anchors match one early took it from 30,000-50,000 events away, bursts
# longer than any real run holds that early. Candidates further than this are not taken; the
# stretch grows instead (sqlite, seeds 0-2, dev: disc@512 0.614 -> 0.531, floor 0.516).
MAX_DRIFT = 4096
OFTEN = 256  # a k-gram occurring this often keeps its places per state (`Training.places_after`)
SUPPORT_K = 8  # the support corrector's order: an unseen 8-gram marks a slip
GROW = 8  # events a stretch grows by when its anchors are not found in training
CANDIDATES = 32  # candidates checked against the copied-run bound, best first
# The longest verbatim training run a splice may make, anchors and what matches around it
# included: under the evaluation's `FLAG_MIN_LCS` (1,024), the copied run at which it starts to
# flag a trace. A stretch, and what replaces it, are at most this less the two anchors (895
# events at anchors of 64).
MAX_COPY = 1023
# A stretch whose anchors occur nowhere within MAX_COPY (pybench's and build's sampled traces: 86-88%
# of their events in stretches no training 64-gram covers, most over 895 events long, where a held-out
# run is 92-96% covered) is walked instead, with `splice(walk=P)`: from a place in training where its
# left anchor occurs, training's events are copied in pieces of at least P/2-2P events, each next
# piece going on from a place drawn among those where the last ANCHOR events occur (another run or
# another part of the same one, near this phase; a draw that goes on as the piece does lengthens
# it), until a place where the right anchor follows: every 64-event span of the walk occurs in
# training, and no verbatim copy around it is longer than MAX_COPY.
WALK_TRIES = 3  # walks tried per stretch (each a new draw) before it is left as sampled
WALK_BACK = 64  # how far before a stretch its walk may start, looking for a left anchor in training


@dataclass
class SpliceResult:
    codes: np.ndarray
    gaps: np.ndarray
    spliced: int  # stretches replaced between matching anchors
    unmatched: int  # stretches left as sampled (no anchors within max_copy, and not walked)
    # per spliced stretch: (where it starts in the result, training run, where in that run, events)
    sources: list[tuple[int, int, int, int]] = field(default_factory=list)
    walked: int = 0  # stretches walked (their pieces are in `sources` too)

    @property
    def from_training(self) -> int:
        """Events of the result that came from training."""
        return sum(length for *_, length in self.sources)


class Training:
    """One workload's training runs, indexed for the splice: built once per model and workload
    (`TraceSynth` keeps one per workload) rather than on every trace: the anchor indexes, the
    1,024-gram and 8-gram hash sets and the least pairwise share."""

    def __init__(self, runs: list[tuple[np.ndarray, np.ndarray]], states: np.ndarray | None = None):
        self.runs = [(np.asarray(c, dtype=np.int64), np.asarray(g, dtype=np.int64)) for c, g in runs]
        # a label per event (of the concatenated runs) for the state after it; where given, a walk
        # jumps only between places whose labels match (thread_seams.machine_states: the threads
        # running on each CPU); None: event types decide alone
        self.states = None if states is None else np.asarray(states)
        self.codes = np.concatenate([c for c, _ in self.runs]) if self.runs else np.zeros(0, np.int64)
        self.gaps = np.concatenate([g for _, g in self.runs]) if self.runs else np.zeros(0, np.int64)
        self.offsets = np.cumsum([0] + [len(c) for c, _ in self.runs[:-1]]).astype(np.int64)  # where each run begins
        self.ends = self.offsets + np.array([len(c) for c, _ in self.runs], dtype=np.int64)
        # (first, end) of each run as Python ints: the walk asks for one place's run at nearly
        # every event (fileio: ~40,000 times per 16k events), where a numpy call costs more
        self.spans = [(int(a), int(b)) for a, b in zip(self.offsets, self.ends)]
        self._firsts = [a for a, _ in self.spans]
        self._indices: dict[int, _Index] = {}
        self._grams: dict[int, np.ndarray] = {}
        self._per_run: dict[tuple[int, int], np.ndarray] = {}
        self._least: dict[int, float] = {}
        self._branches: dict[int, np.ndarray] = {}
        self._after: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}

    def run_of(self, positions):
        """The training run each of `positions` (in the concatenated runs) belongs to."""
        return np.searchsorted(self.offsets, positions, "right") - 1

    def run_at(self, position: int) -> int:
        """`run_of` for one position."""
        return bisect.bisect_right(self._firsts, position) - 1

    def distance(self, positions, runs, place) -> np.ndarray:
        """How far each of `positions` (in the concatenated runs; `runs`: theirs) sits from `place`
        in its own run, in events: the splice takes nothing further than `MAX_DRIFT`."""
        return np.abs(positions - self.offsets[runs] - place)

    def branches(self, k: int) -> np.ndarray:
        """Sorted places p (in the concatenated runs) where the k events before p occur somewhere in
        training followed by another event than p's (a run's end counts as one): the only places
        the walk can leave its run. Elsewhere every occurrence goes on alike, so a draw among them
        cannot branch; `resample` steps over those without drawing."""
        if k not in self._branches:
            index = self.index(k)
            starts = np.nonzero(index.starts)[0]
            after = starts + k
            inside = after < self.ends[self.run_of(starts)]
            following = np.where(inside, self.codes[np.minimum(after, len(self.codes) - 1)], -1)
            grams = index.at[starts]
            order = np.lexsort((following, grams))
            g, f = grams[order], following[order]
            group = np.cumsum(np.r_[True, g[1:] != g[:-1]]) - 1 if len(g) else np.zeros(0, np.int64)
            varies = np.zeros(group[-1] + 1 if len(g) else 0, dtype=bool)
            varies[group[1:][(g[1:] == g[:-1]) & (f[1:] != f[:-1])]] = True
            branch = np.zeros(len(starts), dtype=bool)
            branch[order] = varies[group]
            self._branches[k] = np.sort(after[branch])
        return self._branches[k]

    def places_after(self, index: _Index, gram_hash, state) -> tuple[np.ndarray, np.ndarray]:
        """(places, their runs), ascending: the place after each occurrence of k-gram `gram_hash`
        (k = `index.k`), only those where the machine's state there is `state` where states are
        kept. Kept for grams that occur `OFTEN` times or more: fileio's loop 64-gram occurs 17,991
        times and the walk asks for it at nearly every event; each state's places are a part of
        the gram's, so what is kept is at most two arrays the size of training."""
        key = (index.k, int(gram_hash), None if state is None else int(state))
        if key in self._after:
            return self._after[key]
        where, runs = index.find(gram_hash)
        often = len(where) >= OFTEN
        where = where + index.k
        if self.states is not None:
            keep = self.states[where - 1] == state
            where, runs = where[keep], runs[keep]
        if often:  # shared by every later call: read-only, so a caller cannot change them in place
            where.flags.writeable = runs.flags.writeable = False
            self._after[key] = (where, runs)
        return where, runs

    def index(self, k: int) -> _Index:
        if k not in self._indices:
            self._indices[k] = _Index(self.runs, k)
        return self._indices[k]

    def grams(self, k: int) -> np.ndarray:
        """Sorted hashes of every k-gram of every run."""
        if k not in self._grams:
            self._grams[k] = np.unique(np.concatenate([kgram_hashes(c, k) for c, _ in self.runs]))
        return self._grams[k]

    def most_copied(self, codes: np.ndarray, span: int) -> float:
        """The largest share of `codes`' `span`-grams found in any one training run (what
        `run_copy_share` gives for the run copied most)."""
        grams = kgram_hashes(np.asarray(codes, dtype=np.int64), span)
        return max(_share(grams, self._run_grams(r, span)) for r in range(len(self.runs)))

    def _run_grams(self, r: int, span: int) -> np.ndarray:
        if (r, span) not in self._per_run:
            self._per_run[r, span] = np.unique(kgram_hashes(self.runs[r][0], span))
        return self._per_run[r, span]

    def least_shared(self, span: int) -> float:
        if span not in self._least:
            self._least[span] = least_shared([c for c, _ in self.runs], span)
        return self._least[span]


class _Index:
    """One workload's training k-grams: sorted hashes with the position each starts at."""

    def __init__(self, runs: list[tuple[np.ndarray, np.ndarray]], k: int):
        hashes, positions, run_ids = [], [], []
        offset = 0
        for r, (codes, _) in enumerate(runs):
            h = kgram_hashes(codes, k)
            hashes.append(h)
            positions.append(offset + np.arange(len(h), dtype=np.int64))
            run_ids.append(np.full(len(h), r, dtype=np.int64))
            offset += len(codes)
        h = np.concatenate(hashes) if hashes else np.zeros(0, np.uint64)
        # the k-gram starting at each place of the concatenated runs (`starts`: where one does)
        self.at = np.zeros(offset, dtype=np.uint64)
        self.starts = np.zeros(offset, dtype=bool)
        if len(h):
            where = np.concatenate(positions)
            self.at[where], self.starts[where] = h, True
        order = np.argsort(h, kind="stable")
        self.hashes, self.positions = h[order], np.concatenate(positions or [np.zeros(0, np.int64)])[order]
        self.runs = np.concatenate(run_ids or [np.zeros(0, np.int64)])[order]
        self.k = k

    def find(self, gram_hash: np.uint64) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = np.searchsorted(self.hashes, gram_hash, "left"), np.searchsorted(self.hashes, gram_hash, "right")
        return self.positions[lo:hi], self.runs[lo:hi]


def covered(codes: np.ndarray, spans: np.ndarray, support: np.ndarray, k: int = ANCHOR) -> np.ndarray:
    """bool per event: inside a k-gram found in training (`spans`, sorted hashes) and in no
    8-gram missing from training (`support`, sorted hashes)."""
    n = len(codes)
    cover = np.zeros(n + 1, dtype=np.int64)
    if n >= k:
        starts = np.nonzero(in_sorted(kgram_hashes(codes, k), spans))[0]
        np.add.at(cover, starts, 1)
        np.add.at(cover, starts + k, -1)
    ok = np.cumsum(cover)[:n] > 0
    if n >= SUPPORT_K:
        bad = np.nonzero(~in_sorted(kgram_hashes(codes, SUPPORT_K), support))[0]
        slip = np.zeros(n + 1, dtype=np.int64)
        np.add.at(slip, bad, 1)
        np.add.at(slip, bad + SUPPORT_K, -1)
        ok &= np.cumsum(slip)[:n] == 0
    return ok


def splice(codes: np.ndarray, gaps: np.ndarray, runs: Training | list[tuple[np.ndarray, np.ndarray]],
           rng: np.random.Generator, k: int = ANCHOR, max_copy: int = MAX_COPY, keep: int = 0,
           phase: bool = True, walk: int = 0, walk_context: int = 0, walk_drift: int | None = None,
           walk_aligned: bool = False) -> SpliceResult:
    """Splice training's events into the uncovered stretches of `codes` (module docstring).
    `runs`: (codes, gaps) of each training run, or a `Training` built from them (reused across
    calls); the first `keep` events stay as they are (known events, e.g. a prefix); `phase`:
    rank candidates by their place in the run first (False: by length first, from anywhere);
    `walk`: walk the stretches no anchors match in pieces of about this many events (0: leave
    them as sampled; `MAX_COPY`'s note), matching the last `walk_context` events at each jump
    (0: `k`, the anchors' length); `walk_drift`: each jump lands within this many events of the
    place the walk would have reached had it stayed in the run it began in (None: within
    `MAX_DRIFT` of the stretch's place in the trace, as published); `walk_aligned`: each jump draws
    among one place per run, the nearest (`_near`). `resample`'s `context`, `drift` and `aligned`:
    a walk from a run's start has the trace's places as its own."""
    codes, gaps = np.asarray(codes, dtype=np.int64), np.asarray(gaps, dtype=np.int64)
    n = len(codes)
    max_span = max_copy - 2 * k
    training = runs if isinstance(runs, Training) else Training(runs)
    if not training.runs or n < 2 * k + 1 or max_span < 1:
        return SpliceResult(codes, gaps, 0, 0)
    train_codes, train_gaps = training.codes, training.gaps
    long_grams = training.grams(max_copy + 1)
    ok = covered(codes, training.grams(k), training.grams(SUPPORT_K), k)
    ok[:keep] = True
    pieces: list[tuple[np.ndarray, np.ndarray]] = []  # (codes, gaps) of the output, in order
    done = 0  # events of `codes` already placed in `pieces`
    placed = 0  # events in `pieces`: where codes[done] lands in the output
    spliced = unmatched = walked = 0
    sources: list[tuple[int, int, int, int]] = []
    taken = np.zeros(len(training.runs), dtype=np.int64)  # events taken from each training run
    i = 0
    while i < n:
        if ok[i]:
            i += 1
            continue
        end = i
        while end < n and not ok[end]:
            end += 1
        match = None
        for anchor in _anchors(k):
            match, lo, hi = _match(codes, i, end, done, placed - done if phase else None, training, anchor, taken,
                                   rng, max_copy - 2 * anchor)
            if match is not None:
                # the first candidate that, with what already matches training around it, makes no
                # verbatim run longer than max_copy (a splice next to a copied stretch would join them)
                before = _tail(pieces, codes[done:lo - anchor], max_copy)
                match = next(((int(a), int(b), int(r)) for a, b, r in zip(*match)
                              if not _makes_long_copy(before, codes[hi + anchor:], train_codes, int(a), int(b), anchor,
                                                      long_grams, max_copy)), None)
            if match is not None:
                break
        steps = None
        if match is not None:
            steps = [match]
            spliced += 1
        elif walk and phase:
            bridge = _walk(codes, i, end, done, placed - done, training, walk_context or k, walk, rng, taken, pieces,
                           max_copy, long_grams, walk_drift, walk_aligned)
            if bridge is not None:
                lo, hi, pieces_walked = bridge
                steps = [(a, b, int(training.run_of(a))) for a, b in pieces_walked]
                walked += 1
        if steps is None:
            unmatched += 1
            i = end
            continue
        # codes[lo:hi] gives way to training events a..b-1 (of run `run`) of each step, in order
        pieces.append((codes[done:lo], gaps[done:lo]))
        placed += lo - done
        for a, b, run in steps:
            taken[run] += b - a
            sources.append((placed, run, a - int(training.offsets[run]), b - a))
            pieces.append((train_codes[a:b], train_gaps[a:b]))
            placed += b - a
        done = hi
        i = max(end, hi)
    pieces.append((codes[done:], gaps[done:]))
    out_codes = np.concatenate([p[0] for p in pieces])
    out_gaps = np.concatenate([p[1] for p in pieces])
    if len(out_gaps):
        out_gaps[0] = gaps[0]
    return SpliceResult(out_codes, out_gaps, spliced, unmatched, sources, walked)


def _tail(pieces, last: np.ndarray, limit: int) -> np.ndarray:
    """The last `limit` events of the output so far: what is placed (`pieces`), then `last`."""
    parts, have = [last[max(0, len(last) - limit):]], min(len(last), limit)
    for piece in reversed(pieces):
        if have >= limit:
            break
        parts.append(piece[0][max(0, len(piece[0]) - (limit - have)):])
        have += len(parts[-1])
    return np.concatenate(parts[::-1])


def _anchors(k: int) -> list[int]:
    """The anchor lengths a stretch tries, longest first: `k`, then halves down to `MIN_ANCHOR`
    (sqlite, seed 0: 23 of 119 stretches found no 64-event anchors, 10 none at 16)."""
    out = [k]
    while out[-1] // 2 >= MIN_ANCHOR:
        out.append(out[-1] // 2)
    return out


def _match(codes, start, end, done, shift, training: Training, k, taken, rng, max_span):
    """((a, b, run) arrays of candidates, best first: training events a..b-1 of a run to put in place
    of codes[lo:hi]; lo, hi) for the uncovered stretch codes[start:end], or (None, start, end): the
    anchors are codes[lo-k:lo] and codes[hi:hi+k]. `shift`: what earlier splices moved codes[lo] by
    in the output (its place there is lo + shift; None: candidates from anywhere in a run)."""
    index = training.index(k)
    n = len(codes)
    lo, hi = start, end
    grow_left = True
    while hi - lo <= max_span:
        if lo - k >= done and hi + k <= n:
            left = kgram_hashes(codes[lo - k:lo], k)[0]
            right = kgram_hashes(codes[hi:hi + k], k)[0]
            lp, lr = index.find(left)
            rp, rr = index.find(right)
            if len(lp) and len(rp):
                want = hi - lo
                order = np.argsort(rp, kind="stable")
                rp, rr = rp[order], rr[order]
                first = lp + k  # the first training event after each left anchor
                longest = min(2 * want + 2 * k, max_span)  # events between the anchors, at most
                # per left anchor, the right anchors nearest to where the stretch's length puts
                # them (one either side): the closest lengths, without every pair (fileio's
                # anchors occur thousands of times)
                j = np.searchsorted(rp, first + want)
                j = np.concatenate([j - 1, j])
                which = np.concatenate([np.arange(len(lp))] * 2)
                inside = (j >= 0) & (j < len(rp))
                j, which = j[inside], which[inside]
                gap = rp[j] - first[which]
                same = (rr[j] == lr[which]) & (gap >= 0) & (gap <= longest)
                if same.any():
                    a_, q_, r_ = first[which][same], rp[j][same], lr[which][same]
                    # nearest the stretch's place in the trace (in PHASE steps: the same phase of
                    # the run), then closest in length, then the run least taken from so far (no
                    # one training run copied more than the others), then the seed's draw
                    phase = (training.distance(a_, r_, lo + shift) // PHASE if shift is not None
                             else np.zeros(len(a_), dtype=np.int64))
                    off = np.abs((q_ - a_) - want)
                    order = np.lexsort((rng.random(len(off)), taken[r_], off, phase))[:CANDIDATES]
                    if shift is not None:  # none from another phase of the run: grow instead
                        order = order[phase[order] * PHASE <= MAX_DRIFT]
                    if len(order):
                        return (a_[order], q_[order], r_[order]), lo, hi
        # grow one side, in turn (the other where one is at its limit): left no further than leaves
        # room for an anchor after what is already placed, right no further than leaves one before the end
        left_to, right_to = min(lo, max(done + k, lo - GROW)), max(hi, min(n - k, hi + GROW))
        can_left, can_right = left_to < lo, right_to > hi
        if not (can_left or can_right):
            break
        if (grow_left and can_left) or not can_right:
            lo = left_to
        else:
            hi = right_to
        grow_left = not grow_left
    return None, start, end


def _walk(codes, start, end, done, shift, training: Training, k, piece, rng, taken, pieces, max_copy, long_grams,
          drift=None, aligned=False):
    """(lo, hi, [(a, b), ...]): training events a..b-1, piece after piece, to put in place of
    codes[lo:hi] for the uncovered stretch codes[start:end] that no anchors match (`MAX_COPY`'s
    note), or None: no place in training near this phase holds the k events before the stretch,
    or the walk would make a verbatim training run over `max_copy` events. `pieces`: the output so
    far, up to codes[done]. The walk ends where the k events after the stretch follow in
    training or, failing that within two pieces of the stretch's length, at that length. `drift`:
    jumps land within this many events of where the walk would be in the run it began in (None:
    within `MAX_DRIFT` of the stretch's place in the trace); `aligned`: one place per run at each
    jump, the nearest (`_near`)."""
    index, train_codes = training.index(k), training.codes
    n = len(codes)
    lo, p = start, None
    # the left anchor: the k events before the stretch, or before a place up to WALK_BACK earlier
    # (the model's events between are walked over too), occurring in training near this phase
    # (anchors half as long where none is found, as for the anchored splice)
    for anchor in _anchors(k):
        for lo in range(start, max(done + anchor, start - WALK_BACK) - 1, -1):
            where, runs = training.index(anchor).find(kgram_hashes(codes[lo - anchor:lo], anchor)[0])
            where = where + anchor  # the training event after each occurrence
            far = training.distance(where, runs, lo + shift)
            keep = (far <= MAX_DRIFT) & (where < training.ends[runs])
            if keep.any():
                where, runs = where[keep], runs[keep]
                p = int(where[np.lexsort((rng.random(len(where)), taken[runs], far[keep] // PHASE))[0]])
                break
        if p is not None:
            break
    if p is None:
        return None
    # the output before may already copy training where the walk starts (a sampled trace that
    # copied a stretch): the first piece ends in time to keep that copy under max_copy
    before = _tail(pieces, codes[done:lo], max_copy)
    behind = train_codes[max(int(training.offsets[training.run_of(p)]), p - len(before)):p]
    same = before[len(before) - len(behind):][::-1] == behind[::-1]
    copied = int(np.argmin(same)) if not same.all() else len(same)
    room = max_copy - copied - 1
    if room < 2 * piece:  # no room for a piece: branch off at the latest place before that has a branch
        for back in range(0, min(copied, lo - done) - k + 1):
            where, _, same = _places(p - back, lo - back + shift, training, index, k)
            if (~same).any():
                lo, p, room = lo - back, int(rng.choice(where[~same])), max_copy
                before = before[:len(before) - back]
                break
        else:
            return None
    hi = end
    want = hi - lo
    # the right anchor's occurrences: where the walk may end, the model's trace going on after it
    # (where what follows the anchor in training is what follows it in the trace, the last piece must
    # be short enough that the copy it starts stays under max_copy: `room_after` per target)
    targets = np.sort(index.find(kgram_hashes(codes[hi:hi + k], k)[0])[0]) if hi + k <= n else np.zeros(0, np.int64)
    if len(targets):
        after = codes[hi:hi + max_copy]
        span = np.minimum(len(after), training.ends[training.run_of(targets)] - targets)
        follows = np.array([int(np.argmin(np.append(train_codes[t:t + m] == after[:m], False))) for t, m in zip(targets, span)])
        room_after = max_copy - k - 1 - follows
        targets, room_after = targets[room_after > 0], room_after[room_after > 0]
    else:
        room_after = np.zeros(0, np.int64)
    # the walk's place: the trace's, or (a drift of its own) p's in its run, moving with the walk
    place = lo + shift if drift is None else p - int(training.offsets[training.run_at(p)])
    for _ in range(WALK_TRIES):
        steps, _ = _steps(p, place, want, training, index, k, piece, rng, targets, room_after, room,
                          drift=MAX_DRIFT if drift is None else drift, aligned=aligned)
        if steps:
            events = np.concatenate([train_codes[a:b] for a, b in steps])
            window = np.concatenate([before, events, codes[hi:hi + max_copy]])
            if len(window) <= max_copy or not in_sorted(kgram_hashes(window, max_copy + 1), long_grams).any():
                return lo, hi, steps
    return None


# `resample` walks and checks this many events at a time: a verbatim copy over MAX_COPY found in a
# chunk is drawn again there, not over the whole trace (scimark, 94,102 events: each of three
# tries of the whole walk held one somewhere, and the tries took 52 s; per chunk, with draws only
# where a branch is possible, 14 s)
RESAMPLE_CHUNK = 4096


@dataclass
class Resampled:
    """What `resample` walked: training events a..b-1 of each step, in order."""

    steps: list[tuple[int, int]]
    segments: int  # walks begun at a training run's start (one more each time a walk could not go on)
    over: int  # chunks whose every try made a verbatim training run over max_copy (the least such kept)

    @property
    def length(self) -> int:
        return sum(b - a for a, b in self.steps)


def resample(training: Training, n_events: int, piece: int, rng: np.random.Generator, k: int = ANCHOR,
             max_copy: int = MAX_COPY, drift: int = MAX_DRIFT, aligned: bool | str = False) -> Resampled:
    """`n_events` of training's own events with no model at all: the splice's walk (`_steps`, pieces
    of about `piece` events, each next piece from a place drawn among those where the last `k`
    events occur, within `drift` events of the output's own position in its run: the splice's
    `MAX_DRIFT` by default) begun at the start of a training run drawn by `rng`, for
    the whole length. Where a walk cannot go on (the end of a run whose last k events occur
    nowhere else), the next begins at a run's start again, as a new recording would. The walk
    goes `RESAMPLE_CHUNK` events at a time, each chunk checked with what precedes it against
    training's (max_copy+1)-grams and drawn again up to `WALK_TRIES` times; where every draw makes
    a longer verbatim copy (a stretch of a run no other place shares, e.g. a process start-up),
    the draw with the fewest such grams is kept and counted in `over`. The reference the spliced
    model must beat: what it scores is the walk's, not a network's. `aligned`: each jump draws
    among one place per training run, the one nearest the output's own position; "shared": so
    only where two runs or more hold the last k events within the drift (`_near`)."""
    if n_events < 1 or not training.runs:
        raise ValueError("resample: needs at least one training run and a positive length")
    if piece < 2 or 2 * piece >= max_copy - 1:
        raise ValueError(f"resample: piece must be 2..{(max_copy - 2) // 2 - 1} events, not {piece}")
    index, codes, branches = training.index(k), training.codes, training.branches(k)
    long_grams = training.grams(max_copy + 1)
    none = np.zeros(0, np.int64)
    steps: list[tuple[int, int]] = []
    tail = np.zeros(0, np.int64)  # the output's last max_copy events, for the copy check
    length = segments = over = place = 0
    p = None  # where the walk goes on in training; None: at a run's start
    while length < n_events:
        if p is None:
            p, place = int(training.offsets[int(rng.integers(len(training.runs)))]), 0
            segments += 1
        best = None
        for _ in range(WALK_TRIES):
            walked, then = _steps(p, place, min(RESAMPLE_CHUNK, n_events - length), training, index, k, piece, rng,
                                  none, none, max_copy - 1, branches, drift, aligned)
            window = np.concatenate([tail, *[codes[a:b] for a, b in walked]])
            hits = int(in_sorted(kgram_hashes(window, max_copy + 1), long_grams).sum()) if len(window) > max_copy else 0
            if best is None or hits < best[0]:
                best = (hits, walked, window, then)
            if not hits:
                break
        hits, walked, window, p = best  # p: where the walk goes on (None: a run's end, nowhere to go)
        steps += walked
        walked_length = sum(b - a for a, b in walked)
        length, place = length + walked_length, place + walked_length
        tail = window[-max_copy:]
        over += hits > 0
    return Resampled(steps, segments, over)


def _steps(p, place, want, training: Training, index: _Index, k, piece, rng, targets, room_after, room,
           branches=None, drift=MAX_DRIFT, aligned=False):
    """The pieces (a, b) of one walk from training event p, at `place` in the output, for `want`
    events: ending where a target follows within its room (`room_after`), or past `want` by two
    pieces without one; the first piece under `room` less two pieces. `branches`
    (`Training.branches`): look for a jump only there, drawing nothing where no draw could branch
    (the same walk, fewer draws: `resample`; the splice draws at every event, as its published
    traces did). Returns the pieces and where the walk would go on after them (None where it
    ended at a run's end with nowhere to go, or at a target)."""
    steps: list[tuple[int, int]] = []
    length, pending = 0, None
    while True:
        run_end = training.spans[training.run_at(p)][1]
        if len(targets) and length >= want - 2 * piece:
            j = np.searchsorted(targets, p)
            if j < len(targets) and targets[j] < run_end and targets[j] - p <= min(2 * piece, room_after[j]):
                steps.append((p, int(targets[j])))
                break
        if length >= want + (2 * piece if len(targets) else 0):
            pending = p
            break
        take = min(int(rng.integers(piece // 2, 2 * piece + 1)), run_end - p)
        if not steps:
            take = min(take, room - 2 * piece)
        if not len(targets):
            take = min(take, want - length)
        if take <= 0:
            break
        first = p
        p += take
        # jump at the piece's end or, where the k events before it occur nowhere else near this
        # phase, at the first place after it that has somewhere to go (a piece that runs on is a
        # longer verbatim copy, which the check on the whole walk bounds)
        jumped = None
        while True:
            if branches is not None:  # the next place a draw could branch, or the run's end
                j = np.searchsorted(branches, p)
                p = min(int(branches[j]) if j < len(branches) else run_end, run_end)
            near_end = (targets, np.minimum(room_after, 2 * piece)) if length + p - first >= want - 2 * piece else None
            q = _jump(p, place + length + p - first, training, index, k, rng, near_end, drift, aligned)
            if q != p:
                jumped = q
                break
            if p >= run_end:
                break
            p += 1
        steps.append((first, p))
        length += p - first
        if jumped is None:  # the run's end, nowhere to go: the walk ends here
            break
        p = jumped
    return [(a, b) for a, b in steps if b > a], pending


def _jump(p, place, training: Training, index: _Index, k, rng, ends=None, drift=MAX_DRIFT, aligned=False) -> int:
    """Where the walk goes on after training event p-1: one of the places the k events before p
    occur (`_places`), drawn alike, so that the walk leaves p's continuation as often as the
    training runs do after those k events (always taking a place that goes on differently made
    build's walks skip its process starts: TSTR/TRTR 0.89 against 1.00); where there are `ends`
    (targets, how far before each the walk may come in), one a right anchor follows within its
    reach first. p itself where the draw goes on as p does (the same next event)."""
    where, runs, same = _places(p, place, training, index, k, drift, aligned)
    if not len(where):
        return p
    reaches = np.zeros(len(where), dtype=bool)
    if ends is not None and len(ends[0]):
        targets, reach = ends
        j = np.minimum(np.searchsorted(targets, where), len(targets) - 1)
        ahead = targets[j] - where
        reaches = (ahead >= 0) & (ahead <= reach[j]) & (targets[j] < training.ends[runs])
    # the least of one uniform draw per place, among those that reach an end where any do (what a
    # lexsort on (reaches, draw) picks, without sorting thousands of places per event on fileio)
    draws = rng.random(len(where))
    if reaches.any():
        draws[~reaches] = np.inf
    pick = int(np.argmin(draws))
    return p if same[pick] and not reaches[pick] else int(where[pick])


def _places(p, place, training: Training, index: _Index, k, drift=MAX_DRIFT, aligned=False):
    """(places, their runs, whether each goes on as p does): where in training the k events
    before p occur (p among them), within `drift` of `place` in the output, each with an
    event after it (`aligned`: the nearest `place` in each run only)."""
    start = p - k
    first, end = training.spans[training.run_at(p - 1)]
    if start < first or not index.starts[start]:  # (start < first: the k events span two runs)
        empty = np.zeros(0, np.int64)
        return empty, empty, np.zeros(0, dtype=bool)
    state = None if training.states is None else training.states[p - 1]
    where, runs = _near(*training.places_after(index, index.at[start], state), place, training, drift, aligned)
    codes = training.codes
    return where, runs, codes[where] == (codes[p] if p < end else -1)  # none after a run's end


def _near(where, runs, place, training: Training, drift=MAX_DRIFT, aligned=False):
    """The places of `where` (ascending, as `_Index.find` gives them; `runs`: theirs) that have an
    event after them in their run and sit within `drift` of `place` in it: one slice per run,
    found by bisection (a 64-gram of scimark's or fileio's loop occurs thousands of times; the
    walk asks at every event). `aligned`: of each run's, only the one nearest `place` (the
    earlier of two as near): the walk then branches between runs at the same moment of each,
    never back or ahead within one -- which in a repeated structure repeats or skips what the
    run holds once (pybench's windows 0.72 -> 0.64 at a 16-event match and a 64-event drift,
    three seeds, a dev probe). `aligned="shared"`: so only where two runs or more hold places;
    where one run alone does, all of its places, as unaligned (aligned, a walk there could only
    stay in its run: stream's copying 0.03 -> 0.44 with run 1 held out)."""
    keep, targets = [], []
    for first, end in training.spans:
        lo = where.searchsorted(max(first + 1, first + place - drift), "left")
        hi = where.searchsorted(min(end - 1, first + place + drift), "right")
        if hi > lo:
            keep.append((lo, hi))
            targets.append(first + place)
    if aligned is True or (aligned == "shared" and len(keep) > 1):
        for i, ((lo, hi), target) in enumerate(zip(keep, targets)):
            at = lo + int(where[lo:hi].searchsorted(target, "left"))
            if at == hi or (at > lo and target - where[at - 1] <= where[at] - target):
                at -= 1
            keep[i] = (at, at + 1)
    if len(keep) == 1:  # slices, not copies: most grams' places lie in one run's stretch
        (lo, hi), = keep
        return where[lo:hi], runs[lo:hi]
    if not keep:
        return where[:0], runs[:0]
    return (np.concatenate([where[lo:hi] for lo, hi in keep]), np.concatenate([runs[lo:hi] for lo, hi in keep]))


def _makes_long_copy(before, after, train_codes, a, b, k, long_grams, limit) -> bool:
    """Whether splicing training events a..b-1 (between their anchors) makes a run of more than
    `limit` events that occurs verbatim in training: any (limit+1)-gram of the output around the
    splice (`before` it, the anchors and events, `after` it) that holds a spliced or anchor event
    and is among training's (`long_grams`, sorted hashes)."""
    head = before[max(0, len(before) - limit):]
    window = np.concatenate([head, train_codes[a - k:b + k], after[:limit]])
    grams = kgram_hashes(window, limit + 1)
    if not len(grams):
        return False
    first, last = len(head), len(head) + (b - a) + 2 * k - 1  # the anchors and the events between
    lo, hi = max(0, first - limit), min(len(grams) - 1, last)
    return bool(in_sorted(grams[lo:hi + 1], long_grams).any())


def run_copy_share(codes: np.ndarray, run: np.ndarray, span: int) -> float:
    """Share of the `span`-grams of `codes` that occur in the one training run `run`: what a
    spliced trace is held to, against the share of one real run's spans in another
    (`SpanTable.natural`)."""
    return _share(kgram_hashes(np.asarray(codes, dtype=np.int64), span),
                  np.unique(kgram_hashes(np.asarray(run, dtype=np.int64), span)))


def _share(grams: np.ndarray, table: np.ndarray) -> float:
    """Share of `grams` (hashes) found in `table` (sorted hashes); 0 where there are none."""
    return float(in_sorted(grams, table).mean()) if len(grams) else 0.0


def least_shared(runs: list[np.ndarray], span: int) -> float:
    """The least share of one training run's `span`-grams found in another (every ordered pair;
    one run: its second half in its first): how much a new real run may be expected to copy of
    any one training run, at the low end, which a spliced trace is held to."""
    runs = [np.asarray(r, dtype=np.int64) for r in runs]
    if len(runs) == 1:
        half = len(runs[0]) // 2
        runs = [runs[0][half:], runs[0][:half]]
        return run_copy_share(runs[0], runs[1], span)
    return min(run_copy_share(a, b, span) for i, a in enumerate(runs) for j, b in enumerate(runs) if i != j)

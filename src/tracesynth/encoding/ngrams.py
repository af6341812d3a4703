"""Event n-gram counts of the training traces, per workload: the sampler's n-gram prior.

The denoiser is a small network trained for minutes on a CPU, and its conditionals are too flat
where a real run is certain: in pybench every `sched_process_exec` is followed by `<execve` (66
of 66 in the training runs), yet the 1000-step model gives that 0.29 with its neighbours partly
known and 0.12 with most of the window masked (docs/model.md, Known limits). Counting is what
learns such a rule from two runs, so the sampler multiplies the network's event distribution at
a position by how much more (or less) likely each event is given the decided events right
before it and right after it than it is overall:

    log p(x) = log p_net(x) + w · [log q(x | left) − log q(x)] + w · [log q(x | right) − log q(x)]

where q(x | left) is an interpolated Witten-Bell estimate over the last 1..K decided events
(Witten & Bell 1991; the back-off of order k is weighted by how many distinct events followed
that context in training), q(x | right) the same over the next 1..K, and q(x) the add-one
unigram. A position with no decided neighbour gets no prior. This is the n-gram/neural
interpolation of language modelling (e.g. Neubig & Dyer 2016; kNN-LM, Khandelwal et al. 2020),
here as a product, since a diffusion sampler needs logits it can rank and temper.

Stored per workload, direction and order as sorted 64-bit context hashes (the evaluation's
k-gram hash) with CSR rows of (following event, count); kept with the model in
`ngrams.safetensors` (safetensors, never pickle). Like the support table, these are event
types only, but with counts: docs/model.md, Known limits, says what sharing a model shares.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from tracesynth.evaluation.windows import KGramHasher

K = 8  # longest context, in events, on each side (the default; `fit(k=...)`, `train --ngram-order`)
MAX_ORDER = 64  # the longest `train --ngram-order` takes (tables grow with it: build's 1.5 MB at 8, 21 MB at 32)
DIRECTIONS = ("left", "right")
_FEW_CHANGES = 8  # CachedPrior: up to this many changed positions, look near each one only
_MEMO_SIZE = 50_000  # and is emptied when it holds more contexts than this (~40 MB at 71 events, k 32)


def _spans(begin: np.ndarray, length: np.ndarray) -> np.ndarray:
    """The indices begin[i], ..., begin[i] + length[i] - 1 of every span, one after the other."""
    return np.repeat(begin - np.cumsum(length) + length, length) + np.arange(length.sum())


@dataclass
class _Table:
    """Following-event counts of every context of one order and direction (CSR by context)."""

    keys: np.ndarray     # uint64, sorted unique context hashes
    starts: np.ndarray   # int64, len(keys) + 1: row i is targets/counts[starts[i]:starts[i+1]]
    targets: np.ndarray  # int64 event codes
    counts: np.ndarray   # float64

    @classmethod
    def from_pairs(cls, contexts: np.ndarray, targets: np.ndarray) -> _Table:
        if not len(contexts):
            empty = np.zeros(0, np.int64)
            return cls(np.zeros(0, np.uint64), np.zeros(1, np.int64), empty, np.zeros(0))
        order = np.lexsort((targets, contexts))
        ctx, tgt = contexts[order], targets[order].astype(np.int64)
        new_pair = np.ones(len(ctx), dtype=bool)
        new_pair[1:] = (ctx[1:] != ctx[:-1]) | (tgt[1:] != tgt[:-1])
        first = np.flatnonzero(new_pair)
        counts = np.diff(np.append(first, len(ctx))).astype(np.float64)
        ctx, tgt = ctx[first], tgt[first]
        new_ctx = np.ones(len(ctx), dtype=bool)
        new_ctx[1:] = ctx[1:] != ctx[:-1]
        heads = np.flatnonzero(new_ctx)
        return cls(ctx[heads], np.append(heads, len(ctx)).astype(np.int64), tgt, counts)

    def lookup(self, hashes: np.ndarray) -> np.ndarray:
        """Row index of each hash, -1 where training never had that context."""
        if not len(self.keys):
            return np.full(len(hashes), -1, dtype=np.int64)
        where = np.minimum(np.searchsorted(self.keys, hashes), len(self.keys) - 1)
        return np.where(self.keys[where] == hashes, where, -1)

    def __post_init__(self):
        # per context: how many events followed it in training, and how many distinct ones
        self.totals = (np.add.reduceat(self.counts, self.starts[:-1]) if len(self.keys)
                       else np.zeros(0))
        self.distinct = np.diff(self.starts).astype(np.float64)

    def entries(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(index into `rows`, following event, count) of every entry of those context rows."""
        begin = self.starts[rows]
        length = self.starts[rows + 1] - begin
        flat = _spans(begin, length)
        return np.repeat(np.arange(len(rows)), length), self.targets[flat], self.counts[flat]

    def dense(self, rows: np.ndarray, vocab: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(counts [len(rows), vocab], total per row, distinct followers per row): the rows
        written out, for reading and testing (sampling works on `entries`)."""
        which, targets, counts = self.entries(rows)
        out = np.zeros((len(rows), vocab))
        out[which, targets] = counts
        return out, self.totals[rows], self.distinct[rows]


@dataclass
class _Merged:
    """Every order's contexts of one workload and direction in one sorted table, so that a
    window's rows look all their orders up in one search instead of one per order (the prior is
    recomputed for a few dozen rows at a time, thousands of times a trace: per-call overhead is
    what it costs). Built only where no two orders share a context hash (else None)."""

    keys: np.ndarray      # uint64, sorted unique over all orders
    order: np.ndarray     # int64, the context's order
    begin: np.ndarray     # int64, where its followers start in `targets` / `counts`
    length: np.ndarray    # int64, how many followers it has
    totals: np.ndarray    # float64, the order's table's totals of that row
    distinct: np.ndarray  # float64
    targets: np.ndarray   # int64, every order's tables' targets, one after the other
    counts: np.ndarray    # float64

    @classmethod
    def build(cls, tables: list[_Table]) -> _Merged | None:
        keys = np.concatenate([t.keys for t in tables])
        if len(np.unique(keys)) != len(keys):
            return None
        sort = np.argsort(keys, kind="stable")
        order = np.concatenate([np.full(len(t.keys), k + 1, np.int64) for k, t in enumerate(tables)])
        offsets = np.cumsum([0] + [len(t.targets) for t in tables])
        begin = np.concatenate([t.starts[:-1] + offset for t, offset in zip(tables, offsets)])
        length = np.concatenate([np.diff(t.starts) for t in tables])
        totals = np.concatenate([t.totals for t in tables])
        distinct = np.concatenate([t.distinct for t in tables])
        return cls(keys[sort], order[sort], begin[sort], length[sort], totals[sort], distinct[sort],
                   np.concatenate([t.targets for t in tables]), np.concatenate([t.counts for t in tables]))

    def lookup(self, hashes: np.ndarray, orders: np.ndarray) -> np.ndarray:
        """Row of each (hash, order), -1 where training never had that context at that order."""
        if not len(self.keys):
            return np.full(len(hashes), -1, dtype=np.int64)
        where = np.minimum(np.searchsorted(self.keys, hashes), len(self.keys) - 1)
        return np.where((self.keys[where] == hashes) & (self.order[where] == orders), where, -1)


class EventNGrams:
    """Left and right event-context counts up to order `k`, per workload (`fit`), and the
    log-ratio prior they give a window's undecided positions (`log_prior`)."""

    def __init__(self, vocab_size: int, k: int = K, tables: dict | None = None,
                 unigrams: dict[str, np.ndarray] | None = None):
        if k < 1:
            raise ValueError("n-gram contexts need k >= 1")
        self.vocab_size = int(vocab_size)
        self.k = k
        self.tables: dict[tuple[str, str, int], _Table] = dict(tables or {})  # (workload, direction, order)
        self.unigrams: dict[str, np.ndarray] = dict(unigrams or {})          # event counts per workload
        self._merged: dict[tuple[str, str], _Merged | None] = {}             # built on first use

    @classmethod
    def fit(cls, sequences: Iterable[tuple[str, np.ndarray]], vocab_size: int, k: int = K) -> EventNGrams:
        """`sequences`: (workload, event codes of one trace) pairs; contexts never cross traces."""
        parts: dict[str, list[np.ndarray]] = {}
        for workload, codes in sequences:
            parts.setdefault(workload, []).append(np.asarray(codes, dtype=np.int64))
        tables, unigrams = {}, {}
        for w, runs in parts.items():
            unigrams[w] = np.bincount(np.concatenate(runs), minlength=vocab_size)[:vocab_size].astype(np.float64)
            hashers = [KGramHasher(codes) for codes in runs]  # one pass per run serves every order
            for order in range(1, k + 1):
                left_ctx, left_tgt, right_ctx, right_tgt = [], [], [], []
                for codes, hasher in zip(runs, hashers):
                    n = len(codes)
                    if n <= order:
                        continue
                    h = hasher.at(np.arange(n - order + 1), order)  # h[j]: the events codes[j:j+order]
                    left_ctx.append(h[:n - order])           # the `order` events before codes[order:]
                    left_tgt.append(codes[order:])
                    right_ctx.append(h[1:])                  # the `order` events after codes[:n-order]
                    right_tgt.append(codes[:n - order])
                for direction, ctx, tgt in (("left", left_ctx, left_tgt), ("right", right_ctx, right_tgt)):
                    tables[(w, direction, order)] = _Table.from_pairs(
                        np.concatenate(ctx) if ctx else np.zeros(0, np.uint64),
                        np.concatenate(tgt) if tgt else np.zeros(0, np.int64))
        return cls(vocab_size, k, tables, unigrams)

    def knows(self, workload: str) -> bool:
        return workload in self.unigrams

    def _base(self, workload: str) -> np.ndarray:
        counts = self.unigrams[workload]
        return (counts + 1.0) / (counts.sum() + self.vocab_size)

    def conditional(self, codes: np.ndarray, positions: np.ndarray, workload: str,
                    direction: str) -> tuple[np.ndarray, np.ndarray]:
        """(q(x | context) [len(positions), vocab], longest order used per position): Witten-Bell
        interpolation over the decided events on one side (0 and the unigram where none is)."""
        codes = np.asarray(codes, dtype=np.int64)
        rows, q, used = self._conditional(codes, KGramHasher(codes), positions, workload, direction)
        out = np.broadcast_to(self._base(workload), (len(positions), self.vocab_size)).copy()
        out[rows] = q
        full = np.zeros(len(positions), dtype=np.int64)
        full[rows] = used
        return out, full

    def _conditional(self, codes, hasher, positions, workload: str, direction: str):
        """(rows of `positions` with a known context on this side, q for those rows, order used).
        `codes` is a window in which undecided positions hold a code training never had (the mask
        id), so a context that reaches one is never found and the recursion stops at the last
        decided event; only rows whose nearest neighbour is decided cost anything."""
        positions = np.asarray(positions, dtype=np.int64)
        key = (workload, direction)
        if key not in self._merged:
            self._merged[key] = _Merged.build([self.tables[(workload, direction, k)] for k in range(1, self.k + 1)])
        if self._merged[key] is not None:
            return self._conditional_merged(self._merged[key], codes, hasher, positions, workload, direction)
        n = len(codes)
        base = self._base(workload)
        # q = weight_base · base + scale · acc, per row: each order's step
        #     q_k = (c_k + T q_{k-1}) / (N + T)
        # then only scales two numbers per row and adds the context's few counts into `acc`,
        # instead of rewriting a vocab-wide row per order.
        rows = np.zeros(0, dtype=np.int64)
        weight_base = scale = np.ones(0)
        acc = np.zeros((0, self.vocab_size))
        used = np.zeros(0, dtype=np.int64)
        active = np.arange(len(positions))  # indices into `rows` once order 1 is done
        for order in range(1, self.k + 1):
            if not len(active) or n < order:
                break
            pos = positions[active] if order == 1 else positions[rows[active]]
            start = pos - order if direction == "left" else pos + 1
            inside = (start >= 0) & (start <= n - order)
            active, start = active[inside], start[inside]
            table = self.tables[(workload, direction, order)]
            found = table.lookup(hasher.at(start, order))
            keep = found >= 0
            active, found = active[keep], found[keep]
            if not len(active):
                break
            if order == 1:  # from here on, work on the rows that have a decided neighbour only
                rows, active = active, np.arange(len(active))
                weight_base, scale = np.ones(len(rows)), np.ones(len(rows))
                acc = np.zeros((len(rows), self.vocab_size))
                used = np.zeros(len(rows), dtype=np.int64)
            total, distinct = table.totals[found], table.distinct[found]
            keep_share = distinct / (total + distinct)
            weight_base[active] *= keep_share
            scale[active] *= keep_share
            which, targets, counts = table.entries(found)
            acc[active[which], targets] += counts / ((total + distinct)[which] * scale[active[which]])
            used[active] = order
            # A context seen 10^5 times with two followers scales its row by ~10^-5 an order: fold
            # the scale into the row before 1/scale leaves float64's range (k is not always 8).
            tiny = active[scale[active] < 1e-100]
            if len(tiny):
                acc[tiny] *= scale[tiny, None]
                scale[tiny] = 1.0
        q = weight_base[:, None] * base[None, :] + scale[:, None] * acc
        # float32 from here (it is added to float32 logits); below 1e-30 (-69 nats) is "never"
        return rows, np.maximum(q, 1e-30).astype(np.float32), used

    def _conditional_merged(self, merged: _Merged, codes, hasher, positions, workload: str, direction: str):
        """`_conditional` with every order looked up at once: the same numbers, float for float
        (the per-row products are `cumprod`s in order, the counts are added order by order with
        `np.add.at`); a row whose scale would need folding (below 1e-100: contexts seen ~10^5
        times at many orders) is added up on its own by `_folded_row`, as the loop does it."""
        n, k = len(codes), self.k
        orders = np.arange(1, k + 1)
        start = positions[:, None] - orders[None, :] if direction == "left" else \
            np.broadcast_to(positions[:, None] + 1, (len(positions), k))
        inside = (start >= 0) & (start <= n - orders[None, :])
        found = np.full((len(positions), k), -1, dtype=np.int64)
        cells = np.nonzero(inside)
        if len(cells[0]):
            cell_orders = orders[cells[1]]
            found[cells] = merged.lookup(hasher.at(start[cells], cell_orders), cell_orders)
        # a row's chain of contexts ends at its first order training never had
        valid = np.logical_and.accumulate(found >= 0, axis=1)
        used = valid.sum(1)
        rows = np.flatnonzero(used)
        found, valid, used = found[rows], valid[rows], used[rows]
        total = np.where(valid, merged.totals[np.maximum(found, 0)], 0.0)
        distinct = np.where(valid, merged.distinct[np.maximum(found, 0)], 1.0)
        keep_share = np.where(valid, distinct / (total + distinct), 1.0)
        scale = np.cumprod(keep_share, axis=1)
        folds = (scale < 1e-100).any(1)  # rows the loop would fold: done one by one below
        weight_base = scale[:, -1]  # the same product: weight and scale are only folded apart
        acc = np.zeros((len(rows), self.vocab_size))
        order_index, row = np.nonzero((valid & ~folds[:, None]).T)  # by order: np.add.at adds in that order
        at = found[row, order_index]
        length = merged.length[at]
        flat = _spans(merged.begin[at], length)
        denominator = (total[row, order_index] + distinct[row, order_index]) * scale[row, order_index]
        np.add.at(acc, (np.repeat(row, length), merged.targets[flat]),
                  merged.counts[flat] / np.repeat(denominator, length))
        final_scale = scale[:, -1].copy()
        for r in np.flatnonzero(folds):
            final_scale[r] = self._folded_row(merged, found[r, :used[r]], acc[r])
        q = weight_base[:, None] * self._base(workload)[None, :] + final_scale[:, None] * acc
        return rows, np.maximum(q, 1e-30).astype(np.float32), used

    @staticmethod
    def _folded_row(merged: _Merged, found: np.ndarray, acc: np.ndarray) -> float:
        """One row's counts added into `acc` order by order with the loop's folding (its scale
        multiplied into the row whenever it drops below 1e-100), the same operations in the same
        order as `_conditional`'s loop; returns the scale left at the end. Only rows whose
        contexts were seen ~10^5 times at many orders get here, a few per call at most."""
        scale = 1.0
        for at in found:
            total, distinct = merged.totals[at], merged.distinct[at]
            scale *= distinct / (total + distinct)
            span = slice(merged.begin[at], merged.begin[at] + merged.length[at])
            acc[merged.targets[span]] += merged.counts[span] / ((total + distinct) * scale)
            if scale < 1e-100:
                acc *= scale
                scale = 1.0
        return scale

    def log_prior(self, codes: np.ndarray, positions: np.ndarray, workload: str,
                  memo: dict | None = None) -> np.ndarray:
        """log q(x | left) + log q(x | right) − 2 log q(x) per position ([len(positions), vocab],
        float32: it is added to float32 logits); 0 for a side with no decided neighbour.

        `memo` (a dict the caller keeps, e.g. for one trace): a side's term depends only on the
        decided events between the position and the nearest undecided one (at most k), so it
        is kept under those events (their count and k-gram hash) and looked up, not computed,
        when they come back: 93-100% of the contexts a trace's sampler asks about were asked
        about before. The same numbers: a term is computed once, as it would be in any batch,
        and added in the same order."""
        out = np.zeros((len(positions), self.vocab_size), dtype=np.float32)
        if not self.knows(workload) or not len(positions):
            return out
        log_base = np.log(self._base(workload)).astype(np.float32)
        codes = np.asarray(codes, dtype=np.int64)
        positions = np.asarray(positions, dtype=np.int64)
        # Contexts reach k events either side: hash only that stretch of the window (a k-gram's
        # hash does not depend on where it starts), which is all of it on the first call of a
        # denoising step and a few dozen events when the sampler asks about two rows.
        lo, hi = max(int(positions.min()) - self.k, 0), min(int(positions.max()) + self.k + 1, len(codes))
        stretch, at = codes[lo:hi], positions - lo
        hasher = KGramHasher(stretch)
        for direction in DIRECTIONS:
            if memo is None:
                rows, q, _ = self._conditional(stretch, hasher, at, workload, direction)
                out[rows] += np.log(q) - log_base
                continue
            length = self._context_lengths(stretch, at, direction)
            live = np.flatnonzero(length)  # rows with no decided neighbour on this side get nothing
            if not len(live):
                continue
            starts = at[live] - length[live] if direction == "left" else at[live] + 1
            keys = [(workload, direction, n, h) for n, h in
                    zip(length[live].tolist(), hasher.at(starts, length[live]).tolist())]
            todo = [j for j, key in enumerate(keys) if key not in memo]
            if todo:
                rows, q, _ = self._conditional(stretch, hasher, at[live[todo]], workload, direction)
                terms = dict(zip(rows.tolist(), np.log(q) - log_base))
                for i, j in enumerate(todo):
                    memo[keys[j]] = terms.get(i)  # None: training never had even its nearest event
            hit = [j for j, key in enumerate(keys) if memo[key] is not None]
            if hit:
                out[live[hit]] += np.stack([memo[keys[j]] for j in hit])
        if memo is not None and len(memo) > _MEMO_SIZE:
            memo.clear()
        return out

    def _context_lengths(self, codes: np.ndarray, positions: np.ndarray, direction: str) -> np.ndarray:
        """How many decided events lie next to each position on one side before the first
        undecided one or the window's edge, at most k: the events a side's term depends on."""
        n = len(codes)
        undecided = (codes < 0) | (codes >= self.vocab_size)
        idx = np.arange(n)
        if direction == "left":  # the last undecided position strictly before each position
            stop = np.concatenate(([-1], np.maximum.accumulate(np.where(undecided, idx, -1))[:-1]))
            return np.minimum(positions - 1 - stop[positions], self.k)
        stop = np.concatenate((np.minimum.accumulate(np.where(undecided, idx, n)[::-1])[::-1][1:], [n]))
        return np.minimum(stop[positions] - positions - 1, self.k)

    # --- persistence: tensors for safetensors ---------------------------------------------
    def to_arrays(self) -> dict[str, np.ndarray]:
        arrays = {"k": np.array([self.k], dtype=np.int64), "vocab_size": np.array([self.vocab_size], dtype=np.int64)}
        for w, counts in self.unigrams.items():
            arrays[f"unigram/{w}"] = counts
        for (w, direction, order), t in self.tables.items():
            base = f"{direction}/{order}"
            arrays[f"keys/{base}/{w}"] = t.keys.view(np.int64)
            arrays[f"starts/{base}/{w}"] = t.starts
            arrays[f"targets/{base}/{w}"] = t.targets
            arrays[f"counts/{base}/{w}"] = t.counts
        return arrays

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> EventNGrams:
        unigrams = {key.split("/", 1)[1]: np.asarray(v, dtype=np.float64)
                    for key, v in arrays.items() if key.startswith("unigram/")}
        tables = {}
        for key in arrays:
            if not key.startswith("keys/"):
                continue
            _, direction, order, w = key.split("/", 3)
            base = f"{direction}/{order}/{w}"
            tables[(w, direction, int(order))] = _Table(
                np.ascontiguousarray(arrays[key], dtype=np.int64).view(np.uint64),
                np.asarray(arrays[f"starts/{base}"], dtype=np.int64),
                np.asarray(arrays[f"targets/{base}"], dtype=np.int64),
                np.asarray(arrays[f"counts/{base}"], dtype=np.float64))
        return cls(int(arrays["vocab_size"][0]), int(arrays["k"][0]), tables, unigrams)


class CachedPrior:
    """`weight · ngrams.log_prior(codes, positions, workload)` as the sampler's `event_prior`,
    recomputing only the rows whose contexts changed since the last call.

    A row's prior on one side depends only on the decided events between it and the nearest
    undecided one, at most `k` away (a context that reaches an undecided event is never in the
    table). So a change at p moves a row r only if p is within `k` of r and no position between
    them stayed undecided throughout: a reveal moves about two still-masked rows (the nearest on
    either side), not all 2k around it. The cached rows are exactly the ones a fresh computation
    would give (the sampler's output does not change), while the parts of one denoising step and
    the short redraw passes, which change a few events each, stop paying for the whole window."""

    def __init__(self, ngrams: EventNGrams, workload: str, weight: float):
        self.ngrams, self.workload, self.weight = ngrams, workload, float(weight)
        self.codes: np.ndarray | None = None
        self.rows: np.ndarray | None = None   # [window, vocab] float32, valid where `fresh`
        self.fresh: np.ndarray | None = None
        self.version: np.ndarray | None = None  # per row: how often it was recomputed
        self.memo: dict = {}  # log_prior's terms by context, for the whole trace
        self.quiet_before = 0  # window rows before this one get no prior (`quiet`)

    def quiet(self, before: int) -> None:
        """Give the window's rows before `before` no prior (zeros) until told otherwise: the
        sampler's start-up rows, where the network's trace-position embedding places each event
        of the start-up and counts read from the neighbours would splice two training runs'
        layouts (`sample_window`'s `start_prior`). A change drops every cached row."""
        before = max(0, int(before))
        if before != self.quiet_before:
            self.quiet_before = before
            if self.fresh is not None:
                self.fresh[:] = False

    def __call__(self, codes: np.ndarray, positions: np.ndarray) -> np.ndarray:
        positions = np.asarray(positions, dtype=np.int64)
        self.refresh(codes, positions)
        return self.rows[positions]

    def refresh(self, codes: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """Bring the rows at `positions` up to date for `codes` (what `__call__` returns then
        sits in `self.rows`) and return their versions: a row's version changes whenever it is
        recomputed, so a caller that kept an older version knows which rows to look at again
        without reading every row (the sampler, which asks about thousands of rows a part)."""
        codes = np.asarray(codes, dtype=np.int64)
        positions = np.asarray(positions, dtype=np.int64)
        if self.codes is None or len(self.codes) != len(codes):
            self.rows = np.zeros((len(codes), self.ngrams.vocab_size), dtype=np.float32)
            self.fresh = np.zeros(len(codes), dtype=bool)
            self.version = np.zeros(len(codes), dtype=np.int64) if self.version is None else \
                np.full(len(codes), int(self.version.max(initial=0)) + 1, dtype=np.int64)
        else:
            changed = self.codes != codes
            if changed.any():
                self.fresh &= ~self._moved(self.codes, codes, changed)
        self.codes = codes.copy()
        todo = positions[~self.fresh[positions]]
        if len(todo):
            live = todo[todo >= self.quiet_before]
            self.rows[todo[todo < self.quiet_before]] = 0.0
            if len(live):
                self.rows[live] = self.weight * self.ngrams.log_prior(codes, live, self.workload, self.memo)
            self.fresh[todo] = True
            self.version[todo] += 1
        return self.version[positions]

    def _moved(self, old: np.ndarray, new: np.ndarray, changed: np.ndarray) -> np.ndarray:
        """Rows whose prior the change from `old` to `new` can move: on either side, the nearest
        changed position lies within k and no position undecided in both lies between them
        (a context stops at the first undecided event, so nothing beyond one matters)."""
        n, k, vocab = len(new), self.ngrams.k, self.ngrams.vocab_size
        where = np.flatnonzero(changed)
        if len(where) <= _FEW_CHANGES:
            return self._moved_near(old, new, where)
        undecided = ((old < 0) | (old >= vocab)) & ((new < 0) | (new >= vocab)) & ~changed
        idx = np.arange(n)
        # left: the last change and the last undecided position strictly before each row
        change_before = np.concatenate(([-1], np.maximum.accumulate(np.where(changed, idx, -1))[:-1]))
        stop_before = np.concatenate(([-1], np.maximum.accumulate(np.where(undecided, idx, -1))[:-1]))
        moved = (change_before >= 0) & (idx - change_before <= k) & (stop_before < change_before)
        # right: the first change and the first undecided position strictly after each row
        change_after = np.concatenate((np.minimum.accumulate(np.where(changed, idx, n)[::-1])[::-1][1:], [n]))
        stop_after = np.concatenate((np.minimum.accumulate(np.where(undecided, idx, n)[::-1])[::-1][1:], [n]))
        moved |= (change_after < n) & (change_after - idx <= k) & (stop_after > change_after)
        return moved

    def _moved_near(self, old: np.ndarray, new: np.ndarray, where: np.ndarray) -> np.ndarray:
        """`_moved` for a few changed positions `where`, looking only within k of each: from a
        change, the rows up to k away on either side, up to and including the first position
        undecided in both `old` and `new` (a change nearer to a row moves it anyway: the union
        over changes is the nearest-change rule above). What a part of a denoising step costs
        when it reveals a token or two, instead of passes over the whole window."""
        n, k, vocab = len(new), self.ngrams.k, self.ngrams.vocab_size
        moved = np.zeros(n, dtype=bool)
        changed = np.zeros(n, dtype=bool)
        changed[where] = True
        for c in where:
            lo, hi = max(c - k, 0), min(c + k + 1, n)
            a, b = old[lo:hi], new[lo:hi]
            stop = np.flatnonzero(((a < 0) | (a >= vocab)) & ((b < 0) | (b >= vocab)) & ~changed[lo:hi]) + lo
            right = stop[stop > c]
            left = stop[stop < c]
            moved[c + 1:(right[0] + 1 if len(right) else hi)] = True
            moved[(left[-1] if len(left) else lo):c] = True
        return moved

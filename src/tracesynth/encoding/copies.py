"""Which long event spans the training traces contain, per workload: the copy guard's table.

A model trained on two or three runs of a workload learns their start-up well enough to replay
it: with the trace-position embedding and start windows, the first window of a generated tar
trace repeats training start-ups so closely that 76-82% of its event 256-grams occur verbatim in
training, where an independent real run's first window has none (docs/model.md, "Copy guard").
Real runs differ from each other at branch points: places where the same few events are
followed by one event in one run and another in the next (a timer interrupt a few events later,
a page fault, another thread scheduled first). The sampler's copy guard (`sampling.copy_guard`)
finds generated 256-grams that occur in training and edits each at such a branch point, the way
training itself varies there.

Two tables per workload, both of 64-bit hashes of event codes (the evaluation's k-gram hash,
`evaluation.windows.kgram_hashes`, so the guard and the evaluation's copy share count the same
spans):
- `spans[w]`: every training 256-gram (sorted; one hash per training event, ~0.1-1.3 MB per
  workload on the bundled data);
- `contexts[w]`, `nexts[w]`, `counts[w]`: every (branch-1)-gram of training that is followed by
  at least two different events, once per event that follows it, and how often it does (sorted
  by context);
and `natural[w]`, the share of one real run's 256-grams found in the other training runs. The
guard runs only where that share is low (`SHARED_SPANS`): tar and stream, whose runs share
0.1-26% of their long spans, not the deterministic workloads whose runs share 50-90%.
Event types only (no times, threads or arguments), kept with the model in `copies.safetensors`
(safetensors, never pickle). A model saved before this table existed has none: no guard.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from tracesynth.encoding.support import held_out_grams
from tracesynth.evaluation.windows import in_sorted, kgram_hashes, require_sorted

SPAN = 256  # events per copied span: the evaluation's copy share and privacy flag (FLAG_KS)
BRANCH = 8  # a branch point is judged on the 7 events before it (the support corrector's order)
# Where real runs of a workload share more of their 256-event spans with each other than this
# (one training run against the others: sqlite 0.50, pybench 0.56, build 0.59, scimark 0.72,
# gzip 0.78, fileio 0.90), a span found in training is what the workload does, not something the
# model memorised, and breaking such spans made windows easier to tell from real ones (scimark
# disc@512 0.80 -> 0.97, sqlite 0.85 -> 0.93): the guard only runs below it (tar 0.26, stream
# 0.001). Set between the two groups of the bundled workloads.
SHARED_SPANS = 0.4
_EMPTY = np.zeros(0, dtype=np.uint64)


class SpanTable:
    """Training event spans and branch points, per workload."""

    def __init__(self, span: int = SPAN, branch: int = BRANCH, spans: dict[str, np.ndarray] | None = None,
                 contexts: dict[str, np.ndarray] | None = None, nexts: dict[str, np.ndarray] | None = None,
                 counts: dict[str, np.ndarray] | None = None, natural: dict[str, float] | None = None):
        if span < 2 or branch < 2:
            raise ValueError("span and branch orders must be >= 2")
        self.span = span
        self.branch = branch
        self.spans: dict[str, np.ndarray] = dict(spans or {})
        self.contexts: dict[str, np.ndarray] = dict(contexts or {})
        self.nexts: dict[str, np.ndarray] = dict(nexts or {})
        self.counts: dict[str, np.ndarray] = dict(counts or {})  # times each (context, next) occurs
        self.natural: dict[str, float] = dict(natural or {})  # a real run's share of copied spans

    @classmethod
    def fit(cls, sequences: Iterable[tuple[str, np.ndarray]], span: int = SPAN, branch: int = BRANCH) -> SpanTable:
        """`sequences`: (workload, event codes of one trace) pairs; spans never cross traces.

        `natural[w]`: the share of a real run's 256-grams that occur in the other training runs,
        mean over the runs held out one at a time (one trace: its second half against its first)."""
        parts: dict[str, list[np.ndarray]] = {}
        for workload, codes in sequences:
            parts.setdefault(workload, []).append(np.asarray(codes, dtype=np.int64))
        spans, contexts, nexts, counts, natural = {}, {}, {}, {}, {}
        for w, runs in parts.items():
            hashes = [kgram_hashes(c, span) for c in runs]
            spans[w] = np.unique(np.concatenate(hashes + [_EMPTY]))
            shares = [float(np.isin(h, others).mean()) for h, others in held_out_grams(runs, span)]
            natural[w] = float(np.mean(shares)) if shares else 0.0
            lead = [kgram_hashes(c[:-1], branch - 1) for c in runs if len(c) >= branch]
            follow = [c[branch - 1:].astype(np.uint64) for c in runs if len(c) >= branch]
            pairs, times = np.unique(np.stack([np.concatenate(lead + [_EMPTY]), np.concatenate(follow + [_EMPTY])]),
                                     axis=1, return_counts=True)
            ctx, n_next = np.unique(pairs[0], return_counts=True)
            keep = np.isin(pairs[0], ctx[n_next >= 2])  # np.unique sorted the pairs by context
            contexts[w], nexts[w] = pairs[0][keep], pairs[1][keep].astype(np.int64)
            counts[w] = times[keep].astype(np.int64)
        return cls(span, branch, spans, contexts, nexts, counts, natural)

    def applies(self, workload: str) -> bool:
        """Whether the guard should run for `workload`: real runs share few long spans."""
        return workload in self.spans and self.natural.get(workload, 1.0) <= SHARED_SPANS

    def copied(self, codes: np.ndarray, workload: str) -> np.ndarray:
        """bool per span start: codes[i:i+span] occurs in a training trace of `workload`."""
        return in_sorted(kgram_hashes(np.asarray(codes), self.span), self.spans.get(workload, _EMPTY))

    def branch_points(self, codes: np.ndarray, workload: str) -> np.ndarray:
        """bool per event: the branch-1 events before it are followed by more than one event
        type in training, so another event there is one training has seen."""
        codes = np.asarray(codes)
        out = np.zeros(len(codes), dtype=bool)
        lead = self.branch - 1
        if len(codes) > lead:
            out[lead:] = in_sorted(kgram_hashes(codes[:-1], lead), self.contexts.get(workload, _EMPTY))
        return out

    def followers(self, context: np.ndarray, workload: str) -> tuple[np.ndarray, np.ndarray]:
        """The event codes that follow `context` (branch-1 codes) in training, if it branches,
        and how often each does."""
        h = kgram_hashes(np.asarray(context), self.branch - 1)
        table = self.contexts.get(workload, _EMPTY)
        if len(h) != 1 or not len(table):
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        lo, hi = np.searchsorted(table, h[0], "left"), np.searchsorted(table, h[0], "right")
        return self.nexts[workload][lo:hi], self.counts[workload][lo:hi]

    def copy_share(self, codes: np.ndarray, workload: str) -> float:
        copied = self.copied(codes, workload)
        return float(copied.mean()) if len(copied) else 0.0

    # --- persistence: tensors for safetensors ---------------------------------------------
    def to_arrays(self) -> dict[str, np.ndarray]:
        arrays = {f"spans/{w}": h.view(np.int64) for w, h in self.spans.items()}
        arrays.update({f"contexts/{w}": h.view(np.int64) for w, h in self.contexts.items()})
        arrays.update({f"nexts/{w}": v.astype(np.int64) for w, v in self.nexts.items()})
        arrays.update({f"counts/{w}": v.astype(np.int64) for w, v in self.counts.items()})
        arrays.update({f"natural/{w}": np.array([v], dtype=np.float64) for w, v in self.natural.items()})
        arrays["orders"] = np.array([self.span, self.branch], dtype=np.int64)
        return arrays

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> SpanTable:
        def table(prefix: str, hashes: bool = True) -> dict[str, np.ndarray]:
            out = {key.split("/", 1)[1]: np.ascontiguousarray(v, dtype=np.int64)
                   for key, v in arrays.items() if key.startswith(prefix)}
            return {w: require_sorted(v.view(np.uint64), prefix + w) for w, v in out.items()} if hashes else out
        span, branch = (int(v) for v in arrays["orders"])
        natural = {key.split("/", 1)[1]: float(v[0]) for key, v in arrays.items() if key.startswith("natural/")}
        return cls(span, branch, table("spans/"), table("contexts/"), table("nexts/", hashes=False),
                   table("counts/", hashes=False), natural)

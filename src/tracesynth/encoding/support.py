"""Which event k-grams the training traces contain, per workload: the support corrector's table.

The masked-diffusion sampler draws the tokens of one reverse step independently, so at 16 steps
for 3,072 new events a window gets ~190 tokens per network call, and some land where the events
around them do not fit: a loop iteration with one read too many, an exit followed by the wrong
entry. Each such slip is an event 8-gram that no real run contains (gzip, 3000-step model: 13%
of generated 8-grams never occur in training; a held-out real run: 0.03%), and those are what a
window classifier sees first (docs/model.md, "Why windows are still told from real ones"). The
sampler uses this table after its reverse steps to find the events inside unseen 8-grams and
draw them again (`sampling.sampler`, "support corrector").

Stored as sorted 64-bit hashes of the k-grams of event codes (one array per workload), so
membership is one binary search per gram and the table is small (206-5,126 distinct 8-grams, at most 41 KB,
on the bundled workloads).
The hashes are of event types only (no timestamps, threads or arguments) and are kept with the
model in `support.safetensors` (safetensors, never pickle).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from tracesynth.evaluation.windows import in_sorted, kgram_hashes, require_sorted

K = 8  # events per gram: the order at which real runs have (almost) no unseen grams
# Above this many distinct k-grams per training event a workload's grammar is open (processes
# launched and interleaved: pybench 0.017, build 0.031; the six others 0.001-0.006): an unseen
# gram in a sample is weak evidence of a slip there, and redrawing around it measured worse
# (docs/model.md, "Support corrector"), so the corrector leaves such workloads alone.
OPEN_DENSITY = 0.01


def gram_hashes(codes: np.ndarray, k: int = K) -> np.ndarray:
    """Hash of each k-gram of `codes` (len - k + 1 values; none if shorter than k): the
    evaluation's 64-bit k-gram hash (`evaluation.windows.kgram_hashes`), so the table and the
    evaluation's unseen-8-gram share count the same grams."""
    return kgram_hashes(np.asarray(codes), k)


def held_out_grams(runs: list[np.ndarray], k: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(k-gram hashes of one run, those of all the others) for each run held out in turn; one
    run: its halves, each against the other. Runs too short for a k-gram are skipped."""
    hashes = [gram_hashes(c, k) for c in runs]
    if len(runs) == 1:
        half = len(runs[0]) // 2
        hashes = [gram_hashes(runs[0][:half], k), gram_hashes(runs[0][half:], k)]
    return [(h, np.concatenate(hashes[:i] + hashes[i + 1:])) for i, h in enumerate(hashes) if len(h)]


class EventSupport:
    """The set of event k-grams seen in training, per workload, and how many unseen ones a
    real run has (`natural`)."""

    def __init__(self, k: int = K, grams: dict[str, np.ndarray] | None = None,
                 natural: dict[str, float] | None = None, positions: dict[str, int] | None = None):
        if k < 2:
            raise ValueError("support k-grams need k >= 2")
        self.k = k
        self.grams: dict[str, np.ndarray] = dict(grams or {})
        self.natural: dict[str, float] = dict(natural or {})
        self.positions: dict[str, int] = dict(positions or {})  # k-grams counted in training

    def density(self, workload: str) -> float:
        """Distinct k-grams per k-gram of training (1.0 when unknown: treated as open)."""
        total = self.positions.get(workload, 0)
        return len(self.grams.get(workload, ())) / total if total else 1.0

    def applies(self, workload: str) -> bool:
        """Whether the corrector should use this table for `workload` (a closed grammar)."""
        return workload in self.grams and self.density(workload) <= OPEN_DENSITY

    @classmethod
    def fit(cls, sequences: Iterable[tuple[str, np.ndarray]], k: int = K) -> EventSupport:
        """`sequences`: (workload, event codes of one trace) pairs; grams never cross traces.

        `natural[w]`: the share of a real run's k-grams that the others lack, mean over the
        workload's traces held out one at a time (one trace: its second half against its
        first). Real runs are not closed under k-grams (build, a compiler launching processes:
        1.4-3.4% of one run's 8-grams are missing from the other; gzip: 0.1-0.2%), so the
        sampler leaves a window alone once it has no more unseen grams than that."""
        parts: dict[str, list[np.ndarray]] = {}
        for workload, codes in sequences:
            parts.setdefault(workload, []).append(np.asarray(codes))
        grams, natural, positions = {}, {}, {}
        for w, runs in parts.items():
            hashes = [gram_hashes(c, k) for c in runs]
            grams[w] = np.unique(np.concatenate(hashes))
            positions[w] = int(sum(len(h) for h in hashes))
            shares = [float((~np.isin(h, others)).mean()) for h, others in held_out_grams(runs, k)]
            natural[w] = float(np.mean(shares)) if shares else 0.0
        return cls(k, grams, natural, positions)

    def novel(self, codes: np.ndarray, workload: str) -> np.ndarray:
        """bool per k-gram start: the gram codes[i:i+k] was not seen for `workload`."""
        return ~in_sorted(gram_hashes(codes, self.k), self.grams.get(workload, np.zeros(0, np.uint64)))

    def cover(self, codes: np.ndarray, workload: str) -> np.ndarray:
        """bool per event: it lies inside at least one unseen k-gram."""
        return self._spread(self.novel(codes, workload), len(codes))

    def excess_cover(self, codes: np.ndarray, workload: str) -> np.ndarray:
        """`cover`, or nothing flagged when the share of unseen k-grams is within the
        workload's natural share (what the support corrector redraws)."""
        novel = self.novel(codes, workload)
        if not len(novel) or novel.mean() <= self.natural.get(workload, 0.0):
            return np.zeros(len(codes), dtype=bool)
        return self._spread(novel, len(codes))

    def _spread(self, novel: np.ndarray, n: int) -> np.ndarray:
        """Per-gram flags → per-event flags (each gram covers its k events)."""
        starts = np.nonzero(novel)[0]
        edges = np.zeros(n + 1, dtype=np.int64)
        np.add.at(edges, starts, 1)
        np.add.at(edges, starts + self.k, -1)
        return np.cumsum(edges)[:n] > 0

    def novel_share(self, codes: np.ndarray, workload: str) -> float:
        """Share of the k-grams of `codes` not seen in training (0.0 for a too-short sequence)."""
        novel = self.novel(codes, workload)
        return float(novel.mean()) if len(novel) else 0.0

    # --- persistence: tensors for safetensors ---------------------------------------------
    def to_arrays(self) -> dict[str, np.ndarray]:
        arrays = {f"grams/{w}": g.view(np.int64) for w, g in self.grams.items()}
        arrays.update({f"natural/{w}": np.array([v], dtype=np.float64) for w, v in self.natural.items()})
        arrays.update({f"positions/{w}": np.array([v], dtype=np.int64) for w, v in self.positions.items()})
        arrays["k"] = np.array([self.k], dtype=np.int64)
        return arrays

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> EventSupport:
        grams = {key.split("/", 1)[1]: require_sorted(np.ascontiguousarray(v, dtype=np.int64).view(np.uint64), key)
                 for key, v in arrays.items() if key.startswith("grams/")}
        natural = {key.split("/", 1)[1]: float(v[0]) for key, v in arrays.items() if key.startswith("natural/")}
        positions = {key.split("/", 1)[1]: int(v[0]) for key, v in arrays.items() if key.startswith("positions/")}
        return cls(int(arrays["k"][0]), grams, natural, positions)

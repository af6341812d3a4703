"""Inter-event time (`dt`, nanoseconds) as fine log-spaced bins.

Kernel gaps span nine orders of magnitude (back-to-back events a few ns apart, idle CPUs
seconds apart) and are heavy-tailed, so a linear scale or a Gaussian would waste its capacity
on one end. Bins equally spaced in log10(ns) give every decade the same resolution
(`bins_per_decade`, 20 by default: a bin is 12% wide). Class 0 is an exact zero gap (events with
the same timestamp are common); the last class is "longer than the top edge".

Decoding draws within the bin from the training gaps that fell into it (stored as quantiles),
so the fine structure inside a bin (e.g. a timer's exact period) survives; an empty bin falls
back to log-uniform.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

N_QUANTILES = 33


class DtEncoder:
    def __init__(self, bins_per_decade: int = 20, decades: int = 10, quantiles: dict | None = None):
        self.bins_per_decade = bins_per_decade
        self.decades = decades  # top edge: 10**decades ns (10 s by default)
        self.quantiles: dict[int, list[int]] = {int(k): v for k, v in (quantiles or {}).items()}

    @property
    def n_log_bins(self) -> int:
        return self.bins_per_decade * self.decades

    @property
    def vocab_size(self) -> int:
        return 1 + self.n_log_bins + 1  # zero, log bins, overflow

    def bin_edges(self, code: int) -> tuple[float, float]:
        """The [low, high) gap range in ns of a class."""
        if code == 0:
            return 0.0, 1.0
        if code > self.n_log_bins:
            return 10.0**self.decades, 10.0 ** (self.decades + 1)
        low = 10.0 ** ((code - 1) / self.bins_per_decade)
        high = 10.0 ** (code / self.bins_per_decade)
        return low, high

    def encode(self, dt_ns: np.ndarray) -> np.ndarray:
        dt = np.maximum(np.asarray(dt_ns, dtype=np.float64), 0.0)
        codes = np.zeros(dt.shape, dtype=np.int64)
        positive = dt >= 1.0
        logs = np.log10(dt[positive]) * self.bins_per_decade
        codes[positive] = np.minimum(np.floor(logs).astype(np.int64) + 1, self.n_log_bins + 1)
        return codes

    def fit(self, gaps: Iterable[np.ndarray]) -> DtEncoder:
        all_gaps = np.concatenate([np.asarray(g, dtype=np.int64) for g in gaps]) if gaps else np.zeros(0)
        codes = self.encode(all_gaps)
        order = np.argsort(codes, kind="stable")
        codes_sorted, gaps_sorted = codes[order], all_gaps[order]
        bounds = np.searchsorted(codes_sorted, np.arange(self.vocab_size + 1))
        self.quantiles = {}
        probs = np.linspace(0.0, 1.0, N_QUANTILES)
        for code in range(1, self.vocab_size):
            in_bin = gaps_sorted[bounds[code]: bounds[code + 1]]
            if len(in_bin):
                self.quantiles[code] = np.unique(np.quantile(in_bin, probs, method="nearest")).astype(int).tolist()
        return self

    def decode(self, codes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Class ids → gaps in ns (int64), drawn within each bin."""
        codes = np.asarray(codes, dtype=np.int64)
        out = np.zeros(codes.shape, dtype=np.int64)
        for code in np.unique(codes):
            if code == 0:
                continue
            where = np.nonzero(codes == code)[0]
            samples = self.quantiles.get(int(code))
            if samples:
                out[where] = np.asarray(samples, dtype=np.int64)[rng.integers(0, len(samples), len(where))]
            else:
                low, high = self.bin_edges(int(code))
                vals = np.exp(rng.uniform(np.log(low), np.log(high), len(where)))
                out[where] = np.clip(np.floor(vals), np.ceil(low), max(np.ceil(low), np.ceil(high) - 1))
        return out

    def representative(self, codes: np.ndarray) -> np.ndarray:
        """A deterministic gap per class (the bin's geometric centre), for partial decodes."""
        codes = np.asarray(codes, dtype=np.int64)
        centre = 10.0 ** ((codes - 0.5) / self.bins_per_decade)
        return np.where(codes == 0, 0, np.floor(centre)).astype(np.int64)

    def to_json(self) -> dict:
        return {"bins_per_decade": self.bins_per_decade, "decades": self.decades,
                "quantiles": {str(k): v for k, v in self.quantiles.items()}}

    @classmethod
    def from_json(cls, data: dict) -> DtEncoder:
        return cls(data["bins_per_decade"], data["decades"], data["quantiles"])

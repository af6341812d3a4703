"""Vocabulary encoders for the categorical channels `event`, `cpu` and `procname`.

Class 0 is "no value" (a NULL in the canonical table), class 1 is "a value not seen in
training"; the vocabulary learned from the training traces follows, most frequent first, so
that encoding then decoding a training trace is exact.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import numpy as np
import pandas as pd

NULL_CLASS = 0
UNKNOWN_CLASS = 1
N_RESERVED = 2


class CategoricalEncoder:
    """Values ↔ class ids, fitted on training columns. JSON-serialisable."""

    def __init__(self, name: str, values: list | None = None, kind: str = "str",
                 max_size: int = 4096, unknown_label=None):
        self.name = name
        self.kind = kind  # "str" or "int": how values are stored in JSON and returned
        self.max_size = max_size
        self.values = list(values or [])
        # What an unknown class decodes to: None (NULL) for nullable columns, a label otherwise.
        self.unknown_label = unknown_label
        self._index = pd.Index(self.values)

    @property
    def vocab_size(self) -> int:
        return N_RESERVED + len(self.values)

    def fit(self, columns: Iterable[np.ndarray]) -> CategoricalEncoder:
        counts: Counter = Counter()
        for col in columns:
            ser = pd.Series(col).dropna()
            counts.update(ser.value_counts().to_dict())
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0])))[: self.max_size]
        self.values = [int(v) if self.kind == "int" else str(v) for v, _ in ranked]
        self._index = pd.Index(self.values)
        return self

    def encode(self, column: np.ndarray) -> np.ndarray:
        """An object/float array with None/NaN for NULL → int64 class ids."""
        ser = pd.Series(column)
        null = ser.isna().to_numpy()
        if self.kind == "int":
            lookup = ser.fillna(-(2**62)).astype("int64")
        else:
            lookup = ser.astype(object)
        ids = self._index.get_indexer(lookup)
        codes = np.where(ids < 0, UNKNOWN_CLASS, ids + N_RESERVED).astype(np.int64)
        codes[null] = NULL_CLASS
        return codes

    def decode(self, codes: np.ndarray) -> np.ndarray:
        """Class ids → an object array of values (None for NULL)."""
        table = np.empty(self.vocab_size, dtype=object)
        table[NULL_CLASS] = None
        table[UNKNOWN_CLASS] = self.unknown_label
        table[N_RESERVED:] = self.values
        return table[np.asarray(codes, dtype=np.int64)]

    def to_json(self) -> dict:
        return {"name": self.name, "kind": self.kind, "max_size": self.max_size,
                "values": self.values, "unknown_label": self.unknown_label}

    @classmethod
    def from_json(cls, data: dict) -> CategoricalEncoder:
        return cls(data["name"], data["values"], data["kind"], data["max_size"], data.get("unknown_label"))

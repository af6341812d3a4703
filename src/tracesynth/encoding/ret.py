"""Syscall return values as classes that keep their meaning.

A return value is a file descriptor, a byte count, an address or an error, and the model should
learn which, not the raw number. Classes (fixed, not fitted, so every model shares them):

    NULL            no return value (every event that is not a syscall exit)
    0               success without a value
    1 .. 63         one class each: small non-negative numbers (file descriptors, counts)
    [2^k, 2^k+1)    k = 6..62: byte counts, sizes, addresses, in log2 buckets
    -1 .. -133      one class each: negative errno, named (-2 is -ENOENT)
    -134 .. -4095   other error codes
    < -4095         log2 buckets of the magnitude (rare: values that are not errors)

Decoding an exact class gives its value; a bucket draws from the training values that fell in
it (quantiles), or log-uniformly within the bucket when training had none.
"""

from __future__ import annotations

import errno
from collections.abc import Iterable

import numpy as np
import pandas as pd

NULL_CLASS = 0
ZERO_CLASS = 1
SMALL_MAX = 63
MAX_ERRNO = 133
FIRST_BUCKET_BIT = 6  # 64 = 2**6, just above the exact small values
LAST_BUCKET_BIT = 62

_SMALL0 = 2  # class of value 1
_POS_BUCKET0 = _SMALL0 + SMALL_MAX  # class of [64, 128)
_N_POS_BUCKETS = LAST_BUCKET_BIT - FIRST_BUCKET_BIT + 1
_ERRNO0 = _POS_BUCKET0 + _N_POS_BUCKETS  # class of -1
_OTHER_ERRNO = _ERRNO0 + MAX_ERRNO
_NEG_BUCKET0 = _OTHER_ERRNO + 1  # class of -(2**12 .. 2**13) etc.
_N_NEG_BUCKETS = 64 - 12
VOCAB_SIZE = _NEG_BUCKET0 + _N_NEG_BUCKETS
N_QUANTILES = 17


def class_label(code: int) -> str:
    """A readable name for a class, e.g. '0', '3', '[2^12,2^13)', '-ENOENT'."""
    if code == NULL_CLASS:
        return "NULL"
    if code == ZERO_CLASS:
        return "0"
    if code < _POS_BUCKET0:
        return str(code - _SMALL0 + 1)
    if code < _ERRNO0:
        k = code - _POS_BUCKET0 + FIRST_BUCKET_BIT
        return f"[2^{k},2^{k + 1})"
    if code < _OTHER_ERRNO:
        value = code - _ERRNO0 + 1
        return "-" + errno.errorcode.get(value, f"E{value}")
    if code == _OTHER_ERRNO:
        return "-E(134..4095)"
    k = code - _NEG_BUCKET0 + 12
    return f"-[2^{k},2^{k + 1})"


class RetEncoder:
    vocab_size = VOCAB_SIZE

    def __init__(self, quantiles: dict | None = None):
        self.quantiles: dict[int, list[int]] = {int(k): v for k, v in (quantiles or {}).items()}

    def encode(self, ret: np.ndarray) -> np.ndarray:
        """A float array (NaN = NULL) or object array of ints/None → class ids."""
        ser = pd.Series(ret)
        null = ser.isna().to_numpy()
        v = ser.fillna(0).to_numpy().astype(np.int64)
        codes = np.full(v.shape, ZERO_CLASS, dtype=np.int64)
        small = (v >= 1) & (v <= SMALL_MAX)
        codes[small] = v[small] - 1 + _SMALL0
        big = v > SMALL_MAX
        bits = np.floor(np.log2(np.maximum(v[big], 1).astype(np.float64))).astype(np.int64)
        codes[big] = _POS_BUCKET0 + np.clip(bits, FIRST_BUCKET_BIT, LAST_BUCKET_BIT) - FIRST_BUCKET_BIT
        err = (v <= -1) & (v >= -MAX_ERRNO)
        codes[err] = _ERRNO0 + (-v[err]) - 1
        codes[(v < -MAX_ERRNO) & (v >= -4095)] = _OTHER_ERRNO
        neg = v < -4095
        nbits = np.floor(np.log2(-(v[neg].astype(np.float64)))).astype(np.int64)
        codes[neg] = _NEG_BUCKET0 + np.clip(nbits, 12, 63) - 12
        codes[null] = NULL_CLASS
        return codes

    def fit(self, columns: Iterable[np.ndarray]) -> RetEncoder:
        parts = [pd.Series(c).dropna().to_numpy().astype(np.int64) for c in columns]
        allv = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        codes = self.encode(allv)
        self.quantiles = {}
        probs = np.linspace(0.0, 1.0, N_QUANTILES)
        for code in np.unique(codes):
            if self._exact_value(int(code)) is None:
                in_class = allv[codes == code]
                self.quantiles[int(code)] = np.unique(np.quantile(in_class, probs, method="nearest")).astype(int).tolist()
        return self

    @staticmethod
    def _exact_value(code: int) -> int | None:
        if code == ZERO_CLASS:
            return 0
        if _SMALL0 <= code < _POS_BUCKET0:
            return code - _SMALL0 + 1
        if _ERRNO0 <= code < _OTHER_ERRNO:
            return -(code - _ERRNO0 + 1)
        return None

    def _bounds(self, code: int) -> tuple[int, int]:
        if code < _ERRNO0:
            k = code - _POS_BUCKET0 + FIRST_BUCKET_BIT
            return 2**k, 2 ** (k + 1) - 1
        if code == _OTHER_ERRNO:
            return -4095, -MAX_ERRNO - 1
        k = code - _NEG_BUCKET0 + 12
        return -(2 ** (k + 1)) + 1, -(2**k)

    def value_table(self) -> np.ndarray:
        """A deterministic value per class (exact value or bucket median; NaN for NULL)."""
        table = np.full(VOCAB_SIZE, np.nan)
        for code in range(1, VOCAB_SIZE):
            exact = self._exact_value(code)
            if exact is not None:
                table[code] = exact
            elif code in self.quantiles:
                q = self.quantiles[code]
                table[code] = q[len(q) // 2]
            else:
                low, high = self._bounds(code)
                table[code] = low
        return table

    def decode(self, codes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Class ids → float64 values (NaN = NULL): exact, or drawn within the bucket."""
        codes = np.asarray(codes, dtype=np.int64)
        out = self.value_table()[codes]
        for code in np.unique(codes):
            code = int(code)
            if code == NULL_CLASS or self._exact_value(code) is not None:
                continue
            where = np.nonzero(codes == code)[0]
            samples = self.quantiles.get(code)
            if samples:
                out[where] = np.asarray(samples, dtype=np.float64)[rng.integers(0, len(samples), len(where))]
            else:
                low, high = self._bounds(code)
                low, high = max(low, -(2**63)), min(high, 2**63 - 2)  # int64 range
                out[where] = rng.integers(low, high + 1, len(where)).astype(np.float64)
        return out

    def to_json(self) -> dict:
        return {"quantiles": {str(k): v for k, v in self.quantiles.items()}}

    @classmethod
    def from_json(cls, data: dict) -> RetEncoder:
        return cls(data["quantiles"])

"""Turning traces into the integer arrays every metric works on, the same way for all of them.

One `Vocabulary` is built from the *real* traces (train + test) of a workload, so that real and
synthetic sequences are compared on the same token ids. A synthetic event name the real data
never had maps to `UNKNOWN` (id 0) and is counted, never silently dropped: the runner reports
the share as ``unknown_event_share`` and every metric sees those events as one extra class.

Everything here is vectorised numpy: the evaluation must handle 1M-event traces on 2 cores.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracesynth.errors import ConfigError, TraceFormatError
from tracesynth.schema import SYSCALL_ENTRY_PREFIX, SYSCALL_EXIT_PREFIX, Trace

UNKNOWN = 0
UNKNOWN_NAME = "<unknown>"

#: Odd multiplier of the polynomial k-gram hash (odd, so it is invertible modulo 2**64).
_HASH_BASE = np.uint64(0x9E3779B97F4A7C15)


@dataclass
class Vocabulary:
    """Event names → ids 1..V (0 is reserved for names the real traces never had)."""

    names: list[str]

    @classmethod
    def from_traces(cls, traces: Sequence[Trace]) -> Vocabulary:
        seen: set[str] = set()
        for trace in traces:
            seen.update(pc.unique(trace.column("event")).to_pylist())
        return cls([UNKNOWN_NAME, *sorted(seen)])

    def __len__(self) -> int:
        return len(self.names)

    def encode(self, trace: Trace) -> np.ndarray:
        """Token ids (int32) of the trace's events; unknown names become `UNKNOWN`."""
        if len(trace) == 0:
            return np.zeros(0, dtype=np.int32)
        index = pc.index_in(trace.column("event"), value_set=pa.array(self.names[1:]))
        return pc.fill_null(index, -1).to_numpy().astype(np.int32) + 1


@dataclass
class Encoded:
    """The channels of one trace as numpy arrays, aligned row by row."""

    tokens: np.ndarray  # int32 event ids
    log_dt: np.ndarray  # float64 log10(max(inter-event ns, 1)); first event gets 0
    tid: np.ndarray  # int64, -1 where null
    cpu: np.ndarray  # int64, -1 where null
    ts: np.ndarray  # int64 absolute ns

    def __len__(self) -> int:
        return len(self.tokens)

    def slice(self, start: int, stop: int) -> Encoded:
        """Events start..stop-1, every channel cut alike (views, no copies)."""
        return Encoded(self.tokens[start:stop], self.log_dt[start:stop], self.tid[start:stop],
                       self.cpu[start:stop], self.ts[start:stop])


def _int_column(trace: Trace, name: str) -> np.ndarray:
    return pc.fill_null(trace.column(name), -1).to_numpy().astype(np.int64)


def encode(trace: Trace, vocab: Vocabulary) -> Encoded:
    ts = trace.column("ts").to_numpy().astype(np.int64)
    dt = np.diff(ts, prepend=ts[:1]) if len(ts) else ts
    return Encoded(
        tokens=vocab.encode(trace),
        log_dt=np.log10(np.maximum(dt, 1).astype(np.float64)),
        tid=_int_column(trace, "tid"),
        cpu=_int_column(trace, "cpu"),
        ts=ts,
    )


def kgram_hashes(tokens: np.ndarray, k: int) -> np.ndarray:
    """64-bit polynomial hash of every length-`k` run of `tokens` (len(tokens)-k+1 values).

    Vectorised trick: prefix sums of tok[j]·B^j (wrapping modulo 2**64) give B^i·h(i) for the
    k-gram starting at i; multiplying by B^-i (B is odd, hence invertible) leaves h(i), which is
    the same value wherever that k-gram occurs. Collisions are ~n²/2**64: negligible.
    """
    n = len(tokens)
    if k <= 0:
        raise ValueError("k must be positive")
    if n < k:
        return np.zeros(0, dtype=np.uint64)
    return KGramHasher(tokens).at(np.arange(n - k + 1), k)


class KGramHasher:
    """`kgram_hashes(tokens, k)[starts]` for any k and starts from one O(n) pass over `tokens`
    (the prefix sums above), for callers that need several k-gram lengths of one sequence."""

    def __init__(self, tokens: np.ndarray):
        n = len(tokens)
        powers, self.inv_powers = _powers(n + 1)
        with np.errstate(over="ignore"):
            values = np.asarray(tokens).astype(np.uint64) + np.uint64(1)
            self.prefix = np.concatenate([np.zeros(1, np.uint64), np.cumsum(values * powers[:n], dtype=np.uint64)])

    def at(self, starts: np.ndarray, k: int) -> np.ndarray:
        """Hashes of the k-grams beginning at `starts` (each start + k <= len(tokens))."""
        with np.errstate(over="ignore"):
            return (self.prefix[starts + k] - self.prefix[starts]) * self.inv_powers[starts]


_POWERS: tuple[np.ndarray, np.ndarray] = (np.ones(1, np.uint64), np.ones(1, np.uint64))


def _powers(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(B^i, B^-i) for i < n, modulo 2**64: the same for every sequence, so kept and grown, not
    recomputed per hasher (the sampler builds one per prior call, thousands per trace)."""
    global _POWERS
    if len(_POWERS[0]) < n:
        size = max(n, 2 * len(_POWERS[0]))
        with np.errstate(over="ignore"):
            powers = np.cumprod(np.full(size, _HASH_BASE, dtype=np.uint64))
            inv = np.cumprod(np.full(size, np.uint64(_inverse_mod_2_64(int(_HASH_BASE))), dtype=np.uint64))
        _POWERS = (np.concatenate([np.ones(1, np.uint64), powers[:-1]]),
                   np.concatenate([np.ones(1, np.uint64), inv[:-1]]))
    return _POWERS[0][:n], _POWERS[1][:n]


def _inverse_mod_2_64(value: int) -> int:
    inverse = 1
    for _ in range(7):  # Newton iteration doubles the correct low bits each step
        inverse = (inverse * (2 - value * inverse)) % (1 << 64)
    return inverse


def in_sorted(values: np.ndarray, table: np.ndarray) -> np.ndarray:
    """`np.isin(values, table)` for a `table` already sorted ascending (duplicates allowed): one
    binary search per value. `np.isin` sorts both arrays on every call, which is what the
    sampler's per-round span and 8-gram checks against ~10^5 training hashes paid for (the copy
    guard's span check was 15% of a stream trace's sampling time)."""
    values = np.asarray(values)
    if not len(table) or not len(values):
        return np.zeros(len(values), dtype=bool)
    where = np.minimum(np.searchsorted(table, values), len(table) - 1)
    return table[where] == values


def require_sorted(table: np.ndarray, name: str) -> np.ndarray:
    """`table` if it is sorted ascending (what `in_sorted` needs), else a ValueError naming it:
    the hash tables are saved sorted, so an unsorted one is a damaged file, not a slow path."""
    if len(table) > 1 and bool((table[1:] < table[:-1]).any()):
        raise ValueError(f"{name} is not sorted ascending (damaged table)")
    return table


def hashes_of_many(sequences: Sequence[np.ndarray], k: int) -> np.ndarray:
    """k-gram hashes of several sequences, never spanning two of them."""
    parts = [kgram_hashes(s, k) for s in sequences]
    return np.concatenate(parts) if parts else np.zeros(0, np.uint64)


def window_starts(n: int, length: int, max_windows: int, rng: np.random.Generator,
                  stride: int | None = None) -> np.ndarray:
    """Start offsets of up to `max_windows` windows of `length` (stride `length` by default),
    a seeded random subset when there are more, in increasing order."""
    stride = stride or length
    if n < length:
        return np.zeros(0, dtype=np.int64)
    starts = np.arange(0, n - length + 1, stride, dtype=np.int64)
    if len(starts) > max_windows:
        starts = np.sort(rng.choice(starts, size=max_windows, replace=False))
    return starts


def contexts(values: np.ndarray, positions: np.ndarray, width: int, pad=-1) -> np.ndarray:
    """The `width` values before each position (left-padded with `pad` where the trace starts);
    int64 for integer channels, float64 otherwise."""
    dtype = np.float64 if np.issubdtype(values.dtype, np.floating) else np.int64
    padded = np.concatenate([np.full(width, pad, dtype=dtype), values.astype(dtype)])
    index = positions[:, None] + np.arange(width)[None, :]
    return padded[index]


def syscall_pairs(tokens: np.ndarray, tid: np.ndarray, cpu: np.ndarray, ts: np.ndarray,
                  vocab: Vocabulary) -> tuple[np.ndarray, np.ndarray]:
    """(entry positions, durations in ns) of syscalls whose entry and exit are both seen.

    An entry pairs with the next event of the matching exit name on the same thread (the same
    CPU when the trace has no thread ids), found with one stable sort instead of a Python loop.
    """
    names = vocab.names
    entry_of = np.full(len(names), -1, dtype=np.int64)  # token id of the exit matching an entry
    exit_ids = {n[len(SYSCALL_EXIT_PREFIX):]: i for i, n in enumerate(names) if n.startswith(SYSCALL_EXIT_PREFIX)}
    for i, name in enumerate(names):
        if name.startswith(SYSCALL_ENTRY_PREFIX):
            entry_of[i] = exit_ids.get(name[len(SYSCALL_ENTRY_PREFIX):], -1)
    is_entry = entry_of[tokens] >= 0
    is_exit = np.isin(tokens, list(exit_ids.values())) if exit_ids else np.zeros(len(tokens), bool)
    relevant = np.flatnonzero(is_entry | is_exit)
    if len(relevant) < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    owner = np.where(tid[relevant] >= 0, tid[relevant], -2 - cpu[relevant])
    order = np.lexsort((relevant, owner))
    rel = relevant[order]
    own = owner[order]
    first, second = rel[:-1], rel[1:]
    match = (own[:-1] == own[1:]) & is_entry[first] & (tokens[second] == entry_of[tokens[first]])
    entries = first[match]
    return entries, ts[second[match]] - ts[entries]


def require_nonempty(traces: Sequence[Trace], role: str) -> None:
    if not traces:
        raise ConfigError(f"evaluate: no {role} traces given")
    for t in traces:
        if len(t) == 0:
            raise ConfigError(f"evaluate: {role} trace {t.meta.source_path or '?'} has no events")


def trace_label(trace: Trace) -> str:
    """What names a trace in an error: its file, else the generator that wrote it."""
    return trace.meta.source_path or str(trace.meta.extra.get("generator") or "") or "<in-memory trace>"


def require_event_names(trace: Trace, role: str) -> None:
    """Refuse a trace with a null event name: no metric can place such an event (an unknown
    name still counts as `<unknown>`, but a missing one is a broken trace, not a guess)."""
    missing = trace.column("event").is_null()
    if pc.any(missing).as_py():
        row = int(pc.index(missing, True).as_py())
        raise TraceFormatError(trace_label(trace), f"row {row}",
                               f"{role} trace has a null event name ({pc.sum(missing).as_py()} rows); "
                               "fix or drop those rows before evaluating")


# --- exact repeats ------------------------------------------------------------------------------
REPEAT_RADIUS = 16   # `repeats`: an event's span is the 33 events centred on it
REPEAT_REACH = 512   # and counts as repeated when the same span starts this close again


def token_repeat_share(tokens: np.ndarray, radius: int = REPEAT_RADIUS, reach: int = REPEAT_REACH) -> float | None:
    """`repeat_share` of one sequence of event codes (any integer coding: only equality counts)."""
    covered, total = repeat_counts(np.asarray(tokens), radius, reach)
    return covered / total if total else None


def repeat_counts(tokens: np.ndarray, radius: int, reach: int) -> tuple[int, int]:
    """(events in a repeated span, events with a whole span) of one sequence."""
    h = kgram_hashes(tokens, 2 * radius + 1)
    if not len(h):
        return 0, 0
    order = np.argsort(h, kind="stable")  # stable: positions ascend within one span
    near = (h[order][1:] == h[order][:-1]) & (np.diff(order) <= reach)
    hit = np.zeros(len(h), dtype=bool)
    hit[order[1:][near]] = True   # an earlier copy close enough
    hit[order[:-1][near]] = True  # a later one
    return int(hit.sum()), len(h)

"""Thread ids as slots: the order in which threads first appear within a window.

A tid is an arbitrary number (4711 on one run is 5230 on the next), so the model sees only
"the first thread of this window, the second, ...": class 0 is "no thread known", classes
1..K are slots 0..K-1, class K+1 is "one more thread beyond K". What the model learns is the
interleaving pattern, which does carry over between runs.

Decoding turns slots back into realistic, consistent tids (`TidAllocator`): slots the window's
known prefix already fixed keep their threads; a new slot becomes the child of a pending
fork/clone (whose return value is that child's tid, as the kernel reports it) or a thread id
drawn from the training run's own threads, with the pid and name they had there.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

import numpy as np
import pandas as pd

NULL_CLASS = 0
FORK_EXITS = frozenset({"syscall_exit_clone", "syscall_exit_clone3", "syscall_exit_fork",
                        "syscall_exit_vfork"})


class TidEncoder:
    def __init__(self, slots: int = 64, pool: list | None = None, max_tid: int = 0):
        self.slots = slots
        # Training threads, most active first: [tid, pid or None, procname or None].
        self.pool = [list(p) for p in (pool or [])]
        self.max_tid = max_tid

    @property
    def vocab_size(self) -> int:
        return self.slots + 2

    @property
    def overflow_class(self) -> int:
        return self.slots + 1

    def fit(self, frames: Iterable[pd.DataFrame], pool_size: int = 4096) -> TidEncoder:
        """Learn the pool of realistic threads from frames with tid, pid, procname columns."""
        parts = [f[["tid", "pid", "procname"]].dropna(subset=["tid"]) for f in frames]
        rows = pd.concat(parts) if parts else pd.DataFrame(columns=["tid", "pid", "procname"])
        if len(rows):
            counts = rows.groupby("tid").size().sort_values(ascending=False, kind="stable")
            first = rows.groupby("tid").first()
            self.pool = [
                [int(t), None if pd.isna(first.at[t, "pid"]) else int(first.at[t, "pid"]),
                 None if pd.isna(first.at[t, "procname"]) else str(first.at[t, "procname"])]
                for t in counts.index[:pool_size]
            ]
            self.max_tid = int(rows["tid"].max())
        return self

    def slot_window(self, tids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Real tids (int64, -1 = unknown) → (slot classes, slot_tids: the real tid per slot,
        -1 for slots the window does not use)."""
        tids = np.asarray(tids, dtype=np.int64)
        codes = np.zeros(tids.shape, dtype=np.int64)
        slot_tids = np.full(self.slots, -1, dtype=np.int64)
        valid = tids >= 0
        if not valid.any():
            return codes, slot_tids
        uniq, first, inverse = np.unique(tids[valid], return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        codes[valid] = 1 + np.minimum(rank[inverse], self.slots)
        used = min(len(order), self.slots)
        slot_tids[:used] = uniq[order][:used]
        return codes, slot_tids

    def to_json(self) -> dict:
        return {"slots": self.slots, "pool": self.pool, "max_tid": self.max_tid}

    @classmethod
    def from_json(cls, data: dict) -> TidEncoder:
        return cls(data["slots"], data["pool"], data["max_tid"])


class TidAllocator:
    """Stateful slot → tid decoding across the windows of one generated trace."""

    def __init__(self, encoder: TidEncoder, rng: np.random.Generator):
        self.encoder = encoder
        self.rng = rng
        self.pool_tids = np.array([p[0] for p in encoder.pool], dtype=np.int64)
        weights = np.linspace(2.0, 1.0, len(self.pool_tids)) if len(self.pool_tids) else np.zeros(0)
        self.pool_weights = weights / weights.sum() if len(weights) else weights
        self.pid_of: dict[int, int | None] = {p[0]: p[1] for p in encoder.pool}
        self.name_of: dict[int, str | None] = {p[0]: p[2] for p in encoder.pool}
        self.next_fresh = max(encoder.max_tid, 1000) + 1
        self.seen: list[int] = []
        self.seen_set: set[int] = set()

    def _fresh(self) -> int:
        tid = self.next_fresh
        self.next_fresh += int(self.rng.integers(1, 4))
        return tid

    def _from_pool(self, taken: set[int]) -> int:
        if len(self.pool_tids):
            for _ in range(8):
                tid = int(self.rng.choice(self.pool_tids, p=self.pool_weights))
                if tid not in taken:
                    return tid
            free = [int(t) for t in self.pool_tids if int(t) not in taken]
            if free:
                return free[int(self.rng.integers(len(free)))]
        return self._fresh()

    def decode_window(self, slot_codes: np.ndarray, slot_tids: np.ndarray, events: np.ndarray,
                      rets: np.ndarray | None, start: int) -> np.ndarray:
        """Slot classes of a window → real tids (-1 = unknown) for positions [start:].

        `slot_tids` holds the tids the known prefix fixed (updated in place with new ones);
        `rets` (float, NaN = NULL) is updated in place so that a fork/clone exit in the
        parent returns the child's tid.
        """
        enc = self.encoder
        slot_codes = np.asarray(slot_codes, dtype=np.int64)
        n = len(slot_codes)
        out = np.full(n - start, -1, dtype=np.int64)
        is_slot = (slot_codes >= 1) & (slot_codes <= enc.slots)
        slot_index = np.where(is_slot, slot_codes - 1, 0)
        # Positions where a slot with no tid yet first appears, and parents' fork exits.
        positions = np.nonzero(is_slot[start:])[0] + start
        slots_here, first = np.unique(slot_index[positions], return_index=True)
        new_first = {int(s): int(positions[f]) for s, f in zip(slots_here, first) if slot_tids[s] < 0}
        forks = []
        if rets is not None:
            fork_mask = np.isin(events[start:], list(FORK_EXITS)) & (np.nan_to_num(rets[start:], nan=0) > 0)
            forks = (np.nonzero(fork_mask)[0] + start).tolist()
        marks = sorted([(p, 0, s) for s, p in new_first.items()] + [(p, 1, -1) for p in forks])
        taken = {int(t) for t in slot_tids if t >= 0}
        pending: deque[tuple[int, int | None]] = deque()
        for pos, kind, s in marks:
            if kind == 1:
                child = self._fresh()
                rets[pos] = child
                parent = slot_tids[slot_index[pos]] if is_slot[pos] and slot_tids[slot_index[pos]] >= 0 else -1
                # clone usually makes a thread (same process); fork and vfork make a process.
                same_process = events[pos] in ("syscall_exit_clone", "syscall_exit_clone3") and parent >= 0
                pending.append((child, self.pid(int(parent)) if same_process else None))
            else:
                if pending:
                    tid, pid = pending.popleft()
                    self.pid_of[tid] = pid if pid is not None else tid
                else:
                    tid = self._from_pool(taken)
                slot_tids[s] = tid
                taken.add(tid)
        tids_full = np.where(is_slot, slot_tids[slot_index], -1)
        out[:] = tids_full[start:]
        overflow = np.nonzero(slot_codes[start:] == enc.overflow_class)[0]
        if len(overflow):
            candidates = [t for t in self.seen if t not in taken] or self.pool_tids.tolist() or [self._fresh()]
            out[overflow] = np.asarray(candidates, dtype=np.int64)[self.rng.integers(0, len(candidates), len(overflow))]
        for t in np.unique(out[out >= 0]).tolist():
            if t not in self.seen_set:
                self.seen_set.add(t)
                self.seen.append(t)
        return out

    def pid(self, tid: int) -> int | None:
        if tid < 0:
            return None
        pid = self.pid_of.get(tid)
        return tid if pid is None else pid

"""Syscalls that the training runs make one at a time: what a trace without thread ids can
still be checked against.

A `light` model has no thread channel, so on a workload whose syscalls come from several threads
the syscall-pairing rule cannot tell whose exit closes whose entry, and nothing guides sampling
(stream writes exits with no entry; pybench's child start-ups leave entries open: `>pread64
>getuid >lseek`). Yet most syscalls of such runs are still made one at a time: projected onto
all their syscalls but `poll` and `execve` (the parent polls while a child starts), every
bundled pybench run reads `>a <a >b <b ...` for 64,500 syscall events, whichever process makes
them; stream's runs do for 13 syscalls (`write` among them, not `futex`, on which its threads
wait together). Those syscalls behave as one virtual thread, and a guide can hold a generated
trace to that (`constraints.guidance.ConstraintGuide(serial=...)`): an entry is followed by its
own exit before any other of them.

The set is found greedily: begin with every syscall that has at least `MIN_CALLS` entries and
as many exits across the training runs (a call seen once or twice fits by chance; calls that do
not return, exit and exit_group, have no exits and never qualify); while some run's projection
breaks (two entries in a row, two exits, an exit of another call), drop the syscall involved in
the most breaks (ties: the first by name). A run may begin with the exit of a call entered
before recording began.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from tracesynth.schema import SYSCALL_ENTRY_PREFIX, SYSCALL_EXIT_PREFIX

#: Entries (and exits) a syscall needs across the training runs before it can join the set.
MIN_CALLS = 4


def _calls(events: np.ndarray) -> pd.DataFrame:
    """One row per syscall event, in order: its syscall name and kind (1 entry, 2 exit)."""
    names = pd.Series(np.asarray(events, dtype=object)).dropna().astype(str)
    entry = names.str.startswith(SYSCALL_ENTRY_PREFIX)
    exit_ = names.str.startswith(SYSCALL_EXIT_PREFIX)
    names = names[entry | exit_]
    entry = entry[entry | exit_].to_numpy()
    syscall = np.where(entry, names.str.slice(len(SYSCALL_ENTRY_PREFIX)),
                       names.str.slice(len(SYSCALL_EXIT_PREFIX)))
    return pd.DataFrame({"syscall": syscall, "kind": np.where(entry, 1, 2)})


def _breaks(syscall: np.ndarray, kind: np.ndarray) -> np.ndarray:
    """Rows of a projection that break one-at-a-time order given the row before: the same kind
    twice, or an exit of another call than the one entered."""
    out = np.zeros(len(kind), bool)
    if len(kind) > 1:
        out[1:] = (kind[1:] == kind[:-1]) | ((kind[1:] == 2) & (syscall[1:] != syscall[:-1]))
    return out


def serial_syscalls(runs: Iterable[Sequence[str] | np.ndarray]) -> list[str]:
    """The syscall names (without prefix) every run makes one at a time, together, sorted."""
    calls = [_calls(np.asarray(events, dtype=object)) for events in runs]
    counts = Counter()
    for c in calls:
        counts.update(zip(c["syscall"], c["kind"]))
    chosen = {name for (name, kind), n in counts.items()
              if kind == 1 and n >= MIN_CALLS and counts[(name, 2)] >= MIN_CALLS}
    while chosen:
        involved = Counter()
        for c in calls:
            c = c[c["syscall"].isin(chosen)]
            syscall, kind = c["syscall"].to_numpy(), c["kind"].to_numpy()
            rows = np.flatnonzero(_breaks(syscall, kind))
            involved.update(syscall[rows])
            involved.update(syscall[rows - 1])
        if not involved:
            break
        chosen.discard(min(involved, key=lambda name: (-involved[name], name)))
    return sorted(chosen)


def overlaps(events: Sequence[str] | np.ndarray, names: Iterable[str]) -> tuple[int, int]:
    """(events of the `names` syscalls that break one-at-a-time order — an entry while one of
    them is pending, an exit of another call or with none pending —, their events in all)."""
    calls = _calls(np.asarray(events, dtype=object))
    calls = calls[calls["syscall"].isin(set(names))]
    return int(_breaks(calls["syscall"].to_numpy(), calls["kind"].to_numpy()).sum()), len(calls)

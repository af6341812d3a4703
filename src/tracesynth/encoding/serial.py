"""Syscalls that never overlap in the training runs: what a trace without thread ids can still
be checked against.

A `light` model has no thread channel, so on a workload whose syscalls come from several threads
the syscall-pairing rule cannot tell whose exit closes whose entry, and nothing guides sampling
(stream writes exits with no entry; pybench's child start-ups leave entries open). Yet most
syscalls of such runs are still made one at a time: in every bundled pybench run 39 of its 41
syscalls alternate entry, exit, entry, exit in the global event order, whichever thread makes
them (stream: 22 of 24, among them `write`). For those, the projection of a trace onto one
syscall's events must alternate too, and a guide can hold a generated trace to it
(`constraints.guidance.ConstraintGuide(serial=...)`).

A syscall qualifies when every training run of the workload alternates it (no two entries and
no two exits in a row; a run may begin with the exit of a call entered before recording began),
and the runs together hold at least `MIN_CALLS` of its entries and as many exits: a call seen
once or twice alternates by chance. Calls that do not return (exit, exit_group) have no exits
and never qualify.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from tracesynth.schema import SYSCALL_ENTRY_PREFIX, SYSCALL_EXIT_PREFIX

#: Entries (and exits) a syscall needs across the training runs before its alternation counts.
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


def serial_syscalls(runs: Iterable[Sequence[str] | np.ndarray]) -> list[str]:
    """The syscall names (without prefix) that alternate entry/exit in every run, sorted."""
    broken: set[str] = set()
    entries: dict[str, int] = {}
    exits: dict[str, int] = {}
    for events in runs:
        calls = _calls(np.asarray(events, dtype=object))
        if calls.empty:
            continue
        broken.update(calls["syscall"].to_numpy()[_repeated(calls)])
        counts = calls.groupby(["syscall", "kind"]).size()
        for (name, kind), n in counts.items():
            (entries if kind == 1 else exits)[name] = (entries if kind == 1 else exits).get(name, 0) + int(n)
    return sorted(name for name in entries
                  if name not in broken and entries[name] >= MIN_CALLS and exits.get(name, 0) >= MIN_CALLS)


def overlaps(events: Sequence[str] | np.ndarray, names: Iterable[str]) -> tuple[int, int]:
    """(events of the `names` syscalls that repeat their previous event's kind — a second
    entry while one is pending, or an exit with none —, events of those syscalls in all)."""
    calls = _calls(np.asarray(events, dtype=object))
    calls = calls[calls["syscall"].isin(set(names))]
    return int(_repeated(calls).sum()), len(calls)


def _repeated(calls: pd.DataFrame) -> np.ndarray:
    """Rows whose kind equals the previous kind of the same syscall: two calls overlapped."""
    return (calls["kind"] == calls.groupby("syscall")["kind"].shift(1)).to_numpy()

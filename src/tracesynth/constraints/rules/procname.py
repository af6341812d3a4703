"""A thread's name changes only where the kernel changes it: at exec (the new program's
name), through prctl(PR_SET_NAME), or when a new thread starts (it inherits its parent's
name). Between those points every event of the thread carries one name.

The idle task (tid 0) is one per CPU with a different name each (swapper/N), so it is skipped.
"""

from __future__ import annotations

import json
import re
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracesynth.constraints import syscall_table as sc
from tracesynth.constraints.rules.base import Edit, Findings, Rule
from tracesynth.constraints.rules.cpu import observed_threads
from tracesynth.constraints.rules.syscalls import creation_markers
from tracesynth.constraints.view import ENTRY, TraceView, thread_keys

REASONS = {1: "process name changed without exec, prctl or a write to /proc/.../comm"}
_COMM_FILE = re.compile(r"^/proc/(self|thread-self|\d+)/(?:task/(\d+)/)?comm$")


def comm_file_opens(view: TraceView) -> tuple[np.ndarray, np.ndarray]:
    """(rows, renamed tids) of opens of /proc/<pid>[/task/<tid>]/comm: how
    pthread_setname_np renames another thread (the write follows the open)."""
    rows, tids = [], []
    for name in ("open", "openat"):
        for prefix in ("syscall_entry_", "compat_syscall_entry_"):
            code = view.code(prefix + name)
            if code < 0:
                continue
            candidates = np.flatnonzero(view.ev_code == code)
            texts = view.table.column("payload").take(pa.array(candidates))
            hit = pc.fill_null(pc.match_substring(texts, "comm"), False).to_numpy(zero_copy_only=False)
            matched = texts.filter(pa.array(hit)).to_pylist()
            for row, text in zip(candidates[hit].tolist(), matched):
                path = json.loads(text).get("filename") if text else None
                match = _COMM_FILE.match(path) if isinstance(path, str) else None
                if not match:
                    continue
                who, task = match.groups()
                if task is not None:
                    tid = int(task)
                elif who == "thread-self":
                    tid = int(view.tid[row])
                elif who == "self":
                    tid = int(view.pid[row]) if view.pid[row] >= 0 else int(view.tid[row])
                else:
                    tid = int(who)
                rows.append(row), tids.append(tid)
    return np.array(rows, np.int64), np.array(tids, np.int64)


def _two_name_targets(names: np.ndarray) -> np.ndarray:
    """Per position, the name it should carry so the sequence is `a...a b...b` with the
    fewest relabels (a = the first name, b = the last)."""
    first, last = names[0], names[-1]
    # Cost of splitting before position k: mismatches with `first` before k + with `last` from k.
    miss_first = np.concatenate([[0], np.cumsum(names != first)])
    miss_last = np.concatenate([np.cumsum((names != last)[::-1])[::-1], [0]])
    k = int(np.argmin(miss_first + miss_last))
    out = np.full(len(names), last)
    out[:k] = first
    return out


class ProcessName(Rule):
    name = "procname"
    explanation = "a thread's name changes only at exec, prctl(PR_SET_NAME) or thread creation"
    channels = ("event", "tid", "procname")

    def unmet_precondition(self, view):
        if not (view.kind > 0).any():
            return "trace records no syscalls, so renames (prctl, /proc/.../comm) are invisible"
        return None

    def segments(self, view: TraceView):
        def compute():
            # Threads seen only through switches/wakeups may live outside a scoped recording,
            # where their renames are invisible.
            rows = np.flatnonzero((view.tid > 0) & (view.proc_code >= 0)
                                  & np.isin(view.tid, observed_threads(view)))
            m_rows, m_tids = [], []
            c_rows, c_tids = creation_markers(view)
            m_rows.append(c_rows), m_tids.append(c_tids)
            ex_rows, ex_new, ex_old = view.exec_tids()
            m_rows += [ex_rows, ex_rows]
            m_tids += [ex_new, ex_old]
            calls = view.syscall_rows(sc.EXEC | sc.RENAMING)
            calls = calls[(view.kind[calls] == ENTRY) & (view.tid[calls] >= 0)]
            m_rows.append(calls), m_tids.append(view.tid[calls])
            r, t = comm_file_opens(view)
            m_rows.append(r), m_tids.append(t)
            m_rows, m_tids = np.concatenate(m_rows), np.concatenate(m_tids)
            stride = 2 * (view.n + 1)
            keys = thread_keys(np.concatenate([view.tid[rows], m_tids]),
                               np.concatenate([2 * rows + 1, 2 * m_rows]), stride)
            is_marker = np.concatenate([np.zeros(len(rows), bool), np.ones(len(m_rows), bool)])
            order = np.argsort(keys)
            keys, is_marker = keys[order], is_marker[order]
            thread = keys // stride
            new_thread = np.ones(len(keys), bool)
            new_thread[1:] = thread[1:] != thread[:-1]
            starts = is_marker | new_thread
            segment = np.cumsum(starts)
            # Segments opened by a marker may change name once (the reader, or ftrace's
            # comm cache, shows the new name a little after the kernel set it).
            allowed = np.zeros(segment[-1] + 1 if len(segment) else 1, np.int64)
            allowed[segment[starts]] = is_marker[starts]
            event_rows = (keys[~is_marker] % stride) // 2
            seg = segment[~is_marker]
            return event_rows, seg, allowed[seg]

        return view.memo("procname-segments", compute)

    def find(self, view: TraceView) -> Findings:
        rows, segment, allowed = self.segments(view)
        names = view.proc_code[rows]
        changed = np.zeros(len(rows), bool)
        changed[1:] = (segment[1:] == segment[:-1]) & (names[1:] != names[:-1])
        # Rank of each change within its segment (1 = first change).
        total = np.cumsum(changed)
        seg_start = np.searchsorted(segment, segment, "left")
        rank = total - np.where(seg_start > 0, total[np.maximum(seg_start - 1, 0)], 0)
        return Findings.of([(rows[changed & (rank > allowed)], 1)], REASONS)

    def fix(self, view: TraceView, found: Findings) -> list[Edit]:
        """Within each segment that shows a change, relabel the rows that differ from the
        segment's most common name (the fewest relabels that make it constant)."""
        rows, segment, allowed = self.segments(view)
        names = view.proc_code[rows]
        position = np.empty(view.n, np.int64)
        position[rows] = np.arange(len(rows))
        bad_segments = np.unique(segment[position[found.rows]])
        edits = []
        for seg in bad_segments.tolist():
            members = np.arange(np.searchsorted(segment, seg, "left"), np.searchsorted(segment, seg, "right"))
            if allowed[members[0]]:
                # One change allowed: keep the longest prefix/suffix split that needs the
                # fewest relabels (old name up to the change, new name after it).
                targets = _two_name_targets(names[members])
            else:
                counts = Counter(names[members].tolist())
                best = max(counts, key=lambda c: (counts[c], -c))
                targets = np.full(len(members), best)
            for i, best in zip(members.tolist(), targets.tolist()):
                if names[i] == best:
                    continue
                row = int(rows[i])
                edits.append(Edit("set", row, self.name, {"procname": view.proc_names[names[i]]},
                                  {"procname": view.proc_names[best]}))
        return edits

"""File-descriptor lifecycle, where descriptors are visible (return values of open/socket/
dup..., `fd` fields of syscall entries): a successful call cannot use or close a descriptor
that is closed, `open` cannot return a descriptor that is already open, and `close` cannot
fail with EBADF on an open one.

The state is per process (threads share the table). Descriptors open when tracing started are
unknown, never violations. The walk continues as if each violation were repaired (the repair's value), so one missing
close does not flag every later open, and one repair pass fixes them all.

Calls that may install descriptors invisibly (pipe, socketpair,
SCM_RIGHTS via recvmsg, ioctl, fcntl...) make closed descriptors unknown again, exec resets
the table (close-on-exec), and a check is skipped whenever another descriptor-changing call
of the process overlaps the call (threads race legitimately).
"""

from __future__ import annotations

import numpy as np

from tracesynth.constraints import syscall_table as sc
from tracesynth.constraints.rules.base import Edit, Findings, Rule
from tracesynth.constraints.rules.syscalls import pairing
from tracesynth.constraints.view import ENTRY, EXIT, TraceView

OPEN, CLOSED = 1, 2
USE_CLOSED, OPEN_TWICE, CLOSE_EBADF, CLOSE_CLOSED = 1, 2, 3, 4
REASONS = {
    USE_CLOSED: "successful call on a descriptor that is closed",
    OPEN_TWICE: "call returned a descriptor that is already open",
    CLOSE_EBADF: "close failed with EBADF on a descriptor that is open",
    CLOSE_CLOSED: "close succeeded on a descriptor that is not open",
}
C_CREATE, C_REPLACE, C_CLOSE, C_USE, C_OPAQUE, C_EXEC = 1, 2, 3, 4, 5, 6
_FD_SPACE = 1 << 32
_CHANGING = frozenset({C_CREATE, C_REPLACE, C_CLOSE, C_OPAQUE, C_EXEC})


def _category(name: str) -> int:
    if name in sc.FD_CREATING:
        return C_CREATE
    if name in sc.FD_REPLACING:
        return C_REPLACE
    if name in sc.FD_CLOSING:
        return C_CLOSE
    if name in sc.EXEC:
        return C_EXEC
    if name in sc.FD_OPAQUE:
        return C_OPAQUE
    if name in sc.FD_USE_FIELDS:
        return C_USE
    return 0


class FdLifecycle(Rule):
    name = "fd-lifecycle"
    explanation = "no successful use or close of a closed descriptor; open never returns an open one"
    channels = ("event", "pid", "ret", "payload")

    def unmet_precondition(self, view):
        if not len(view.syscall_rows(sc.FD_CREATING | sc.FD_CLOSING)):
            return "trace has no descriptor-creating or closing syscalls"
        return None

    def _fds(self, view: TraceView, name: str, fields: tuple[str, ...]) -> list[tuple[np.ndarray, np.ndarray]]:
        entries = (f"syscall_entry_{name}", f"compat_syscall_entry_{name}", f"sys_enter_{name}")
        return [view.field(entries, f) for f in fields]

    def analyse(self, view: TraceView):
        def compute():
            cats = np.array([_category(s) for s in view.syscall_names] + [0], np.int8)
            row_cat = cats[view.scid]
            rows = np.flatnonzero((row_cat > 0) & (view.pid >= 0) & (view.tid >= 0))
            entry_of = pairing(view)["entry_of"]
            kind, pid_col, ret, ret_valid = view.kind, view.pid, view.ret, view.ret_valid
            # Descriptor arguments per entry row: up to two fds, -1 when none.
            fd_a = np.full(view.n, -1, np.int64)
            fd_b = np.full(view.n, -1, np.int64)
            for name in view.syscall_names:
                cat = _category(name)
                fields = ("fd",) if cat == C_CLOSE else sc.FD_USE_FIELDS.get(name, ())
                for k, (values, ok) in enumerate(self._fds(view, name, fields)[:2]):
                    target = fd_a if k == 0 else fd_b
                    sel = ok & (values >= 0)
                    target[sel] = values[sel]
            # Uses of descriptors that no create/close of the process ever names cannot break
            # the rule: leave them out of the Python walk (most reads and writes).
            is_use = row_cat[rows] == C_USE
            if is_use.any():
                closes = rows[(row_cat[rows] == C_CLOSE) & (kind[rows] == ENTRY)]
                creates = rows[np.isin(row_cat[rows], (C_CREATE, C_REPLACE)) & (kind[rows] == EXIT)
                               & view.ret_valid[rows] & (view.ret[rows] >= 0)]
                named = np.concatenate([view.pid[closes] * _FD_SPACE + fd_a[closes],
                                        view.pid[creates] * _FD_SPACE + view.ret[creates]])
                use_rows = rows[is_use]
                source = np.where(kind[use_rows] == ENTRY, use_rows, entry_of[use_rows])
                has_source = source >= 0
                source = np.where(has_source, source, 0)
                pid_u = view.pid[use_rows]
                touched = has_source & (
                    ((fd_a[source] >= 0) & np.isin(pid_u * _FD_SPACE + fd_a[source], named))
                    | ((fd_b[source] >= 0) & np.isin(pid_u * _FD_SPACE + fd_b[source], named)))
                keep = np.ones(len(rows), bool)
                keep[np.flatnonzero(is_use)[~touched]] = False
                rows = rows[keep]
            found_rows, found_codes, fixes = [], [], []
            state: dict[int, dict[int, int]] = {}
            inflight: dict[int, int] = {}
            epoch: dict[int, int] = {}
            snap: dict[int, tuple] = {}
            # Per walked row, as Python lists (numpy scalar indexing in the loop is slow): its
            # own descriptor arguments (entries) and its entry's (exits).
            entries = entry_of[rows]
            source = np.where(kind[rows] == ENTRY, rows, np.maximum(entries, 0))
            columns = zip(rows.tolist(), row_cat[rows].tolist(), kind[rows].tolist(),
                          pid_col[rows].tolist(), entries.tolist(), fd_a[source].tolist(),
                          fd_b[source].tolist(), ret_valid[rows].tolist(), ret[rows].tolist())
            for r, cat, k, pid, e, fa, fb, has_ret, value in columns:
                table = state.setdefault(pid, {})
                changing = cat in _CHANGING
                if k == ENTRY:
                    busy = inflight.get(pid, 0)
                    snap[r] = (busy, epoch.get(pid, 0), table.get(fa), table.get(fb))
                    if changing:
                        inflight[pid] = busy + 1
                    continue
                entry_snap = snap.pop(e, None) if e >= 0 else None
                if changing and e >= 0:
                    inflight[pid] = max(inflight.get(pid, 1) - 1, 0)
                quiet = (entry_snap is not None and entry_snap[0] == 0
                         and entry_snap[1] == epoch.get(pid, 0) and inflight.get(pid, 0) == 0)
                if not has_ret:
                    continue
                if cat == C_CREATE or cat == C_REPLACE:
                    if value >= 0:
                        if cat == C_CREATE and quiet and table.get(value) == OPEN:
                            found_rows.append(r), found_codes.append(OPEN_TWICE)
                            closed = [fd for fd, st in table.items() if st == CLOSED]
                            value = min(closed) if closed else max(table) + 1
                            fixes.append(value)  # and walk on as if repaired
                        table[value] = OPEN
                elif cat == C_CLOSE and (e < 0 or fa < 0):
                    # A close of a descriptor we cannot see: any open one may be gone.
                    for fd in [fd for fd, st in table.items() if st == OPEN]:
                        del table[fd]
                elif cat == C_CLOSE:
                    fd = fa
                    if quiet and value == sc.EBADF and entry_snap[2] == OPEN:
                        found_rows.append(r), found_codes.append(CLOSE_EBADF), fixes.append(0)
                    elif quiet and value != sc.EBADF and entry_snap[2] == CLOSED:
                        found_rows.append(r), found_codes.append(CLOSE_CLOSED), fixes.append(sc.EBADF)
                    table[fd] = CLOSED
                elif cat == C_USE and value >= 0 and e >= 0:
                    closed = entry_snap is not None and CLOSED in (entry_snap[2], entry_snap[3])
                    if quiet and closed:
                        found_rows.append(r), found_codes.append(USE_CLOSED), fixes.append(sc.EBADF)
                        continue  # repaired to EBADF: the state stays as it was
                    if fa >= 0:
                        table[fa] = OPEN
                    if fb >= 0:
                        table[fb] = OPEN
                elif cat == C_OPAQUE:
                    for fd in [fd for fd, s in table.items() if s == CLOSED]:
                        del table[fd]
                elif cat == C_EXEC and value == 0:
                    table.clear()
                if changing:
                    epoch[pid] = epoch.get(pid, 0) + 1
            return (np.array(found_rows, np.int64), np.array(found_codes, np.int8),
                    np.array(fixes, np.int64))

        return view.memo("fds", compute)

    def find(self, view: TraceView) -> Findings:
        rows, codes, _ = self.analyse(view)
        order = np.argsort(rows, kind="stable")
        return Findings(rows[order], codes[order], REASONS)

    def fix(self, view: TraceView, found: Findings) -> list[Edit]:
        rows, _, values = self.analyse(view)
        want = dict(zip(rows.tolist(), values.tolist()))
        return [Edit("set", r, self.name, {"ret": int(view.ret[r])}, {"ret": want[r]})
                for r in found.rows.tolist() if r in want]


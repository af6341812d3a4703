"""Return-value domain per syscall (see syscall_table): errors are -1..-4095, descriptors are
small and non-negative, `close` returns 0, `read`/`write` return at most the requested count,
`mmap` returns a page-aligned address, `exit_group` never returns."""

from __future__ import annotations

import numpy as np

from tracesynth.constraints import syscall_table as sc
from tracesynth.constraints.rules.base import Edit, Findings, Rule
from tracesynth.constraints.rules.syscalls import pairing
from tracesynth.constraints.view import EXIT, TraceView

REASONS = {sc.NONNEG: "negative return value that is not an errno",
           sc.ZERO: "call that returns 0 on success returned another value",
           sc.FD: "descriptor-returning call returned a value that is not a small descriptor",
           sc.COUNT: "returned more than the requested count (or a non-errno negative)",
           sc.ADDR: "returned a value that is not a page-aligned user address",
           sc.NORETURN: "exit of a syscall that never returns (exit, exit_group)",
           sc.ERRONLY: "call that only returns when interrupted returned success"}


def ret_ok(cls: np.ndarray, ret: np.ndarray, count: np.ndarray | None = None) -> np.ndarray:
    """Vectorized domain test. `count` (or None): the bounding argument, -1 when unknown."""
    err = (ret >= sc.MIN_ERRNO_RET) & (ret <= -1)
    nonneg = ret >= 0
    ok = ret >= sc.MIN_ERRNO_RET  # NONNEG, and the default
    ok = np.where(cls == sc.ZERO, (ret == 0) | err, ok)
    ok = np.where(cls == sc.FD, (nonneg & (ret < sc.FD_LIMIT)) | err, ok)
    bound = nonneg if count is None else nonneg & ((count < 0) | (ret <= count))
    ok = np.where(cls == sc.COUNT, bound | err, ok)
    # A 32-bit kernel's `long` ret shows addresses above 2 GiB sign-extended (negative).
    addr = (nonneg & (ret < sc.ADDR_LIMIT)) | ((ret >= -(1 << 31)) & (ret < sc.MIN_ERRNO_RET))
    ok = np.where(cls == sc.ADDR, (addr & (ret % sc.PAGE == 0)) | err, ok)
    ok = np.where(cls == sc.ANY, True, ok)
    ok = np.where(cls == sc.NORETURN, False, ok)
    ok = np.where(cls == sc.ERRONLY, err, ok)
    return ok


def nearest_ret(cls: int, ret: int, count: int) -> int:
    """A valid value close to `ret` for a syscall of domain `cls` (repair's choice)."""
    if cls == sc.ERRONLY:
        return sc.EINTR
    if ret < 0:
        return sc.EINVAL
    if cls == sc.ZERO:
        return 0
    if cls == sc.FD:
        return 3
    if cls == sc.COUNT and count >= 0:
        return min(ret, count)
    if cls == sc.ADDR:
        aligned = ret - ret % sc.PAGE
        return aligned if 0 <= aligned < sc.ADDR_LIMIT else sc.default_ret("mmap")
    return max(ret, 0)


def exit_domains(view: TraceView):
    """(exit rows with a ret, their domain class, their count bound or -1, their entry row)."""

    def compute():
        rows = np.flatnonzero((view.kind == EXIT) & view.ret_valid)
        dom = np.array([sc.domain_of(s) for s in view.syscall_names] + [sc.NONNEG], np.int8)
        scid = view.scid[rows].copy()
        entry = pairing(view)["entry_of"][rows] if view.has_tid else np.full(len(rows), -1)
        generic = view.scid_generic[scid]
        if generic.any():
            known = generic & (entry >= 0)
            scid[known] = view.scid[entry[known]]
            scid[generic & ~known] = -1
        cls = dom[scid]
        count = np.full(len(rows), -1, np.int64)
        for name, fieldname in sc.COUNT_FIELD.items():
            if name not in view.syscall_names:
                continue
            entries = (f"syscall_entry_{name}", f"compat_syscall_entry_{name}", f"sys_enter_{name}")
            values, valid = view.field(entries, fieldname)
            if not valid.any():
                continue
            mine = (scid == view.syscall_names.index(name)) & (entry >= 0)
            has = np.zeros(len(rows), bool)
            has[mine] = valid[entry[mine]]
            count[has] = values[entry[has]]
        return rows, cls, count, entry

    return view.memo("exit-domains", compute)


class ReturnValueDomain(Rule):
    name = "return-values"
    explanation = "each syscall's return value lies in its domain (errno, descriptor, count, address...)"
    channels = ("event", "ret")

    def unmet_precondition(self, view):
        if not (view.kind == EXIT).any():
            return "trace has no syscall exits"
        return None

    def find(self, view: TraceView) -> Findings:
        rows, cls, count, _ = exit_domains(view)
        bad = ~ret_ok(cls, view.ret[rows], count)
        codes = cls[bad].astype(np.int8)
        order = np.argsort(rows[bad], kind="stable")
        return Findings(rows[bad][order], codes[order], REASONS)

    def fix(self, view: TraceView, found: Findings) -> list[Edit]:
        rows, cls, count, _ = exit_domains(view)
        where = np.searchsorted(rows, found.rows)
        edits = []
        for row, i in zip(found.rows.tolist(), where.tolist()):
            c = int(cls[i])
            if c == sc.NORETURN:
                edits.append(Edit("drop", row, self.name, view.row_info(row)))
                continue
            old = int(view.ret[row])
            edits.append(Edit("set", row, self.name, {"ret": old},
                              {"ret": nearest_ret(c, old, int(count[i]))}))
        return edits


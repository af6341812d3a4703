"""The rule registry: every kernel-semantics rule, in repair order (timestamps first, because
every other rule reads the order of events; CPU placement before thread lifecycle, which
decides which events a thread may have; pairing before return values, which read the pairs).
"""

from __future__ import annotations

from tracesynth.constraints.rules.base import Edit, Findings, Rule
from tracesynth.constraints.rules.cpu import CpuSwitch, ThreadMigration
from tracesynth.constraints.rules.fds import FdLifecycle
from tracesynth.constraints.rules.lifecycle import ThreadLifecycle
from tracesynth.constraints.rules.procname import ProcessName
from tracesynth.constraints.rules.retvals import ReturnValueDomain
from tracesynth.constraints.rules.syscalls import SyscallPairing
from tracesynth.constraints.rules.timestamps import TimestampsGlobal, TimestampsPerCpu
from tracesynth.errors import ConfigError

RULE_CLASSES: tuple[type[Rule], ...] = (
    TimestampsGlobal, TimestampsPerCpu, ThreadMigration, CpuSwitch, ThreadLifecycle,
    SyscallPairing, ReturnValueDomain, ProcessName, FdLifecycle,
)


def all_rules() -> list[Rule]:
    return [cls() for cls in RULE_CLASSES]


def select_rules(names=None) -> list[Rule]:
    """The rules named in `names` (a list or a comma-separated string), in registry order."""
    rules = all_rules()
    if names is None:
        return rules
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    known = {r.name for r in rules}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ConfigError(f"unknown rule(s) {', '.join(unknown)}; choose from: {', '.join(sorted(known))}")
    return [r for r in rules if r.name in set(names)]


__all__ = ["Edit", "Findings", "RULE_CLASSES", "Rule", "all_rules", "select_rules"]

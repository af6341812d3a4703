"""Kernel-semantics constraints: check a trace, repair it with few edits, guide sampling.

    report = tracesynth.constraints.check(trace)          # per-rule ok / violated / n/a
    fixed, edits = tracesynth.constraints.repair(trace)   # fixed checks clean
    guide = ConstraintGuide()                             # the sampler's hook
    guide.violating_positions(partial_window)

Rules live in `rules/` (one module per family); see docs/constraints.md.
"""

from __future__ import annotations

from tracesynth.constraints.checker import CheckReport, RuleResult, check
from tracesynth.constraints.guidance import ConstraintGuide
from tracesynth.constraints.repair import repair
from tracesynth.constraints.rules import all_rules, select_rules

__all__ = ["CheckReport", "ConstraintGuide", "RuleResult", "all_rules", "check", "repair", "select_rules"]

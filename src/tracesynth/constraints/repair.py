"""`repair(trace)`: the fewest edits we can find that make a trace check clean.

Rules are applied in registry order; each proposes edits for its own violations (insert a
missing syscall entry/exit, drop an orphan, bring a return value into its domain, relabel a
process name, move an event to its thread's CPU, raise a timestamp that went backwards...).
After a rule's edits the trace is re-read, because one rule's fix can expose another's
violation; rounds repeat until no rule finds anything. If that does not converge, the rows that
still violate are dropped (the last resort, logged like every other edit).

Every edit is logged with the original row number, so the log reads against the input.
Repair of a clean trace makes no edits, hence repair is idempotent.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracesynth.constraints.checker import single_threaded, violating_rows
from tracesynth.constraints.rules import Edit, select_rules
from tracesynth.constraints.view import TraceView
from tracesynth.schema import SCHEMA, Trace

MAX_ROUNDS = 8
#: Fix-then-drop cycles before repair only drops (see `repair`).
LAST_RESORT_CYCLES = 4


def apply_edits(table: pa.Table, origin: np.ndarray, edits: list[Edit]) -> tuple[pa.Table, np.ndarray]:
    """Apply edits given in current-row coordinates; returns the new table and, per new row,
    its original row number (-1 for inserted rows)."""
    n = table.num_rows
    dropped = np.zeros(n, bool)
    sets: dict[str, dict[int, object]] = defaultdict(dict)
    inserts: list[tuple[int, dict]] = []
    for e in edits:
        if e.op == "drop":
            dropped[e.row] = True
        elif e.op == "set":
            for col, value in (e.after or {}).items():
                sets[col][e.row] = value
        elif e.op == "insert":
            inserts.append((e.row, e.after))
    columns = []
    for f in SCHEMA:
        col = table.column(f.name)
        changes = sets.get(f.name)
        if changes:
            rows = np.fromiter(changes.keys(), np.int64, len(changes))
            order = np.argsort(rows)
            mask = np.zeros(n, bool)
            mask[rows] = True
            new = [changes[r] for r in rows[order].tolist()]
            col = pc.replace_with_mask(col.combine_chunks(), pa.array(mask), pa.array(new, f.type))
        columns.append(col if isinstance(col, pa.ChunkedArray) else pa.chunked_array([col]))
    body = pa.Table.from_arrays(columns, schema=SCHEMA)
    keys = np.arange(n, dtype=np.int64) * 2 + 1
    keep = ~dropped
    if inserts:
        added = pa.Table.from_pylist([row for _, row in inserts], schema=SCHEMA)
        body = pa.concat_tables([body, added])
        keys = np.concatenate([keys, np.array([2 * r for r, _ in inserts], np.int64)])
        keep = np.concatenate([keep, np.ones(len(inserts), bool)])
        origin = np.concatenate([origin, np.full(len(inserts), -1, np.int64)])
    idx = np.flatnonzero(keep)
    idx = idx[np.argsort(keys[idx], kind="stable")]
    return body.take(pa.array(idx)), origin[idx]


def _logged(edit: Edit, origin: np.ndarray) -> dict:
    record = edit.to_dict()
    row = edit.row
    record["row"] = int(origin[row]) if row < len(origin) and origin[row] >= 0 else None
    return record


def repair(trace: Trace, rules=None, *, assume_single_thread: bool | None = None) -> tuple[Trace, list[dict]]:
    """Return (repaired trace, edit log). The log holds dicts: op, row (in the input), rule,
    before, after. The repaired trace checks clean against the same rules (and the same
    `assume_single_thread`, see `check`)."""
    assume_single_thread = single_threaded(trace, assume_single_thread)
    table = trace.events
    origin = np.arange(table.num_rows, dtype=np.int64)
    log: list[dict] = []
    selected = select_rules(rules)

    def view_of():
        return TraceView(table, origin, single_thread=assume_single_thread)

    def rule_rounds() -> bool:
        """Apply rule fixes until no rule finds anything; True when that happened."""
        nonlocal table, origin
        for _ in range(MAX_ROUNDS):
            changed = False
            view = view_of()
            for rule in selected:
                if rule.not_applicable(view):
                    continue
                found = rule.find(view)
                if not len(found):
                    continue
                edits = rule.fix(view, found) or [Edit("drop", int(r), rule.name, view.row_info(int(r)))
                                                 for r in found.rows]
                log.extend(_logged(e, origin) for e in edits)
                table, origin = apply_edits(table, origin, edits)
                view = view_of()
                changed = True
            if not changed:
                return True
        return False

    def drop_violations(rule_name: str) -> bool:
        """Drop every row a rule flags; False when nothing was flagged (the trace is clean)."""
        nonlocal table, origin
        view = view_of()
        rows = violating_rows(view, rules)
        if not len(rows):
            return False
        edits = [Edit("drop", int(r), rule_name, view.row_info(int(r))) for r in rows]
        log.extend(_logged(e, origin) for e in edits)
        table, origin = apply_edits(table, origin, edits)
        return True

    # Last resort when fixes keep exposing new violations: drop the violating rows, then let
    # the rules fix what the drops broke; in practice one or two cycles suffice. A fix can
    # keep re-creating what a drop removed (e.g. a switch inserted, dropped, inserted again on
    # a trace with no coherent scheduling at all), so after LAST_RESORT_CYCLES only drops are
    # made: each round removes at least one row, so this ends (an empty trace is clean).
    for _ in range(LAST_RESORT_CYCLES):
        if rule_rounds() or not drop_violations("last-resort"):
            break
    else:
        while drop_violations("last-resort-drop-only"):
            pass
    meta = dataclasses.replace(trace.meta, extra=dict(trace.meta.extra))  # the input's stays untouched
    return Trace(table, meta), log

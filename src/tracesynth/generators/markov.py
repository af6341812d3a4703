"""`Markov`: the short-memory reference generator (an order-K chain over event names).

What it learns, per workload:
- event names: counts of (previous K names → next name) and of every shorter context, with
  start-of-trace markers before each trace so that a sample begins the way real traces begin
  (process start-up: execve, mmap...); sampling uses the longest context seen in training and
  backs off to shorter ones (down to the unigram distribution), so it never gets stuck in a
  context that training never continued;
- inter-event time: drawn from the training gaps observed between the same (previous, current)
  pair of event names when that pair was seen at least `MIN_PAIR_GAPS` times, otherwise from the
  gaps before that event name (empirical, so the marginal is reproduced exactly in the limit);
- thread: a thread switch happens with the empirical probability that the thread changes
  between that (previous, current) pair (falling back to the current name); the new thread is
  drawn from the threads that emitted that event name in training. So tids stay a small real
  set and switch about where real traces switch (after sched_switch, on interrupts...);
- pid and procname: those of the chosen thread in training (its most frequent ones);
- cpu: switches like the thread, by its own empirical per-pair probability, to a CPU drawn from
  those that recorded that event name;
- ret and payload: copied together from one random training row of the same event name, so
  that a return value and its payload are consistent with each other (not with the thread).

Output is canonical: ts starts at the first training trace's start and never decreases.
"""

from __future__ import annotations

import bisect
import time
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from tracesynth.errors import ConfigError
from tracesynth.generators.base import Generator
from tracesynth.schema import Trace, TraceMeta

MIN_PAIR_GAPS = 5
BOS = -1  # start-of-trace marker in contexts


@dataclass
class _WorkloadModel:
    names: list[str]
    order_tables: list[dict]  # order k → {context tuple: (next ids list, cumulative counts list)}
    gaps_by_pair: dict  # (prev, cur) → int64 array of gaps (ns)
    gaps_by_event: list  # cur → int64 array
    switch_tid_pair: dict  # (prev, cur) → probability
    switch_tid_event: np.ndarray
    switch_cpu_pair: dict
    switch_cpu_event: np.ndarray
    tids_by_event: list  # cur → int64 array of tids (with repetition = empirical frequency)
    cpus_by_event: list
    rows_by_event: list  # cur → row indices into ret/payload
    ret: np.ndarray  # int64 (0 where null)
    ret_null: np.ndarray  # bool
    payload: np.ndarray  # object
    tid_pid: dict
    tid_procname: dict
    start_ts: int


def _collision(values: np.ndarray) -> float:
    counts = np.unique(values, return_counts=True)[1]
    share = counts / counts.sum()
    return float(np.sum(share * share))


def _redraw(p_change: float, collision: float) -> float:
    return min(1.0, p_change / (1.0 - collision)) if collision < 1.0 else p_change


def _column(table: pa.Table, name: str, fill):
    import pyarrow.compute as pc

    return pc.fill_null(table.column(name), fill).to_numpy(zero_copy_only=False)


class Markov(Generator):
    """Order-`order` Markov chain over event names, other channels per event type (see module)."""

    name = "markov"

    def __init__(self, order: int = 8, random_state: int = 0):
        super().__init__(random_state=random_state)
        self.order = order

    def _fit(self, traces_by_workload: dict[str, list[Trace]]) -> None:
        if not isinstance(self.order, int) or isinstance(self.order, bool) or self.order < 1:
            raise ConfigError(f"markov: order must be a positive integer, got {self.order!r}")
        started = time.perf_counter()
        self.models_ = {w: self._fit_workload(ts) for w, ts in traces_by_workload.items()}
        self.train_seconds_ = time.perf_counter() - started

    def _fit_workload(self, traces: list[Trace]) -> _WorkloadModel:
        table = pa.concat_tables([t.events for t in traces])
        names, ids = np.unique(_column(table, "event", ""), return_inverse=True)
        ids = ids.astype(np.int64)
        lengths = [len(t) for t in traces]
        first = np.zeros(len(ids), dtype=bool)
        first[np.cumsum([0, *lengths[:-1]])] = True  # rows that start a trace (no predecessor)
        ts = _column(table, "ts", 0).astype(np.int64)
        tid = _column(table, "tid", -1).astype(np.int64)
        cpu = _column(table, "cpu", -1).astype(np.int64)
        n_names = len(names)

        order_tables = [self._context_table(ids, lengths, k) for k in range(self.order + 1)]

        valid = ~first  # rows with a predecessor in the same trace
        prev = np.where(valid, np.roll(ids, 1), -1)
        pair_key = prev * n_names + ids
        gaps = np.where(valid, ts - np.roll(ts, 1), 0)
        tid_changed = valid & (tid != np.roll(tid, 1))
        cpu_changed = valid & (cpu != np.roll(cpu, 1))

        gaps_by_pair, switch_tid_pair, switch_cpu_pair = {}, {}, {}
        order = np.argsort(pair_key[valid], kind="stable")
        keys_sorted = pair_key[valid][order]
        bounds = np.flatnonzero(np.diff(keys_sorted)) + 1
        for chunk in np.split(order, bounds):
            if not len(chunk):
                continue
            key = int(pair_key[valid][chunk[0]])
            pair = (key // n_names, key % n_names)
            switch_tid_pair[pair] = float(tid_changed[valid][chunk].mean())
            switch_cpu_pair[pair] = float(cpu_changed[valid][chunk].mean())
            if len(chunk) >= MIN_PAIR_GAPS:
                gaps_by_pair[pair] = gaps[valid][chunk]

        by_event = [np.flatnonzero(ids == e) for e in range(n_names)]
        gaps_by_event = [gaps[rows[valid[rows]]] if valid[rows].any() else np.zeros(1, np.int64) for rows in by_event]
        switch_tid_event = np.array([tid_changed[r].mean() for r in by_event])
        switch_cpu_event = np.array([cpu_changed[r].mean() for r in by_event])
        # a redraw may land on the current value again; raise the redraw probability so the
        # observed change rate is reproduced: p_redraw = p_change / (1 - P(two draws collide))
        tid_collide = np.array([_collision(tid[r]) for r in by_event])
        cpu_collide = np.array([_collision(cpu[r]) for r in by_event])
        for pair in switch_tid_pair:
            switch_tid_pair[pair] = _redraw(switch_tid_pair[pair], tid_collide[pair[1]])
            switch_cpu_pair[pair] = _redraw(switch_cpu_pair[pair], cpu_collide[pair[1]])
        switch_tid_event = np.array([_redraw(p, c) for p, c in zip(switch_tid_event, tid_collide)])
        switch_cpu_event = np.array([_redraw(p, c) for p, c in zip(switch_cpu_event, cpu_collide)])

        tid_pid, tid_procname = {}, {}
        frame = table.select(["tid", "pid", "procname"]).to_pandas()
        frame = frame[frame["tid"].notna()]
        if len(frame):
            frame["tid"] = frame["tid"].astype(np.int64)
            for col, target in (("pid", tid_pid), ("procname", tid_procname)):
                known = frame[frame[col].notna()]
                if len(known):
                    target.update(known.groupby("tid")[col].agg(lambda s: s.value_counts().index[0]).to_dict())

        ret_col = table.column("ret")
        return _WorkloadModel(
            names=[str(n) for n in names],
            order_tables=order_tables,
            gaps_by_pair=gaps_by_pair,
            gaps_by_event=gaps_by_event,
            switch_tid_pair=switch_tid_pair,
            switch_tid_event=switch_tid_event,
            switch_cpu_pair=switch_cpu_pair,
            switch_cpu_event=switch_cpu_event,
            tids_by_event=[tid[r] for r in by_event],
            cpus_by_event=[cpu[r] for r in by_event],
            rows_by_event=by_event,
            ret=_column(table, "ret", 0).astype(np.int64),
            ret_null=ret_col.is_null().to_numpy(zero_copy_only=False),
            payload=np.asarray(table.column("payload").to_pylist(), dtype=object),
            tid_pid=tid_pid,
            tid_procname=tid_procname,
            start_ts=int(traces[0].column("ts")[0].as_py()),
        )

    @staticmethod
    def _context_table(ids: np.ndarray, lengths: list[int], k: int) -> dict:
        """{previous-k-names tuple: (next ids, cumulative counts)} from every trace."""
        from numpy.lib.stride_tricks import sliding_window_view

        rows = []
        offset = 0
        for length in lengths:
            seq = ids[offset:offset + length]
            offset += length
            # k start-of-trace markers before each trace: the chain learns how traces begin
            padded = np.concatenate([np.full(k, BOS, dtype=np.int64), seq])
            rows.append(sliding_window_view(padded, k + 1))
        if not rows:
            return {}
        grams, counts = np.unique(np.concatenate(rows), axis=0, return_counts=True)
        table: dict = {}
        # np.unique sorts rows, so each context's continuations are contiguous
        contexts = [tuple(r) for r in grams[:, :k].tolist()]
        nexts = grams[:, k].tolist()
        counts = counts.tolist()
        start = 0
        for i in range(1, len(contexts) + 1):
            if i == len(contexts) or contexts[i] != contexts[start]:
                table[contexts[start]] = (nexts[start:i], list(np.cumsum(counts[start:i])))
                start = i
        return table

    def _sample(self, n_events: int, workload: str, seed: int) -> Trace:
        started = time.perf_counter()
        model = self.models_[workload]
        rng = np.random.default_rng(seed)
        uniforms = rng.random(n_events).tolist()
        tables = model.order_tables
        history: list[int] = [BOS] * self.order  # generation starts like a real trace starts
        ids = np.empty(n_events, dtype=np.int64)
        for i in range(n_events):
            for k in range(min(self.order, len(history)), -1, -1):
                entry = tables[k].get(tuple(history[len(history) - k:]) if k else ())
                if entry is not None:
                    nexts, cumulative = entry
                    ids[i] = nexts[bisect.bisect_right(cumulative, uniforms[i] * cumulative[-1])]
                    break
            history.append(int(ids[i]))
            if len(history) > 4 * self.order + 64:
                del history[: len(history) - self.order]
        trace = self._channels(model, ids, rng, workload)
        seconds = time.perf_counter() - started
        trace.meta.extra.update(seed=seed, sample_seconds=round(seconds, 3),
                                events_per_second=round(n_events / max(seconds, 1e-9), 1))
        return trace

    def _channels(self, model: _WorkloadModel, ids: np.ndarray, rng: np.random.Generator,
                  workload: str) -> Trace:
        n = len(ids)
        prev = np.concatenate([[-1], ids[:-1]])
        gaps = np.zeros(n, dtype=np.int64)
        p_tid = np.empty(n)
        p_cpu = np.empty(n)
        pair_key = prev * len(model.names) + ids
        for key in np.unique(pair_key):  # sorted: a deterministic order of draws
            rows = np.flatnonzero(pair_key == key)
            pair = (int(key) // len(model.names), int(key) % len(model.names)) if key >= 0 else None
            cur = int(ids[rows[0]])
            pool = model.gaps_by_pair.get(pair) if pair else None
            pool = pool if pool is not None else model.gaps_by_event[cur]
            gaps[rows] = pool[rng.integers(0, len(pool), len(rows))]
            p_tid[rows] = model.switch_tid_pair.get(pair, model.switch_tid_event[cur])
            p_cpu[rows] = model.switch_cpu_pair.get(pair, model.switch_cpu_event[cur])
        gaps[0] = 0
        switch_tid = rng.random(n) < p_tid
        switch_cpu = rng.random(n) < p_cpu
        switch_tid[0] = switch_cpu[0] = True
        draw = rng.random((n, 3))
        tid = np.empty(n, dtype=np.int64)
        cpu = np.empty(n, dtype=np.int64)
        source_row = np.empty(n, dtype=np.int64)
        for e in np.unique(ids):
            rows = np.flatnonzero(ids == e)
            tids, cpus, train_rows = model.tids_by_event[e], model.cpus_by_event[e], model.rows_by_event[e]
            tid[rows] = tids[(draw[rows, 0] * len(tids)).astype(np.int64)]
            cpu[rows] = cpus[(draw[rows, 1] * len(cpus)).astype(np.int64)]
            source_row[rows] = train_rows[(draw[rows, 2] * len(train_rows)).astype(np.int64)]
        # a thread (cpu) keeps its value until the chain decides to switch: forward-fill
        tid = tid[np.maximum.accumulate(np.where(switch_tid, np.arange(n), 0))]
        cpu = cpu[np.maximum.accumulate(np.where(switch_cpu, np.arange(n), 0))]
        names = np.asarray(model.names, dtype=object)
        tid_list = tid.tolist()
        columns = {
            "ts": pa.array(model.start_ts + np.cumsum(gaps), pa.int64()),
            "cpu": pa.array(cpu, pa.int32(), mask=cpu < 0),
            "tid": pa.array(tid, pa.int64(), mask=tid < 0),
            "pid": pa.array([model.tid_pid.get(t) for t in tid_list], pa.int64()),
            "procname": pa.array([model.tid_procname.get(t) for t in tid_list], pa.string()),
            "event": pa.array(names[ids], pa.string()),
            "ret": pa.array(model.ret[source_row], pa.int64(), mask=model.ret_null[source_row]),
            "payload": pa.array(model.payload[source_row], pa.string()),
        }
        extra = {"generator": self.name, "order": self.order, "train_seconds": round(self.train_seconds_, 3)}
        return Trace(pa.table(columns), TraceMeta(source_format="synthetic", workload=workload, extra=extra))

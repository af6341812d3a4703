"""`Resample`: training's own events, walked piece by piece — the no-model reference for the splice.

TraceSynth's span splice (`--splice 64`, sampling/span_splice.py) fills every stretch of a sampled
trace that no training 64-gram covers with training's events, and its walk fills the long ones
piece by piece; on pybench and build that is most of the trace. This generator is the same walk
with no model at all, so a reader can see what the network adds (docs/model.md, "What the model
still decides"):

- `fit` keeps each training run's rows and event types (a vocabulary of the workload's names);
- `sample` begins at the start of a training run drawn by the seed and walks
  (`span_splice.resample`): pieces of at least half to twice `piece` events, then a draw among the
  places in training where the last `context` events (64, the splice's anchor) occur, within
  `drift` events (4,096, the splice's `MAX_DRIFT`) of the output's own position in the run, so
  the walk branches where the runs branch; where a walk cannot go on it begins again at a run's
  start; 4,096 events at a time, each chunk drawn again (up to three times) where it would make
  a verbatim training run over 1,023 events;
- like the splice, it walks in shorter pieces (halved down to `SPLICE_WALK_MIN`, as
  `TraceSynth._splice_passes`) while the result copies more of one training run's 256-grams than
  the least one training run shares with another, plus `SPLICE_MARGIN`, and keeps the last try
  otherwise (the evaluation then flags it).

`context` is the walk's privacy dial: the shorter the match a jump needs, the more places it can
jump to and the fewer of training's long spans it copies (sqlite, run 3 held out: 0.38-0.40 of
its 256-event spans in training with 64, 0.02-0.04 with 8; stream 0.14-0.16 and 0.01-0.03, where
the held-out run shares 0.002), at the price of the long-range structure only a long match keeps.
`drift` bounds how far a jump may move the walk within its run: with 4,096, a jump in a loop or a
repeated structure (pybench's imports) lands thousands of events back or ahead, and the walk
repeats and skips what the runs hold once (pybench: 0.55 of its events in an exactly repeated
33-event span against real runs' 0.38-0.40; 0.41 with a drift of 64). `aligned` goes further:
each jump draws among one place per training run, the one nearest the output's own position, so
the walk branches between runs at the same moment of each and never back or ahead within one.
`aligned="shared"` does so only where two runs or more hold the last `context` events within the
drift; where one run alone does, the jump draws among all of that run's places there, as
unaligned (aligned there, the walk could only stay where it is: stream copied 0.44 of its
256-event spans from one run with run 1 held out, against 0.03 unaligned).
`piece` sets how often the walk jumps at all: with the 16-event match and 64-event drift, 384-event
pieces brought the 512-event windows to the floor on average in both folds (pybench 0.72 -> 0.58
and 0.71 -> 0.48) at more copying (0.39 -> 0.60 of the 256-event spans; tar flagged with run 3
held out) (experiments-resample-pieces-run3, -run1).

`channels="light"` (the default) writes event types and timestamps, the channels the splice
replaces, other columns null, as a `light` TraceSynth trace. `channels="full"` copies the rows
whole (thread, CPU, return value, payload with their event), so every channel's marginal is real,
and keeps them one consistent machine across the walk's jumps (sampling/thread_seams.py): a jump
goes only to a place where every CPU runs a thread of the same name in the same syscall (a read
or write of the same count; alike exited or not, the same forks pending, the threads on no CPU
waiting in the same calls), and the far side's threads take the ids of the output's.
Copied as they were, a jump landed in another run's threads mid-syscall: build, seed 0, 464 rule
breaks per 1,000 events (its training runs: 0.02); renamed, 0.16 on average over eight workloads
and two folds, all of it the lost `sched_switch` events of the training recordings copied with
their rows (sqlite 0.18-0.24 against its runs' own 0.18-0.22; one fileio trace 3.7 against 1.05)
(`benchmarks/full_walk_rules.py`).
Timestamps: the real gap before each copied event, from the first training run's start.
"""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa

from tracesynth.errors import ConfigError
from tracesynth.generators.base import Generator
from tracesynth.schema import Trace, TraceMeta

COPY_SPAN = 256  # the span whose one-run copy share the walk is held to (the splice's, the evaluation's)
MAX_CONTEXT = 256  # the longest match a jump may require (the copy span: longer matches only copy)
CONTEXT = 64  # the events a jump's place must share with the walk's last ones: the splice's ANCHOR
DRIFT = 4096  # how far from the output's position in its run a jump may land: the splice's MAX_DRIFT
# (span_splice imports the sampler, hence torch: it is imported where the walk runs, not here)


class Resample(Generator):
    """Training rows walked piece by piece from a run's start (see module)."""

    name = "resample"

    def __init__(self, piece: int = 128, context: int = CONTEXT, channels: str = "light", random_state: int = 0,
                 drift: int = DRIFT, aligned: bool | str = False):
        super().__init__(random_state=random_state)
        self.piece = piece
        self.context = context
        self.drift = drift
        self.aligned = aligned
        self.channels = channels

    def _fit(self, traces_by_workload: dict[str, list[Trace]]) -> None:
        from tracesynth.sampling.span_splice import MAX_COPY, Training

        piece = self.piece
        if not isinstance(piece, int) or isinstance(piece, bool) or not 2 <= piece < (MAX_COPY - 1) // 2:
            raise ConfigError(f"resample: piece must be an integer from 2 to {(MAX_COPY - 1) // 2 - 1} events, "
                              f"got {piece!r}")
        context = self.context
        if not isinstance(context, int) or isinstance(context, bool) or not 1 <= context <= MAX_CONTEXT:
            raise ConfigError(f"resample: context must be an integer from 1 to {MAX_CONTEXT} events, got {context!r}")
        drift = self.drift
        if not isinstance(drift, int) or isinstance(drift, bool) or drift < 1:
            raise ConfigError(f"resample: drift must be a positive integer (events), got {drift!r}")
        if not (isinstance(self.aligned, bool) or self.aligned == "shared"):
            raise ConfigError(f"resample: aligned must be true, false or 'shared', got {self.aligned!r}")
        if self.channels not in ("light", "full"):
            raise ConfigError(f"resample: channels must be 'light' or 'full', got {self.channels!r}")
        from tracesynth.sampling.thread_seams import machine_states

        self.tables_, self.training_, self.start_ts_, self.threads_ = {}, {}, {}, {}
        for workload, traces in traces_by_workload.items():
            tables = [t.events for t in traces]
            names = [t.column("event").to_numpy(zero_copy_only=False).astype(str) for t in tables]
            vocabulary = np.unique(np.concatenate(names))
            runs = []
            for table, run_names in zip(tables, names):
                ts = table.column("ts").to_numpy().astype(np.int64)
                runs.append((np.searchsorted(vocabulary, run_names).astype(np.int64), np.diff(ts, prepend=ts[:1])))
            table = pa.concat_tables(tables)  # rows in the order Training concatenates runs
            states = None
            if self.channels == "light":  # event types and times: the other columns null, once
                table = pa.table({f.name: table.column(f.name) if f.name in ("ts", "event")
                                  else pa.nulls(len(table), f.type) for f in table.schema}, schema=table.schema)
            else:  # whole rows: jump only where the CPUs run alike, and rename threads across jumps
                machine = machine_states(tables)
                states, self.threads_[workload] = machine.labels, machine
            self.tables_[workload] = table
            self.training_[workload] = Training(runs, states)
            self.start_ts_[workload] = int(tables[0].column("ts")[0].as_py())

    def _sample(self, n_events: int, workload: str, seed: int) -> Trace:
        from tracesynth.generators.diffusion import SPLICE_MARGIN, walk_pieces
        from tracesynth.sampling.span_splice import resample
        from tracesynth.sampling.thread_seams import ThreadMap

        started = time.perf_counter()
        training = self.training_[workload]
        bound = training.least_shared(COPY_SPAN) + SPLICE_MARGIN
        for piece in walk_pieces(self.piece):  # the last is kept even above the bound (the evaluation flags it)
            walked = resample(training, n_events, piece, np.random.default_rng([seed, piece]), k=self.context,
                              drift=self.drift, aligned=self.aligned)
            rows = np.concatenate([np.arange(a, b) for a, b in walked.steps])[:n_events]
            share = training.most_copied(training.codes[rows], COPY_SPAN)
            if share <= bound:
                break
        gaps = training.gaps[rows].copy()
        gaps[0] = 0
        events = self.tables_[workload].take(pa.array(rows))
        if workload in self.threads_:
            events = ThreadMap(self.threads_[workload], training.run_of).rename(events, rows)
        ts = self.start_ts_[workload] + np.cumsum(gaps)
        events = events.set_column(events.schema.get_field_index("ts"), "ts", pa.array(ts, pa.int64()))
        seconds = time.perf_counter() - started
        extra = {"generator": self.name, "channels": self.channels, "piece": piece, "context": self.context,
                 "drift": self.drift, "aligned": self.aligned, "seed": seed, "segments": walked.segments,
                 "chunks_over_max_copy": walked.over, "copy_share_256_one_run": round(share, 4),
                 "training_runs_least_share": round(bound - SPLICE_MARGIN, 4), "within_bound": share <= bound,
                 "sample_seconds": round(seconds, 3), "events_per_second": round(n_events / max(seconds, 1e-9), 1)}
        return Trace(events, TraceMeta(source_format="synthetic", workload=workload, extra=extra))

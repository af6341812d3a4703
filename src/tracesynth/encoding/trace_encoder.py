"""`TraceEncoder`: canonical traces ↔ per-channel integer codes, and back.

It composes one encoder per channel, is fitted on the training traces and saved with the model
(`to_json`). Encoding keeps tids as real numbers (`encode`); a training or generation window
turns them into slots (`window`), because slots only mean something within a window.
Decoding (`WindowDecoder`) is stateful across the windows of one generated trace: it carries
the clock and the thread-id mapping from one window to the next.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from tracesynth.encoding.categorical import NULL_CLASS, UNKNOWN_CLASS, CategoricalEncoder
from tracesynth.encoding.channels import resolve_channels
from tracesynth.encoding.dt import DtEncoder
from tracesynth.encoding.ret import RetEncoder
from tracesynth.encoding.cadence import CadenceTable
from tracesynth.encoding.copies import SpanTable
from tracesynth.encoding.ngrams import K as NGRAM_ORDER, MAX_ORDER as MAX_NGRAM_ORDER, EventNGrams
from tracesynth.encoding.serial import serial_syscalls
from tracesynth.encoding.splices import RunTable
from tracesynth.encoding.startups import STARTUP_EVENTS, StartupTable
from tracesynth.encoding.support import EventSupport
from tracesynth.encoding.tid import TidAllocator, TidEncoder
from tracesynth.errors import ConfigError
from tracesynth.evaluation.windows import token_repeat_share
from tracesynth.schema import SYSCALL_EXIT_PREFIX, Trace, TraceMeta

ENCODER_VERSION = 1


def _frame(trace: Trace) -> pd.DataFrame:
    return trace.events.select(["ts", "cpu", "tid", "pid", "procname", "event", "ret"]).to_pandas()


def _syscall_threads(frame: pd.DataFrame) -> int:
    """Distinct known tids among a trace's syscall events."""
    syscalls = frame["event"].str.startswith("syscall_", na=False)
    return int(frame.loc[syscalls, "tid"].dropna().nunique())


def _gaps(ts: np.ndarray) -> np.ndarray:
    """Inter-event gaps in ns; the first event's gap is 0."""
    ts = np.asarray(ts, dtype=np.int64)
    return np.diff(ts, prepend=ts[:1]) if len(ts) else ts


class TraceEncoder:
    def __init__(self, channels: str | Sequence[str] = "light", tid_slots: int = 64, ngram_order: int = NGRAM_ORDER):
        self.channels = resolve_channels(channels)
        if not 1 <= ngram_order <= MAX_NGRAM_ORDER:
            raise ConfigError(f"n-gram order must be 1-{MAX_NGRAM_ORDER}, not {ngram_order}")
        self.ngram_order = ngram_order  # longest context of the n-gram prior, in events on each side
        self.event = CategoricalEncoder("event", unknown_label="unknown")
        self.dt = DtEncoder()
        self.tid = TidEncoder(tid_slots)
        self.cpu = CategoricalEncoder("cpu", kind="int", max_size=1024)
        self.ret = RetEncoder()
        self.procname = CategoricalEncoder("procname", max_size=2048)
        self.workloads: list[str] = []
        self.start_ts: dict[str, int] = {}
        self.n_cpus = 1
        self.syscall_threads: int | None = None  # most threads making syscalls in one training trace
        # Event 8-grams of the training traces (the sampler's support corrector); saved beside
        # the encoder JSON in support.safetensors by the checkpoint, None for older models.
        self.support: EventSupport | None = None
        # Event 256-grams and branch points of the training traces (the sampler's copy guard);
        # saved in copies.safetensors, None for older models.
        self.copies: SpanTable | None = None
        # Event n-gram counts of the training traces, both directions (the sampler's n-gram
        # prior); saved in ngrams.safetensors, None for older models.
        self.ngrams: EventNGrams | None = None
        # Per workload, the events that recur at a steady gap in training (the sampler's cadence
        # scaffold); saved in cadence.safetensors, None for older models.
        self.cadence: CadenceTable | None = None
        # Per workload, each training run's first events as codes (the sampler's start-up
        # anchor); saved in startups.safetensors, None for older models.
        self.startups: StartupTable | None = None
        # Per workload whose runs share most long spans, the training runs' event codes and gaps
        # (the sampler's span splice); saved in splices.safetensors, None for older models.
        self.splices: RunTable | None = None
        # Per workload, the syscalls its training runs never overlap (encoding/serial.py): what
        # guides a trace without thread ids on a multi-threaded workload. Empty for older models.
        self.serial: dict[str, list[str]] = {}
        # Per workload, each training run's share of events in an exactly repeated 33-event span
        # (`evaluation.longrange.repeat_share`): what `generate` sets a trace's share beside.
        # Empty for older models.
        self.repeat_shares: dict[str, list[float]] = {}

    # --- fitting ------------------------------------------------------------------------
    def fit(self, traces: Sequence[Trace], keep_runs: bool = True) -> TraceEncoder:
        """Fits every channel and table on `traces`, the training runs. `keep_runs=False` (`train
        --no-runs`, a model to share) builds no table that holds a training run verbatim: the
        start-ups and the span splice's runs."""
        frames = [_frame(t) for t in traces]
        self.event.fit(f["event"].to_numpy() for f in frames)
        self.dt.fit([_gaps(f["ts"].to_numpy()) for f in frames])
        self.tid.fit(frames)
        self.cpu.fit(f["cpu"].to_numpy() for f in frames)
        self.ret.fit(f["ret"].to_numpy() for f in frames)
        self.procname.fit(f["procname"].to_numpy() for f in frames)
        self.workloads = sorted({t.meta.workload or "default" for t in traces})
        self.start_ts = {}
        for t, f in zip(traces, frames):
            self.start_ts.setdefault(t.meta.workload or "default", int(f["ts"].iloc[0]) if len(f) else 0)
        self.n_cpus = max(1, len(self.cpu.values))
        self.syscall_threads = max((_syscall_threads(f) for f in frames), default=0)
        codes = [(t.meta.workload or "default", self.event.encode(f["event"].to_numpy()))
                 for t, f in zip(traces, frames)]
        self.support = EventSupport.fit(codes)
        self.serial = {w: serial_syscalls(f["event"].to_numpy() for t, f in zip(traces, frames)
                                          if (t.meta.workload or "default") == w)
                       for w in self.workloads}
        self.copies = SpanTable.fit(codes)
        self.repeat_shares = {}
        for w, run in codes:
            share = token_repeat_share(run)
            if share is not None:
                self.repeat_shares.setdefault(w, []).append(round(share, 4))
        self.ngrams = EventNGrams.fit(codes, self.event.vocab_size, k=self.ngram_order)
        self.cadence = CadenceTable.fit(codes)
        self.startups = (StartupTable.fit((t.meta.workload or "default", self.startup_codes(t)) for t in traces)
                         if keep_runs else None)
        # the splice replaces event types and gaps only: a model with other channels keeps no runs
        self.splices = self.fit_splices(traces) if keep_runs and set(self.channels) == {"event", "dt"} else None
        return self

    def fit_splices(self, traces: Sequence[Trace]) -> RunTable:
        """The span splice's table (encoding/splices.py) from `traces`, the training runs, for
        the workloads whose runs share most of their long spans (`SpanTable.natural`)."""
        from tracesynth.encoding.copies import SHARED_SPANS

        natural = self.copies.natural if self.copies is not None else {}
        shared = [w for w, share in natural.items() if share >= SHARED_SPANS]
        frames = [_frame(t) for t in traces]
        return RunTable.fit(((t.meta.workload or "default", self.event.encode(f["event"].to_numpy()),
                              _gaps(f["ts"].to_numpy())) for t, f in zip(traces, frames)), shared)

    def startup_codes(self, trace: Trace) -> dict[str, np.ndarray]:
        """The codes of `trace`'s first `STARTUP_EVENTS` events as a trace's first window holds
        them (thread ids as slots): what the start-up table keeps of a training run."""
        codes = self.encode(trace.slice(0, STARTUP_EVENTS))
        if "tid" in codes:
            codes["tid"] = self.tid.slot_window(codes["tid"])[0]
        return codes

    @property
    def single_syscall_thread(self) -> bool:
        """Whether every training trace made its syscalls from one thread: then a trace of a
        model without thread ids can be checked and guided as that one thread (syscall pairing,
        lifecycle), as `check --single-thread` does."""
        return self.syscall_threads is not None and self.syscall_threads <= 1

    # --- codes --------------------------------------------------------------------------
    def vocab_sizes(self) -> dict[str, int]:
        return {c: getattr(self, c).vocab_size for c in self.channels}

    def encode(self, trace: Trace) -> dict[str, np.ndarray]:
        """A whole trace → per-channel int64 arrays (tid: real tids, -1 = unknown)."""
        f = _frame(trace)
        out: dict[str, np.ndarray] = {}
        for ch in self.channels:
            if ch == "event":
                out[ch] = self.event.encode(f["event"].to_numpy())
            elif ch == "dt":
                out[ch] = self.dt.encode(_gaps(f["ts"].to_numpy()))
            elif ch == "tid":
                out[ch] = f["tid"].fillna(-1).to_numpy().astype(np.int64)
            elif ch == "ret":
                out[ch] = self.ret.encode(f["ret"].to_numpy())
            else:
                out[ch] = getattr(self, ch).encode(f[ch].to_numpy())
        return out

    def window(self, encoded: dict[str, np.ndarray], start: int, length: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """Codes of events [start, start+length) with tids as slots; also the slot → tid table."""
        codes = {ch: arr[start:start + length] for ch, arr in encoded.items()}
        slot_tids = np.full(self.tid.slots, -1, dtype=np.int64)
        if "tid" in codes:
            codes["tid"], slot_tids = self.tid.slot_window(codes["tid"])
        return codes, slot_tids

    def never_generated(self) -> dict[str, list[int]]:
        """Classes the sampler must not draw: an event always has a name, and "a value not
        seen in training" has nothing to decode to."""
        banned = {"event": [NULL_CLASS, UNKNOWN_CLASS], "cpu": [UNKNOWN_CLASS], "procname": [UNKNOWN_CLASS]}
        return {ch: v for ch, v in banned.items() if ch in self.channels}

    def decoder(self, workload: str, seed: int) -> WindowDecoder:
        return WindowDecoder(self, workload, np.random.default_rng(seed))

    def partial(self, codes: dict[str, np.ndarray], decided: dict[str, np.ndarray],
                slot_tids: np.ndarray) -> dict[str, np.ndarray]:
        """Decided codes of a window → canonical terms for a sampling guide.

        Undecided entries are None (event, ret) or -1 (tid, cpu). A new slot's thread gets a
        provisional id (-2 - slot) so positions of the same new thread compare equal.
        """
        codes = {ch: np.where(decided[ch], c, 0) for ch, c in codes.items()}  # MASK → class 0
        event_decided = decided["event"]
        events = self.event.decode(codes["event"])
        events[~event_decided] = None
        out = {"event": events, "decided": event_decided.copy()}
        n = len(events)
        if "tid" in codes:
            slot = codes["tid"]
            real = slot_tids[np.clip(slot - 1, 0, self.tid.slots - 1)]
            provisional = np.where(real >= 0, real, -2 - (slot - 1))
            tid = np.where((slot >= 1) & (slot <= self.tid.slots), provisional, -1)
            tid[~decided["tid"]] = -1
            out["tid"] = tid.astype(np.int64)
        else:
            out["tid"] = np.full(n, -1, dtype=np.int64)
        if "cpu" in codes:
            cpus = self.cpu.decode(codes["cpu"])
            cpu = np.array([-1 if c is None else int(c) for c in cpus], dtype=np.int64)
            cpu[~decided["cpu"]] = -1
            out["cpu"] = cpu
        else:
            out["cpu"] = np.full(n, -1, dtype=np.int64)
        if "ret" in codes:
            ret = self.ret.value_table()[codes["ret"]]
            ret[~decided["ret"]] = np.nan
            out["ret"] = ret
        else:
            out["ret"] = np.full(n, np.nan)
        return out

    # --- persistence --------------------------------------------------------------------
    def to_json(self) -> dict:
        return {
            "version": ENCODER_VERSION,
            "channels": list(self.channels),
            "event": self.event.to_json(),
            "dt": self.dt.to_json(),
            "tid": self.tid.to_json(),
            "cpu": self.cpu.to_json(),
            "ret": self.ret.to_json(),
            "procname": self.procname.to_json(),
            "workloads": self.workloads,
            "start_ts": self.start_ts,
            "n_cpus": self.n_cpus,
            "syscall_threads": self.syscall_threads,
            "serial_syscalls": self.serial,
            "repeat_shares": self.repeat_shares,
        }

    @classmethod
    def from_json(cls, data: dict | str) -> TraceEncoder:
        if isinstance(data, str):
            data = json.loads(data)
        if data.get("version") != ENCODER_VERSION:
            raise ConfigError(f"encoder version {data.get('version')} is not supported (expected {ENCODER_VERSION})")
        enc = cls(data["channels"], data["tid"]["slots"])
        enc.event = CategoricalEncoder.from_json(data["event"])
        enc.dt = DtEncoder.from_json(data["dt"])
        enc.tid = TidEncoder.from_json(data["tid"])
        enc.cpu = CategoricalEncoder.from_json(data["cpu"])
        enc.ret = RetEncoder.from_json(data["ret"])
        enc.procname = CategoricalEncoder.from_json(data["procname"])
        enc.workloads = list(data["workloads"])
        enc.start_ts = {k: int(v) for k, v in data["start_ts"].items()}
        enc.n_cpus = int(data["n_cpus"])
        enc.syscall_threads = data.get("syscall_threads")  # None: saved before it was fitted
        enc.serial = {w: list(names) for w, names in data.get("serial_syscalls", {}).items()}
        enc.repeat_shares = {w: [float(v) for v in shares] for w, shares in data.get("repeat_shares", {}).items()}
        return enc


class WindowDecoder:
    """Decodes the windows of one generated trace in order, keeping clock and threads."""

    def __init__(self, encoder: TraceEncoder, workload: str, rng: np.random.Generator):
        self.encoder = encoder
        self.rng = rng
        self.last_ts = encoder.start_ts.get(workload, 0)
        self.first = True
        self.tids = TidAllocator(encoder.tid, rng)

    def decode_window(self, codes: dict[str, np.ndarray], start: int,
                      slot_tids: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """Codes of a whole window → canonical columns for positions [start:].

        `slot_tids` (the tid of each slot fixed by the known prefix; updated in place) is
        only used with the `tid` channel.
        """
        enc = self.encoder
        n = len(codes["event"]) - start
        events = enc.event.decode(codes["event"])
        cols: dict[str, np.ndarray] = {"event": events[start:]}
        if "dt" in codes:
            gaps = enc.dt.decode(codes["dt"][start:], self.rng)
            if self.first and n:
                gaps[0] = 0
        else:
            gaps = np.full(n, 1000, dtype=np.int64)  # documented default: 1 µs apart
        self.first = False
        ts = self.last_ts + np.cumsum(gaps)
        if n:
            self.last_ts = int(ts[-1])
        cols["ts"] = ts.astype(np.int64)
        rets = None
        if "ret" in codes:
            rets = np.full(len(events), np.nan)
            rets[start:] = enc.ret.decode(codes["ret"][start:], self.rng)
            # Only syscall exits carry a return value, whatever the model said.
            not_exit = ~np.char.startswith(np.asarray(events, dtype=str), SYSCALL_EXIT_PREFIX)
            not_exit &= events != "exit_syscall"
            rets[not_exit] = np.nan
        if "tid" in codes:
            if slot_tids is None:
                slot_tids = np.full(enc.tid.slots, -1, dtype=np.int64)
            tids = self.tids.decode_window(codes["tid"], slot_tids, events, rets, start)
            cols["tid"] = tids
            cols["pid"] = np.array([self.tids.pid(int(t)) if t >= 0 else None for t in tids], dtype=object)
        else:
            cols["tid"] = np.full(n, -1, dtype=np.int64)
            cols["pid"] = np.full(n, None, dtype=object)
        cols["ret"] = rets[start:] if rets is not None else np.full(n, np.nan)
        if "cpu" in codes:
            cols["cpu"] = enc.cpu.decode(codes["cpu"][start:])
        else:
            cols["cpu"] = np.full(n, None, dtype=object)
        if "procname" in codes:
            cols["procname"] = enc.procname.decode(codes["procname"][start:])
        elif "tid" in codes:
            cols["procname"] = np.array([self.tids.name_of.get(int(t)) for t in cols["tid"]], dtype=object)
        else:
            cols["procname"] = np.full(n, None, dtype=object)
        return cols


def columns_to_trace(parts: list[dict[str, np.ndarray]], meta: TraceMeta) -> Trace:
    """Concatenate decoded column dicts into a canonical `Trace`."""
    def cat(name):
        return np.concatenate([p[name] for p in parts]) if parts else np.zeros(0)

    tid = cat("tid").astype(np.int64)
    ret = cat("ret").astype(np.float64)
    cpu = cat("cpu")
    table = pa.table({
        "ts": pa.array(cat("ts").astype(np.int64), pa.int64()),
        "cpu": pa.array([None if c is None else int(c) for c in cpu], pa.int32()),
        "tid": pa.array(tid, pa.int64(), mask=tid < 0),
        "pid": pa.array([None if p is None else int(p) for p in cat("pid")], pa.int64()),
        "procname": pa.array(list(cat("procname")), pa.string()),
        "event": pa.array(list(cat("event")), pa.string()),
        "ret": pa.array(np.nan_to_num(ret, nan=0).astype(np.int64), pa.int64(), mask=np.isnan(ret)),
        "payload": pa.nulls(len(tid), pa.string()),
    })
    return Trace(table, meta)

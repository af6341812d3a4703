"""Peer generators behind the one Generator interface, so they run in the same cells, on the
same splits, through the same evaluation as TraceSynth.

- `markov`, `copy`, `resample`: the built-in references (tracesynth.generators); `resample` is
  the span splice's walk through training with no model (the reference the spliced model must beat).
- `ar`: an autoregressive transformer of the same parameter count as the TraceSynth denoiser
  (model/ar_reference.py), trained on the same encoded windows with teacher forcing and
  sampled window by window exactly like the diffusion pipeline (each window continues the tail
  of the previous one), so only the model family differs. Trace starts get the same attention
  as TraceSynth's: the same share of training windows begins at a trace's first event
  (`start_rate`), and a generated trace begins from the first event of a training run (the
  autoregressive equivalent of a begin-of-trace token), so the peer learns and reproduces the
  start-up instead of beginning mid-run.
- `par`: SDV's PARSynthesizer (optional extra `peers`): a trace becomes sequences of `window`
  events with an `event` (categorical) and a `log_dt` (numerical) column; generated sequences
  are concatenated back into one canonical trace (event + ts; the other columns null).
- `dgan`: gretel-synthetics' DoppelGANger (optional extra `peers`), same conversion, with the
  event id as a discrete feature and log10 gap as a continuous one.

A peer whose library is missing raises `PeerUnavailable` with the import error; the runner
records that message in the cell's result instead of a number.
"""

from __future__ import annotations

import math
import time
import warnings

import numpy as np
import pyarrow as pa

from tracesynth.errors import ConfigError, TraceSynthError
from tracesynth.generators.base import Generator
from tracesynth.schema import Trace, TraceMeta


class PeerUnavailable(TraceSynthError):
    """The peer's library is not installed or cannot be imported here."""


def make_peer(name: str, params: dict, random_state: int) -> Generator:
    """A peer generator by adapter name (see module docstring)."""
    if name in ("markov", "copy", "resample"):
        from tracesynth.generators import make

        return make(name, random_state=random_state, **params)
    classes = {"ar": ARTransformerPeer, "par": PARPeer, "dgan": DGANPeer}
    if name not in classes:
        raise ConfigError(f"unknown peer {name!r}; choose one of: markov, copy, resample, {', '.join(classes)}")
    try:
        return classes[name](random_state=random_state, **params)
    except TypeError as exc:
        raise ConfigError(f"peer {name}: bad parameters ({exc})") from None


def _gaps(trace: Trace) -> np.ndarray:
    ts = trace.column("ts").to_numpy().astype(np.int64)
    return np.diff(ts, prepend=ts[:1]) if len(ts) else ts


def _event_dt_trace(events: list, gaps_ns: np.ndarray, start_ts: int, workload: str, generator: str) -> Trace:
    """Canonical trace from event names and gaps (the columns event/dt peers produce)."""
    ts = start_ts + np.cumsum(np.maximum(gaps_ns, 0).astype(np.int64))
    n = len(events)
    table = pa.table({"ts": pa.array(ts, pa.int64()), "event": pa.array(events, pa.string()),
                      **{c: pa.nulls(n) for c in ("cpu", "tid", "pid", "procname", "ret", "payload")}})
    return Trace(table, TraceMeta(source_format="tracesynth", workload=workload, extra={"generator": generator}))


# --- the autoregressive transformer ---------------------------------------------------------
class ARTransformerPeer(Generator):
    """A causal transformer over the same channels, encoder and windows as TraceSynth."""

    name = "ar"

    def __init__(self, channels: str = "light", context: int = 1024, size: str = "auto", train_steps: int = 300,
                 batch_events: int = 16384, lr: float = 1e-3, prefix_fraction: float = 0.25,
                 start_rate: float | None = None, device: str = "cpu", random_state: int = 0):
        super().__init__(random_state)
        self.channels = channels
        self.context = context
        self.size = size
        self.train_steps = train_steps
        self.batch_events = batch_events
        self.lr = lr
        self.prefix_fraction = prefix_fraction
        self.start_rate = start_rate  # None: TraceSynth's default share of trace-start windows
        self.device = device

    def _fit(self, traces_by_workload: dict[str, list[Trace]]) -> None:
        import torch

        from tracesynth.encoding.trace_encoder import TraceEncoder
        from tracesynth.model.ar_reference import matched_reference
        from tracesynth.model.config import START_RATE, ModelConfig, size_config
        from tracesynth.model.denoiser import Denoiser, parameter_count
        from tracesynth.model.train import WindowSource, resolve_device

        device = resolve_device(self.device)
        start_rate = START_RATE if self.start_rate is None else self.start_rate
        if not 0.0 <= start_rate <= 1.0:
            raise ConfigError(f"peer ar: start_rate must be in [0, 1], not {start_rate}")
        self.models_, self.encoders_, self.contexts_, self.first_events_ = {}, {}, {}, {}
        for workload, traces in traces_by_workload.items():  # one model per workload: no label input
            traces = [t.with_meta(workload=workload) for t in traces]
            encoder = TraceEncoder(self.channels).fit(traces)
            size = size_config(self.size, self.channels)
            longest = max(len(t) for t in traces)
            context = min(self.context, longest - 1)
            same_size = Denoiser(ModelConfig(vocab_sizes=encoder.vocab_sizes(), context=self.context, **size))
            torch.manual_seed(self.random_state)
            model = matched_reference(encoder.vocab_sizes(), parameter_count(same_size),
                                      width=size["d_global"], heads=size["heads"]).to(device)
            # +1: teacher forcing predicts events 1..context from 0..context-1
            source = WindowSource(encoder, traces, context + 1, 0.0, self.random_state, start_rate=start_rate)
            # each training run's first event, window-encoded: where generated traces begin
            self.first_events_[workload] = [encoder.window(e, 0, 1)[0] for e in source.encoded]
            batch = max(1, self.batch_events // context)
            optimizer = torch.optim.AdamW(model.parameters(), lr=self.lr, weight_decay=0.01)
            model.train()
            for step in range(self.train_steps):
                codes, _labels = source.batch(step, batch)
                lr = self.lr * min(1.0, (step + 1) / max(1, self.train_steps // 20))
                for group in optimizer.param_groups:
                    group["lr"] = lr
                loss = model.loss({c: v.to(device) for c, v in codes.items()})
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
            model.eval()
            self.models_[workload], self.encoders_[workload], self.contexts_[workload] = model, encoder, context
            self.params_ = parameter_count(model)

    def _sample(self, n_events: int, workload: str, seed: int) -> Trace:
        import torch

        from tracesynth.encoding.trace_encoder import columns_to_trace

        model, encoder, window = self.models_[workload], self.encoders_[workload], self.contexts_[workload]
        device = next(model.parameters()).device
        channels = model.channels
        banned = encoder.never_generated()
        generator = torch.Generator().manual_seed(seed)
        rng = np.random.default_rng(seed)
        decoder = encoder.decoder(workload, seed)
        n_prefix = max(1, int(window * self.prefix_fraction))
        parts, produced = [], 0
        prev_codes, prev_tids = None, None
        while produced < n_events:
            slot_tids = np.full(encoder.tid.slots, -1, dtype=np.int64)
            if prev_codes is None:  # the first event of a training run (a begin-of-trace token)
                firsts = self.first_events_[workload]
                first = firsts[int(rng.integers(len(firsts)))]
                prompt = {ch: np.asarray(first[ch], dtype=np.int64) for ch in channels}
                start = 0
            else:
                prompt = {ch: prev_codes[ch][-n_prefix:] for ch in channels}
                if "tid" in channels:
                    prompt["tid"], slot_tids = encoder.tid.slot_window(prev_tids[-n_prefix:])
                start = n_prefix
            tensor = {ch: torch.as_tensor(v, dtype=torch.long).view(1, -1).to(device) for ch, v in prompt.items()}
            new = model.generate(tensor, window - len(prompt["event"]), window, generator, banned)
            codes = {ch: np.concatenate([prompt[ch], new[ch][0].cpu().numpy()]) for ch in channels}
            cols = decoder.decode_window(codes, start, slot_tids.copy())
            take = min(n_events - produced, window - start)
            parts.append({k: v[:take] for k, v in cols.items()})
            produced += take
            window_tids = np.full(window, -1, dtype=np.int64)
            if "tid" in channels:
                if start:
                    window_tids[:start] = prev_tids[-n_prefix:]
                window_tids[start:] = cols["tid"]
            prev_codes, prev_tids = codes, window_tids
        meta = TraceMeta(source_format="tracesynth", workload=workload,
                         n_cpus=encoder.n_cpus if "cpu" in channels else None,
                         extra={"generator": self.name, "channels": list(channels), "seed": seed})
        return columns_to_trace(parts, meta)


# --- SDV PARSynthesizer --------------------------------------------------------------------
def _windows(trace: Trace, window: int, max_windows: int) -> tuple[np.ndarray, np.ndarray]:
    """(event names, log10(gap+1)) of up to `max_windows` evenly spaced windows, shape (W, window)."""
    events = np.asarray(trace.column("event").to_numpy(zero_copy_only=False), dtype=object)
    log_dt = np.log10(_gaps(trace).astype(np.float64) + 1.0)
    count = len(events) // window
    if count == 0:
        raise ConfigError(f"trace of {len(events)} events is shorter than one window of {window}")
    picks = np.linspace(0, count - 1, min(count, max_windows)).round().astype(int)
    idx = picks[:, None] * window + np.arange(window)[None, :]
    return events[idx], log_dt[idx]


class _SequencePeer(Generator):
    """Shared conversion for the window-sequence peers (event + dt)."""

    def __init__(self, window: int = 64, max_windows: int = 200, epochs: int = 32,
                 max_sample_seconds: float = 1800.0, random_state: int = 0):
        super().__init__(random_state)
        self.window = window
        self.max_windows = max_windows
        self.epochs = epochs
        self.max_sample_seconds = max_sample_seconds

    def _training_windows(self, traces: list[Trace]) -> tuple[np.ndarray, np.ndarray]:
        per = max(1, self.max_windows // len(traces))
        parts = [_windows(t, self.window, per) for t in traces]
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    def _seed_everything(self, seed: int) -> None:
        import random

        import torch

        random.seed(seed)
        np.random.seed(seed % 2**32)
        torch.manual_seed(seed)


class PARPeer(_SequencePeer):
    name = "par"

    def _fit(self, traces_by_workload: dict[str, list[Trace]]) -> None:
        try:
            import pandas as pd
            from sdv.metadata import Metadata
            from sdv.sequential import PARSynthesizer
        except ImportError as exc:
            raise PeerUnavailable(f"par: SDV is not installed ({exc}); pip install 'tracesynth[peers]'") from None
        self.models_, self.start_ts_ = {}, {}
        for workload, traces in traces_by_workload.items():
            events, log_dt = self._training_windows(traces)
            frame = pd.DataFrame({
                "seq_id": np.repeat(np.arange(len(events)), self.window).astype(str),
                "event": events.reshape(-1).astype(str),
                "log_dt": log_dt.reshape(-1),
            })
            metadata = Metadata.load_from_dict({"tables": {"trace": {
                "columns": {"seq_id": {"sdtype": "id"}, "event": {"sdtype": "categorical"},
                            "log_dt": {"sdtype": "numerical"}},
                "sequence_key": "seq_id"}}})
            self._seed_everything(self.random_state)
            with warnings.catch_warnings():  # SDV advises saving metadata to JSON: not our case
                warnings.simplefilter("ignore", UserWarning)
                model = PARSynthesizer(metadata, epochs=self.epochs, cuda=False, verbose=False,
                                       enforce_min_max_values=True)
                model.fit(frame)
            self.models_[workload] = model
            self.start_ts_[workload] = int(traces[0].column("ts")[0].as_py())

    def _sample(self, n_events: int, workload: str, seed: int) -> Trace:
        import pandas as pd

        self._seed_everything(seed)
        n_sequences = math.ceil(n_events / self.window)
        model = self.models_[workload]
        # PAR samples one event per LSTM step; measure on a first batch and refuse a size that
        # would run past the limit, with the measured rate in the message.
        first = min(n_sequences, 4)
        start = time.perf_counter()
        frames = [model.sample(num_sequences=first, sequence_length=self.window)]
        rate = first * self.window / max(time.perf_counter() - start, 1e-9)
        projected = n_events / rate
        if projected > self.max_sample_seconds:
            raise PeerUnavailable(f"par cannot sample {n_events} events within max_sample_seconds="
                                  f"{self.max_sample_seconds:.0f}: measured {rate:.0f} events/s, "
                                  f"about {projected / 60:.0f} min")
        if n_sequences > first:
            frames.append(model.sample(num_sequences=n_sequences - first, sequence_length=self.window))
        frame = pd.concat(frames, ignore_index=True)
        events = frame["event"].astype(str).tolist()[:n_events]
        gaps = np.rint(10 ** frame["log_dt"].to_numpy(dtype=np.float64)[:n_events] - 1.0)
        if len(events) < n_events:
            raise ConfigError(f"par produced {len(events)} events, asked {n_events}")
        return _event_dt_trace(events, gaps, self.start_ts_[workload], workload, self.name)


# --- gretel-synthetics DGAN ----------------------------------------------------------------
class DGANPeer(_SequencePeer):
    name = "dgan"

    def _fit(self, traces_by_workload: dict[str, list[Trace]]) -> None:
        try:
            from gretel_synthetics.timeseries_dgan.config import DGANConfig, OutputType
            from gretel_synthetics.timeseries_dgan.dgan import DGAN
        except ImportError as exc:
            raise PeerUnavailable(f"dgan: gretel-synthetics is not installed ({exc}); "
                                  "see docs/experiments.md (Peers) for why it may not install") from None
        self.models_, self.vocab_, self.start_ts_ = {}, {}, {}
        for workload, traces in traces_by_workload.items():
            events, log_dt = self._training_windows(traces)
            names, ids = np.unique(events.astype(str), return_inverse=True)
            features = np.stack([ids.reshape(events.shape).astype(np.float64), log_dt], axis=-1)
            self._seed_everything(self.random_state)
            config = DGANConfig(max_sequence_len=self.window, sample_len=max(1, self.window // 16),
                                batch_size=min(100, len(features)), epochs=self.epochs, cuda=False)
            model = DGAN(config)
            with warnings.catch_warnings():  # its notices (no CUDA, deprecations), not ours
                warnings.simplefilter("ignore")
                model.train_numpy(features=features,
                                  feature_types=[OutputType.DISCRETE, OutputType.CONTINUOUS])
            self.models_[workload], self.vocab_[workload] = model, names
            self.start_ts_[workload] = int(traces[0].column("ts")[0].as_py())

    def _sample(self, n_events: int, workload: str, seed: int) -> Trace:
        self._seed_everything(seed)
        n_sequences = math.ceil(n_events / self.window)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _attributes, features = self.models_[workload].generate_numpy(n_sequences)
        features = np.asarray(features, dtype=np.float64).reshape(-1, 2)[:n_events]
        names = self.vocab_[workload]
        ids = np.clip(np.rint(features[:, 0]).astype(int), 0, len(names) - 1)
        gaps = np.rint(10 ** features[:, 1] - 1.0)
        return _event_dt_trace(names[ids].tolist(), gaps, self.start_ts_[workload], workload, self.name)


def timed_fit_sample(generator: Generator, train: list[Trace], n_events: int, workload: str,
                     seed: int) -> tuple[Trace, float, float]:
    """(synthetic trace, train seconds, sample seconds)."""
    start = time.perf_counter()
    generator.fit(train)
    fitted = time.perf_counter()
    trace = generator.sample(n_events, workload=workload, seed=seed)
    return trace, fitted - start, time.perf_counter() - fitted

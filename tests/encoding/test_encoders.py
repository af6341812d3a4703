"""Encoders: real traces round-trip (exact for categorical channels, within a bin for dt)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import shared_trace

from tracesynth import Trace, TraceMeta
from tracesynth.encoding import TraceEncoder, columns_to_trace, resolve_channels
from tracesynth.encoding.dt import DtEncoder
from tracesynth.encoding.ret import RetEncoder, class_label
from tracesynth.encoding.tid import TidEncoder
from tracesynth.errors import ConfigError


@pytest.fixture(scope="module")
def real():
    return shared_trace("bug446190").with_meta(workload="bug")


def _decode_window(encoder, trace, start, length):
    codes, slot_tids = encoder.window(encoder.encode(trace), start, length)
    decoder = encoder.decoder(trace.meta.workload, seed=0)
    decoder.last_ts = int(trace.events["ts"][start].as_py())
    decoder.first = True
    return columns_to_trace([decoder.decode_window(codes, 0, slot_tids.copy())], trace.meta)


@pytest.mark.parametrize("start", [0, 12_000, 29_000])
def test_real_trace_round_trips(real, start):
    encoder = TraceEncoder("full").fit([real])
    back = _decode_window(encoder, real, start, 2048).to_pandas()
    orig = real.slice(start, 2048).to_pandas()
    for column in ("event", "cpu", "tid", "pid", "procname"):
        if column == "pid":
            continue  # pid is derived from the thread pool, not a channel
        assert orig[column].astype(object).where(orig[column].notna(), None).tolist() == \
            back[column].astype(object).where(back[column].notna(), None).tolist(), column
    # Return values: exact classes exact, buckets within the bucket.
    assert (encoder.ret.encode(orig["ret"].to_numpy()) == encoder.ret.encode(back["ret"].to_numpy())).all()
    exact = orig["ret"].notna() & (orig["ret"].abs() < 64)
    assert (orig["ret"][exact] == back["ret"][exact]).all()
    # Gaps: same log bin, so within one bin width (12%) of the original.
    gaps_orig, gaps_back = np.diff(orig["ts"].to_numpy()), np.diff(back["ts"].to_numpy())
    assert (encoder.dt.encode(gaps_orig) == encoder.dt.encode(gaps_back)).all()
    positive = gaps_orig > 0
    ratio = np.abs(np.log10(gaps_back[positive]) - np.log10(gaps_orig[positive]))
    assert ratio.max() <= 1 / encoder.dt.bins_per_decade + 1e-9


def test_encoder_json_round_trip(real):
    encoder = TraceEncoder("full").fit([real])
    text = json.dumps(encoder.to_json())
    again = TraceEncoder.from_json(text)
    a, b = encoder.encode(real), again.encode(real)
    assert all((a[ch] == b[ch]).all() for ch in a)
    assert again.vocab_sizes() == encoder.vocab_sizes()


def test_light_encoder_has_two_channels_and_decodes_nulls_elsewhere(real):
    encoder = TraceEncoder("light").fit([real])
    assert list(encoder.vocab_sizes()) == ["event", "dt"]
    back = _decode_window(encoder, real, 100, 256).to_pandas()
    assert back["tid"].isna().all() and back["cpu"].isna().all() and back["ret"].isna().all()
    assert back["ts"].is_monotonic_increasing


def test_channel_presets_and_errors():
    assert resolve_channels("light") == ("event", "dt")
    assert resolve_channels("full") == ("event", "dt", "tid", "cpu", "ret", "procname")
    assert resolve_channels("tid,event") == ("event", "tid")
    assert resolve_channels("light,tid") == ("event", "dt", "tid")  # a preset inside a list
    assert resolve_channels(["procname", "light", "dt"]) == ("event", "dt", "procname")
    with pytest.raises(ConfigError, match="unknown channel"):
        resolve_channels("event,colour")
    with pytest.raises(ConfigError, match="must include 'event'"):
        resolve_channels(["dt"])


def test_dt_bins_cover_nanoseconds_to_seconds():
    enc = DtEncoder()
    codes = enc.encode(np.array([0, 1, 9, 10, 1_000, 999_999_999, 10**10, 10**11]))
    assert codes[0] == 0 and codes[1] == 1 and codes[-1] == codes[-2] == enc.vocab_size - 1
    assert len(set(codes.tolist())) == len(codes) - 1
    enc.fit([np.array([0, 1234, 1240, 5, 5, 5])])
    rng = np.random.default_rng(0)
    assert set(enc.decode(enc.encode(np.full(50, 5)), rng).tolist()) == {5}
    low, high = enc.bin_edges(int(enc.encode(np.array([77_777]))[0]))
    drawn = enc.decode(enc.encode(np.full(200, 77_777)), rng)  # empty bin: log-uniform in the bin
    assert ((drawn >= np.floor(low)) & (drawn < high)).all()


def test_ret_classes_keep_their_meaning():
    enc = RetEncoder()
    values = np.array([np.nan, 0, 3, 63, 64, 4096, -2, -11, -4000, -(2**40)], dtype=object)
    values[0] = None
    codes = enc.encode(values)
    assert [class_label(int(c)) for c in codes] == [
        "NULL", "0", "3", "63", "[2^6,2^7)", "[2^12,2^13)", "-ENOENT", "-EAGAIN", "-E(134..4095)", "-[2^40,2^41)"]
    enc.fit([np.array([4096, 5000, 6000, 7, -2], dtype=float)])
    decoded = enc.decode(codes, np.random.default_rng(0))
    assert np.isnan(decoded[0]) and decoded[1:4].tolist() == [0, 3, 63] and decoded[6] == -2
    assert decoded[5] in (4096, 5000, 6000)
    assert (enc.encode(decoded) == codes).all()


def test_tid_slots_follow_first_appearance():
    enc = TidEncoder(slots=2)
    codes, slot_tids = enc.slot_window(np.array([-1, 42, 7, 42, 9, 7]))
    assert codes.tolist() == [0, 1, 2, 1, 3, 2]  # 9 is the third thread: overflow class
    assert slot_tids.tolist() == [42, 7]


def test_fork_child_gets_the_tid_the_parent_was_returned():
    trace = Trace.from_pydict({
        "ts": [1, 2, 3, 4, 5], "tid": [100, 100, 100, 200, 200], "pid": [100] * 3 + [200] * 2,
        "cpu": [0] * 5, "procname": ["sh"] * 5,
        "event": ["syscall_entry_clone", "syscall_exit_clone", "sched_switch", "syscall_exit_clone", "sched_switch"],
        "ret": [None, 200, None, 0, None]}, TraceMeta(workload="w"))
    encoder = TraceEncoder("full").fit([trace])
    codes, _ = encoder.window(encoder.encode(trace), 0, 5)
    cols = encoder.decoder("w", seed=3).decode_window(codes, 0)  # no known threads: all new
    tids, rets = cols["tid"], cols["ret"]
    assert tids[0] == tids[1] == tids[2] != tids[3]
    assert rets[1] == tids[3]          # parent's clone returns the child's tid
    assert rets[3] == 0                # the child's clone returns 0
    assert cols["pid"][3] == cols["pid"][0]  # a cloned thread stays in its parent's process


@pytest.mark.parametrize("workload, threads", [("scimark", 1), ("stream", 2)])
def test_encoder_counts_the_threads_that_make_syscalls(workload, threads):
    import tracesynth.datasets as ds

    # scimark's trace holds sched events of ~20 other tasks, but one thread makes syscalls.
    trace = ds.load(workload, 1)
    encoder = TraceEncoder("light").fit([trace])
    assert encoder.syscall_threads == threads
    assert encoder.single_syscall_thread is (threads == 1)
    again = TraceEncoder.from_json(json.loads(json.dumps(encoder.to_json())))
    assert again.syscall_threads == threads
    legacy = encoder.to_json()
    del legacy["syscall_threads"]
    assert TraceEncoder.from_json(legacy).single_syscall_thread is False  # unknown: not assumed


def test_the_encoder_keeps_each_training_runs_repeat_share():
    """What `generate` sets a trace's repeats beside: each training run's share of events in an
    exactly repeated 33-event span, as the evaluation counts it."""
    import tracesynth.datasets as ds
    from tracesynth.evaluation.longrange import repeat_share
    from tracesynth.evaluation.windows import Vocabulary, encode

    runs = [ds.load("sqlite", i).slice(0, 20_000).with_meta(workload="sqlite") for i in (1, 2)]
    encoder = TraceEncoder("light").fit(runs)
    vocab = Vocabulary.from_traces(runs)
    expected = [round(repeat_share([encode(r, vocab)]), 4) for r in runs]
    assert encoder.repeat_shares == {"sqlite": expected}
    assert all(0.5 < v <= 1 for v in expected)  # real sqlite repeats most of its spans (0.81-0.84)
    again = TraceEncoder.from_json(json.loads(json.dumps(encoder.to_json())))
    assert again.repeat_shares == encoder.repeat_shares
    legacy = encoder.to_json()
    del legacy["repeat_shares"]
    assert TraceEncoder.from_json(legacy).repeat_shares == {}  # older models: none

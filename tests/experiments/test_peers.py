"""Peer adapters on a real bundled workload: the `ar` peer trains, then samples across several
windows (the first from a training run's first event, the next from the last quarter of the previous one),
deterministically, with only event names seen in training."""

from __future__ import annotations

import pytest

import tracesynth.datasets as ds
from tracesynth.experiments.peers import make_peer


@pytest.fixture(scope="module")
def stream_runs():
    if "stream" not in ds.workloads():
        pytest.skip("bundled dataset not present")
    return [ds.load("stream", i).slice(0, 3000) for i in (1, 2)]


def test_ar_peer_samples_across_windows(stream_runs):
    params = {"context": 64, "size": "tiny", "train_steps": 3, "batch_events": 512}
    peer = make_peer("ar", params, random_state=0).fit(stream_runs)
    trace = peer.sample(300, workload="stream", seed=1)  # six windows: 1 + 63, then 16 + 48 each
    events = trace.column("event").to_pylist()
    assert len(events) == 300
    assert events[0] in {t.column("event")[0].as_py() for t in stream_runs}  # begins where real runs begin
    known = {e for t in stream_runs for e in t.column("event").to_pylist()}
    assert set(events) <= known
    ts = trace.column("ts").to_pylist()
    assert all(b >= a for a, b in zip(ts, ts[1:]))
    again = make_peer("ar", params, random_state=0).fit(stream_runs).sample(300, workload="stream", seed=1)
    assert again.column("event").to_pylist() == events


def test_ar_peer_rejects_a_bad_start_rate(stream_runs):
    from tracesynth.errors import ConfigError

    with pytest.raises(ConfigError, match="start_rate"):
        make_peer("ar", {"context": 64, "size": "tiny", "train_steps": 1, "start_rate": 1.5}, 0).fit(stream_runs)


@pytest.mark.parametrize("name, library", [("par", "sdv"), ("dgan", "gretel_synthetics.timeseries_dgan.dgan")])
def test_sequence_peers_train_and_sample_deterministically(stream_runs, name, library):
    # the optional peers (scripts/install_peers.sh, run by `make test`): real library, tiny budget
    pytest.importorskip(library)
    params = {"window": 32, "max_windows": 40, "epochs": 2}
    trace = make_peer(name, params, random_state=0).fit(stream_runs).sample(300, workload="stream", seed=1)
    events = trace.column("event").to_pylist()
    assert len(events) == 300
    known = {e for t in stream_runs for e in t.column("event").to_pylist()}
    assert set(events) <= known
    ts = trace.column("ts").to_pylist()
    assert all(b >= a for a, b in zip(ts, ts[1:]))
    again = make_peer(name, params, random_state=0).fit(stream_runs).sample(300, workload="stream", seed=1)
    assert again.column("event").to_pylist() == events
    assert again.column("ts").to_pylist() == ts

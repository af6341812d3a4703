"""The conformance check every generator must pass (the baselines now, the diffusion model later).

    from generators.conformance import check_generator
    check_generator(lambda seed: Markov(order=2, random_state=seed), traces)

`make_generator(seed)` returns a fresh, unfitted generator; `traces` are canonical training
traces of one workload (at least a few thousand events). Each failed property raises an
AssertionError (or pytest's) that says which property broke.
"""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc
import pytest

from tracesynth import Trace, TraceMeta
from tracesynth.errors import ConfigError
from tracesynth.schema import SCHEMA


def _assert_canonical(trace: Trace, n: int, workload: str, train_names: set[str]) -> None:
    assert isinstance(trace, Trace), "sample() must return a Trace"
    assert len(trace) == n, f"asked {n} events, got {len(trace)}"
    assert trace.events.schema.equals(SCHEMA), "output must have the canonical schema"
    assert trace.meta.workload == workload, "meta.workload must name the sampled workload"
    ts = trace.column("ts").to_numpy()
    assert (np.diff(ts) >= 0).all(), "timestamps must never decrease"
    assert trace.column("event").null_count == 0, "every event needs a name"
    names = set(pc.unique(trace.column("event")).to_pylist())
    assert names <= train_names, f"invented event names: {sorted(names - train_names)[:5]}"


def check_generator(make_generator, traces: list[Trace]) -> None:
    workload = traces[0].meta.workload
    train_names = {n for t in traces for n in pc.unique(t.column("event")).to_pylist()}

    # refused before fit, and on bad training input
    with pytest.raises(ConfigError):
        make_generator(0).sample(10)
    for bad in ([], ["not a trace"], [Trace.from_pydict({"ts": [], "event": []}, TraceMeta(workload=workload))]):
        with pytest.raises(ConfigError):
            make_generator(0).fit(bad)

    generator = make_generator(1)
    assert generator.fit(traces) is generator, "fit() must return self"

    # requested length honoured, canonical output
    for n in (1, 7, 3000):
        _assert_canonical(generator.sample(n), n, workload, train_names)

    # bad sampling requests refused
    for bad_n in (0, -5, 2.5, True, "10"):
        with pytest.raises(ConfigError):
            generator.sample(bad_n)
    with pytest.raises(ConfigError):
        generator.sample(10, workload="no-such-workload")

    # deterministic per seed (also across separately fitted instances), different seeds differ
    first = generator.sample(2000, seed=5)
    again = make_generator(1).fit(traces).sample(2000, seed=5)
    assert first.events.equals(again.events), "same seed must give the same trace"
    assert generator.sample(2000).events.equals(make_generator(1).fit(traces).sample(2000).events), \
        "random_state must seed sample() when no seed is given"
    other = generator.sample(2000, seed=6)
    assert not first.events.equals(other.events), "different seeds must give different traces"

    # several workloads: the label chooses, and is required
    relabelled = [t.with_meta(workload="other") for t in traces]
    multi = make_generator(2).fit([*traces, *relabelled])
    with pytest.raises(ConfigError):
        multi.sample(10)
    assert multi.sample(50, workload="other").meta.workload == "other"

"""`evaluate()` end to end: report keys, awkward inputs, and a real LTTng trace."""

from __future__ import annotations

import pyarrow as pa
import pytest
from conftest import ctf_trace
from evaluation.constructed import build, chain_trace

from tracesynth.errors import ConfigError
from tracesynth.evaluation.runner import evaluate, next_event_tstr
from tracesynth.generators.markov import Markov
from tracesynth.schema import Trace

HEADLINE_KEYS = {"tstr", "trtr", "tstr_trtr_ratio", "discriminative", "discriminative_real_floor",
                 "discriminative_events", "discriminative_events_real_floor", "copy_rate",
                 "copy_rate_holdout", "privacy_flagged", "event_jsd", "event_jsd_real_floor"}


@pytest.fixture(scope="module")
def quick_report():
    train, test = chain_trace(12_000, seed=1), chain_trace(6000, seed=2)
    synthetic = Markov(order=2, random_state=0).fit([train]).sample(6000)
    return evaluate([train], [test], [synthetic], seeds=2, quick=True)


def test_report_has_the_documented_keys(quick_report):
    assert {"report_version", "config", "workloads", "overall", "workload_classification", "cost"} <= set(quick_report)
    per = quick_report["workloads"]["unit"]
    assert HEADLINE_KEYS <= set(per["headline"]) and HEADLINE_KEYS <= set(quick_report["overall"])
    assert {"fidelity", "long_range", "privacy", "utility", "validity", "vocabulary", "events"} <= set(per)
    assert set(per["headline"]["discriminative"]) == {"512", "2048"}
    assert per["headline"]["tstr_trtr_ratio"]["next_event_ngram"] > 0.8  # order-2 chain of an order-1 process
    for key in ("tstr_accuracy", "trtr_accuracy", "tstr_weighted_f1", "trtr_weighted_f1"):
        assert 0 < per["headline"][key]["next_event_ngram"] <= 1 and key in quick_report["overall"]
    ngram = per["utility"]["next_event"]["ngram"]["tstr"]
    assert per["headline"]["tstr_accuracy"]["next_event_ngram"] == ngram["accuracy"]["mean"]
    assert per["headline"]["tstr"]["next_event_ngram"] == ngram["mean"]  # macro-F1 key unchanged
    assert quick_report["workload_classification"]["available"] is False
    cost = quick_report["cost"]
    assert cost["events_evaluated"] == {"train": 12_000, "test": 6000, "synthetic": 6000}
    assert cost["peak_rss_mb"] > 0 and cost["generator"]["reported"]


def test_validity_is_reported_or_honestly_absent(quick_report):
    validity = quick_report["workloads"]["unit"]["validity"]["synthetic"]
    assert validity["available"] in (True, False)
    if not validity["available"]:
        assert validity["reason"] and "total" not in validity
    serial = quick_report["workloads"]["unit"]["validity"]["serial"]
    assert set(serial) == {"synthetic", "real_test"}
    assert {"syscalls", "events", "serial_events", "per_1k"} <= set(serial["synthetic"])


def test_awkward_inputs_are_refused_with_clear_errors():
    train, test, syn = chain_trace(2000, seed=1), chain_trace(2000, seed=2), chain_trace(2000, seed=3)
    with pytest.raises(ConfigError, match="no synthetic traces"):
        evaluate([train], [test], [])
    with pytest.raises(ConfigError, match="workload label"):
        evaluate([train], [test], [syn.with_meta(workload=None)])
    with pytest.raises(ConfigError, match="workloads differ"):
        evaluate([train], [test], [syn.with_meta(workload="other")])
    with pytest.raises(ConfigError, match="has no events"):
        evaluate([train], [test.slice(0, 0)], [syn])


def test_unknown_synthetic_events_are_counted_not_hidden():
    train, test = chain_trace(3000, seed=1), chain_trace(3000, seed=2)
    events = train.column("event").to_pylist()[:3000]
    events[::10] = ["invented_event"] * len(events[::10])
    report = evaluate([train], [test], [build(events)], seeds=1, quick=True)
    vocab = report["workloads"]["unit"]["vocabulary"]
    assert vocab["unknown_event_share"] == pytest.approx(0.1)
    assert vocab["unknown_events"] == ["invented_event"]


def test_workload_override_labels_unlabelled_traces():
    t = [chain_trace(3000, seed=s).with_meta(workload=None) for s in (1, 2, 3)]
    report = evaluate(t[:1], t[1:2], t[2:], seeds=1, quick=True, workload="w")
    assert list(report["workloads"]) == ["w"]


def test_real_trace_split_in_time_halves():
    import tracesynth

    trace = tracesynth.load(ctf_trace("bug446190"), workload="bug446190")
    half = len(trace) // 2
    train, test = trace.slice(0, half), trace.slice(half)
    synthetic = Markov(order=4, random_state=0).fit([train]).sample(len(test))
    report = evaluate([train], [test], [synthetic], seeds=1, quick=True)
    head = report["workloads"]["bug446190"]["headline"]
    assert 0 < head["tstr"]["next_event_ngram"] <= 1 and 0 < head["trtr"]["next_event_ngram"] <= 1
    assert head["discriminative"]["512"] is not None and head["discriminative_real_floor"]["512"] is not None
    assert not head["privacy_flagged"]
    # a Markov trace has threads and CPUs, so its main score reads them; the event-types-only
    # score is exactly what the same events score without those columns (what a light trace gets)
    disc = report["workloads"]["bug446190"]["long_range"]["discriminative"]
    assert disc["channels"] == ["tid", "cpu"] and set(disc["events_only"]) == {"synthetic_vs_real", "real_vs_real"}
    blind_table = synthetic.events.set_column(synthetic.events.schema.get_field_index("tid"), "tid",
                                              pa.nulls(len(synthetic), pa.int64()))
    blind_table = blind_table.set_column(blind_table.schema.get_field_index("cpu"), "cpu",
                                         pa.nulls(len(synthetic), pa.int64()))
    blind = evaluate([train], [test], [Trace(blind_table, synthetic.meta)], seeds=1, quick=True)
    blind_head = blind["workloads"]["bug446190"]["headline"]
    assert blind["workloads"]["bug446190"]["long_range"]["discriminative"]["channels"] == []
    assert head["discriminative_events"] == blind_head["discriminative"] == blind_head["discriminative_events"]
    assert head["discriminative_events_real_floor"] == blind_head["discriminative_real_floor"]


def test_same_seeds_same_report():
    train, test = chain_trace(6000, seed=1), chain_trace(3000, seed=2)
    synthetic = Markov(order=2, random_state=0).fit([train]).sample(3000)
    first, second = (evaluate([train], [test], [synthetic], seeds=1, quick=True) for _ in range(2))
    first.pop("cost"), second.pop("cost")
    assert first == second


def test_null_synthetic_event_name_is_a_format_error_naming_trace_and_row():
    from tracesynth.errors import TraceFormatError

    train, test = chain_trace(2000, seed=1), chain_trace(2000, seed=2)
    import pyarrow as pa

    from tracesynth import Trace

    events = train.column("event").to_pylist()
    events[7] = None  # `build` would turn None into the string "None"
    table = train.events.set_column(train.events.schema.get_field_index("event"), "event", pa.array(events))
    syn = Trace(table, train.meta).with_meta(extra={"generator": "markov"})
    with pytest.raises(TraceFormatError, match=r"markov \(row 7\): synthetic trace has a null event name"):
        evaluate([train], [test], [syn], seeds=1, quick=True)


def test_next_event_tstr_is_the_report_s_tstr_on_the_same_traces(quick_report):
    """The size-matched figure (`tstr_matched`) is `evaluate`'s TSTR, computed on however many
    synthetic events it is given: same vocabulary, test examples and predictor seeds."""
    train, test = chain_trace(12_000, seed=1), chain_trace(6000, seed=2)
    synthetic = Markov(order=2, random_state=0).fit([train]).sample(6000)
    head = quick_report["workloads"]["unit"]["headline"]
    assert next_event_tstr([train], [test], [synthetic], seeds=2)["mean"] == head["tstr"]["next_event_ngram"]
    # trained on the real training run itself, it is TRTR
    assert next_event_tstr([train], [test], [train], seeds=2)["mean"] == head["trtr"]["next_event_ngram"]
    with pytest.raises(ConfigError, match="predictor must be one of ngram, gru"):
        next_event_tstr([train], [test], [synthetic], predictor="lstm")
    with pytest.raises(ConfigError, match="no synthetic traces given"):
        next_event_tstr([train], [test], [])


def test_copying_more_than_the_holdout_is_named_with_what_lowers_it(quick_report):
    """A synthetic trace that is a training run's copy is flagged, and the summary line says so
    and names the setting measured to copy less; a Markov trace is not flagged: no line."""
    from tracesynth.evaluation.report import privacy_summary

    assert privacy_summary("unit", quick_report["workloads"]["unit"]) is None
    train, test = chain_trace(12_000, seed=1), chain_trace(6000, seed=2)
    copied = train.slice(2000, 6000)
    copied.meta.workload = train.meta.workload
    report = evaluate([train], [test], [copied], seeds=1, quick=True)
    line = privacy_summary("unit", report["workloads"]["unit"])
    assert line.startswith("unit: copies more of the training runs than the held-out run does (")
    assert "-gram copy share 1.00 vs holdout" in line and "`generate --temperature 1.2`" in line


def test_an_anchored_start_up_is_reported_as_such(quick_report):
    """A trace whose generator took its start from a training run (`generate --start-anchor`)
    says so beside its start-up edits: those are the anchor's, not the model's."""
    import copy

    from tracesynth.evaluation.report import startup_summary

    per = quick_report["workloads"]["unit"]
    assert per["fidelity"]["startup"]["synthetic"]["anchored"] == [0]  # a Markov trace: nothing anchored
    line = startup_summary("unit", per)
    assert line.startswith("unit: the first 256 events are ") and "anchored" not in line
    train, test = chain_trace(12_000, seed=1), chain_trace(6000, seed=2)
    head = train.slice(0, 256).events.replace_schema_metadata(None)
    rest = Markov(order=2, random_state=0).fit([train]).sample(5744)
    meta = copy.deepcopy(rest.meta)
    meta.extra["start_anchor"] = 256
    anchored = Trace(pa.concat_tables([head, rest.events.replace_schema_metadata(None)]), meta)
    report = evaluate([train], [test], [anchored, rest], seeds=1, quick=True)
    start = report["workloads"]["unit"]["fidelity"]["startup"]["synthetic"]
    assert start["anchored"] == [256, 0] and start["edits"]["per_trace"][0] == 0
    assert startup_summary("unit", report["workloads"]["unit"]).endswith(
        "; anchored: 1 of 2 synthetic traces begin with up to 256 events of a training run's (`generate --start-anchor`)")

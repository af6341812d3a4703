"""The cadence table on real runs: fileio's syncs are a rhythm, gzip's short loop is not one to place."""

from __future__ import annotations

import numpy as np
import pytest

import tracesynth.datasets as ds
from tracesynth.encoding.cadence import MIN_GAP, MIN_GAPS, CadenceTable
from tracesynth.encoding.trace_encoder import TraceEncoder


@pytest.fixture(scope="module")
def fileio():
    runs = [ds.load("fileio", r) for r in (2, 3)]
    encoder = TraceEncoder("light").fit(runs)
    return encoder, [encoder.encode(r)["event"] for r in runs]


def names(encoder, codes) -> list[str]:
    return list(encoder.event.decode(np.asarray(codes, dtype=np.int64)))


def test_fileio_syncs_are_one_rhythm_with_their_exit_as_member(fileio):
    encoder, runs = fileio
    (rhythm,) = encoder.cadence.of("fileio")
    assert names(encoder, [rhythm.event]) == ["syscall_entry_fdatasync"]
    # every 256 writes: 523 events nine times in ten, the file changes a little further
    assert 500 <= rhythm.low <= 523 <= rhythm.high <= 600
    assert np.median(rhythm.gaps) == 523 and (np.diff(rhythm.gaps) >= 0).all()
    # 60 syncs a run; a pause (the read phase, a slow sync) splits them into phases
    assert rhythm.phases.sum() == 2 * 60 and rhythm.phases.min() >= 2
    (member,) = rhythm.members.tolist()
    assert names(encoder, [member[0]]) == ["syscall_exit_fdatasync"] and 0 < member[1] <= member[2] < rhythm.low / 2
    # between entry and exit only the scheduler runs; a sync comes after writes, never reads
    assert set(names(encoder, rhythm.inside(0))) == {"sched_switch", "sched_wakeup"}
    assert {"syscall_entry_write", "syscall_exit_write"} <= set(names(encoder, rhythm.before))
    assert not {"syscall_entry_read", "syscall_exit_read"} & set(names(encoder, rhythm.before))


def test_fileio_closes_every_20th_sync_of_a_phase_with_an_fsync(fileio):
    """fio syncs every 256 writes and finishes a file every 20 syncs: an `fsync` right after
    that sync's exit (three times a run; the fourth, at the end of the run, is not after one),
    then the file's `close` and the next one's `openat`, which come elsewhere too but after no
    other sync."""
    encoder, _ = fileio
    (rhythm,) = encoder.cadence.of("fileio")
    assert rhythm.period == 20 and rhythm.phases.tolist() == [40, 20, 40, 20] and rhythm.has_closers
    assert names(encoder, rhythm.closers) == [f"syscall_{k}_{call}" for call in ("fsync", "close", "openat")
                                              for k in ("entry", "exit")]
    assert len(rhythm.layouts) == 2 * 3 and (rhythm.layouts[:, 0] == 1).all()  # right after the exit
    assert (rhythm.layouts[:, 1] == 0).all() and set(rhythm.layouts[:, 2].tolist()) <= {3, 4}
    assert (np.diff(rhythm.layouts[:, 1:], axis=1) >= 1).all() and rhythm.layouts[:, -1].max() < 16


def test_closers_need_every_closing_occurrence_and_no_other():
    rng = np.random.default_rng(1)
    codes, closing = [], []
    for k in range(1, 25):  # anchor 1 every 200-209 events; event 3 after every 4th, event 4 after a few
        block = np.zeros(int(rng.integers(200, 210)), dtype=np.int64)
        block[0] = 1
        if k % 4 == 0:
            block[5:7] = 3, 5
            block[8] = 6  # common elsewhere (below), after no other anchor: it comes along
        if k in (3, 4):
            block[9] = 4
        block[150:160] = 6
        codes.append(block)
    (rhythm,) = CadenceTable.fit([("w", np.concatenate(codes))]).of("w")
    assert rhythm.event == 1 and rhythm.period == 4 and rhythm.closers.tolist() == [3, 5, 6]
    assert rhythm.layouts.tolist() == [[5, 0, 1, 3]] * 6  # no member: the lead counts from the anchor
    alone = [b.copy() for b in codes]
    for b in alone:
        b[5:7] = 0  # only the event common elsewhere follows them: an end, not a period
    (plain,) = CadenceTable.fit([("w", np.concatenate(alone))]).of("w")
    assert plain.period == 0 and not plain.has_closers
    for k in (1, 2):  # one closing occurrence without it: no closer
        codes[4 * k - 1][5:7] = 0
        assert CadenceTable.fit([("w", np.concatenate(codes))]).of("w")[0].period == 0
        codes[4 * k - 1][5:7] = 3, 5


def test_short_or_unsteady_recurrences_are_left_to_the_model():
    runs = [ds.load("gzip", r) for r in (1, 2)]
    encoder = TraceEncoder("light").fit(runs)
    assert encoder.cadence.of("gzip") == []  # its file loop recurs every 34 events: under MIN_GAP
    rng = np.random.default_rng(0)
    steady = np.cumsum(rng.integers(200, 210, 40))
    loose = np.cumsum(rng.integers(50, 600, 40))
    codes = np.zeros(steady[-1] + loose[-1] + 10, dtype=np.int64)
    codes[steady] = 1
    codes[loose] = 2
    table = CadenceTable.fit([("w", codes)])
    assert [r.event for r in table.of("w")] == [1]
    few = CadenceTable.fit([("w", codes[:steady[MIN_GAPS - 2] + 1])])  # MIN_GAPS - 2 gaps
    assert few.of("w") == []
    assert MIN_GAP > 34


def test_arrays_round_trip_and_bad_arrays_fail(fileio):
    encoder, _ = fileio
    table = encoder.cadence
    back = CadenceTable.from_arrays(table.to_arrays())
    (a,), (b,) = table.of("fileio"), back.of("fileio")
    assert a.event == b.event and (a.gaps == b.gaps).all() and (a.phases == b.phases).all()
    assert (a.members == b.members).all() and (a.before == b.before).all()
    assert all((x == y).all() for x, y in zip(a.between, b.between))
    assert a.period == b.period == 20 and (a.closers == b.closers).all() and (a.layouts == b.layouts).all()
    arrays = table.to_arrays()
    del arrays["period/fileio/0"], arrays["closers/fileio/0"], arrays["layouts/fileio/0"]
    (old,) = CadenceTable.from_arrays(arrays).of("fileio")  # a table saved before closers
    assert old.period == 0 and not old.has_closers
    arrays = table.to_arrays()
    arrays["layouts/fileio/0"][:, 2] = 0  # the exit at the entry
    with pytest.raises(ValueError, match="closers/fileio/0 must come with a period"):
        CadenceTable.from_arrays(arrays)
    arrays = table.to_arrays()
    arrays["gaps/fileio/0"] = arrays["gaps/fileio/0"][::-1].copy()
    with pytest.raises(ValueError, match="sorted positive gaps"):
        CadenceTable.from_arrays(arrays)
    arrays = table.to_arrays()
    del arrays["phases/fileio/0"]
    with pytest.raises(ValueError, match="bad cadence entry"):
        CadenceTable.from_arrays(arrays)


def test_the_model_directory_keeps_the_table(fileio, tmp_path):
    from tracesynth.model.checkpoint import load_model, save_checkpoint
    from tracesynth.model.config import SIZES, ModelConfig
    from tracesynth.model.denoiser import Denoiser

    encoder, _ = fileio
    model = Denoiser(ModelConfig(context=64, vocab_sizes=encoder.vocab_sizes(), n_workloads=len(encoder.workloads),
                                 **SIZES["tiny"]))
    save_checkpoint(tmp_path / "m", model, encoder, None)
    assert (tmp_path / "m" / "cadence.safetensors").exists()
    loaded = load_model(tmp_path / "m")[1].cadence
    assert [r.event for r in loaded.of("fileio")] == [r.event for r in encoder.cadence.of("fileio")]

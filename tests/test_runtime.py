"""tracesynth.runtime: the CLI's process settings take effect, a user's own choice wins, and
the sampler's thread count follows the cores other processes use without changing a trace."""

import os
import subprocess
import sys
import types

import pytest
import torch

from tracesynth import runtime


def test_malloc_keeps_freed_memory_on_glibc():
    # This machine's C library is glibc (Debian); mallopt accepts both settings.
    assert runtime.keep_freed_memory() is True


def test_users_malloc_environment_wins(monkeypatch):
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "0")
    assert runtime.keep_freed_memory() is False
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_")
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=65536")
    assert runtime.keep_freed_memory() is False


def _child(code: str, env: dict[str, str], args: list[str] = ()) -> str:
    clean = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    out = subprocess.run([sys.executable, "-c", code, *args], env={**clean, **env}, capture_output=True,
                         text=True, check=True)
    return out.stdout.strip()


def _policy_for(args: list[str], env: dict[str, str]) -> str:
    code = ("import os, sys\nfrom tracesynth.cli import main\nmain(sys.argv[1:])\n"
            "print(os.environ.get('OMP_WAIT_POLICY'), 'torch' in sys.modules)")
    return _child(code + "\n", env, args).splitlines()[-1]


def test_cli_sets_the_wait_policy_per_command_before_torch_is_loaded():
    # Sampling keeps libgomp's default (spin, then sleep); everything else sleeps at once.
    assert _policy_for(["generate", "--help"], {}) == "None False"
    assert _policy_for(["train", "--help"], {}) == "PASSIVE False"
    assert _policy_for(["check", "--help"], {}) == "PASSIVE False"
    assert _policy_for(["train", "--help"], {"OMP_WAIT_POLICY": "ACTIVE"}) == "ACTIVE False"


@pytest.mark.parametrize("n_cpus,max_threads,others,expected", [
    (2, 2, 0.0, 2), (2, 2, 0.15, 2), (2, 2, 0.3, 1), (2, 2, 0.67, 1), (2, 2, 1.0, 1), (2, 2, 2.0, 1),
    (16, 8, 1.0, 8), (16, 8, 9.5, 6), (16, 8, 15.9, 1), (4, 4, 1.1, 3)])
def test_one_thread_fewer_per_core_others_use(n_cpus, max_threads, others, expected):
    assert runtime.choose_threads(n_cpus, max_threads, others) == expected


STAT = """cpu  {a} 0 {b} 900 7 0 0 0 0 0
cpu0 {a} 0 0 400 3 0 0 0 0 0
cpu1 0 0 {b} 500 4 0 0 0 0 0
cpu2 50 0 0 500 4 0 0 0 0 0
intr 1 2 3
"""


def test_busy_ticks_read_the_allowed_cpus_without_idle_or_iowait(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text(STAT.format(a=30, b=20))
    assert runtime._busy_ticks(str(stat), {0, 1}) == 50
    assert runtime._busy_ticks(str(stat), {2}) == 50
    assert runtime._busy_ticks(str(tmp_path / "missing"), {0}) is None


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def test_sampling_threads_give_a_core_up_while_another_process_uses_it(tmp_path, monkeypatch, two_threads):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    clock = {"now": 100.0, "own": 5.0}
    monkeypatch.setattr(runtime, "time", types.SimpleNamespace(monotonic=lambda: clock["now"], sleep=lambda s: None))
    monkeypatch.setattr(runtime.os, "times", lambda: types.SimpleNamespace(user=clock["own"], system=0.0))
    monkeypatch.setattr(runtime.os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(runtime.os, "sysconf", lambda name: 100)
    stat = tmp_path / "stat"
    busy = {"a": 0, "b": 0}
    stat.write_text(STAT.format(**busy))

    def elapse(seconds, own_cores, other_cores):
        clock["now"] += seconds
        clock["own"] += seconds * own_cores
        busy["a"] += round(100 * seconds * own_cores)
        busy["b"] += round(100 * seconds * other_cores)
        stat.write_text(STAT.format(**busy))

    loadavg = tmp_path / "loadavg"
    loadavg.write_text("0.50 0.40 0.30 1/120 999\n")  # runnable now: this test's thread alone
    with runtime.SamplingThreads(stat_path=str(stat), loadavg_path=str(loadavg)) as threads:
        assert threads.enabled and threads.max_threads == 2
        assert threads.update() == 2  # the first window: nobody else runnable
        elapse(0.5, own_cores=2.0, other_cores=0.0)  # alone: both cores
        assert threads.update() == 2
        elapse(0.5, own_cores=1.4, other_cores=0.6)  # a busy loop starved by our spinning
        assert threads.update() == 1 and torch.get_num_threads() == 1
        elapse(0.05, own_cores=1.0, other_cores=1.0)  # too soon to tell: unchanged
        assert threads.update() == 1
        elapse(0.5, own_cores=1.0, other_cores=1.0)
        assert threads.update() == 1
        elapse(0.5, own_cores=1.0, other_cores=0.05)  # it left
        assert threads.update() == 2
        elapse(0.5, own_cores=1.0, other_cores=1.0)
        assert threads.update() == 1
        assert [t for _, t in threads.history] == [2, 1, 1, 2, 1]
        assert threads.history[1][0] == pytest.approx(0.6)
    assert torch.get_num_threads() == 2  # put back as it was found


def test_the_first_window_goes_by_whoever_is_runnable_now(tmp_path, monkeypatch, two_threads):
    # No stretch measured yet: a busy process runnable at every look takes a core from the
    # first window already (a window with spinning threads on a contended core costs 2-2.5x).
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(runtime.os, "sched_getaffinity", lambda pid: {0, 1})
    loadavg = tmp_path / "loadavg"
    loadavg.write_text("1.00 0.40 0.30 2/120 999\n")
    with runtime.SamplingThreads(loadavg_path=str(loadavg)) as threads:
        assert threads.update() == 1 and torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2
    loadavg.write_text("garbage\n")
    assert runtime.running_elsewhere(str(loadavg)) is None


def test_sampling_threads_leave_a_users_thread_count_alone(monkeypatch, two_threads):
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    with runtime.SamplingThreads() as threads:
        assert not threads.enabled and threads.update() == 2
    monkeypatch.delenv("OMP_NUM_THREADS")
    torch.set_num_threads(1)
    assert not runtime.SamplingThreads().enabled  # one thread: nothing to give up
    torch.set_num_threads(2)
    assert not runtime.SamplingThreads(stat_path="/nonexistent/stat").enabled
    assert not runtime.SamplingThreads(active=False).enabled  # a model on a GPU


def test_a_trace_does_not_depend_on_the_thread_count(two_threads):
    # What lets the sampler change its thread count between windows under a fixed seed: the
    # same trace at one and at two threads (a model of the default size on a real trace).
    import tracesynth.datasets as ds
    from tracesynth.generators.diffusion import TraceSynth

    real = ds.load("sqlite", 1)
    gen = TraceSynth(channels="full", context=512, train_steps=4, batch_size=2, random_state=0).fit([real])
    traces = []
    for n in (1, 2):
        torch.set_num_threads(n)
        traces.append(gen.sample(1200, workload="sqlite", seed=3).events)
    assert traces[0].equals(traces[1])

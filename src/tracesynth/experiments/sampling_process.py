"""TraceSynth cells sampled in a child process whose OpenMP threads wait as `tracesynth
generate`'s do.

`tracesynth experiment` trains and samples in one process, and the command line makes that
process's OpenMP threads passive (`runtime.tune_cpu_process`): training beside another busy
process took 1.72x the time with spinning threads, and a thread count that followed the load
would change the trained weights. libgomp reads its wait policy once, when PyTorch loads, so the
same process cannot sample with `generate`'s spinning, load-following threads, which took
0.68-0.76x the passive time on idle cores (`benchmarks/results/support/bench_threads_policy.txt`).
The experiment's speed column then under-stated what users get from `tracesynth generate`.

So where the passive policy was set by TraceSynth itself (not by the user), CPU cells are sampled
in one spawned child for the whole run: started without OMP_WAIT_POLICY, it loads each cell's
saved model directory (the weights the parent would sample), applies the same settings, times
`generate` alone and hands the trace back through a Parquet file. Same seed, same trace as in
the parent (the sampler's output does not depend on the thread count;
tests/experiments/test_sampling_process.py). Peers still sample in the parent.
"""

from __future__ import annotations

import multiprocessing
import os
import tempfile
import time
from pathlib import Path

from tracesynth.schema import Trace


def _start(threads: int) -> None:
    """The child's set-up, before anything imports torch: the CLI's heap settings, the parent's
    thread count. Ctrl-C reaches the whole process group; the parent handles it (and stops the
    child), so the child ignores it rather than print a traceback of its idle wait."""
    import signal

    from tracesynth.runtime import keep_freed_memory

    signal.signal(signal.SIGINT, signal.SIG_IGN)

    keep_freed_memory()
    import torch

    torch.set_num_threads(threads)


def _generate(model_dir: str, settings: dict, n_events: int, workload: str, seed: int, constraints: str,
              out: str) -> float:
    """Sample one cell in the child; the trace goes to `out`, the sampling seconds come back.
    Errors come back as RuntimeError with the original type in the message: the library's own
    exception classes take arguments that pickling across processes would lose."""
    try:
        from tracesynth.generators.diffusion import TraceSynth

        generator = TraceSynth.load(model_dir, device="cpu")
        for key, value in settings.items():
            setattr(generator, key, value)
        start = time.perf_counter()
        trace = generator.generate(n_events, workload, seed, constraints=constraints)
        seconds = time.perf_counter() - start
        trace.save(out)
        return seconds
    except Exception as exc:  # noqa: BLE001 — re-raised with its type named
        raise RuntimeError(f"{type(exc).__name__}: {exc}") from None


class SamplingProcess:
    """One spawned child that samples TraceSynth cells (`generate`); `close` (or `with`) ends it."""

    def __init__(self, threads: int):
        context = multiprocessing.get_context("spawn")
        saved = os.environ.pop("OMP_WAIT_POLICY", None)  # the child starts with libgomp's default
        try:
            self._pool = context.Pool(1, initializer=_start, initargs=(threads,))
        finally:
            if saved is not None:
                os.environ["OMP_WAIT_POLICY"] = saved

    def generate(self, model_dir: str | Path, settings: dict, n_events: int, workload: str, seed: int,
                 constraints: str) -> tuple[Trace, float]:
        """(the trace, seconds `generate` took in the child)."""
        from tracesynth import load as load_trace

        with tempfile.TemporaryDirectory(prefix="tracesynth-sample-") as tmp:
            out = Path(tmp) / "trace.parquet"
            seconds = self._pool.apply(_generate, (str(model_dir), settings, n_events, workload, seed,
                                                   constraints, str(out)))
            return load_trace(out, "parquet"), seconds

    def close(self, interrupted: bool = False) -> None:
        """Let the child finish and exit; `interrupted` (the run stopped by an error or Ctrl-C):
        stop it at once, whatever it is drawing."""
        if interrupted:
            self._pool.terminate()
        else:
            self._pool.close()
        self._pool.join()

    def __enter__(self) -> SamplingProcess:
        return self

    def __exit__(self, exc_type, *exc) -> None:
        self.close(interrupted=exc_type is not None)

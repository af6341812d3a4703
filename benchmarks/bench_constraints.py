"""Throughput of `check` and `repair` on a real trace, on one core, against a baseline
measured in the same run: reading the same trace from Parquet.

    .venv/bin/python benchmarks/bench_constraints.py [TRACE] [--repeat 3]

TRACE defaults to the shared LTTng trace many-threads (240,644 events). Times are CPU seconds
of this process (pyarrow limited to one thread), the best of --repeat runs. Prints events/s for
check, repair of the clean trace, repair of a mangled copy (the same trace with entries lost,
return values, names, CPUs and timestamps corrupted), and the sampling guide's time per
4,096-event window.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
DEFAULT = REPO.parent / "shared" / "data" / "ctf" / "many-threads"


def best(fn, repeat):
    """Fastest of `repeat` runs, in CPU seconds of this (single-threaded) process: on a shared
    machine wall time mostly measures the neighbours."""
    times = []
    result = None
    for _ in range(repeat):
        start = time.process_time()
        result = fn()
        times.append(time.process_time() - start)
    return min(times), result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", nargs="?", default=str(DEFAULT))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    os.environ.setdefault("OMP_NUM_THREADS", "1")

    import tracesynth
    from tracesynth.constraints import ConstraintGuide, check, repair
    from tracesynth.constraints.corrupt import corrupt

    trace = tracesynth.load(args.trace)
    n = len(trace)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.parquet"
        trace.save(path)
        t_read, _ = best(lambda: tracesynth.Trace(pq.read_table(path)), args.repeat)
    t_check, report = best(lambda: check(trace), args.repeat)
    t_repair, (_, log) = best(lambda: repair(trace), args.repeat)
    broken = corrupt(trace, per_kind=max(n // 2000, 10))
    t_broken, (fixed, broken_log) = best(lambda: repair(broken), args.repeat)
    assert not check(fixed).violated

    window = trace.events.slice(n // 2, 4096).to_pandas()
    rng = np.random.default_rng(0)
    masked = rng.random(len(window)) < 0.5
    partial = {"event": np.where(masked, None, window.event.to_numpy(object)),
               "tid": np.where(masked, -1, window.tid.fillna(-1).to_numpy(np.int64)),
               "cpu": np.where(masked, -1, window.cpu.fillna(-1).to_numpy(np.int64)),
               "ret": np.where(masked, np.nan, window.ret.to_numpy(np.float64)),
               "decided": ~masked}
    guide = ConstraintGuide()
    t_guide, _ = best(lambda: [guide.violating_positions(partial) for _ in range(20)], args.repeat)

    rate = lambda t: n / t  # noqa: E731
    shown = os.path.relpath(args.trace, REPO) if os.path.isabs(args.trace) else args.trace
    print(f"trace: {shown} ({n:,} events), one core, best of {args.repeat} (CPU time)")
    print(f"baseline  read Parquet        {rate(t_read):>12,.0f} events/s")
    print(f"check     ({report.violations} violations)     {rate(t_check):>12,.0f} events/s"
          f"   {t_check / t_read:5.1f}x the Parquet read time")
    print(f"repair    clean ({len(log)} edits)       {rate(t_repair):>12,.0f} events/s"
          f"   {t_repair / t_read:5.1f}x")
    print(f"repair    mangled ({len(broken_log):,} edits) {len(broken) / t_broken:>12,.0f} events/s"
          f"   {t_broken / t_read:5.1f}x")
    print(f"guide     4,096-event window   {t_guide / 20 * 1000:12.2f} ms per call")
    return 0


if __name__ == "__main__":
    sys.exit(main())

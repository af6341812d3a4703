"""Ingest and export throughput per format, with baselines measured in the same run.

    .venv/bin/python benchmarks/bench_ingest.py [--trace many-threads] [--repeat 1]

Readers: events/s of each reader, next to a floor measured on the same input in the same run
(the `babeltrace2` C CLI printing the CTF trace to /dev/null; a bare Python line loop for the
text formats; pyarrow's own reader for the table formats), so the ratio says how much our
parsing adds. Writers: events/s of each sink on the same table, relative to the Parquet sink.
The machine is noisy: compare ratios, not absolute figures, across runs.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

import pyarrow.parquet as pq  # noqa: E402

import tracesynth  # noqa: E402
from tracesynth.sinks import write_trace  # noqa: E402
from tracesynth.sources import open_reader  # noqa: E402

SHARED = REPO.parent / "shared" / "data" / "ctf"
FIXTURES = REPO / "tests" / "data"


def timed(fn, repeat: int) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def read_all(path: Path, fmt: str | None = None) -> int:
    return sum(b.num_rows for b in open_reader(path, fmt).batches())


def line_loop(path: Path) -> int:
    n = 0
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            n += len(line.split())
    return n


def peak_rss_of_ingest(path: Path, tmp: Path) -> int:
    """Peak resident memory (bytes) of a fresh process that ingests `path`.

    Read from /proc/self/status VmHWM, which belongs to the new address space; ru_maxrss would
    carry over the parent's peak from before exec.
    """
    code = (
        "import sys; from tracesynth.sources import ingest; "
        "ingest(sys.argv[1], sys.argv[2]); "
        "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')][0])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(path), str(tmp / "mem.parquet")],
        check=True, capture_output=True, text=True,
        env={**__import__("os").environ, "PYTHONPATH": str(REPO / "src")},
    )
    return int(out.stdout.split()[-1]) * 1024


def replicate(src: Path, dst: Path, copies: int) -> Path:
    """A bigger text input: the fixture repeated (readers do not require global ts order
    across copies for throughput purposes; strace reorders within a bounded window)."""
    text = src.read_text()
    if not text.endswith("\n"):
        text += "\n"
    dst.write_text(text * copies)
    return dst


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default="many-threads", help="shared CTF trace to use")
    ap.add_argument("--repeat", type=int, default=1, help="best of N timings")
    ap.add_argument("--text-events", type=int, default=200_000, help="target size of text inputs")
    args = ap.parse_args()

    ctf = SHARED / args.trace
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        # --- CTF reader vs the babeltrace2 CLI -----------------------------------------
        bt_time, _ = timed(
            lambda: subprocess.run(["babeltrace2", str(ctf)], stdout=subprocess.DEVNULL, check=False),
            args.repeat,
        )
        t, n = timed(lambda: read_all(ctf, "ctf"), args.repeat)
        rows.append(("read", "ctf", n, t, "babeltrace2 CLI → /dev/null", bt_time))
        trace = tracesynth.load(ctf)

        # --- table formats vs pyarrow's own readers -------------------------------------
        for fmt, suffix in (("parquet", ".parquet"), ("csv", ".csv"), ("jsonl", ".jsonl")):
            path = tmp / f"t{suffix}"
            write_trace(trace, path)
            if fmt == "parquet":
                base, _ = timed(lambda: pq.read_table(path), args.repeat)
                base_name = "pyarrow.parquet.read_table"
            else:
                base, _ = timed(lambda: line_loop(path), args.repeat)
                base_name = "Python line loop"
            t, n = timed(lambda: read_all(path, fmt), args.repeat)
            rows.append(("read", fmt, n, t, base_name, base))

        # --- text tracer formats (committed fixtures, replicated) ------------------------
        for fmt, fixture in (
            ("ftrace", FIXTURES / "ftrace" / "syscalls_trace.txt"),
            ("ftrace", FIXTURES / "ftrace" / "syscalls_report_t.txt"),
            ("strace", FIXTURES / "strace" / "sh_f_ttt_T.txt"),
            ("eventids", FIXTURES / "eventids" / "sh_syscalls_windows.txt"),
        ):
            if not fixture.exists():
                continue
            per_copy = read_all(fixture, fmt)
            copies = max(1, args.text_events // max(per_copy, 1))
            big = replicate(fixture, tmp / (fixture.name + ".big"), copies)
            base, _ = timed(lambda: line_loop(big), args.repeat)
            t, n = timed(lambda: read_all(big, fmt), args.repeat)
            rows.append(("read", f"{fmt} ({fixture.name})", n, t, "Python line loop", base))

        # --- writers, relative to the Parquet sink --------------------------------------
        parquet_time, _ = timed(lambda: write_trace(trace, tmp / "w.parquet"), args.repeat)
        for fmt, target in (
            ("parquet", tmp / "w.parquet"),
            ("csv", tmp / "w.csv"),
            ("jsonl", tmp / "w.jsonl"),
            ("text", tmp / "w.txt"),
            ("ctf", tmp / "w-ctf"),
        ):
            t, _ = timed(lambda: write_trace(trace, target, format=fmt), args.repeat)
            rows.append(("write", fmt, len(trace), t, "parquet sink", parquet_time))
            if target.is_dir():
                shutil.rmtree(target)

        # --- bounded memory: peak RSS of `tracesynth ingest` at 1x and 4x the input size ----
        memory_rows = []
        fixture = FIXTURES / "ftrace" / "syscalls_trace.txt"
        per_copy = read_all(fixture, "ftrace")
        for factor in (1, 4):
            copies = max(1, factor * args.text_events // per_copy)
            big = replicate(fixture, tmp / f"mem{factor}.txt", copies)
            memory_rows.append((factor, copies * per_copy, big.stat().st_size, peak_rss_of_ingest(big, tmp)))

    print(f"trace: {args.trace} ({len(trace):,} events); best of {args.repeat}")
    print(f"{'op':5} {'format':34} {'events':>9} {'s':>7} {'ev/s':>10}  {'baseline':28} {'base ev/s':>10} {'ratio':>6}")
    for op, fmt, n, t, base_name, base in rows:
        print(
            f"{op:5} {fmt:34} {n:>9,} {t:>7.2f} {n / t:>10,.0f}  {base_name:28} "
            f"{n / base:>10,.0f} {base / t:>6.2f}"
        )
    print("ratio = baseline time / our time (1.0 = as fast as the baseline)")
    print()
    print("bounded memory: peak RSS of `tracesynth ingest` (ftrace text) as the input grows")
    for factor, events, size, rss in memory_rows:
        print(f"  x{factor}: {events:>10,} events, {size / 2**20:7.1f} MiB in, peak RSS {rss / 2**20:7.1f} MiB")
    ratio = memory_rows[-1][3] / memory_rows[0][3]
    print(f"  peak RSS ratio x4/x1 = {ratio:.2f} (streaming: stays near 1 while the input grows 4x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

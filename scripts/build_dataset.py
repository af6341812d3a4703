"""Re-record the bundled dataset from scratch, then regenerate its manifest and summary.

    python scripts/build_dataset.py                 # every workload, 3 runs each (make dataset)
    python scripts/build_dataset.py -w gzip -w tar  # some workloads
    python scripts/build_dataset.py --manifest      # only datasets/MANIFEST.md + docs/datasets.md

Each workload is prepared in a fresh folder under --work (inputs generated from fixed seeds,
C programs compiled with gcc), then its command is recorded with `tracesynth.record` (strict:
a run with lost events is recorded again) into datasets/<workload>/run<N>.parquet. Runs are
independent executions of the same deterministic work, so train/test splits go by run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATASETS = REPO / "datasets"
WORKLOADS_SRC = DATASETS / "workloads"
DOCS = REPO / "docs" / "datasets.md"
PYTHON = "/usr/bin/python3"  # the workloads' interpreter: the system one, not the venv
EVENTS_RANGE = (50_000, 300_000)
ATTEMPTS = 3

sys.path.insert(0, str(REPO / "src"))


@dataclass
class Workload:
    name: str
    description: str
    prepare: Callable[[Path], None]  # makes the run folder ready (not recorded)
    command: list[str]  # run in the run folder
    tools: tuple[str, ...] = ()  # programs whose versions go into the metadata
    env: dict[str, str] = field(default_factory=dict)


def _gen(kind: str, out: str, *args: str) -> Callable[[Path], None]:
    def prepare(folder: Path) -> None:
        subprocess.run([PYTHON, str(WORKLOADS_SRC / "gen_inputs.py"), kind, out, *args],
                       cwd=folder, check=True)
    return prepare


def _gcc(source: str, binary: str, *flags: str) -> Callable[[Path], None]:
    def prepare(folder: Path) -> None:
        subprocess.run(["gcc", "-O2", *flags, "-o", binary, str(WORKLOADS_SRC / source), "-lm"],
                       cwd=folder, check=True)
    return prepare


def _tar_prepare(folder: Path) -> None:
    _gen("tree", "tree", "--files", "4500", "--seed", "3")(folder)
    subprocess.run(["tar", "-cf", "tree.tar", "tree"], cwd=folder, check=True)
    shutil.rmtree(folder / "tree")
    (folder / "out").mkdir()


def _pybench_prepare(folder: Path) -> None:
    shutil.copy(WORKLOADS_SRC / "pybench.py", folder / "pybench.py")


WORKLOADS = [
    Workload("gzip", "compression: gzip -6 of a generated corpus of 2,500 text files (~22 MB)",
             _gen("corpus", "corpus", "--files", "2500", "--seed", "1"),
             ["gzip", "-6", "-r", "corpus"], ("gzip",)),
    Workload("tar", "archive unpacking: tar -x of a generated tree of 4,500 small files",
             _tar_prepare, ["tar", "-xf", "tree.tar", "-C", "out"], ("tar",)),
    Workload("scimark", "numeric kernels (SciMark2-like FFT, SOR, Monte Carlo, sparse, LU), "
             "every repetition timed with clock()",
             _gcc("scimark.c", "scimark"), ["./scimark", "3"], ("gcc",)),
    Workload("stream", "memory bandwidth (STREAM-like copy/scale/add/triad), OpenMP, 2 threads",
             _gcc("stream.c", "stream", "-fopenmp"), ["./stream", "2000000", "50"], ("gcc",),
             {"OMP_NUM_THREADS": "2", "OMP_WAIT_POLICY": "passive"}),
    Workload("fileio", "file I/O (IOzone-like write/rewrite/read/random/backward, fdatasync "
             "every 256 records, fsync per test), 20 MiB file, 4 KiB records",
             _gcc("fileio.c", "fileio"), ["./fileio", "data.bin", "20480", "4", "256", "7"],
             ("gcc",)),
    Workload("pybench", "interpreter: pure-Python loops and containers, one worker process per "
             "benchmark (pyperformance-style)",
             _pybench_prepare, [PYTHON, "pybench.py", "--rounds", "4"], ("python3",)),
    Workload("build", "make -j2 of a generated 16-unit C project (many short gcc processes)",
             _gen("build", "proj", "--units", "16", "--seed", "5"), ["make", "-j2", "-C", "proj"],
             ("make", "gcc")),
    Workload("sqlite", "database: sqlite3 running 350 seeded transactions (journal, fsync)",
             _gen("sql", "script.sql", "--txns", "350", "--seed", "9"),
             ["sqlite3", "orders.db", ".read script.sql"], ("sqlite3",)),
]


WORKLOAD_PATH = "/usr/bin:/bin"


def tool_version(tool: str) -> str:
    """First line of `tool --version`, for the tool the workloads run (their PATH)."""
    flag = "-version" if tool == "sqlite3" else "--version"
    exe = shutil.which(tool, path=WORKLOAD_PATH) or tool
    done = subprocess.run([exe, flag], capture_output=True, text=True, check=False)
    lines = (done.stdout or done.stderr).strip().splitlines()
    return lines[0].strip() if lines else "unknown"


def record_run(workload: Workload, run: int, work: Path, versions: dict[str, str]) -> Path:
    from tracesynth.record import LostEventsError, RecordOptions, record

    out = DATASETS / workload.name / f"run{run}.parquet"
    env = {"PATH": WORKLOAD_PATH, "LC_ALL": "C", "LANG": "C", "TZ": "UTC", **workload.env}
    for attempt in range(1, ATTEMPTS + 1):
        folder = work / workload.name / f"run{run}"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        env.update(HOME=str(folder), TMPDIR=str(folder))
        workload.prepare(folder)
        options = RecordOptions(
            workload=workload.name, run=str(run), strict=True, wait_lock_s=300,
            extra={"description": workload.description,
                   "workload_tools": {t: versions[t] for t in workload.tools},
                   "environment": {k: v for k, v in env.items() if k not in ("HOME", "TMPDIR")}})
        started = time.monotonic()
        try:
            with open(os.devnull) as stdin, open(folder / "output.log", "w") as log:
                result = record(workload.command, out, options, env=env, cwd=folder,
                                stdio=(stdin.fileno(), log.fileno(), log.fileno()))
        except LostEventsError as exc:
            print(f"  {workload.name} run {run} attempt {attempt}: {exc}; recording again")
            continue
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        if result.exit_code != 0:
            raise SystemExit(f"{workload.name} run {run}: command failed ({result.exit_code})")
        low, high = EVENTS_RANGE
        if not low <= result.events <= high:
            raise SystemExit(f"{workload.name} run {run}: {result.events:,} events, outside "
                             f"{low:,}-{high:,}: retune the workload")
        print(f"  {workload.name} run {run}: {result.events:,} events, "
              f"{result.duration_s:.2f} s, 0 lost ({time.monotonic() - started:.1f} s)", flush=True)
        return out
    raise SystemExit(f"{workload.name} run {run}: events lost in {ATTEMPTS} attempts")


# --- manifest and summary ---------------------------------------------------------------------
def _md_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def write_manifest() -> None:
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    import tracesynth.datasets as ds
    from tracesynth.schema import read_parquet_meta

    runs, summary, tops = [], [], []
    total_bytes = total_events = 0
    for name in ds.workloads():
        counts: dict[str, int] = {}
        sizes = []
        for run in ds.runs(name):
            path = ds.path(name, run)
            meta = read_parquet_meta(path)
            table = pq.read_table(path, columns=["ts", "event"])
            n = table.num_rows
            vc = pc.value_counts(table["event"]).to_pylist()
            for item in vc:
                counts[item["values"]] = counts.get(item["values"], 0) + item["counts"]
            tools = "; ".join(v for _, v in sorted(meta.extra.get("workload_tools", {}).items()))
            size = path.stat().st_size
            total_bytes += size
            total_events += n
            sizes.append(n)
            runs.append([name, str(run), f"`{meta.command}`", tools, f"{n:,}", str(len(vc)),
                         str(meta.extra.get("scope", {}).get("threads", "?")),
                         f"{meta.extra.get('duration_s', 0):.2f}", str(meta.lost_events),
                         str(meta.extra.get("loadavg_1min_before", "?")), f"{size / 1e6:.2f}"])
        first = read_parquet_meta(ds.path(name, ds.runs(name)[0]))
        summary.append([name, first.extra.get("description", ""), str(len(sizes)),
                        " / ".join(f"{n:,}" for n in sizes)])
        total = sum(counts.values())
        merged: dict[str, int] = {}  # a syscall's entry and exit counted together as name()
        for event, count in counts.items():
            key = event.replace("syscall_entry_", "").replace("syscall_exit_", "")
            key = key + "()" if key != event else event
            merged[key] = merged.get(key, 0) + count
        top = sorted(merged.items(), key=lambda kv: (-kv[1], kv[0]))[:6]
        tops.append([name, ", ".join(f"{e} {c / total:.0%}" for e, c in top)])

    head = ("<!-- generated by scripts/build_dataset.py --manifest; do not edit by hand -->\n")
    first_meta = read_parquet_meta(ds.path(ds.workloads()[0], 1))
    kernel = first_meta.kernel_version
    recorder = "; ".join(f"{k} {v}" for k, v in sorted(first_meta.extra.get("tool_versions", {}).items()))
    folder_mb = sum(p.stat().st_size for p in DATASETS.rglob("*") if p.is_file()) / 1e6
    manifest = (
        head + "# Dataset manifest\n\n"
        f"Recorded with `tracesynth record` (ftrace, preset `default`) on Linux {kernel}, "
        f"{len(runs)} runs, {total_events:,} events, {total_bytes / 1e6:.1f} MB of Parquet. "
        "Re-record with `make dataset`.\n\n"
        f"Recorder: {recorder}. Each file's metadata holds its own versions.\n\n"
        "Columns: exact command (run in a fresh folder holding the generated inputs; "
        "environment in the metadata), versions of the workload's tools, events, distinct "
        "event names, threads of the recorded process tree, duration of the command (s), "
        "events lost by the ring buffer, the machine's 1-minute load average when the run "
        "started (other jobs shared its 2 vCPUs), file size (MB).\n\n"
        + _md_table(["workload", "run", "command", "tools", "events", "distinct", "threads",
                     "duration s", "lost", "load", "MB"], runs) + "\n")
    (DATASETS / "MANIFEST.md").write_text(manifest)
    docs = (
        head + "# Bundled dataset\n\n"
        "Real kernel traces of benchmark workloads, recorded on this kind of machine (2 vCPUs, "
        f"Linux {kernel}) with `tracesynth record`; {len(runs)} runs, {total_events:,} events, "
        f"{total_bytes / 1e6:.1f} MB of Parquet ({folder_mb:.1f} MB for all of `datasets/`). "
        "Per-run details: `datasets/MANIFEST.md`. Load one with "
        "`tracesynth.datasets.load(\"gzip\", run=1)`; list them with `tracesynth datasets list`. "
        "Split train/test by run: the runs of a workload are independent executions of the "
        "same deterministic work (seeded inputs), so they differ only by what the machine did "
        "(scheduling, I/O timing, other tasks). The machine was shared with other jobs while "
        "recording (load averages in the manifest), so the traces include real contention: "
        "`sched_switch` to and from unrelated tasks, threads waiting for a CPU.\n\n"
        "## Workloads\n\n"
        + _md_table(["workload", "what runs", "runs", "events per run"], summary)
        + "\n\n## Top events per workload\n\n"
        "Share of all events of the workload's runs; `name()` counts a syscall's entry and "
        "exit events together.\n\n"
        + _md_table(["workload", "top events"], tops)
        + "\n\n## How it was recorded\n\n"
        "- Events: all syscalls (entry/exit), `sched_switch`, `sched_wakeup`, "
        "`sched_process_fork/exec/exit`; only the command's process tree, from its `execve` "
        "to its last event (see docs/recording.md for what is kept of other tasks).\n"
        "- Timestamps: CLOCK_MONOTONIC, nanoseconds. Zero lost events in every run (a run with "
        "losses is recorded again).\n"
        "- Workload sources and input generators: `datasets/workloads/`; the recipe (seeds, "
        "sizes, environment) is `scripts/build_dataset.py`.\n")
    DOCS.write_text(docs)
    print(f"wrote {DATASETS / 'MANIFEST.md'} and {DOCS}: {len(runs)} runs, {total_events:,} events, "
          f"{total_bytes / 1e6:.1f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-w", "--workload", action="append", help="Only these workloads.")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--work", type=Path, default=Path("/tmp/tracesynth-dataset-build"))
    parser.add_argument("--manifest", action="store_true", help="Only regenerate the manifest.")
    parser.add_argument("--all", action="store_true", help="Every workload (the default).")
    args = parser.parse_args()
    if not args.manifest:
        chosen = [w for w in WORKLOADS if not args.workload or w.name in args.workload]
        unknown = set(args.workload or ()) - {w.name for w in WORKLOADS}
        if unknown:
            raise SystemExit(f"unknown workloads: {', '.join(sorted(unknown))}")
        tools = sorted({t for w in chosen for t in w.tools})
        versions = {t: tool_version(t) for t in tools}
        started = time.monotonic()
        for workload in chosen:
            print(f"{workload.name}: {workload.description}", flush=True)
            for run in range(1, args.runs + 1):
                record_run(workload, run, args.work, versions)
            for stale in (DATASETS / workload.name).glob("run*.parquet"):
                if int(stale.stem[3:]) > args.runs:
                    stale.unlink()
        if args.all or not args.workload:  # from scratch: drop workloads no longer recorded
            for folder in DATASETS.iterdir():
                if folder.is_dir() and folder.name not in {w.name for w in WORKLOADS}:
                    for stale in folder.glob("run*.parquet"):
                        stale.unlink()
        shutil.rmtree(args.work, ignore_errors=True)
        print(f"recorded {len(chosen)} workloads × {args.runs} runs in "
              f"{time.monotonic() - started:.0f} s")
    write_manifest()


if __name__ == "__main__":
    os.umask(0o022)
    main()

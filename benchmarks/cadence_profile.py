"""How far generated traces keep a workload's rhythm: per recurring event type, the gaps between
its consecutive occurrences against the held-out run's, beside the other real runs'.

    .venv/bin/python benchmarks/cadence_profile.py TRACE... --workload fileio [--test-run 1] \\
        [--events 32768] [--top 2]

For the first `--events` events of the bundled held-out run (`--test-run`), of every other bundled
run of the workload and of each TRACE, it prints `longrange.compare_cadence`: the mean over the
event types recurring at least 16 times in the held-out run of the Wasserstein-1 distance of
log2 gaps (octaves), and the `--top` event types furthest off (for a generated trace: furthest
beyond the real runs' own figure for that type, shown in brackets), each with its median gap on
the compared side and in the held-out run. A real run of the same command is the floor. On the
bundled fileio runs `fdatasync` comes every 521-577 events (every 256 writes) in all three; the
default model, trained on the other two, syncs at irregular gaps (median 364, 1.47 octaves off).
No timing: the figures are distances, not speeds.
"""

from __future__ import annotations

import argparse
import sys

import tracesynth.datasets as ds
from tracesynth.errors import TraceSynthError
from tracesynth.evaluation import longrange
from tracesynth.evaluation.windows import Vocabulary, encode
from tracesynth.sources import read_trace


def _num(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def line(label: str, result: dict, top: int, floor: dict[str, float] | None = None) -> str:
    """One side's mean and its `top` event types furthest off — for a generated trace, furthest
    beyond what the other real runs differ by (`floor`, each event type's largest real figure)."""
    rows = sorted(result["events"], key=lambda r: -(r["octaves"] - (floor or {}).get(r["event"], 0.0)))
    far = "; ".join(f"{r['event']} every {_num(r['median'])} (held-out {_num(r['median_reference'])}) "
                    f"{_num(r['octaves'], 2)}" + (f" (real {_num(floor.get(r['event']), 2)})" if floor else "")
                    for r in rows[:top])
    return (f"  {label:28s} {len(result['events']):3d} types  mean {_num(result['mean_octaves'], 3)}  | {far}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="*", help="generated traces (any readable format)")
    parser.add_argument("--workload", required=True)
    parser.add_argument("--test-run", type=int, default=3)
    parser.add_argument("--events", type=int, default=32_768)
    parser.add_argument("--top", type=int, default=2)
    args = parser.parse_args(argv)
    try:
        runs = {r: ds.load(args.workload, r) for r in ds.runs(args.workload)}
        if args.test_run not in runs:
            raise TraceSynthError(f"{args.workload} has no run {args.test_run} (runs: {sorted(runs)})")
        generated = [(path, read_trace(path)) for path in args.traces]
    except TraceSynthError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    vocab = Vocabulary.from_traces(list(runs.values()))
    reference = [encode(runs[args.test_run].slice(0, args.events), vocab)]
    print(f"{args.workload}, held-out run {args.test_run}, first {args.events:,} events")
    floor: dict[str, float] = {}
    for run, trace in runs.items():
        if run != args.test_run:
            result = longrange.compare_cadence([encode(trace.slice(0, args.events), vocab)], reference, vocab.names)
            for row in result["events"]:
                floor[row["event"]] = max(floor.get(row["event"], 0.0), row["octaves"])
            print(line(f"real run {run}", result, args.top))
    for path, trace in generated:
        result = longrange.compare_cadence([encode(trace.slice(0, args.events), vocab)], reference, vocab.names)
        print(line(str(path).rsplit("/", 1)[-1], result, args.top, floor))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Add a saved model's span-splice table (`splices.safetensors`) from its training runs, leaving
the weights and every other file as they are.

    .venv/bin/python benchmarks/refit_splices.py MODEL_DIR WORKLOAD --runs 1,2

The table is fitted with the encoder when a model is trained (encoding/splices.py): the training
runs' event codes and gaps, in training order, for the workloads whose runs share most long spans
(the copy table's `natural`), with no random draw. So fitting it from the same runs gives what
training at this commit would save, and a model trained before the table existed can be sampled
with the span splice (`generate --splice 64`) beside its published cells without being trained
again. The runs must be the model's training runs: the script checks that every event type is one
the encoder knows, and stops with an error otherwise, writing nothing. WORKLOAD's runs are the
bundled dataset's (`tracesynth.datasets`). A workload whose runs share few long spans gets no
table (said, exit 0): the splice does not apply to it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir", type=Path)
    parser.add_argument("workload")
    parser.add_argument("--runs", required=True, help="comma-separated training runs in training order, e.g. 1,2")
    args = parser.parse_args(argv)

    import tracesynth.datasets as ds
    from tracesynth.encoding.categorical import UNKNOWN_CLASS
    from tracesynth.encoding.splices import RunTable
    from tracesynth.fileio import atomic_path
    from tracesynth.model.checkpoint import load_model, save_arrays

    _, encoder, _, _ = load_model(args.model_dir, "cpu")
    if args.workload not in encoder.workloads:
        print(f"error: {args.model_dir} knows {', '.join(encoder.workloads)}, not {args.workload!r}", file=sys.stderr)
        return 1
    runs = args.runs.split(",")
    traces = []
    for run in runs:
        trace = ds.load(args.workload, int(run))
        trace.meta.workload = args.workload
        traces.append(trace)
    for run, trace in zip(runs, traces):
        codes = encoder.event.encode(trace.events.column("event").to_numpy(zero_copy_only=False))
        if np.any(codes == UNKNOWN_CLASS):
            print(f"error: {args.model_dir}: run {run} of {args.workload} has event types the model never saw: "
                  "not its training runs?", file=sys.stderr)
            return 1
    table = encoder.fit_splices(traces)
    if not table.knows(args.workload):
        share = encoder.copies.natural.get(args.workload) if encoder.copies is not None else None
        print(f"{args.workload}: no table (its training runs share {share if share is None else round(share, 2)} "
              "of their 256-event spans; the splice applies from 0.40)")
        return 0
    if encoder.splices is not None:  # keep the other workloads' runs of a multi-workload model
        for name in ("codes", "gaps", "starts"):
            getattr(table, name).update({w: v for w, v in getattr(encoder.splices, name).items() if w != args.workload})
    with atomic_path(args.model_dir / "splices.safetensors") as tmp:
        save_arrays(table.to_arrays(), str(tmp))
    print(f"{args.workload}: runs {args.runs} kept, {len(table.codes[args.workload]):,} events")
    return 0


if __name__ == "__main__":
    sys.exit(main())

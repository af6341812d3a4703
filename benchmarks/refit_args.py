"""What the refit_* scripts share: their arguments (a saved model, a workload, its training runs
in training order), the model's encoder, and the bundled runs, checked against the encoder, so
that a table is never fitted from runs the model was not trained on."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np


def open_refit(description: str, argv: list[str] | None):
    """(args, encoder, traces) of a refit script's command line, or None after a one-line error
    on stderr: the model does not know the workload, or a run has event types it never saw."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("model_dir", type=Path)
    parser.add_argument("workload")
    parser.add_argument("--runs", required=True, help="comma-separated training runs in training order, e.g. 1,2")
    args = parser.parse_args(argv)

    import tracesynth.datasets as ds
    from tracesynth.encoding.categorical import UNKNOWN_CLASS
    from tracesynth.model.checkpoint import load_model

    _, encoder, _, _ = load_model(args.model_dir, "cpu")
    if args.workload not in encoder.workloads:
        print(f"error: {args.model_dir} knows {', '.join(encoder.workloads)}, not {args.workload!r}", file=sys.stderr)
        return None
    traces = []
    for run in args.runs.split(","):
        trace = ds.load(args.workload, int(run))
        trace.meta.workload = args.workload
        codes = encoder.event.encode(trace.events.column("event").to_numpy(zero_copy_only=False))
        if np.any(codes == UNKNOWN_CLASS):
            print(f"error: {args.model_dir}: run {run} of {args.workload} has event types the model never saw: "
                  "not its training runs?", file=sys.stderr)
            return None
        traces.append(trace)
    return args, encoder, traces

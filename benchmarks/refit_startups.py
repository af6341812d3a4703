"""Add a saved model's start-up table (`startups.safetensors`) from its training runs, leaving
the weights and every other file as they are.

    .venv/bin/python benchmarks/refit_startups.py MODEL_DIR WORKLOAD --runs 1,2

The table is fitted with the encoder when a model is trained (encoding/startups.py): each
training run's first events as codes, in training order, with no random draw. So fitting it from
the same runs, in the same order, gives what training at this commit would save, and a model
trained before the table existed can be sampled with the start-up anchor (`generate
--start-anchor K`) beside its published cells without being trained again. The runs must be the
model's training runs: the script checks that each run's event types are ones the encoder knows
and that its first events' gap classes decode, and stops with an error otherwise, writing
nothing. WORKLOAD's runs are the bundled dataset's (`tracesynth.datasets`).
"""

from __future__ import annotations

import sys

from refit_args import open_refit


def main(argv: list[str] | None = None) -> int:
    opened = open_refit(__doc__.splitlines()[0], argv)
    if opened is None:
        return 1
    args, encoder, traces = opened

    from tracesynth.encoding.startups import StartupTable
    from tracesynth.fileio import atomic_path
    from tracesynth.model.checkpoint import save_arrays

    starts = [encoder.startup_codes(t) for t in traces]
    table = StartupTable.fit((args.workload, c) for c in starts)
    if encoder.startups is not None:  # keep the other workloads' start-ups of a multi-workload model
        table.runs = {**encoder.startups.runs, args.workload: table.runs[args.workload]}
    with atomic_path(args.model_dir / "startups.safetensors") as tmp:
        save_arrays(table.to_arrays(), str(tmp))
    for run, codes in zip(args.runs.split(","), starts):
        head = encoder.event.decode(codes["event"][:6])
        print(f"{args.workload} run {run}: {len(codes['event']):,} start-up events kept, from "
              + " ".join(str(e) for e in head) + " ...")
    return 0


if __name__ == "__main__":
    sys.exit(main())

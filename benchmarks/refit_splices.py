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

import sys

from refit_args import open_refit


def main(argv: list[str] | None = None) -> int:
    opened = open_refit(__doc__.splitlines()[0], argv)
    if opened is None:
        return 1
    args, encoder, traces = opened

    from tracesynth.fileio import atomic_path
    from tracesynth.model.checkpoint import save_arrays

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

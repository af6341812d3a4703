"""Refit a saved model's cadence table (`cadence.safetensors`) from its training runs with the
package as it is now, leaving the weights and every other file as they are.

    .venv/bin/python benchmarks/refit_cadence.py MODEL_DIR WORKLOAD --runs 2,3

The table is fitted with the encoder when a model is trained (encoding/cadence.py) and costs no
random draw, so refitting it from the same runs gives what training at this commit would save:
a model trained before a part of the table existed (closers, 2026-12-06) gets it without being
trained again, and an experiment can pair the scaffold with and without it on the same weights.
The rhythms the saved table has must come out the same (gaps, phases, members); the script
stops with an error otherwise and writes nothing. WORKLOAD's runs are the bundled dataset's
(`tracesynth.datasets`).
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
    parser.add_argument("--runs", required=True, help="comma-separated training runs, e.g. 2,3")
    args = parser.parse_args(argv)

    import tracesynth.datasets as ds
    from tracesynth.encoding.cadence import CadenceTable
    from tracesynth.fileio import atomic_path
    from tracesynth.model.checkpoint import load_model, save_arrays

    _, encoder, _, _ = load_model(args.model_dir, "cpu")
    runs = [int(r) for r in args.runs.split(",")]
    codes = [(args.workload, encoder.event.encode(
        ds.load(args.workload, r).events.column("event").to_numpy(zero_copy_only=False))) for r in runs]
    table = CadenceTable.fit(codes)
    saved = encoder.cadence.of(args.workload) if encoder.cadence is not None else None
    if saved is not None and not (len(saved) == len(table.of(args.workload)) and all(
            a.event == b.event and np.array_equal(a.gaps, b.gaps) and np.array_equal(a.phases, b.phases)
            and np.array_equal(a.members, b.members) for a, b in zip(saved, table.of(args.workload)))):
        print(f"error: {args.model_dir}: the saved rhythms differ from runs {args.runs}'s: not its training runs?",
              file=sys.stderr)
        return 1
    with atomic_path(args.model_dir / "cadence.safetensors") as tmp:
        save_arrays(table.to_arrays(), str(tmp))
    for r in table.of(args.workload):
        name = encoder.event.decode(np.array([r.event]))[0]
        closers = ", ".join(encoder.event.decode(r.closers)) if len(r.closers) else "none"
        print(f"{args.workload}: {name} every {r.low:,}-{r.high:,} events; closers every {r.period or '-'}: {closers}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

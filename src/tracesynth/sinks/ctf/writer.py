"""The ``ctf`` SinkWriter: spill and learn the layout (pass 1), replay into the bt2 graph (pass 2).

The spill is a temporary zstd Parquet file beside the output, so memory stays bounded by one
batch plus the learned layouts however long the trace is.
"""

from __future__ import annotations

import gc
import tempfile
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tracesynth.errors import TraceSynthError
from tracesynth.fileio import TMP_PREFIX
from tracesynth.schema import SCHEMA
from tracesynth.sinks.base import MetaArg, SinkWriter, resolve_meta
from tracesynth.sinks.ctf.graph import NS_PER_S, _Plan, _run_graph, fix_metadata
from tracesynth.sinks.ctf.layout import LayoutCollector


class CtfSink(SinkWriter):
    format = "ctf"
    description = "CTF 1.8 trace directory (LTTng kernel layout: one stream per CPU), via babeltrace2"
    suffixes = (".ctf",)  # a directory named `trace.ctf`: what a user writing CTF types
    directory = True

    def write(self, batches: Iterable[pa.RecordBatch], meta: MetaArg, path: Path) -> int:
        path = Path(path)
        with tempfile.TemporaryDirectory(prefix=TMP_PREFIX + "ctf-spill-", dir=path.parent) as spill_dir:
            spill = Path(spill_dir) / "events.parquet"
            collector = LayoutCollector()
            with pq.ParquetWriter(spill, SCHEMA, compression="zstd") as writer:
                for batch in batches:
                    if batch.num_rows:
                        batch = pa.RecordBatch.from_arrays(batch.columns, schema=SCHEMA)
                        collector.observe(batch)
                        writer.write_batch(batch)
            final_meta = resolve_meta(meta)
            first = collector.first_ts or 0
            plan = _Plan(
                spill=spill,
                meta=final_meta,
                layouts=collector.layouts(),
                cpus=sorted(collector.cpus) or [0],
                offset_s=first // NS_PER_S,
                last_ts=collector.last_ts or 0,
            )
            # sink.ctf.fs in single-trace mode writes into a directory it creates itself.
            if path.exists():
                path.rmdir()
            _run_graph(plan, path)
            del plan
            metadata = path / "metadata"
            if not metadata.exists():  # sink.ctf.fs writes it when the trace object dies
                gc.collect()  # in case a reference cycle still holds it
            if not metadata.exists():
                raise TraceSynthError(f"{path}: babeltrace2 wrote no CTF metadata")
            fix_metadata(metadata)
        return collector.rows


__all__ = ["CtfSink"]

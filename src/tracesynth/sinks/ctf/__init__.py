"""CTF writer: canonical batches → an LTTng-kernel-like CTF 1.8 trace, through babeltrace2.

Details and the conventions shared with the CTF reader: docs/sinks.md. Two passes, because
trace-IR field classes freeze once an event uses them while a payload field may first
appear late in the input:

- `layout`: pass 1 learns, per event name, the union of payload fields and their types
  (`FieldLayout`) while the batches are spilled to a temporary Parquet file (bounded memory).
- `graph`: pass 2 replays the spill into a bt2 graph (a Python source component feeding
  babeltrace2's ``sink.ctf.fs``), then `fix_metadata` restores the ``cpu_id`` name.
- `writer`: the `CtfSink` SinkWriter tying the two together.
"""

from tracesynth.sinks.ctf.graph import fix_metadata
from tracesynth.sinks.ctf.layout import (
    BOOL,
    DEFAULTS,
    DOUBLE,
    JSON,
    S64,
    S64_ARRAY,
    STRING,
    U64,
    U64_ARRAY,
    FieldLayout,
    LayoutCollector,
    event_fields,
    length_field_name,
)
from tracesynth.sinks.ctf.writer import CtfSink

__all__ = [
    "BOOL",
    "DEFAULTS",
    "DOUBLE",
    "JSON",
    "S64",
    "S64_ARRAY",
    "STRING",
    "U64",
    "U64_ARRAY",
    "CtfSink",
    "FieldLayout",
    "LayoutCollector",
    "event_fields",
    "fix_metadata",
    "length_field_name",
]

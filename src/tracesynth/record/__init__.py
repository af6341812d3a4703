"""Record real kernel traces with ftrace: `record(command, out)` → canonical Parquet.

    from tracesynth.record import record, RecordOptions
    result = record(["gzip", "-k", "data.bin"], "gzip.parquet", RecordOptions(workload="gzip"))

Modules: `tracefs` (mount, lock, a private instance or a restored top level), `child` (the
command held at a gate; signal forwarding), `presets` (event sets), `scope` (which events belong
to the command's process tree), `recorder` (the procedure).
"""

from tracesynth.record.child import RecordInterrupted
from tracesynth.record.presets import PRESETS, preset_events
from tracesynth.record.recorder import LostEventsError, RecordOptions, RecordResult, record

__all__ = ["PRESETS", "LostEventsError", "RecordInterrupted", "RecordOptions", "RecordResult",
           "preset_events", "record"]

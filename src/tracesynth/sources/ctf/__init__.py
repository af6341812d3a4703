"""LTTng kernel traces (CTF 1.8) → canonical rows, read with babeltrace2's `bt2` bindings.

Why not `bt2.TraceCollectionMessageIterator`: it always inserts babeltrace2's muxer, which
aborts on traces whose packets overlap in time (scp_src/scp_dest stop after ~11.7k events).
So the reader builds its own graph, ``src.ctf.fs`` → one sink input port per data stream,
pulls each stream lazily in small chunks, drops packet messages and merges the streams by
timestamp with a heap (stable: ties keep stream order, then in-stream order).

Decoding calls `bt2._native_bt` (the C layer under bt2's objects) through one decoder plan
per event class (member indexes, field kinds, names), built once; messages stay raw owned
pointers. bt2's object API costs ~17 µs per event; this path reads ~120k events/s whole.
Tied to bt2 2.0.x internals on purpose (Debian python3-bt2 2.0.4); tests pin the behaviour.

Thread attribution (no event context in LTTng's default kernel channel) follows Trace
Compass; see docs/sources-ctf.md and `ThreadState`.
"""

from tracesynth.sources.ctf.reader import CtfReader
from tracesynth.sources.ctf.threads import SyscallPairing, ThreadState

__all__ = ["CtfReader", "SyscallPairing", "ThreadState"]

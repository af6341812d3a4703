"""Row accumulation for streaming readers: append events, flush canonical record batches.

Readers parse records one at a time (text lines, CTF messages); this buffer turns them into
Arrow record batches of bounded size so a multi-GB input converts in bounded memory.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from tracesynth.schema import BATCH_ROWS, SCHEMA


# One encoder for the whole process: json.dumps with options builds a new one per call, which
# costs ~10% of a reader's time on payload-heavy traces.
_PAYLOAD_ENCODER = json.JSONEncoder(separators=(",", ":"), sort_keys=True, default=str)


def encode_payload(fields: dict[str, Any] | None) -> str | None:
    """Payload dicts are stored as compact JSON text with sorted keys (stable bytes)."""
    if not fields:
        return None
    return _PAYLOAD_ENCODER.encode(fields)


def decode_payload(text: str | None) -> dict[str, Any]:
    return json.loads(text) if text else {}


class RowBuffer:
    """Collects canonical rows column-wise and emits `pa.RecordBatch` every `batch_rows` rows."""

    __slots__ = ("ts", "cpu", "tid", "pid", "procname", "event", "ret", "payload", "batch_rows")

    def __init__(self, batch_rows: int = BATCH_ROWS):
        self.batch_rows = batch_rows
        self._reset()

    def _reset(self) -> None:
        self.ts: list[int] = []
        self.cpu: list[int | None] = []
        self.tid: list[int | None] = []
        self.pid: list[int | None] = []
        self.procname: list[str | None] = []
        self.event: list[str] = []
        self.ret: list[int | None] = []
        self.payload: list[str | None] = []

    def __len__(self) -> int:
        return len(self.ts)

    def append(
        self,
        ts: int,
        event: str,
        cpu: int | None = None,
        tid: int | None = None,
        pid: int | None = None,
        procname: str | None = None,
        ret: int | None = None,
        payload: dict[str, Any] | None = None,
    ) -> None:
        self.ts.append(ts)
        self.cpu.append(cpu)
        self.tid.append(tid)
        self.pid.append(pid)
        self.procname.append(procname)
        self.event.append(event)
        self.ret.append(ret)
        self.payload.append(encode_payload(payload))

    def full(self) -> bool:
        return len(self.ts) >= self.batch_rows

    def flush(self) -> pa.RecordBatch:
        batch = pa.RecordBatch.from_arrays(
            [
                pa.array(self.ts, pa.int64()),
                pa.array(self.cpu, pa.int32()),
                pa.array(self.tid, pa.int64()),
                pa.array(self.pid, pa.int64()),
                pa.array(self.procname, pa.string()),
                pa.array(self.event, pa.string()),
                pa.array(self.ret, pa.int64()),
                pa.array(self.payload, pa.string()),
            ],
            schema=SCHEMA,
        )
        self._reset()
        return batch

    def drain(self) -> Iterator[pa.RecordBatch]:
        """Yield the pending rows as a final batch, if any."""
        if self.ts:
            yield self.flush()

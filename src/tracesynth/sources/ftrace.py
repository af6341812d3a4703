"""ftrace text (tracefs ``trace``/``trace_pipe`` and ``trace-cmd report``) → canonical rows.

Entry points:

    FtraceReader(path, lenient=False).batches()     a file on disk (format name "ftrace")
    parse_ftrace_lines(lines, source_name, meta=None, lenient=False)
                                                    any iterable of text lines, e.g. what the
                                                    recorder pulls out of tracefs; fills `meta`
                                                    (a TraceMeta, created when not given) while
                                                    it runs: read it once the iterator is done
    FtraceTextParser(source_name, meta, lenient)    the same, as an object: .meta, .batches(lines)

Callers may set meta fields first (kernel_version, hostname, clock_name...): the parser fills
only what it learns and never overwrites a value that is already set.

Accepted line shapes (header ``#`` lines, ``cpus=N`` and ``##### CPU N buffer started``
lines are read for metadata or skipped):

    <comm>-<tid> [(<tgid>)] [<cpu>] [<irq flags>] <sec>.<usec|nsec>: <body>
    <instance>: <comm>-<tid> [<cpu>] <sec>.<frac>: <event>: <body>      (trace-cmd report)
    CPU:<n> [LOST <k> EVENTS]                                          (lost events)

Columns: tid from the prefix; pid from the tgid column when present, otherwise tracked through
exec (tid becomes its group leader) and fork (a child of clone without CLONE_THREAD, fork or
vfork leads its own group; with CLONE_THREAD it joins its parent's), otherwise null. procname
comes from the sched events' own comm fields (switch prev/next_comm, wakeup comm, fork
child_comm, exec filename's basename), because the prefix comm is resolved when the text is
printed and so shows a task's last name on lines recorded before an exec; the prefix comm is
the fallback. Event bodies are decoded in `ftrace_events.py`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path

import pyarrow as pa

from tracesynth.errors import TraceFormatError
from tracesynth.schema import BATCH_ROWS, TraceMeta
from tracesynth.sources.base import SourceReader
from tracesynth.sources.ftrace_events import GENERIC_KEY, decode_body
from tracesynth.sources.rows import RowBuffer

CLONE_THREAD = 0x10000
COMM_LEN = 15  # TASK_COMM_LEN - 1: the kernel truncates comm, so exec basenames are cut too
MAX_LOST_POSITIONS = 1000

_PREFIX = re.compile(
    r"(?:(?P<instance>[^\s:]+): +)?"
    r"\s*(?P<comm>.+?)-(?P<tid>\d+)\s+"
    r"(?:\(\s*(?P<tgid>\d+|-+)\)\s+)?"
    r"\[(?P<cpu>\d+)\]\s+"
    r"(?:\S{4,6}\s+)?"
    r"(?P<sec>\d+)\.(?P<frac>\d+):\s+"
    r"(?P<rest>.*?)\s*$"
)
_LOST = re.compile(r"\s*CPU:\s*(\d+) \[(?:LOST )?(\d+) EVENTS(?: DROPPED)?\]\s*$")
_ENTRIES = re.compile(r"#\s*entries-in-buffer/entries-written:\s*(\d+)/(\d+)\s+#P:(\d+)")
_CPUS = re.compile(r"cpus=(\d+)\s*$")
_SKIPPED_TEXT = ("#####", "CPU ")  # buffer-started banners, trace-cmd's "CPU 0 is empty"


def _basename(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1][:COMM_LEN]


class FtraceTextParser:
    """Streaming state machine over ftrace text lines; keeps per-task names and thread groups."""

    def __init__(
        self,
        source_name: str = "<lines>",
        meta: TraceMeta | None = None,
        *,
        lenient: bool = False,
        batch_rows: int = BATCH_ROWS,
    ):
        self.source_name = source_name
        self.meta = meta if meta is not None else TraceMeta(source_format="ftrace")
        self.meta.tracer = self.meta.tracer or "ftrace"
        self.lenient = lenient
        self.batch_rows = batch_rows
        self.comm_of: dict[int, str] = {}
        self.tgid_of: dict[int, int] = {0: 0}
        self.clone_is_thread: dict[int, bool] = {}  # tid → pending clone creates a thread?
        self.flavour: str | None = None

    # --- driving --------------------------------------------------------------------------
    def batches(self, lines: Iterable[str]) -> Iterator[pa.RecordBatch]:
        buf = RowBuffer(self.batch_rows)
        newline_seen = False
        for lineno, line in enumerate(lines, 1):
            ends = line.endswith("\n")
            stripped = line.strip()
            if not stripped:
                continue
            if stripped[0] == "#" or stripped.startswith(_SKIPPED_TEXT):
                self._header(stripped)
                newline_seen = newline_seen or ends
                continue
            match = _PREFIX.match(line)
            decoded = decode_body(match.group("rest")) if match else None
            if decoded is not None and not decoded.exact:
                if newline_seen and not ends:
                    decoded = None  # a known event cut short at the end of the capture
                else:
                    decoded.payload.pop(GENERIC_KEY, None)
            if decoded is None:
                cpus = _CPUS.match(stripped)
                if cpus:
                    self.flavour = "trace-cmd-report"
                    self.meta.n_cpus = self.meta.n_cpus or int(cpus.group(1))
                elif not self._lost(stripped, lineno):
                    self._bad(lineno, line, truncated=newline_seen and not ends)
                newline_seen = newline_seen or ends
                continue
            newline_seen = newline_seen or ends
            self._emit(buf, match, decoded)
            if buf.full():
                yield buf.flush()
        yield from buf.drain()
        self.meta.extra.setdefault("text_flavour", self.flavour or "tracefs")

    # --- metadata lines -------------------------------------------------------------------
    def _header(self, stripped: str) -> None:
        entries = _ENTRIES.match(stripped)
        if entries:
            in_buffer, written, cpus = (int(g) for g in entries.groups())
            # The non-consuming `trace` file shows only what survived; the ring buffer
            # overwrote the rest.
            self.meta.lost_events += max(0, written - in_buffer)
            self.meta.n_cpus = self.meta.n_cpus or cpus
        elif stripped.startswith("# tracer:"):
            self.meta.extra.setdefault("ftrace_tracer", stripped.split(":", 1)[1].strip())

    def _lost(self, stripped: str, lineno: int) -> bool:
        match = _LOST.match(stripped)
        if not match:
            return False
        cpu, count = int(match.group(1)), int(match.group(2))
        self.meta.lost_events += count
        positions = self.meta.extra.setdefault("lost_event_positions", [])
        if len(positions) < MAX_LOST_POSITIONS:
            positions.append({"line": lineno, "cpu": cpu, "count": count})
        return True

    def _bad(self, lineno: int, line: str, truncated: bool) -> None:
        if truncated:
            # Only the last line of a file can lack its newline: a capture cut mid-write.
            self.meta.skipped_records += 1
            self.meta.extra["truncated_final_line"] = lineno
            return
        if self.lenient:
            self.meta.skipped_records += 1
            return
        shown = line.strip()
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        raise TraceFormatError(self.source_name, lineno, f"not an ftrace event line: {shown!r}")

    # --- events ---------------------------------------------------------------------------
    def _emit(self, buf: RowBuffer, match: re.Match, decoded) -> None:
        groups = match.group
        tid = int(groups("tid"))
        if self.flavour is None:
            self.flavour = "trace-cmd-report" if groups("instance") else "tracefs"
        frac = groups("frac")
        if "timestamp_resolution_ns" not in self.meta.extra:
            self.meta.extra["timestamp_resolution_ns"] = 10 ** max(0, 9 - len(frac))
        ts = int(groups("sec")) * 1_000_000_000 + int((frac + "000000000")[:9])
        tgid = groups("tgid")
        if tgid and tgid[0] != "-":
            self.tgid_of[tid] = int(tgid)
        payload = decoded.payload
        event = decoded.event
        if payload is not None:
            self._learn(tid, event, payload)
        elif event.startswith("syscall_exit_"):
            self.clone_is_thread.pop(tid, None)
        comm = self.comm_of.get(tid)
        if comm is None:
            prefix_comm = groups("comm").strip()
            comm = None if prefix_comm == "<...>" else prefix_comm
            if tid == 0 and comm == "<idle>":
                comm = None
        buf.append(ts, event, int(groups("cpu")), tid, self.tgid_of.get(tid), comm,
                   decoded.ret, payload)

    def _learn(self, tid: int, event: str, payload: dict) -> None:
        """Update per-task names and thread groups from what this event states."""
        if event == "sched_switch":
            if "next_tid" in payload:
                self.comm_of[payload["prev_tid"]] = payload["prev_comm"]
                self.comm_of[payload["next_tid"]] = payload["next_comm"]
        elif event in ("sched_wakeup", "sched_waking", "sched_wakeup_new", "sched_process_exit"):
            if "tid" in payload and "comm" in payload:
                self.comm_of[payload["tid"]] = payload["comm"]
        elif event == "sched_process_fork":
            if "child_tid" in payload and "parent_tid" in payload:
                parent, child = payload["parent_tid"], payload["child_tid"]
                self.comm_of[child] = payload["child_comm"]
                is_thread = self.clone_is_thread.get(parent)
                if is_thread is False:
                    self.tgid_of[child] = child
                elif is_thread and parent in self.tgid_of:
                    self.tgid_of[child] = self.tgid_of[parent]
        elif event == "sched_process_exec":
            if "tid" in payload and "filename" in payload:
                self.comm_of[payload["tid"]] = _basename(payload["filename"])
                self.tgid_of[payload["tid"]] = payload["tid"]
        elif event in ("syscall_entry_clone", "syscall_entry_fork", "syscall_entry_vfork"):
            self._note_clone(tid, event, payload)
        elif event.startswith("syscall_exit_"):
            self.clone_is_thread.pop(tid, None)

    def _note_clone(self, tid: int, event: str, payload: dict) -> None:
        if event != "syscall_entry_clone":
            self.clone_is_thread[tid] = False
            return
        flags = payload.get("clone_flags")
        if flags is None and "args" in payload and payload["args"]:
            flags = payload["args"][0]  # raw_syscalls: clone's first register is the flags
        if isinstance(flags, int):
            self.clone_is_thread[tid] = bool(flags & CLONE_THREAD)


def parse_ftrace_lines(
    lines: Iterable[str],
    source_name: str = "<lines>",
    meta: TraceMeta | None = None,
    *,
    lenient: bool = False,
) -> Iterator[pa.RecordBatch]:
    """Canonical record batches from ftrace text lines; `meta` is filled in place as it runs."""
    return FtraceTextParser(source_name, meta, lenient=lenient).batches(lines)


_SNIFF_LINE = re.compile(
    r"(?:[^\s:]+: +)?\s*.+?-\d+\s+(?:\(\s*(?:\d+|-+)\)\s+)?\[\d+\]\s+(?:\S{4,6}\s+)?\d+\.\d+: "
)


class FtraceReader(SourceReader):
    format = "ftrace"
    description = "ftrace text: tracefs trace/trace_pipe or trace-cmd report (-t) output"

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        text = head.decode("utf-8", "replace")
        lines = [ln for ln in text.splitlines()[:-1] or text.splitlines() if ln.strip()]
        events = [ln for ln in lines if not ln.lstrip().startswith(("#", "cpus=", "CPU"))]
        if not events:
            return text.startswith("# tracer:")
        sample = events[:20]
        return sum(1 for ln in sample if _SNIFF_LINE.match(ln)) * 2 > len(sample)

    def __init__(self, path, *, lenient: bool = False):
        super().__init__(path, lenient=lenient)
        self.meta.tracer = "ftrace"

    def batches(self) -> Iterator[pa.RecordBatch]:
        parser = FtraceTextParser(str(self.path), self.meta, lenient=self.lenient)
        with open(self.path, encoding="utf-8", errors="replace", newline="") as fh:
            yield from parser.batches(fh)


__all__ = ["FtraceReader", "FtraceTextParser", "parse_ftrace_lines"]

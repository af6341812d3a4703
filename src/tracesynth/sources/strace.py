"""strace logs (``strace -f -ttt -T``; also -tt, -y, ``[pid N]`` prefixes) → canonical rows.

Each completed syscall line becomes two events: ``syscall_entry_<name>`` at the line's time and
``syscall_exit_<name>`` at start + the ``-T`` duration (at the start when there is none, e.g.
``exit_group(0) = ?``). ``<unfinished ...>`` / ``<... name resumed>`` pairs are joined per pid
(the exit lands at start + duration, or at the resumed line's time without -T). Because exits
computed this way can pass later lines, events go through a small heap and leave it only once
no later line can precede them (or when it holds `SORT_WINDOW` events), so output is in time
order with bounded memory.

Columns: tid from the pid column (null in a log without one); pid (tgid) = tid, except for
children of ``clone``/``clone3`` with CLONE_THREAD, which join their parent's group; procname
from the basename of a successful ``execve``'s filename, inherited by children, null before;
cpu is always null (strace does not see CPUs). Return values: ``-1 ENOENT (...)`` → ret -2
with payload errno "ENOENT", hex → signed 64-bit, ``?`` → null. Payload: the raw argument text
as ``args`` plus ``fd`` / ``dfd`` / ``filename`` where the syscall's signature makes them
obvious (``fd_path`` with -y). ``+++ exited with N +++`` and ``+++ killed by SIG +++`` become
``sched_process_exit``; ``--- SIGxxx {...} ---`` becomes ``signal_deliver``.

Timestamps: -ttt gives epoch nanoseconds; -tt gives nanoseconds since the (unrecorded) day's
midnight, with a day added whenever the clock wraps; meta.clock_name says which.
"""

from __future__ import annotations

import errno
import heapq
import re
import signal
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa

from tracesynth.schema import SYSCALL_ENTRY_PREFIX, SYSCALL_EXIT_PREFIX
from tracesynth.sources.base import SourceReader
from tracesynth.sources.rows import RowBuffer

SORT_WINDOW = 65536
PRESCAN_LINES = 50000
COMM_LEN = 15
AT_FDCWD = -100
DAY_NS = 86400 * 1_000_000_000

#: Kernel-internal restart codes strace prints but Python's errno module lacks.
ERRNO_EXTRA = {"ERESTARTSYS": 512, "ERESTARTNOINTR": 513, "ERESTARTNOHAND": 514,
               "ENOIOCTLCMD": 515, "ERESTART_RESTARTBLOCK": 516}

PATH_FIRST = frozenset({
    "open", "creat", "stat", "lstat", "access", "execve", "readlink", "unlink", "mkdir", "rmdir",
    "chdir", "chroot", "statfs", "truncate", "chmod", "chown", "lchown", "rename", "link",
    "symlink", "mknod", "utime", "utimes", "getxattr", "lgetxattr", "setxattr", "lsetxattr",
    "listxattr", "llistxattr", "removexattr", "lremovexattr", "uselib", "swapon", "swapoff",
})
PATH_SECOND = frozenset({
    "openat", "openat2", "newfstatat", "fstatat64", "faccessat", "faccessat2", "readlinkat",
    "unlinkat", "mkdirat", "mknodat", "fchmodat", "fchmodat2", "fchownat", "execveat", "statx",
    "utimensat", "futimesat", "name_to_handle_at", "renameat", "renameat2", "linkat",
})
FD_FIRST = frozenset({
    "read", "write", "close", "fstat", "pread64", "pwrite64", "readv", "writev", "preadv",
    "pwritev", "preadv2", "pwritev2", "lseek", "ioctl", "fcntl", "getdents", "getdents64",
    "fsync", "fdatasync", "ftruncate", "fchdir", "fchmod", "fchown", "flock", "dup", "dup2",
    "dup3", "sendto", "recvfrom", "sendmsg", "recvmsg", "sendmmsg", "recvmmsg", "connect",
    "accept", "accept4", "bind", "listen", "shutdown", "getsockname", "getpeername",
    "setsockopt", "getsockopt", "epoll_ctl", "epoll_wait", "epoll_pwait", "fstatfs",
    "fadvise64", "sendfile", "splice", "tee", "sync_file_range", "fallocate", "fgetxattr",
    "fsetxattr", "flistxattr", "fremovexattr", "inotify_add_watch", "readahead", "syncfs",
    "timerfd_settime", "timerfd_gettime", "copy_file_range",
})
CLONES = frozenset({"clone", "clone3", "fork", "vfork"})

_LINE = re.compile(
    r"(?:\[pid\s+(?P<ppid>\d+)\]\s+|(?P<pid>\d+)\s+)?"
    r"(?:(?P<epoch>\d+\.\d+)|(?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d)(?:\.(?P<frac>\d+))?)\s+"
    r"(?P<rest>.*?)\s*$"
)
_RET_TAIL = (
    r"\s+= (?P<ret>-?\d+|0x[0-9a-fA-F]+|\?)(?:<(?P<retpath>.*?)>)?"
    r"(?: (?P<errno>E[A-Z0-9_]+))?(?: \((?P<note>.*)\))?(?: <(?P<dur>\d+\.\d+|unavailable)>)?$"
)
_COMPLETE = re.compile(r"(?P<name>\w+)\((?P<args>.*)\)" + _RET_TAIL)
_UNFINISHED = re.compile(r"(?P<name>\w+)\((?P<args>.*?) ?<unfinished \.\.\.>$")
_RESUMED = re.compile(r"<\.\.\. (?P<name>\w+) resumed>(?P<args>.*)\)" + _RET_TAIL)
_RESUMED_AGAIN = re.compile(r"<\.\.\. (?P<name>\w+) resumed>(?P<args>.*?) ?<unfinished \.\.\.>$")
_EXITED = re.compile(r"\+\+\+ exited with (-?\d+) \+\+\+$")
_KILLED = re.compile(r"\+\+\+ killed by (SIG\w+)( \(core dumped\))? \+\+\+$")
_SIGNAL = re.compile(r"--- (?:(?P<stopped>stopped by )?(?P<sig>SIG\w+))(?: (?P<info>\{.*\}))? ---$")
_ATTACHED = re.compile(r"strace: Process (\d+) attached$")
_FD = re.compile(r"(-?\d+)(?:<(.*)>)?$")
_CODE = re.compile(r"si_code=(\w+)")


def errno_value(name: str) -> int | None:
    return getattr(errno, name, None) or ERRNO_EXTRA.get(name)


def signal_number(name: str) -> int | None:
    try:
        return int(signal.Signals[name])
    except KeyError:
        return None


def split_args(text: str, limit: int = 2) -> list[str]:
    """The first `limit` top-level arguments of strace's argument text (quotes and brackets
    respected); enough to pick out fd / dfd / filename."""
    out: list[str] = []
    depth = 0
    start = 0
    in_quote = False
    i = 0
    n = len(text)
    while i < n and len(out) < limit:
        c = text[i]
        if in_quote:
            if c == "\\":
                i += 1
            elif c == '"':
                in_quote = False
        elif c == '"':
            in_quote = True
        elif c in "[{(":
            depth += 1
        elif c in "]})":
            depth -= 1
        elif c == "," and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
        i += 1
    if len(out) < limit and text[start:].strip():
        out.append(text[start:].strip())
    return out


def _unquote(text: str) -> str | None:
    if text.startswith('"'):
        end = text.rfind('"')
        return text[1:end] if end > 0 else text[1:]
    return None


def _fd_fields(text: str, key: str, payload: dict) -> None:
    if text == "AT_FDCWD" or text.startswith("AT_FDCWD<"):
        payload[key] = AT_FDCWD
        return
    match = _FD.match(text)
    if match:
        payload[key] = int(match.group(1))
        if match.group(2) is not None:
            payload[key + "_path"] = match.group(2)


def entry_payload(name: str, args: str) -> dict:
    """``args`` raw, plus fd / dfd / filename when the syscall's signature makes them obvious."""
    payload: dict = {"args": args}
    if name in PATH_FIRST:
        first = split_args(args, 1)
        if first and (path := _unquote(first[0])) is not None:
            payload["filename"] = path
    elif name in PATH_SECOND:
        parts = split_args(args, 2)
        if parts:
            _fd_fields(parts[0], "dfd", payload)
        if len(parts) > 1 and (path := _unquote(parts[1])) is not None:
            payload["filename"] = path
    elif name in FD_FIRST:
        parts = split_args(args, 1)
        if parts:
            _fd_fields(parts[0], "fd", payload)
    return payload


def _ret_of(match: re.Match) -> tuple[int | None, dict]:
    text = match.group("ret")
    extra: dict = {}
    err = match.group("errno")
    if err:
        extra["errno"] = err
    if match.group("retpath") is not None:
        extra["ret_path"] = match.group("retpath")
    if text == "?":
        # `= ? ERESTARTNOHAND`: the call was interrupted and the kernel returned its internal
        # restart code, which strace names but cannot print as a number. Without an errno
        # (`exit_group(0) = ?`) the call did not return at all.
        code = errno_value(err) if err else None
        return (-code if code is not None else None), extra
    if text.startswith("0x"):
        value = int(text, 16)
        return (value - (1 << 64) if value >= 1 << 63 else value), extra
    value = int(text)
    if value == -1 and err and (code := errno_value(err)) is not None:
        value = -code
    return value, extra


def _dur_ns(match: re.Match) -> int | None:
    dur = match.group("dur")
    if not dur or dur == "unavailable":
        return None
    sec, _, frac = dur.partition(".")
    return int(sec) * 1_000_000_000 + int((frac + "000000000")[:9])


class StraceReader(SourceReader):
    format = "strace"
    description = "strace -f -ttt -T (or -tt, -y, [pid N]) text log"

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        text = head.decode("utf-8", "replace")
        lines = [ln for ln in (text.splitlines()[:-1] or text.splitlines()) if ln.strip()][:20]
        if not lines:
            return False
        hits = 0
        for line in lines:
            match = _LINE.match(line)
            rest = match.group("rest") if match else ""
            if match and (re.match(r"\w+\(", rest) or rest.startswith(("<... ", "+++ ", "--- "))):
                hits += 1
        return hits * 2 > len(lines)

    def __init__(self, path, *, lenient: bool = False):
        super().__init__(path, lenient=lenient)
        self.meta.tracer = "strace"
        self.pid_of: dict[int, int] = {}
        self.comm_of: dict[int, str | None] = {}
        self.pending: dict[int | None, tuple[str, str, int]] = {}  # tid → (name, args, start ns)
        self.heap: list[tuple] = []
        self.seq = 0
        self.day_ns = 0
        self.last_ts = -1

    # --- driving --------------------------------------------------------------------------
    def batches(self) -> Iterator[pa.RecordBatch]:
        buf = RowBuffer()
        initial_tid = self._initial_tid()
        carry = ""
        with open(self.path, encoding="utf-8", errors="replace", newline="") as fh:
            for lineno, raw in enumerate(fh, 1):
                line = raw.rstrip("\r\n")
                if carry:
                    line, carry = carry + line, ""
                if not line.strip():
                    continue
                attached = _ATTACHED.search(line)
                if attached and not line.startswith("strace:"):
                    # stderr logs: "vfork(strace: Process 7076 attached\n <unfinished ...>"
                    carry = line[: attached.start()]
                    continue
                if line.startswith("strace: ") or line.startswith("+++ superseded"):
                    continue
                match = _LINE.match(line)
                if match is None or not self._line(match, initial_tid):
                    if not raw.endswith("\n"):
                        self.meta.skipped_records += 1
                        self.meta.extra["truncated_final_line"] = lineno
                        continue
                    self.skip_or_raise(lineno, f"not an strace line: {_shorten(line)!r}")
                    continue
                heap = self.heap
                while heap and (heap[0][0] <= self.last_ts or len(heap) > SORT_WINDOW):
                    buf.append(*heapq.heappop(self.heap)[2:])
                    if buf.full():
                        yield buf.flush()
        while self.heap:
            buf.append(*heapq.heappop(self.heap)[2:])
            if buf.full():
                yield buf.flush()
        yield from buf.drain()

    def _initial_tid(self) -> int | None:
        """In stderr logs the first tracee's lines carry no pid: it is the first pid that shows
        up in a ``[pid N]`` prefix without having been announced as attached."""
        attached: set[int] = set()
        with open(self.path, encoding="utf-8", errors="replace") as fh:
            for lineno, line in enumerate(fh):
                if lineno > PRESCAN_LINES:
                    break
                for found in re.finditer(r"strace: Process (\d+) attached", line):
                    attached.add(int(found.group(1)))
                prefixed = re.match(r"\[pid\s+(\d+)\]", line)
                if prefixed and int(prefixed.group(1)) not in attached:
                    return int(prefixed.group(1))
        return None

    def _timestamp(self, match: re.Match) -> int:
        if match.group("epoch"):
            sec, _, frac = match.group("epoch").partition(".")
            self.meta.clock_name = self.meta.clock_name or "realtime"
        else:
            hours, minutes = int(match.group("h")), int(match.group("m"))
            sec = str(hours * 3600 + minutes * 60 + int(match.group("s")))
            frac = match.group("frac") or ""
            self.meta.clock_name = self.meta.clock_name or "realtime-time-of-day"
        ts = int(sec) * 1_000_000_000 + int((frac + "000000000")[:9]) + self.day_ns
        if self.last_ts - ts > DAY_NS // 2 and not match.group("epoch"):
            self.day_ns += DAY_NS
            ts += DAY_NS
        return ts

    # --- one line -------------------------------------------------------------------------
    def _line(self, match: re.Match, initial_tid: int | None) -> bool:
        """Turn one log line into events; False when its text has no known shape."""
        pid_text = match.group("ppid") or match.group("pid")
        tid = int(pid_text) if pid_text else initial_tid
        rest = match.group("rest")
        ts = self._timestamp(match)
        self.last_ts = max(self.last_ts, ts)
        if tid is not None and tid not in self.pid_of:
            self._adopt(tid)
        if (call := _COMPLETE.match(rest)) is not None:
            name, args = call.group("name"), call.group("args")
            self._entry(ts, tid, name, args)
            dur = _dur_ns(call)
            self._exit(ts + dur if dur is not None else ts, tid, name, args, call)
        elif (call := _UNFINISHED.match(rest)) is not None:
            name, args = call.group("name"), call.group("args")
            self._entry(ts, tid, name, args)
            self.pending[tid] = (name, args, ts)
        elif (call := _RESUMED.match(rest)) is not None:
            name = call.group("name")
            pending = self.pending.pop(tid, None)
            start = pending[2] if pending and pending[0] == name else None
            args = (pending[1] if start is not None else "") + call.group("args")
            dur = _dur_ns(call)
            end = start + dur if start is not None and dur is not None else ts
            self._exit(max(end, ts) if start is None else end, tid, name, args, call)
        elif (call := _RESUMED_AGAIN.match(rest)) is not None:
            pending = self.pending.get(tid)
            if pending and pending[0] == call.group("name"):
                self.pending[tid] = (pending[0], pending[1] + call.group("args"), pending[2])
        elif (ended := _EXITED.match(rest)) is not None:
            code = int(ended.group(1))
            self._push(ts, "sched_process_exit", tid, None,
                       {"tid": tid, "comm": self.comm_of.get(tid), "exit_code": code})
        elif (ended := _KILLED.match(rest)) is not None:
            self._push(ts, "sched_process_exit", tid, None,
                       {"tid": tid, "comm": self.comm_of.get(tid), "signal": ended.group(1),
                        "core_dumped": bool(ended.group(2))})
        elif (sig := _SIGNAL.match(rest)) is not None:
            payload = {"sig": signal_number(sig.group("sig")), "signame": sig.group("sig")}
            if sig.group("stopped"):
                payload["stopped"] = True
            info = sig.group("info")
            if info:
                payload["siginfo"] = info
                if (code := _CODE.search(info)) is not None:
                    payload["code"] = code.group(1)
            self._push(ts, "signal_deliver", tid, None, payload)
        else:
            return False
        return True

    def _adopt(self, tid: int) -> None:
        """A tid seen for the first time: if a clone is in flight, it is that clone's child."""
        parent = None
        for ptid, (name, args, _start) in self.pending.items():
            if name in CLONES and ptid != tid:
                parent = (ptid, args)  # the most recent pending clone wins
        if parent is None:
            self.pid_of[tid] = tid
            return
        ptid, args = parent
        self._link_child(ptid, tid, args)

    def _link_child(self, ptid: int | None, child: int, args: str) -> None:
        if "CLONE_THREAD" in args and ptid is not None:
            self.pid_of[child] = self.pid_of.get(ptid, ptid)
        else:
            self.pid_of[child] = child
        self.comm_of.setdefault(child, self.comm_of.get(ptid))

    # --- events ---------------------------------------------------------------------------
    def _push(
        self, ts: int, event: str, tid: int | None, ret: int | None, payload: dict | None
    ) -> None:
        pid = self.pid_of.get(tid, tid) if tid is not None else None
        comm = self.comm_of.get(tid) if tid is not None else None
        self.seq += 1
        heapq.heappush(self.heap, (ts, self.seq, ts, event, None, tid, pid, comm, ret, payload))

    def _entry(self, ts: int, tid: int | None, name: str, args: str) -> None:
        self._push(ts, SYSCALL_ENTRY_PREFIX + name, tid, None, entry_payload(name, args))

    def _exit(self, ts: int, tid: int | None, name: str, args: str, call: re.Match) -> None:
        ret, payload = _ret_of(call)
        if name in CLONES and ret is not None and ret > 0 and tid is not None:
            if ret not in self.pid_of or self.pid_of[ret] == ret:
                self._link_child(tid, ret, args)
        if name in ("execve", "execveat") and ret == 0 and tid is not None:
            parts = split_args(args, 2 if name == "execveat" else 1)
            path = _unquote(parts[-1]) if parts else None
            if path:
                self.comm_of[tid] = path.rstrip("/").rsplit("/", 1)[-1][:COMM_LEN]
        self._push(ts, SYSCALL_EXIT_PREFIX + name, tid, ret, payload or None)


def _shorten(text: str) -> str:
    text = text.strip()
    return text if len(text) <= 80 else text[:77] + "..."

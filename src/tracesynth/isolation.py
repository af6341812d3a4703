"""Run a conversion in a forked child so that a crash inside a C library becomes an error.

babeltrace2 2.0.4 can die with SIGSEGV on some corrupt CTF packets (garbage inside a packet;
the babeltrace2 CLI crashes on the same files). A crash in-process would kill the CLI with no
message and leave a temporary file behind. Running the conversion in a child turns that into
a one-line `TraceFormatError` naming the input, and lets the parent remove the child's
temporary outputs. Results cross the process boundary as JSON, never as pickles.
"""

from __future__ import annotations

import faulthandler
import json
import multiprocessing
import os
import shutil
import signal
from collections.abc import Callable
from pathlib import Path

from tracesynth.errors import TraceFormatError, TraceSynthError
from tracesynth.fileio import TMP_PREFIX


def _child(conn, fn, args) -> None:
    # The parent reports a crash from the exit status; a traceback dump from an inherited
    # faulthandler (pytest enables one) would only be noise.
    faulthandler.disable()
    try:
        result = fn(*args)
        conn.send_bytes(json.dumps({"ok": result}).encode())
    except TraceSynthError as exc:
        conn.send_bytes(json.dumps({"error": str(exc), "type": type(exc).__name__,
                                    "exit_code": exc.exit_code}).encode())
    except KeyboardInterrupt:
        conn.send_bytes(json.dumps({"interrupted": True}).encode())
    finally:
        conn.close()


def _remove_temporaries(target: Path) -> None:
    for stale in target.parent.glob(f"{TMP_PREFIX}*"):
        if stale.name.endswith(target.name):
            if stale.is_dir():
                shutil.rmtree(stale, ignore_errors=True)
            else:
                stale.unlink(missing_ok=True)


def run_isolated(fn: Callable, args: tuple, *, source: Path, target: Path):
    """Call ``fn(*args)`` in a forked child; return its JSON-able result.

    A `TraceSynthError` in the child is re-raised here with the same message; a child killed
    by a signal raises `TraceFormatError` naming `source`; temporaries of `target` are removed.
    """
    ctx = multiprocessing.get_context("fork")
    parent_conn, child_conn = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child_conn, fn, args))
    proc.start()
    child_conn.close()
    message = None
    try:
        message = json.loads(parent_conn.recv_bytes())
    except EOFError:
        pass
    except KeyboardInterrupt:
        os.kill(proc.pid, signal.SIGINT)
        raise
    finally:
        proc.join()
    if message is None or proc.exitcode and proc.exitcode < 0:
        _remove_temporaries(target)
        code = -(proc.exitcode or 0)
        name = signal.Signals(code).name if code else f"exit {proc.exitcode}"
        raise TraceFormatError(source, None, f"the decoder crashed ({name}) while reading: the trace is corrupt")
    if "error" in message:
        err = TraceSynthError(message["error"])
        err.exit_code = message["exit_code"]
        raise err
    if message.get("interrupted"):
        raise KeyboardInterrupt
    return message["ok"]

"""The recorded command as a child process held at a gate, and signal forwarding to it.

The child is forked first and blocks reading a pipe, so its pid can go into ``set_event_pid``
and the events can be enabled before it executes anything: the trace starts at COMMAND's own
``execve`` instead of somewhere in its start-up. Signals sent to the recorder (Ctrl-C, SIGTERM,
SIGHUP) are forwarded to the child once and remembered, so the recorder itself always lives
long enough to give tracefs back.
"""

from __future__ import annotations

import os
import signal
import threading

from tracesynth.errors import RecordError

#: Exit status of a child whose gate closed without the go byte (the recorder gave up).
GATE_ABORTED = 126
#: Exit status of a child whose execve failed.
EXEC_FAILED = 127
_GO = b"g"


class RecordInterrupted(RecordError):
    """The recorder got a signal: tracefs was restored and no output was written."""

    def __init__(self, signum: int):
        self.signum = signum
        self.exit_code = 128 + signum
        super().__init__(f"recording interrupted by {signal.Signals(signum).name}; "
                         "tracefs restored, nothing written")


class GatedChild:
    """``fork`` now, ``execve(exe, argv)`` only after `release()`."""

    def __init__(self, exe: str, argv: list[str], env: dict[str, str] | None = None,
                 cwd: str | None = None,
                 stdio: tuple[int | None, int | None, int | None] = (None, None, None)):
        read_end, self._gate = os.pipe()
        env = dict(os.environ if env is None else env)
        # The recorder's Python handlers (SignalGuard) must not run in the child, or a signal
        # that arrives while it waits at the gate would be swallowed: block the signals across
        # fork, give the child the default actions, then unblock on both sides.
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, SignalGuard.SIGNALS)
        pid = os.fork()
        if pid == 0:  # child: only async-signal-safe work until execve
            try:
                for signum in SignalGuard.SIGNALS:
                    signal.signal(signum, signal.SIG_DFL)
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)
                os.close(self._gate)
                if cwd is not None:
                    os.chdir(cwd)
                for target, fd in enumerate(stdio):  # stdin, stdout, stderr
                    if fd is not None:
                        os.dup2(fd, target)
                if os.read(read_end, 1) != _GO:
                    os._exit(GATE_ABORTED)
                os.close(read_end)
                # Python ignores SIGPIPE; a shell command expects the default (as subprocess).
                signal.signal(signal.SIGPIPE, signal.SIG_DFL)
                os.execve(exe, argv, env)
            except BaseException:
                pass
            os._exit(EXEC_FAILED)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        os.close(read_end)
        self.pid = pid
        self.status: int | None = None

    def release(self) -> None:
        try:
            os.write(self._gate, _GO)
        except BrokenPipeError:  # a signal killed it at the gate; wait() reports how
            pass
        self._close_gate()

    def _close_gate(self) -> None:
        if self._gate is not None:
            os.close(self._gate)
            self._gate = None

    def wait(self) -> int:
        """Wait for the exit; returns the shell-style exit code (128+N when killed by N)."""
        if self.status is None:
            _, raw = os.waitpid(self.pid, 0)
            self.status = _exit_code(raw)
        return self.status

    def abort(self) -> None:
        """Make sure the child is gone: a gated child exits on EOF, a running one is killed."""
        self._close_gate()
        if self.status is not None:
            return
        try:
            pid, raw = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:  # reaped elsewhere
            self.status = -1
            return
        if pid == 0:
            os.kill(self.pid, signal.SIGKILL)
            self.wait()
        else:
            self.status = _exit_code(raw)


def _exit_code(raw_status: int) -> int:
    code = os.waitstatus_to_exitcode(raw_status)
    return 128 - code if code < 0 else code


class SignalGuard:
    """Catch SIGINT/SIGTERM/SIGHUP while tracefs is ours; forward the first to the child.

    Handlers can only be installed from the main thread; elsewhere the guard is inert (the
    caller's own signal handling applies, and `finally` blocks still restore tracefs).
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self):
        self.child_pid: int | None = None
        self.received: int | None = None
        self._previous: dict[int, object] = {}

    def __enter__(self) -> SignalGuard:
        if threading.current_thread() is threading.main_thread():
            for signum in self.SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def _handle(self, signum, frame) -> None:
        if self.received is not None:
            return
        self.received = signum
        if self.child_pid is not None:
            try:
                os.kill(self.child_pid, signum)
            except ProcessLookupError:
                pass

    def forward_again(self) -> None:
        """Re-send the signal received to the child (it may have been at the gate, where the
        go byte can race with it)."""
        if self.received is not None and self.child_pid is not None:
            try:
                os.kill(self.child_pid, self.received)
            except ProcessLookupError:
                pass

    def check(self) -> None:
        """Raise `RecordInterrupted` if a signal arrived (callers clean up in `finally`)."""
        if self.received is not None:
            raise RecordInterrupted(self.received)

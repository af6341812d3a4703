"""The babeltrace2 graph without the muxer: one sink input port per data stream."""

from __future__ import annotations

import collections
import sys

from tracesynth.errors import TraceFormatError

#: Messages pulled from one stream per graph step: bounds memory (streams × chunk).
CHUNK_MESSAGES = 4096


def _bt2():
    """`bt2` is imported here only: the rest of TraceSynth must not need babeltrace2."""
    try:
        import bt2
        import bt2.native_bt  # noqa: F401  (the low-level module the hot loop uses)
    except ImportError as exc:  # pragma: no cover - depends on the host
        raise TraceFormatError(
            None, None, f"reading CTF needs babeltrace2's bt2 (apt install python3-bt2): {exc}"
        ) from None
    return bt2


class _StreamPuller:
    """State shared between the Python side and the sink component of one graph."""

    def __init__(self, n_ports: int):
        self.want = 0
        self.buffers = [collections.deque() for _ in range(n_ports)]
        self.done = [False] * n_ports
        self.errors: list[Exception | None] = [None] * n_ports


def _sink_class(bt2):
    nbt = sys.modules["bt2._native_bt"]
    get_range = nbt.bt2_self_component_port_input_get_msg_range
    status_ok = nbt.__BT_FUNC_STATUS_OK
    handle_status = sys.modules["bt2.utils"]._handle_func_status

    class _PullSink(bt2._UserSinkComponent):
        """Owns one message iterator per stream; each graph step fills one stream's buffer.

        Messages are kept as raw owned pointers, not bt2 message objects: creating and
        finalising a Python object per event cost ~20% of the reader's time. Whoever pops
        a pointer from a buffer owns its reference (see `_release`).
        """

        def __init__(self, config, params, puller):
            self._puller = puller
            for i in range(len(puller.buffers)):
                self._add_input_port(f"in{i}")

        def _user_graph_is_configured(self):
            self._iterators = [self._create_message_iterator(p) for p in self._input_ports.values()]

        def _user_consume(self):
            puller = self._puller
            i = puller.want
            buffer = puller.buffers[i]
            iterator_ptr = self._iterators[i]._ptr
            try:
                while len(buffer) < CHUNK_MESSAGES:
                    status, messages = get_range(iterator_ptr)
                    if status == status_ok:
                        buffer.extend(messages)
                    else:
                        handle_status(status, "cannot read the next CTF messages")
            except StopIteration:  # bt2.Stop: the stream is finished
                puller.done[i] = True
            except bt2.TryAgain:
                pass
            except bt2._Error as exc:  # kept for the reader; the graph itself stays usable
                puller.done[i] = True
                puller.errors[i] = exc

    return _PullSink


def _release(nbt, items) -> None:
    """Drop our references to raw message pointers that will not be decoded."""
    for item in items:
        nbt.message_put_ref(item[3] if isinstance(item, tuple) else item)

"""(being written) strace reader."""

from tracesynth.sources.base import SourceReader


class StraceReader(SourceReader):
    format = "strace"

    def batches(self):
        return iter(())

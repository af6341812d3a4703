"""(being written) ftrace reader."""

from tracesynth.sources.base import SourceReader


class FtraceReader(SourceReader):
    format = "ftrace"

    def batches(self):
        return iter(())

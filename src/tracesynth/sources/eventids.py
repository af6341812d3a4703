"""(being written) eventids reader."""

from tracesynth.sources.base import SourceReader


class EventIdReader(SourceReader):
    format = "eventids"

    def batches(self):
        return iter(())

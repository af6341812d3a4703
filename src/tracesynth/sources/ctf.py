"""(being written) ctf reader."""

from tracesynth.sources.base import SourceReader


class CtfReader(SourceReader):
    format = "ctf"

    def batches(self):
        return iter(())

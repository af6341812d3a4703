"""The generation pipeline: the reverse-diffusion sampler for one window (steps, guidance,
infilling), window-by-window continuation for any length, and the constraint-guide hook."""

from tracesynth.sampling.guide import SamplingGuide
from tracesynth.sampling.pipeline import generate
from tracesynth.sampling.sampler import sample_window

__all__ = ["SamplingGuide", "generate", "sample_window"]

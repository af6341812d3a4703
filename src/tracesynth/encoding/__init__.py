"""Per-channel encoders (event, dt, tid, cpu, ret, procname) and the `TraceEncoder` that
composes them: canonical traces ↔ integer codes the diffusion model works on."""

from tracesynth.encoding.channels import ALL_CHANNELS, PRESETS, resolve_channels
from tracesynth.encoding.trace_encoder import TraceEncoder, WindowDecoder, columns_to_trace

__all__ = ["ALL_CHANNELS", "PRESETS", "TraceEncoder", "WindowDecoder", "columns_to_trace", "resolve_channels"]

"""Channel names and presets: which columns of the canonical table the model generates.

`light` is the published lightweight model (what happens and when); `full` adds who (tid,
procname), where (cpu) and with what result (ret). Any subset by name works, as long as it
contains `event`: every other channel is meaningless without it.
"""

from __future__ import annotations

from tracesynth.errors import ConfigError

#: All channels, in the order the model and files list them.
ALL_CHANNELS = ("event", "dt", "tid", "cpu", "ret", "procname")

PRESETS = {
    "light": ("event", "dt"),
    "full": ALL_CHANNELS,
}


def resolve_channels(spec: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """`light`, `full`, "event,dt,tid" or a list → the channels in canonical order. A preset
    inside a list stands for its channels ("light,tid" = event, dt, tid)."""
    if isinstance(spec, str):
        if spec in PRESETS:
            return PRESETS[spec]
        names = [s.strip() for s in spec.split(",") if s.strip()]
    else:
        names = list(spec)
    names = [c for n in names for c in (PRESETS[n] if n in PRESETS else (n,))]
    unknown = [n for n in names if n not in ALL_CHANNELS]
    if unknown:
        raise ConfigError(
            f"unknown channel(s) {', '.join(unknown)}; choose from {', '.join(ALL_CHANNELS)} "
            f"or a preset ({', '.join(PRESETS)})"
        )
    if "event" not in names:
        raise ConfigError("the channel list must include 'event'")
    return tuple(c for c in ALL_CHANNELS if c in names)

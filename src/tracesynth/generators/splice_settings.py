"""What the span splice's settings may be, in one place.

`TraceSynth`'s constructor, `tracesynth generate`'s flags (which override a loaded model's
settings after it is built) and experiment configs all check the same four numbers; each caller
words the name its way (`splice_walk`, `--splice-walk`, `tracesynth.splice_walk`) around the
same rule. A module of its own, not diffusion.py, so that reading a config does not import torch.
"""

from __future__ import annotations

# name: (the least non-zero value, what the setting may be). 0 is always allowed: off, or the
# splice's own value (its anchor as the walk's match; its MAX_DRIFT as the walk's drift).
SPLICE_SETTINGS = {
    "splice": (16, "0 (off) or an anchor of at least 16 events"),
    "splice_walk": (2, "0 (no walk) or a piece of at least 2 events"),
    "splice_walk_context": (2, "0 (the splice's anchor) or a match of at least 2 events"),
    "splice_walk_drift": (1, "0 (the splice's) or a number of events"),
}


def splice_setting_problem(name: str, value: int) -> str | None:
    """What is wrong with `value` for the splice setting `name` ("must be ..., got V"), or None."""
    least, allowed = SPLICE_SETTINGS[name]
    if value < 0 or 0 < value < least:
        return f"must be {allowed}, got {value}"
    return None

"""The contract between the sampler and a constraint guide (tracesynth.constraints builds one).

After each denoising step the sampler decodes the window's decided positions to canonical terms
and asks the guide which positions break a rule given what is decided around them; those
positions are masked again (while steps remain), so they are drawn anew.

`partial` holds numpy arrays over the window:
    event    object   event name, None where still masked
    tid      int64    thread id, -1 where unknown or masked (a thread new to this window gets a
                      provisional negative id, -2 - slot, equal for all its positions)
    cpu      int64    CPU, -1 where unknown or masked
    ret      float64  return value, NaN where none or masked
    decided  bool     the event name is decided
"""

from __future__ import annotations

from typing import Protocol

import numpy as np


class SamplingGuide(Protocol):
    def violating_positions(self, partial: dict[str, np.ndarray]) -> np.ndarray:
        """A boolean array over the window: True where a decided event breaks a rule."""

    # Optional: `begin_window(passed, new_trace)` is called before each window with the event
    # names that left the window's view since the last call (with `new_trace`, all that
    # precede the first window), so that a guide can judge across the seam.

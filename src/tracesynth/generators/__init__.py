"""Generators: one fit/sample interface (base.py) for the reference baselines and our model.

    from tracesynth.generators import make
    gen = make("markov", order=8, random_state=1).fit(traces)
"""

from __future__ import annotations

from tracesynth.errors import ConfigError
from tracesynth.generators.base import DEFAULT_WORKLOAD, Generator


def registry() -> dict[str, type[Generator]]:
    """Generator name → class (names are what `tracesynth baseline NAME` accepts)."""
    from tracesynth.generators.copy import Copy
    from tracesynth.generators.markov import Markov
    from tracesynth.generators.resample import Resample

    return {cls.name: cls for cls in (Markov, Copy, Resample)}


def make(name: str, **params) -> Generator:
    generators = registry()
    if name not in generators:
        raise ConfigError(f"unknown generator {name!r}; choose one of: {', '.join(generators)}")
    return generators[name](**params)


__all__ = ["DEFAULT_WORKLOAD", "Generator", "make", "registry"]

"""The one interface every trace generator implements (ours and the reference baselines).

Shaped like a scikit-learn estimator so it feels familiar:

    gen = Markov(order=8, random_state=1).fit(traces)       # hyperparameters in the constructor
    synthetic = gen.sample(100_000, workload="gzip")        # a canonical Trace

- Constructor keywords are stored as given; `fit` returns `self`; learned state ends in `_`.
- `random_state` seeds everything; `sample(..., seed=s)` overrides it for one call. The same
  seed gives the same output on CPU.
- `fit` takes canonical `Trace` objects whose `meta.workload` labels group them; `sample` for a
  workload the generator never saw raises `ConfigError`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from tracesynth.errors import ConfigError
from tracesynth.schema import Trace

DEFAULT_WORKLOAD = "default"


class Generator(ABC):
    """Base class: validation shared by every generator; subclasses implement `_fit`/`_sample`."""

    #: Name used by the CLI (`tracesynth baseline NAME`) and in reports.
    name: str = "generator"

    def __init__(self, random_state: int = 0):
        self.random_state = random_state

    # --- public API ---------------------------------------------------------------------
    def fit(self, traces: Trace | Sequence[Trace]) -> Generator:
        traces = [traces] if isinstance(traces, Trace) else list(traces)
        if not traces:
            raise ConfigError(f"{self.name}: fit() needs at least one trace")
        for t in traces:
            if not isinstance(t, Trace):
                raise ConfigError(f"{self.name}: fit() takes Trace objects, got {type(t).__name__}")
            if len(t) == 0:
                raise ConfigError(f"{self.name}: cannot fit on an empty trace ({t.meta.source_path})")
        by_workload: dict[str, list[Trace]] = {}
        for t in traces:
            by_workload.setdefault(t.meta.workload or DEFAULT_WORKLOAD, []).append(t)
        self.workloads_ = sorted(by_workload)
        self._fit(by_workload)
        return self

    def sample(self, n_events: int, workload: str | None = None, seed: int | None = None) -> Trace:
        if not hasattr(self, "workloads_"):
            raise ConfigError(f"{self.name}: call fit() before sample()")
        if not isinstance(n_events, int) or isinstance(n_events, bool) or n_events <= 0:
            raise ConfigError(f"{self.name}: n_events must be a positive integer, got {n_events!r}")
        if workload is None:
            if len(self.workloads_) > 1:
                raise ConfigError(
                    f"{self.name}: trained on several workloads ({', '.join(self.workloads_)}); "
                    "pass workload="
                )
            workload = self.workloads_[0]
        if workload not in self.workloads_:
            raise ConfigError(
                f"{self.name}: unknown workload {workload!r}; trained on: {', '.join(self.workloads_)}"
            )
        trace = self._sample(n_events, workload, self.random_state if seed is None else seed)
        if len(trace) != n_events:
            raise AssertionError(f"{self.name} produced {len(trace)} events, asked {n_events}")
        trace.meta.workload = workload
        trace.meta.extra.setdefault("generator", self.name)
        return trace

    # --- for subclasses -----------------------------------------------------------------
    @abstractmethod
    def _fit(self, traces_by_workload: dict[str, list[Trace]]) -> None:
        """Learn from the training traces, grouped by workload label."""

    @abstractmethod
    def _sample(self, n_events: int, workload: str, seed: int) -> Trace:
        """Return exactly `n_events` canonical events for `workload`, deterministic in `seed`."""

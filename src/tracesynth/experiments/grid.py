"""The cells of an experiment: which generator, on which workload, with which settings.

A TraceSynth cell is (workload, channels, context, constraints, seed); a peer cell is
(workload, peer, seed); in a config with `data.folds`, both also name their fold (the held-out
run), and each fold trains its own models. The constraint modes of one (workload, channels, context, seed) share
one trained model (constraints act at sampling time only), so cells are enumerated model by
model: `model_groups` yields each trained model with the cells that sample from it.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from tracesynth.experiments.config import ExperimentConfig, folds

TRACESYNTH = "tracesynth"


@dataclass(frozen=True)
class Cell:
    generator: str            # "tracesynth" or a peer's label
    workload: str
    seed: int
    channels: str | None = None
    context: int | None = None
    constraints: str = "none"
    model_seed: int | None = None  # the seed its model was trained with (None: `seed`)
    fold: str = ""  # the fold's label (config.Fold); "" where the config has one split

    @property
    def cell_id(self) -> str:
        """A file-name-safe, stable name: the result lands in cells/<cell_id>.json. A config
        without folds keeps the ids it always had, so its earlier runs resume."""
        if self.generator == TRACESYNTH:
            parts = [self.generator, self.workload, _safe(self.channels), f"ctx{self.context}",
                     self.constraints, *self._fold_part, f"seed{self.seed}"]
        else:
            parts = [_safe(self.generator), self.workload, *self._fold_part, f"seed{self.seed}"]
        return "__".join(parts)

    @property
    def model_id(self) -> str:
        """Cells with the same model_id share one trained model."""
        if self.generator == TRACESYNTH:
            return "__".join([self.generator, self.workload, _safe(self.channels), f"ctx{self.context}",
                              *self._fold_part, f"seed{self.training_seed}"])
        return self.cell_id

    @property
    def _fold_part(self) -> list[str]:
        return [f"fold{_safe(self.fold)}"] if self.fold else []

    @property
    def training_seed(self) -> int:
        return self.seed if self.model_seed is None else self.model_seed

    def to_dict(self) -> dict:
        return asdict(self)


def _safe(text: str | None) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", str(text))


def enumerate_cells(config: ExperimentConfig, workloads: list[str]) -> list[Cell]:
    """Every cell, grouped so that cells sharing a model are adjacent; peers after TraceSynth
    cells of the same workload, fold and seed (so a partial run already compares like with like)."""
    grid = config.grid
    cells: list[Cell] = []
    shared = None if grid.retrain_per_seed else grid.seeds[0]
    for seed in grid.seeds:
        for workload in workloads:
            for fold in folds(config.data):
                for context in grid.contexts:
                    for channels in grid.channels:
                        for mode in grid.constraints:
                            cells.append(Cell(TRACESYNTH, workload, seed, channels, context, mode,
                                              None if shared in (None, seed) else shared, fold.label))
                for peer in config.peers:
                    cells.append(Cell(peer.display, workload, seed, fold=fold.label))
    return cells


def model_groups(cells: list[Cell]) -> list[tuple[str, list[Cell]]]:
    """(model_id, its cells) in enumeration order."""
    groups: dict[str, list[Cell]] = {}
    for cell in cells:
        groups.setdefault(cell.model_id, []).append(cell)
    return list(groups.items())

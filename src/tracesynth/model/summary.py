"""What a model directory holds, for `tracesynth info MODEL_DIR`: the network, what it learnt
from, how its training went, and what its sampler will use — read from the JSON files and the
safetensors headers, so a model is described without loading its weights.

Model directories travel (trained on a GPU, copied between runs); before sampling one, a user
wants to know which workloads and channels it has, how long it trained and where, whether its
validation loss was still falling or it overfit (`best/`), and which traces it learnt from.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from tracesynth.model.checkpoint import BEST, is_model_dir, read_model_info, resume_files

TABLES = {"support.safetensors": "8-gram support (support corrector)",
          "copies.safetensors": "256-gram spans (copy guard)",
          "ngrams.safetensors": "n-gram counts (sampling prior)",
          "cadence.safetensors": "steady rhythms (cadence scaffold)",
          "startups.safetensors": "training start-ups (start-up anchor)",
          "splices.safetensors": "training runs' event types and gaps (span splice)"}


@dataclass
class ModelSummary:
    path: str
    channels: list[str]
    context: int
    params: int
    widths: str                       # local / global widths and blocks, e.g. "64 / 128, 1+1 local, 3 global"
    self_condition: bool
    workloads: list[str]
    vocab_sizes: dict[str, int]
    steps: int
    target_steps: int | None
    events_seen: int
    train_seconds: float
    device: str
    precision: str
    train_loss: float | None          # mean of the last 100 steps' losses
    val_loss: tuple[int, float] | None  # (step, loss) of the last validation
    best: tuple[int, float] | None    # (step, loss) of the lowest validation
    best_dir: str | None              # MODEL_DIR/best when kept
    stopped_early: bool
    val_heldout: bool
    training_traces: list[dict] = field(default_factory=list)  # model.provenance fingerprints
    validation_traces: list[dict] = field(default_factory=list)  # separate runs validated on (train --val-data)
    tables: list[str] = field(default_factory=list)
    serial_syscalls: dict[str, int] = field(default_factory=dict)  # per workload: how many
    optimizer_state: bool = False     # training can resume
    ema: float = 0.0                  # decay of the weights' moving average these weights are (0: the last weights)
    val_fraction: float = 0.1         # share of each training trace's end held out for validation
    keep_runs: bool = True            # trained keeping the runs' event sequences (False: train --no-runs)

    def to_dict(self) -> dict:
        return asdict(self)


def summarize_model(directory: str | Path) -> ModelSummary:
    directory = Path(directory)
    info = read_model_info(directory)
    model, train = info["config"]["model"], info["config"].get("train") or {}
    encoder, state = info["encoder"], info["state"]
    losses = [v for _, v in state.get("train_loss", [])][-100:]
    vals = state.get("val_loss") or []
    best = None
    if state.get("best_step") is not None:
        best = (int(state["best_step"]), float(state["best_val_loss"]))
    elif vals:
        best = tuple(min(vals, key=lambda r: r[1]))
    local = model.get("local_blocks", 1)
    return ModelSummary(
        path=str(directory), channels=list(encoder["channels"]), context=int(model["context"]),
        params=info["params"],
        widths=(f"{model.get('d_local')} local / {model.get('d_global')} global wide, {local}+{local} local and "
                f"{model.get('global_blocks')} attention blocks, every {model.get('downsample')} events pooled"),
        self_condition=bool(model.get("self_condition", False)),
        workloads=list(encoder.get("workloads", [])), vocab_sizes=dict(model.get("vocab_sizes", {})),
        steps=int(state.get("step", 0)), target_steps=train.get("steps"),
        events_seen=int(state.get("events_seen", 0)), train_seconds=float(state.get("seconds", 0.0)),
        device=state.get("device") or "not recorded", precision=state.get("precision") or "not recorded",
        train_loss=sum(losses) / len(losses) if losses else None,
        val_loss=tuple(vals[-1]) if vals else None, best=best,
        best_dir=str(directory / BEST) if is_model_dir(directory / BEST) else None,
        stopped_early=bool(state.get("stopped_early", False)), val_heldout=bool(state.get("val_heldout", True)),
        training_traces=list(state.get("data") or []),
        validation_traces=list(state.get("val_data") or []),
        tables=[label for name, label in TABLES.items() if (directory / name).exists()],
        serial_syscalls={w: len(v) for w, v in (encoder.get("serial_syscalls") or {}).items()},
        optimizer_state=all((directory / name).exists() for name in resume_files(train)),
        ema=float(train.get("ema") or 0.0),
        val_fraction=float(train.get("val_fraction", 0.1)),
        keep_runs=bool(train.get("keep_runs", True)),
    )


def summary_rows(s: ModelSummary) -> list[tuple[str, str]]:
    """(field, value) rows for a table."""
    trained = f"{s.steps:,} steps" + (f" of {s.target_steps:,}" if s.target_steps and s.target_steps != s.steps else "")
    where = f"on {s.device}" if s.device != "not recorded" else "(device not recorded)"
    trained += f", {s.events_seen:,} window events, {s.train_seconds:,.0f} s {where}, {s.precision}"
    if s.stopped_early:
        trained += "; stopped early (no better validation loss)"
    rows = [
        ("channels", ", ".join(s.channels) + (" (self-conditioned)" if s.self_condition else "")),
        ("workloads", ", ".join(s.workloads) or "-"),
        ("network", f"{s.params:,} parameters; context {s.context:,} events; {s.widths}"),
        ("vocabularies", ", ".join(f"{ch} {n}" for ch, n in s.vocab_sizes.items())),
        ("trained", trained),
        ("loss (nats/event)", _losses(s)),
        ("weights", f"moving average over training, decay {s.ema:g} (about the last {round(1 / (1 - s.ema)):,} "
                    f"steps)" if s.ema else "the last step's (no moving average)"),
    ]
    if s.best_dir:
        rows.append(("best weights", s.best_dir))
    if s.training_traces:
        rows.append(("training traces", "; ".join(
            f"{t['workload']} {t['events']:,} events, {_span(t)}" for t in s.training_traces)))
    else:
        rows.append(("training traces", "not recorded (saved before 2026-12-04)"))
    if s.validation_traces:
        rows.append(("validation traces", "; ".join(
            f"{t['workload']} {t['events']:,} events, {_span(t)}" for t in s.validation_traces)))
    rows.append(("sampler tables", ", ".join(s.tables) or "none"))
    if not s.keep_runs:
        rows.append(("training runs", "not kept (train --no-runs): no verbatim training run in this model; "
                                      "the span splice and start-up anchor are off"))
    if any(s.serial_syscalls.values()):
        rows.append(("serial syscalls", ", ".join(f"{w} {n}" for w, n in s.serial_syscalls.items())))
    rows.append(("resumable", "yes (optimizer state kept)" if s.optimizer_state else "no (no optimizer state)"))
    return rows


def _losses(s: ModelSummary) -> str:
    parts = []
    if s.train_loss is not None:
        parts.append(f"training {s.train_loss:.3f} (last 100 steps)")
    if s.val_loss is not None:
        held = (f" on {len(s.validation_traces)} separate validation trace{'s' if len(s.validation_traces) > 1 else ''}"
                if s.validation_traces else f" on the held-out last {s.val_fraction:.0%} of each trace" if s.val_heldout
                else ", on training data: no held-out tail")
        parts.append(f"validation {s.val_loss[1]:.3f} at step {s.val_loss[0]:,}{held}")
    if s.best is not None and s.val_loss is not None and s.best[0] != s.val_loss[0]:
        parts.append(f"best {s.best[1]:.3f} at step {s.best[0]:,}")
    return "; ".join(parts) or "-"


def _span(t: dict) -> str:
    if t.get("first_ts") is None:
        return "empty"
    return f"{(t['last_ts'] - t['first_ts']) / 1e9:.2f} s"

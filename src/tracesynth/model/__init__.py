"""The denoiser network, the masking (absorbing-state) noise process, configs and training."""

from tracesynth.model.config import SIZES, ModelConfig, TrainConfig
from tracesynth.model.denoiser import Denoiser
from tracesynth.model.noise import MaskingSchedule

__all__ = ["SIZES", "Denoiser", "MaskingSchedule", "ModelConfig", "TrainConfig"]

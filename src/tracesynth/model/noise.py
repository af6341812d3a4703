"""The forward process: absorbing-state ("masked") discrete diffusion over every channel.

At diffusion time t ∈ [0, 1] each token (one channel of one event) is independently replaced
by its channel's MASK class with probability 1 - α(t); with the linear schedule α(t) = 1 - t,
t = 1 is all-masked and t = 0 is the data (Austin et al. 2021, D3PM absorbing state; Sahoo et
al. 2024, MDLM; Shi et al. 2024, MD4). The reverse step from t to s < t unmasks each still-
masked token with probability (α(s) - α(t)) / (1 - α(t)) and draws it from the denoiser's
prediction; the negative ELBO is a cross-entropy on masked tokens weighted by
-α'(t) / (1 - α(t)) = 1/t.

Masking is per channel, not per event: the model then also learns a channel given the other
channels of the same event (dt given the event name), and the sampler builds each event's
channels jointly over the steps instead of drawing them independently at once.
"""

from __future__ import annotations

import torch

T_MIN = 1e-3


class MaskingSchedule:
    """Linear absorbing-state schedule α(t) = 1 - t."""

    def alpha(self, t: torch.Tensor) -> torch.Tensor:
        return 1.0 - t

    def loss_weight(self, t: torch.Tensor) -> torch.Tensor:
        """ELBO weight -α'(t)/(1-α(t)) of a masked token's cross-entropy."""
        return 1.0 / t

    def sample_t(self, batch: int, generator: torch.Generator) -> torch.Tensor:
        """Low-discrepancy times (one uniform offset, evenly spread): lower-variance loss."""
        offset = torch.rand((), generator=generator)
        t = (offset + torch.arange(batch) / batch) % 1.0
        return t.clamp(min=T_MIN)

    def mask(self, codes: dict[str, torch.Tensor], t: torch.Tensor, mask_ids: dict[str, int],
             generator: torch.Generator) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """Noised codes and the boolean masked positions, per channel."""
        noisy, masked = {}, {}
        for ch, x in codes.items():
            m = torch.rand(x.shape, generator=generator) < (1.0 - self.alpha(t))[:, None]
            masked[ch] = m
            noisy[ch] = torch.where(m, torch.full_like(x, mask_ids[ch]), x)
        return noisy, masked

    def unmask_probability(self, t: float, s: float) -> float:
        """Chance a still-masked token is revealed on the reverse step t → s."""
        at, as_ = 1.0 - t, 1.0 - s
        return 1.0 if s <= 0 else (as_ - at) / (1.0 - at)

"""The denoiser: a bidirectional U-Net-like hybrid over event windows, near-linear in length.

    codes (per channel, MASK where noised) ──► Σ channel embeddings + (t, workload) embedding
      ──► local conv blocks (dilated depthwise conv + MLP), full resolution       O(L)
      ──► downsample ×r (strided conv) ──► transformer blocks (SDPA + RoPE)        O((L/r)²)
      ──► upsample ×r + skip ──► local conv blocks ──► one output head per channel

Local structure (syscall entry → exit, softirq raise → entry → exit) lives in the dilated
convolutions at full resolution; long-range structure (phases, which threads are active) in
attention over L/r summary tokens, whose quadratic cost is r² smaller. Heads run only on the
positions that need a prediction (masked positions in training, positions being revealed when
sampling), which keeps big vocabularies cheap.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from tracesynth.model.config import ModelConfig


_MIN_ROWS = 16  # LocalBlock.at: the fewest rows it hands to a matrix product


def _key(channel: str) -> str:
    """Module names for a channel ("cpu" alone would clash with nn.Module.cpu)."""
    return f"ch_{channel}"


class LocalBlock(nn.Module):
    """ConvNeXt-style 1D block: depthwise dilated conv, LayerNorm, pointwise MLP, residual."""

    def __init__(self, width: int, kernel_size: int, dilation: int, mlp_ratio: int):
        super().__init__()
        self.conv = nn.Conv1d(width, width, kernel_size, padding=dilation * (kernel_size - 1) // 2,
                              dilation=dilation, groups=width)
        self.norm = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, width * mlp_ratio), nn.GELU(), nn.Linear(width * mlp_ratio, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, L, D)
        return x + self.mlp(self.norm(self._conv(x)))

    def _conv(self, x: torch.Tensor) -> torch.Tensor:
        """The depthwise convolution of (B, L, D) rows, (B, L, D) out, by the fastest route."""
        if x.device.type != "cpu":
            return self.conv(x.transpose(1, 2)).transpose(1, 2)
        if torch.is_grad_enabled():
            return self._shifted_conv(x)
        return self._channels_last_conv(x)

    def _channels_last_conv(self, x: torch.Tensor) -> torch.Tensor:
        """`self.conv` on CPU without transposing copies: (B, L, D) rows are already a
        (B, D, 1, L) image in channels-last layout, which oneDNN's depthwise kernel reads and
        writes as it is (the same function as `self.conv`: on this machine bit for bit at
        dilations 2-8, within 5e-7 at dilation 1, sampled traces unchanged). The transposed
        route copies the input to channels-first for the kernel and hands a strided result to
        the LayerNorm after it: block conv + norm, one 4,096-event window, 1.4 ms against 0.6
        (sampling, where the network is most of the time)."""
        conv = self.conv
        b, n, d = x.shape
        image = x.contiguous().view(b, 1, n, d).permute(0, 3, 1, 2)
        out = F.conv2d(image, conv.weight.unsqueeze(2), conv.bias, padding=(0, conv.padding[0]),
                       dilation=(1, conv.dilation[0]), groups=conv.groups)
        return out.permute(0, 2, 3, 1).reshape(b, n, d)

    def at(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """`forward(x)[:, positions]` without the pointwise MLP at the other positions: the
        convolution still reads every position, the LayerNorm and MLP (most of the block's
        time) run on the rows asked for. Sampling asks for the masked positions only, a few
        dozen in a corrector's short pass. Rows are independent, but a matrix product of fewer
        than `_MIN_ROWS` rows takes another kernel on some CPUs whose rounding differs, so a
        short request is padded with other rows and cut back: the rows come out as `forward`
        gives them."""
        h = self._conv(x)
        n = len(positions)
        if n < _MIN_ROWS:
            fill = torch.arange(min(_MIN_ROWS, x.shape[1]), device=positions.device)
            positions = torch.cat([positions, fill[:max(len(fill) - n, 0)]])
        out = x[:, positions] + self.mlp(self.norm(h[:, positions]))
        return out[:, :n]

    def _shifted_conv(self, x: torch.Tensor) -> torch.Tensor:
        """The same depthwise convolution as `self.conv` (same weights; equal up to float
        rounding), as a sum of K shifted, channel-scaled copies of the input. Training on CPU
        only: PyTorch's CPU kernel for a depthwise dilated conv1d is slow backwards (forward and
        backward of one block, 8 windows of 4,096: 82 ms fp32 / 107 ms under bf16 autocast,
        against 45 / 51 ms this way, where the backward is elementwise), while for sampling
        (no gradient, one window) the library kernel is faster (1.0 ms against 1.4-2.4). At
        dilation 1 the channels-last kernel (`_channels_last_conv`) is 2-3x faster than this
        forwards and backwards, but a whole default-model training took 0.96-1.00x the time
        with it and its weights differ by float rounding (`bench_revisions.py --train`), so
        training stays here: the same seed keeps giving the published models bit for bit."""
        conv = self.conv
        k, dilation, length = conv.kernel_size[0], conv.dilation[0], x.shape[1]
        pad = conv.padding[0]
        padded = F.pad(x, (0, 0, pad, pad))
        weight = conv.weight[:, 0, :]  # (D, K)
        out = padded[:, :length] * weight[:, 0]
        for j in range(1, k):
            out = out + padded[:, j * dilation:j * dilation + length] * weight[:, j]
        return out + conv.bias


def rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class GlobalBlock(nn.Module):
    """Pre-norm bidirectional transformer block; rotary positions; torch SDPA kernel."""

    def __init__(self, width: int, heads: int, mlp_ratio: int):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.norm2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, width * 2 * mlp_ratio), nn.GELU(),
                                 nn.Linear(width * 2 * mlp_ratio, width))

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        q, k = rotary(q, cos, sin), rotary(k, cos, sin)
        attn = F.scaled_dot_product_attention(q, k, v)
        x = x + self.proj(attn.transpose(1, 2).reshape(b, n, d))
        return x + self.mlp(self.norm2(x))


def rotary_tables(n: int, head_dim: int, device, dtype) -> tuple[torch.Tensor, torch.Tensor]:
    inv = 1.0 / (10000 ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim))
    angles = torch.arange(n, device=device, dtype=torch.float32)[:, None] * inv[None, :]
    return angles.cos().to(dtype), angles.sin().to(dtype)


def time_features(t: torch.Tensor, width: int) -> torch.Tensor:
    half = width // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, device=t.device, dtype=torch.float32) / half)
    angles = (t.float() * 1000.0)[:, None] * freqs[None, :]
    return torch.cat([angles.sin(), angles.cos()], dim=-1)


class Denoiser(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        config.validate()
        self.config = config
        self.channels = list(config.vocab_sizes)
        d, g = config.d_local, config.d_global
        # One extra class per channel: the MASK (absorbing) state, id = vocab size.
        self.embed = nn.ModuleDict({_key(ch): nn.Embedding(v + 1, d) for ch, v in config.vocab_sizes.items()})
        self.time_mlp = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.Linear(d, d))
        # Workload labels plus one "no label" class for classifier-free guidance.
        self.workload = nn.Embedding(config.n_workloads + 1, d)
        # Whether the window begins at the start of a trace (0: no, 1: yes). Start-up events
        # (execve, the loader's openat/mmap/mprotect) occur only there; without this signal a
        # model trained on random windows never generates them.
        self.start = nn.Embedding(2, d) if config.start_flag else None
        # Each event's index in its trace, for the first `trace_positions` events (one shared
        # "far" class after that). Start-up is a fixed sequence (execve, the loader's
        # openat/mmap/mprotect, libc's set_tid_address/rseq, ...) at fixed places: relative
        # positions (convolutions, rotary attention) cannot say "the 37th event of the trace",
        # this can. Zero-initialised, so it starts as a no-op and learns only what it needs.
        self.trace_position = None
        if config.trace_positions:
            self.trace_position = nn.Embedding(config.trace_positions + 1, d)
            nn.init.zeros_(self.trace_position.weight)
        # The same at coarse grain: which block of `trace_phase_events` events of its trace an
        # event is in. Programs run in phases at fixed places (fio writes its file, then reads
        # it back: the first read comes after ~20,500 events in every run); a window continued
        # from its predecessor's last events cannot count that far back, this can.
        self.trace_phase = None
        if config.trace_phases:
            self.trace_phase = nn.Embedding(config.trace_phases + 1, d)
            nn.init.zeros_(self.trace_phase.weight)
        # Self-conditioning (Chen et al. 2022, "Analog Bits"; for masked diffusion: Cardei et al.
        # 2026, SCMDM): at a still-masked position, the model's previous estimate of that token
        # (a distribution over the channel's classes) enters as a linear map of it. Without it a
        # token that stays masked after a reverse step is inferred again from MASK alone, and
        # tokens revealed in one step never saw what the others were about to become.
        # Zero-initialised: it starts as a no-op.
        self.self_cond = None
        if config.self_condition:
            self.self_cond = nn.ModuleDict({_key(ch): nn.Linear(v, d, bias=False)
                                            for ch, v in config.vocab_sizes.items()})
            for layer in self.self_cond.values():
                nn.init.zeros_(layer.weight)
        dil = config.dilations
        self.down_blocks = nn.ModuleList(
            LocalBlock(d, config.kernel_size, dil[i % len(dil)], config.mlp_ratio) for i in range(config.local_blocks))
        self.down = nn.Conv1d(d, g, config.downsample, stride=config.downsample)
        self.cond_global = nn.Linear(d, g)
        self.global_blocks = nn.ModuleList(
            GlobalBlock(g, config.heads, config.mlp_ratio) for _ in range(config.global_blocks))
        self.global_norm = nn.LayerNorm(g)
        self.up = nn.Linear(g, d * config.downsample)
        self.up_blocks = nn.ModuleList(
            LocalBlock(d, config.kernel_size, dil[i % len(dil)], config.mlp_ratio) for i in range(config.local_blocks))
        self.out_norm = nn.LayerNorm(d)
        self.heads = nn.ModuleDict({_key(ch): nn.Linear(d, v) for ch, v in config.vocab_sizes.items()})

    @property
    def mask_ids(self) -> dict[str, int]:
        return dict(self.config.vocab_sizes)

    @property
    def null_workload(self) -> int:
        return self.config.n_workloads

    def hidden(self, codes: dict[str, torch.Tensor], t: torch.Tensor, workload: torch.Tensor,
               at_start: torch.Tensor | None = None, offset: torch.Tensor | None = None,
               positions: torch.Tensor | None = None,
               self_cond: torch.Tensor | None = None) -> torch.Tensor:
        """Per-position features (B, L, d_local); L must be a multiple of `downsample`.
        `offset` (B,) is the index in its trace of each window's first event (None: far from
        the start); `at_start` (B,) flags windows that begin a trace (default: offset == 0).
        Models configured without `start_flag` / `trace_positions` ignore them. `positions`
        (sorted indices): the features of those positions only, (B, len(positions), d_local),
        the same numbers as `hidden(...)[:, positions]` with the last block's pointwise part
        computed there alone (`LocalBlock.at`). `self_cond` (B, L, d_local): the
        self-conditioning input (`self_cond_input`), added to the embeddings."""
        r = self.config.downsample
        x = sum(self.embed[_key(ch)](codes[ch]) for ch in self.channels)
        if self_cond is not None:
            x = x + self_cond
        b, n, _ = x.shape
        if n % r:
            raise ValueError(f"window length {n} is not a multiple of {r}")
        if at_start is None and offset is not None:
            at_start = offset == 0
        cond = self.time_mlp(time_features(t, self.config.d_local)) + self.workload(workload)
        if self.start is not None:
            flag = torch.zeros_like(workload) if at_start is None else at_start.to(workload.device).long()
            cond = cond + self.start(flag)
        x = x + cond[:, None, :]
        if offset is not None:  # each event's index in its trace
            index = offset.to(x.device).long()[:, None] + torch.arange(n, device=x.device)[None, :]
        for table, far, stride in ((self.trace_position, self.config.trace_positions, 1),
                                   (self.trace_phase, self.config.trace_phases, self.config.trace_phase_events)):
            if table is not None:  # no offset given: far from the start
                x = x + (table.weight[far] if offset is None else table((index // stride).clamp(min=0, max=far)))
        for block in self.down_blocks:
            x = block(x)
        skip = x
        h = self._downsample(x) + self.cond_global(cond)[:, None, :]
        cos, sin = rotary_tables(h.shape[1], self.config.d_global // self.config.heads, h.device, h.dtype)
        for block in self.global_blocks:
            h = block(h, cos, sin)
        h = self.up(self.global_norm(h)).view(b, n, self.config.d_local)
        x = skip + h
        if positions is None:
            for block in self.up_blocks:
                x = block(x)
            return self.out_norm(x)
        if not len(self.up_blocks):
            return self.out_norm(x[:, positions])
        for block in self.up_blocks[:-1]:
            x = block(x)
        return self.out_norm(self.up_blocks[-1].at(x, positions))

    def _downsample(self, x: torch.Tensor) -> torch.Tensor:
        """`self.down` (a conv whose stride is its kernel size, r) as what it is, one linear map
        of each block of r positions: the same weights and function (equal up to float
        rounding), a plain matrix product instead of a convolution kernel — 2-3x faster on CPU
        forwards (one 4,096-event window: 0.5 ms against 0.9-1.7) and backwards."""
        b, n, d = x.shape
        r, g = self.config.downsample, self.config.d_global
        weight = self.down.weight.permute(0, 2, 1).reshape(g, r * d)  # (g, d, r) → (g, r·d)
        return F.linear(x.reshape(b, n // r, r * d), weight, self.down.bias)

    def self_cond_input(self, probs: dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor]],
                        shape: tuple[int, int]) -> torch.Tensor | None:
        """The (B, L, d_local) self-conditioning input from earlier estimates: per channel
        (window rows, positions, class probabilities) of the tokens still masked; zero
        elsewhere, as for a token that is decided (its own embedding says it). None when the
        model is not self-conditioned."""
        if self.self_cond is None:
            return None
        weight = next(iter(self.self_cond.values())).weight
        out = torch.zeros(*shape, self.config.d_local, device=weight.device, dtype=weight.dtype)
        for ch, (rows, pos, p) in probs.items():
            # Under bf16 autocast the map's output is bf16: the sum stays in the weights' dtype.
            mapped = self.self_cond[_key(ch)](p.to(weight.dtype)).to(out.dtype)
            out = out.index_put((rows, pos), mapped, accumulate=True)
        return out

    def logits(self, hidden: torch.Tensor, channel: str) -> torch.Tensor:
        return self.heads[_key(channel)](hidden)

    def forward(self, codes, t, workload, at_start=None, offset=None, self_cond=None) -> dict[str, torch.Tensor]:
        """Logits for every channel at every position (convenient, not the fast path)."""
        h = self.hidden(codes, t, workload, at_start, offset, self_cond=self_cond)
        return {ch: self.logits(h, ch) for ch in self.channels}


def parameter_count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())

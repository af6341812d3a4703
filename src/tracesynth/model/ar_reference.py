"""An autoregressive transformer of the same size as the denoiser: the benchmark's reference.

Used by benchmarks/bench_model.py and by the `ar` peer of `tracesynth experiment`, to put the
diffusion model side by side with the usual way to generate sequences: a causal transformer
that emits one event at a time (all channels of that event at once, from per-channel heads,
which favours the reference) with a key/value cache over a sliding context (a preallocated
ring buffer: one event costs one attention row over the context, no copies). Same embeddings
and heads as the denoiser; depth is chosen so that the parameter counts match.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tracesynth.model.denoiser import GlobalBlock, rotary


class CausalBlock(GlobalBlock):
    """The denoiser's transformer block (same layers, MLP 4x wide), run causally with a KV cache."""

    def __init__(self, width: int, heads: int):
        super().__init__(width, heads, mlp_ratio=2)

    def forward(self, x, cos, sin, cache=None):
        b, n, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        q, k = rotary(q, cos, sin), rotary(k, cos, sin)
        if cache is None:
            attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        elif n > 1 or "k" not in cache:  # prefill: causal over the prompt, keep its last `size` keys
            attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            keep = min(n, cache["size"])
            cache["k"] = k.new_zeros(b, self.heads, cache["size"], d // self.heads)
            cache["v"] = torch.zeros_like(cache["k"])
            cache["k"][:, :, :keep], cache["v"][:, :, :keep] = k[:, :, -keep:], v[:, :, -keep:]
            cache["filled"], cache["next"] = keep, keep % cache["size"]
        else:  # one new event: write into the ring buffer (rotary is already in the keys)
            slot = cache["next"]
            cache["k"][:, :, slot], cache["v"][:, :, slot] = k[:, :, 0], v[:, :, 0]
            cache["filled"] = min(cache["filled"] + 1, cache["size"])
            cache["next"] = (slot + 1) % cache["size"]
            f = cache["filled"]
            attn = F.scaled_dot_product_attention(q, cache["k"][:, :, :f], cache["v"][:, :, :f])
        x = x + self.proj(attn.transpose(1, 2).reshape(b, n, d))
        return x + self.mlp(self.norm2(x))


class ARTransformer(nn.Module):
    def __init__(self, vocab_sizes: dict[str, int], width: int = 128, layers: int = 4, heads: int = 4):
        super().__init__()
        self.channels = list(vocab_sizes)
        self.width, self.n_heads = width, heads
        self.embed = nn.ModuleDict({f"ch_{c}": nn.Embedding(v, width) for c, v in vocab_sizes.items()})
        self.blocks = nn.ModuleList(CausalBlock(width, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(width)
        self.heads = nn.ModuleDict({f"ch_{c}": nn.Linear(width, v) for c, v in vocab_sizes.items()})

    def forward(self, codes, caches=None, offset: int = 0):
        x = sum(self.embed[f"ch_{c}"](codes[c]) for c in self.channels)
        n = x.shape[1]
        head_dim = self.width // self.n_heads
        inv = 1.0 / (10000 ** (torch.arange(0, head_dim, 2, device=x.device, dtype=torch.float32) / head_dim))
        angles = torch.arange(offset, offset + n, device=x.device, dtype=torch.float32)[:, None] * inv[None, :]
        cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
        for i, block in enumerate(self.blocks):
            x = block(x, cos, sin, None if caches is None else caches[i])
        return self.norm(x)

    def loss(self, codes) -> torch.Tensor:
        """Teacher-forced next-event cross-entropy (summed over channels)."""
        h = self.forward({c: v[:, :-1] for c, v in codes.items()})
        return sum(F.cross_entropy(self.heads[f"ch_{c}"](h).flatten(0, 1), codes[c][:, 1:].flatten())
                   for c in self.channels)

    @torch.inference_mode()
    def generate(self, prompt: dict[str, torch.Tensor], n_new: int, context: int,
                 generator: torch.Generator, banned: dict[str, list[int]] | None = None) -> dict[str, torch.Tensor]:
        """Extend `prompt` (1, P) by `n_new` events, one forward per event, cache cut to `context`.
        `banned[ch]` lists classes never drawn (as the diffusion sampler's `banned`)."""
        banned = {c: torch.as_tensor(v) for c, v in (banned or {}).items() if len(v)}
        caches = [{"size": context} for _ in self.blocks]
        h = self.forward(prompt, caches)
        length = prompt[self.channels[0]].shape[1]
        out = {c: [] for c in self.channels}
        last = h[:, -1:]
        for _ in range(n_new):
            step = {}
            for c in self.channels:
                logits = self.heads[f"ch_{c}"](last)[0, 0].float()
                if c in banned:
                    logits[banned[c]] = float("-inf")
                probs = torch.softmax(logits, -1)
                step[c] = torch.multinomial(probs, 1, generator=generator).view(1, 1)
                out[c].append(step[c])
            last = self.forward(step, caches, offset=length)
            length += 1
        return {c: torch.cat(v, dim=1) for c, v in out.items()}


def matched_reference(vocab_sizes: dict[str, int], target_params: int, width: int = 128, heads: int = 4) -> ARTransformer:
    """The AR reference whose parameter count is closest to `target_params`."""
    def count(module):
        return sum(p.numel() for p in module.parameters())

    base = count(ARTransformer(vocab_sizes, width, 0, heads))
    per_layer = count(CausalBlock(width, heads))
    layers = max(1, round((target_params - base) / per_layer))
    return ARTransformer(vocab_sizes, width, layers, heads)

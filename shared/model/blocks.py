"""BLOCKS registry: the structure of one transformer layer. Projects register their own.

A block class is built as `cls(cfg, rngs=rngs)` (cfg = config.model) and called as
`block(h, ctx, cache) -> (h, new_cache)`. `h` is the scan carry: the residual stream for the built-ins, any
pytree for blocks with several streams. Class hooks let such blocks map the embedding into their carry and
back out:
  enter(x, cfg) -> h     before the first layer (default: identity)
  exit(h, cfg) -> x      after the last layer, before the final norm (default: identity)
  final_norm: bool       whether the decoder applies its final norm after `exit`
"""
from __future__ import annotations

import jax
from flax import nnx

from shared import sharding as sh
from shared.model.layers import MLP, Attention, PendingResidual, add_norm, make_norm
from shared.registry import BLOCKS

RESIDUAL = (sh.ACT_BATCH, sh.ACT_LENGTH, sh.ACT_EMBED)


class Block(nnx.Module):
    final_norm = True

    @staticmethod
    def enter(x, cfg):
        return x

    @staticmethod
    def exit(h, cfg):
        return h


@BLOCKS.register("prenorm")
class PreNormBlock(Block):
    """h = x + Attn(Norm(x)); out = h + MLP(Norm(h)). Llama/Qwen layout."""

    def __init__(self, cfg, *, rngs: nnx.Rngs):
        self.attn_norm = make_norm(cfg, rngs=rngs)
        self.attn = Attention(cfg, rngs=rngs)
        self.mlp_norm = make_norm(cfg, rngs=rngs)
        self.mlp = MLP(cfg, rngs=rngs)

    def __call__(self, x, ctx, cache=None):
        step = cache is not None and (isinstance(x, PendingResidual) or x.shape[1] == 1)   # pending: decode only
        decode_kernels = ctx.decode_attention if step else None
        x, normed = add_norm(self.attn_norm, x, decode_kernels)   # x may be the previous layer's PendingResidual
        h, cache = self.attn(normed, ctx, cache, residual=x)   # x + Attn(Norm(x))
        h = sh.constrain(h, RESIDUAL)
        if step:
            # decode step: h is materialised once instead of XLA fusing the add (and the o projection's
            # split-K reduction) into each consumer, the MLP norm and the next residual add. Measured on an
            # H200: a 0.5B batch-256 decode step 1.7% faster (bench/results/decode_steps/HISTORY.md, 10_residual_barrier)
            h = jax.lax.optimization_barrier(h)
        h, normed = add_norm(self.mlp_norm, h, decode_kernels)
        out = self.mlp(normed, decode_kernels, residual=h, defer=ctx.defer_residual)
        return (out if isinstance(out, PendingResidual) else sh.constrain(out, RESIDUAL)), cache


@BLOCKS.register("postnorm")
class PostNormBlock(Block):
    """h = Norm(x + Attn(x)); out = Norm(h + MLP(h)). The original Transformer layout; no final norm."""
    final_norm = False

    def __init__(self, cfg, *, rngs: nnx.Rngs):
        self.attn = Attention(cfg, rngs=rngs)
        self.attn_norm = make_norm(cfg, rngs=rngs)
        self.mlp = MLP(cfg, rngs=rngs)
        self.mlp_norm = make_norm(cfg, rngs=rngs)

    def __call__(self, x, ctx, cache=None):
        a, cache = self.attn(x, ctx, cache)
        h = sh.constrain(self.attn_norm(x + a), RESIDUAL)
        return sh.constrain(self.mlp_norm(h + self.mlp(h)), RESIDUAL), cache

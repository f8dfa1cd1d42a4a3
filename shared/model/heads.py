"""HEADS registry: what the decoder computes from its final hidden states.

A head is built as `cls(cfg, rngs=rngs)` and called as `head(hidden, decoder) -> array` (the decoder is passed
so a tied LM head can read the embedding table).
"""
from __future__ import annotations

import jax.numpy as jnp
from flax import nnx

from shared import sharding as sh
from shared.model.chunked_head import DEFAULT_CHUNK_TOKENS, ChunkedLogits
from shared.model.layers import param
from shared.registry import HEADS


@HEADS.register("lm")
class LMHead(nnx.Module):
    """Logits over the vocabulary; tied to the input embedding when `tie_embeddings`."""

    def __init__(self, cfg, *, rngs: nnx.Rngs):
        self.tied = cfg.tie_embeddings
        if not self.tied:
            self.kernel = param(rngs, (cfg.d_model, cfg.vocab_size), (sh.EMBED, sh.VOCAB), std=cfg.init_std,
                                dtype=cfg.param_dtype)

    def __call__(self, h, decoder):
        if self.tied:
            logits = jnp.einsum("btd,vd->btv", h, decoder.embed[...].astype(h.dtype))
        else:
            logits = jnp.einsum("btd,dv->btv", h, self.kernel[...].astype(h.dtype))
        return sh.constrain(logits, (sh.ACT_BATCH, sh.ACT_LENGTH, sh.ACT_VOCAB))

    def chunked(self, h, decoder, cfg) -> ChunkedLogits:
        """The logits of `h` left uncomputed (shared.model.chunked_head): losses read per-token statistics
        chunk by chunk, in chunks of model.head_chunk_tokens tokens per device (x model.head_chunk_vocab)."""
        weight = decoder.embed[...] if self.tied else self.kernel[...]
        return ChunkedLogits(h, weight.astype(h.dtype), vocab_axis=0 if self.tied else 1,
                             chunk_tokens=int(cfg.get("head_chunk_tokens", DEFAULT_CHUNK_TOKENS)),
                             chunk_vocab=int(cfg.get("head_chunk_vocab", 0)))


@HEADS.register("scalar")
class ScalarHead(nnx.Module):
    """One number per position (reward model / value head): [B,T]. Callers pick the position they need."""

    def __init__(self, cfg, *, rngs: nnx.Rngs):
        self.kernel = param(rngs, (cfg.d_model,), (sh.EMBED,), std=cfg.init_std, dtype=cfg.param_dtype)
        self.bias = param(rngs, (), (), init="zeros", dtype=cfg.param_dtype)

    def __call__(self, h, decoder):
        out = jnp.einsum("btd,d->bt", h.astype(jnp.float32), self.kernel[...].astype(jnp.float32))
        return out + self.bias[...]

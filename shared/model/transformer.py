"""The shared decoder: embed -> scanned blocks -> final norm -> heads.

One class covers Llama, Qwen2 (qkv bias) and Qwen3 (qk-norm) through config switches; causal or
bidirectional attention; KV-cache prefill/decode that matches the full forward.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import ml_collections
import jax.numpy as jnp
from flax import nnx

from shared import sharding as sh
from shared.model.blocks import RESIDUAL, Block
from shared.model.layers import AttentionContext, PendingResidual, add_norm, make_norm, param
from shared.registry import BLOCKS, HEADS

REMAT_POLICIES = {
    "none": None,
    "full": jax.checkpoint_policies.nothing_saveable,
    "dots": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
    "dots_all": jax.checkpoint_policies.dots_saveable,
    "mlp": None,   # the layer keeps its activations; each MLP recomputes its own (layers.MLP.recompute)
}


def freeze(cfg):
    """Model configs live in module graphs as static data, which must be hashable (jit static args)."""
    return cfg if isinstance(cfg, ml_collections.FrozenConfigDict) else ml_collections.FrozenConfigDict(cfg)


class Decoder(nnx.Module):
    def __init__(self, cfg, *, rngs: nnx.Rngs):
        cfg = freeze(cfg)
        self.cfg = cfg
        self.block_cls = BLOCKS.get(cfg.block)
        self.embed = param(rngs, (cfg.vocab_size, cfg.d_model), (sh.VOCAB, sh.EMBED), std=cfg.init_std,
                           dtype=cfg.param_dtype)

        @nnx.split_rngs(splits=cfg.n_layers)
        @nnx.vmap(in_axes=(0,), out_axes=0, axis_size=cfg.n_layers)
        def make_layers(r):
            return self.block_cls(cfg, rngs=r)

        self.layers = make_layers(rngs)
        if self.block_cls.final_norm:
            self.final_norm = make_norm(cfg, rngs=rngs)
        self.heads = nnx.Dict({name: HEADS.get(name)(cfg, rngs=rngs) for name in cfg.heads})

    def __call__(self, inputs, positions=None, segment_ids=None, *, cache=None, cache_index=None, kv_valid=None,
                 hidden: str = "none", pool_mask=None, attention: str = "xla",
                 layer_params: list | None = None, decode_attention: str = "xla",
                 kv_start=None, logits: str = "dense", embeds=None, embed_mask=None) -> dict[str, Any]:
        """inputs int[B,T] -> {"logits": [B,T,V], <other head>: ..., optional "hidden", "layer_hidden",
        "pooled", "cache"}.

        positions: [B,T] (default 0..T-1, or cache_index + 0..T-1 in decode). segment_ids: [B,T] packed
        documents (attention stays inside a document). cache: from `init_cache`; with it, cache_index is where
        these T tokens go and the returned "cache" holds them. hidden: "none" | "last" (final normed hidden
        [B,T,D]) | "layers" (the stream after the embedding and after every layer, [L+1,B,T,D]) | "prefinal"
        ("hidden" and "prefinal" [B,T,D], the stream the final norm reads: latent-reasoning papers compare norms
        before and after it).
        embeds [B,T,D] + embed_mask [B,T] bool: where the mask is set, the input vector is embeds' row instead of
        the token's embedding (image features, latent thoughts fed back as inputs); inputs there are ignored.
        Works in prefill and in cache decode alike (T = 1 steps).
        A per-layer cache (`init_cache(..., per_layer=True)`, a list of L caches) runs the layers as a Python
        loop: each layer then reads and writes its own buffer, with no slice of a stacked cache copied per
        step (the decode loop's main cost on GPU). layer_params: that loop's per-layer parameter states
        (`unstack_layer_params`), split once outside the decode loop; default: sliced here.
        pool_mask: [B,T] -> "pooled" [B,D] = mean of final hidden over the mask.
        decode_attention / kv_start: how single-token steps attend to the cache ("xla" | "pallas" |
        "pallas_interpret", see AttentionContext); kv_start [B] = first visible slot (kv_valid's kernel form).
        A static (Python int) cache_index lets attention skip the slots after this chunk.
        """
        cfg = self.cfg
        if hidden not in ("none", "last", "layers", "prefinal"):
            raise ValueError(f"Decoder(hidden={hidden!r}): expected 'none', 'last', 'layers' or 'prefinal'")
        dtype = jnp.dtype(cfg.dtype)
        b, t = inputs.shape
        if positions is None:
            start = 0 if cache_index is None else cache_index
            positions = jnp.broadcast_to(start + jnp.arange(t, dtype=jnp.int32), (b, t))
        ctx = AttentionContext(positions=positions, segment_ids=segment_ids, cache_index=cache_index,
                               kv_valid=kv_valid, implementation=attention, decode_attention=decode_attention,
                               kv_start=kv_start)

        # The lookup reads a replicated compute-dtype copy: gathering from a (vocab, fsdp)-sharded table into
        # batch-sharded rows otherwise makes XLA rematerialise the whole table anyway (FSDP gathers it too).
        table = sh.constrain(self.embed[...].astype(dtype), (None, None))
        x = jnp.take(table, inputs, axis=0)
        if embeds is not None or embed_mask is not None:
            x = _splice_embeds(x, embeds, embed_mask)
        x = sh.constrain(x, RESIDUAL)
        h = self.block_cls.enter(x, cfg)

        graphdef, layer_state = nnx.split(self.layers)
        keep_layers = hidden == "layers"
        block_cls = self.block_cls

        def body(carry, xs):
            h, full_cache = carry
            params, layer = xs
            block = nnx.merge(graphdef, params)
            layer_cache = None if full_cache is None else {**full_cache, "layer": layer}
            h, layer_cache = block(h, ctx, layer_cache)
            if layer_cache is not None:  # the whole cache rides in the carry, updated in place slot by slot
                full_cache = {"k": layer_cache["k"], "v": layer_cache["v"]}
            return (h, full_cache), (block_cls.exit(h, cfg) if keep_layers else None)

        policy = REMAT_POLICIES[cfg.remat]
        if policy is not None and cache is None:
            body = jax.checkpoint(body, policy=policy, prevent_cse=False)
        if isinstance(cache, (list, tuple)):  # per-layer cache: a Python loop over the layers
            if len(cache) != cfg.n_layers:
                raise ValueError(f"per-layer cache has {len(cache)} layers, the model {cfg.n_layers}")
            layer_params = layer_params or unstack_layer_params(layer_state, cfg.n_layers)
            # each layer follows the previous one directly: a block may leave its last residual add pending
            # for the next layer's norm kernel (layers.PendingResidual), resolved here after the last layer
            layer_ctx = dataclasses.replace(ctx, defer_residual=hidden not in ("layers", "prefinal") and t == 1)
            new_cache, outs = [], []
            for i in range(cfg.n_layers):
                h, layer_cache = nnx.merge(graphdef, layer_params[i])(h, layer_ctx, {**cache[i], "layer": 0})
                new_cache.append({"k": layer_cache["k"], "v": layer_cache["v"]})
                outs.append(block_cls.exit(h, cfg) if keep_layers else None)
            per_layer = jnp.stack(outs) if keep_layers else None
        else:
            layers = jnp.arange(cfg.n_layers, dtype=jnp.int32)
            (h, new_cache), per_layer = jax.lax.scan(body, (h, cache), (layer_state, layers))

        if isinstance(h, PendingResidual) and self.block_cls.final_norm and self.block_cls.exit is Block.exit:
            _, out = add_norm(self.final_norm, h, decode_attention)   # the pending add and the final norm: one kernel
        else:
            if isinstance(h, PendingResidual):
                h = h.resolve()
            out = prefinal = self.block_cls.exit(h, cfg)
            if self.block_cls.final_norm:
                out = self.final_norm(out)
        result = {}
        if logits not in ("dense", "chunked"):
            raise ValueError(f"Decoder(logits={logits!r}): expected 'dense' or 'chunked'")
        for name, head in self.heads.items():
            if name == "lm":
                result["logits"] = head.chunked(out, self, cfg) if logits == "chunked" else head(out, self)
            else:
                result[name] = head(out, self)
        if hidden in ("last", "layers", "prefinal"):
            result["hidden"] = out
        if hidden == "prefinal":
            result["prefinal"] = prefinal
        if keep_layers:
            result["layer_hidden"] = jnp.concatenate([x[None], per_layer], axis=0)
        if pool_mask is not None:
            w = pool_mask.astype(jnp.float32)[..., None]
            result["pooled"] = (out.astype(jnp.float32) * w).sum(1) / jnp.maximum(w.sum(1), 1.0)
        if cache is not None:
            result["cache"] = new_cache
        return result


def _splice_embeds(x, embeds, embed_mask):
    """x [B,T,D] with embeds' rows where embed_mask is set (a where, not a scatter: shapes stay static and the
    gradient reaches embeds only at the masked positions)."""
    if embeds is None or embed_mask is None:
        raise ValueError("Decoder: embeds and embed_mask go together (got only "
                         f"{'embeds' if embed_mask is None else 'embed_mask'})")
    if embeds.shape != x.shape or embed_mask.shape != x.shape[:2]:
        raise ValueError(f"Decoder: embeds {tuple(embeds.shape)} must be [B,T,D] = {tuple(x.shape)} and embed_mask "
                         f"{tuple(embed_mask.shape)} [B,T] = {tuple(x.shape[:2])}")
    return jnp.where(embed_mask.astype(bool)[..., None], embeds.astype(x.dtype), x)


def init_cache(cfg, batch: int, max_len: int, dtype=None, per_layer: bool = False) -> dict | list[dict]:
    """Static KV cache for all layers: {"k","v"}: [L,B,S,K,D] zeros; per_layer: a list of L such caches
    with a leading axis of 1 (same layout, so blocks see one cache format)."""
    dtype = jnp.dtype(dtype or cfg.dtype)
    if per_layer:
        shape = (1, batch, max_len, cfg.n_kv_heads, cfg.head_dim)
        return [{"k": jnp.zeros(shape, dtype), "v": jnp.zeros(shape, dtype)} for _ in range(cfg.n_layers)]
    shape = (cfg.n_layers, batch, max_len, cfg.n_kv_heads, cfg.head_dim)
    return {"k": jnp.zeros(shape, dtype), "v": jnp.zeros(shape, dtype)}


def unstack_layer_params(layer_state, n_layers: int) -> list:
    """The scanned layers' stacked parameter state as a list of per-layer states."""
    return [jax.tree.map(lambda x, i=i: x[i], layer_state) for i in range(n_layers)]


def decoder_layer_params(params, n_layers: int) -> list:
    """Per-layer parameter states of a Decoder's full param state (for `Decoder(..., layer_params=)`)."""
    return unstack_layer_params(params["layers"], n_layers)


def _cast_weights(state, dtype):
    """Floating arrays with >= 2 dims (weight matrices, head biases) to `dtype`; 1-D norm scales keep theirs
    (norms compute in float32 from them)."""
    return jax.tree.map(lambda x: x.astype(dtype) if jnp.issubdtype(x.dtype, jnp.floating) and x.ndim >= 2
                        else x, state)


def inference_params(graphdef, params, cfg) -> tuple[Any, list]:
    """(params, per-layer params) for a loop that reuses the weights many times (the sampler's decode): weights
    cast to the compute dtype once (the model would cast its float32 masters at every use, reading twice the
    bytes per step), layers unstacked (`Decoder(..., layer_params=)`), SwiGLU gate/up packed into one GEMM and
    attention q/k/v into another.
    The same numbers as the model's own casts; the training state is untouched."""
    from shared.model.layers import pack_attention_weights, pack_mlp_weights

    dtype = jnp.dtype(cfg.dtype)
    layers_module = nnx.merge(graphdef, params).layers  # which sub-modules are MLPs (names alone could mislead)
    layers = [pack_attention_weights(layers_module, pack_mlp_weights(layers_module, _cast_weights(state, dtype)))
              for state in decoder_layer_params(params, cfg.n_layers)]
    outer = _cast_weights(params, dtype)
    outer["layers"] = params["layers"]  # the stacked copy is not read when layer_params are given
    return outer, layers


CACHE_AXES = (sh.LAYERS, sh.ACT_BATCH, sh.CACHE_LENGTH, sh.ACT_KV_HEADS, sh.ACT_HEAD_DIM)


def build_model(cfg, seed: int = 0) -> Decoder:
    return Decoder(cfg, rngs=nnx.Rngs(params=seed))


def create_sharded(cfg, mesh, seed: int = 0, rules=None, check=None):
    """(graphdef, state) with every parameter born sharded on `mesh`; check: see shared.sharding.init_sharded."""
    return sh.init_sharded(functools.partial(build_model, cfg, seed), mesh, rules, check=check)


def attention_implementation(cfg, preset: dict | None, platform: str) -> str:
    """model.attention "auto" takes the preset's choice, else the platform default."""
    if cfg.attention != "auto":
        return cfg.attention
    if preset and preset.get("attention") and preset.get("platform") in (platform, None, "auto"):
        choice = preset["attention"]
        if choice != "auto":
            return choice
    return {"gpu": "cudnn", "tpu": "splash"}.get(platform, "xla")  # as tpu_configs.presets.ATTENTION_BY_PLATFORM


def count_params(state) -> int:
    return sum(x.size for x in jax.tree.leaves(state))

"""Transformer building blocks: norms, RoPE, attention (GQA, qk-norm, sliding window, KV cache), MLPs.

Parameters are float32 (`param_dtype`) and cast to the compute dtype at use. Every parameter carries its
logical axes (`axes=` metadata) so `shared.sharding` can place it; activations are constrained by name.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from shared import sharding as sh
from shared.model import decode_attention, decode_matmul, decode_norm
from shared.model.splash_attention import splash_attention
from shared.registry import NORMS


def dtype_of(name: str):
    return jnp.dtype(name)


def param(rngs: nnx.Rngs, shape, axes, *, std: float | None = None, init: str = "normal", dtype="float32"):
    if init == "normal":
        value = std * jax.random.normal(rngs.params(), shape, dtype=dtype_of(dtype))
    elif init == "ones":
        value = jnp.ones(shape, dtype_of(dtype))
    elif init == "zeros":
        value = jnp.zeros(shape, dtype_of(dtype))
    else:
        raise ValueError(f"unknown init {init!r}")
    return nnx.Param(value, axes=tuple(axes))


# ---------------------------------------------------------------- norms


@NORMS.register("rmsnorm")
class RMSNorm(nnx.Module):
    """y = x / sqrt(mean(x^2) + eps) * scale, computed in float32 (as HF Llama/Qwen do)."""

    def __init__(self, dim: int, *, eps: float = 1e-6, rngs: nnx.Rngs, param_dtype="float32", axes=(sh.NORM,)):
        self.eps = eps
        self.scale = param(rngs, (dim,), axes, init="ones", dtype=param_dtype)

    def __call__(self, x):
        dtype = x.dtype
        x = x.astype(jnp.float32)
        x = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + self.eps)
        return (x * self.scale[...].astype(jnp.float32)).astype(dtype)


@NORMS.register("layernorm")
class LayerNorm(nnx.Module):
    def __init__(self, dim: int, *, eps: float = 1e-6, rngs: nnx.Rngs, param_dtype="float32", axes=(sh.NORM,)):
        self.eps = eps
        self.scale = param(rngs, (dim,), axes, init="ones", dtype=param_dtype)
        self.bias = param(rngs, (dim,), axes, init="zeros", dtype=param_dtype)

    def __call__(self, x):
        dtype = x.dtype
        x = x.astype(jnp.float32)
        mean = jnp.mean(x, axis=-1, keepdims=True)
        var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
        y = (x - mean) * jax.lax.rsqrt(var + self.eps)
        return (y * self.scale[...] + self.bias[...]).astype(dtype)


def make_norm(cfg, dim: int | None = None, *, rngs: nnx.Rngs, axes=(sh.NORM,)):
    return NORMS.get(cfg.norm)(dim or cfg.d_model, eps=cfg.norm_eps, rngs=rngs, param_dtype=cfg.param_dtype,
                               axes=axes)


# ---------------------------------------------------------------- RoPE


def rope_inv_freq(cfg) -> jnp.ndarray:
    """Inverse frequencies, with optional 'linear' or 'llama3' scaling (HF's definitions)."""
    dim = cfg.head_dim
    inv = 1.0 / (cfg.rope_theta ** (jnp.arange(0, dim, 2, dtype=jnp.float32) / dim))
    scaling = cfg.rope_scaling
    kind = scaling.type if scaling is not None else "none"
    if kind in ("none", "default", ""):
        return inv
    if kind == "linear":
        return inv / scaling.factor
    if kind == "llama3":
        low_wavelen = scaling.original_max_position / scaling.low_freq_factor
        high_wavelen = scaling.original_max_position / scaling.high_freq_factor
        wavelen = 2 * math.pi / inv
        smooth = (scaling.original_max_position / wavelen - scaling.low_freq_factor) / (
            scaling.high_freq_factor - scaling.low_freq_factor)
        scaled = jnp.where(wavelen > low_wavelen, inv / scaling.factor, inv)
        mid = (1 - smooth) * inv / scaling.factor + smooth * inv
        is_mid = (wavelen <= low_wavelen) & (wavelen >= high_wavelen)
        return jnp.where(is_mid, mid, scaled)
    raise ValueError(f"model.rope_scaling.type: unknown {kind!r} (none | linear | llama3)")


def apply_rope(x, positions, inv_freq):
    """x [B,T,H,D]; positions [B,T]. Rotate-half layout, as in HF Llama/Qwen."""
    angles = positions.astype(jnp.float32)[..., None] * inv_freq  # [B,T,D/2]
    cos = jnp.cos(angles)[:, :, None, :]
    sin = jnp.sin(angles)[:, :, None, :]
    x32 = x.astype(jnp.float32)
    x1, x2 = jnp.split(x32, 2, axis=-1)
    cos = jnp.concatenate([cos, cos], -1)
    sin = jnp.concatenate([sin, sin], -1)
    rotated = jnp.concatenate([-x2, x1], axis=-1)
    return (x32 * cos + rotated * sin).astype(x.dtype)


def kernel_mode(decode_kernels: str | None) -> tuple[bool, bool]:
    """(use the Pallas decode kernels, interpret them) for a decode path name: "pallas" (compiled, GPU),
    "pallas_interpret" (the Pallas interpreter, CPU tests), anything else (XLA's ops)."""
    return decode_kernels in ("pallas", "pallas_interpret"), decode_kernels == "pallas_interpret"


@functools.partial(jax.tree_util.register_dataclass, data_fields=["x", "partials"], meta_fields=[])
@dataclasses.dataclass
class PendingResidual:
    """A decode step's residual stream with its last add not yet done: x + partials.sum(1), rounded to x's dtype.
    A layer returns it (MLP(..., defer=True)) so that the next layer's `add_norm` runs the add and its RMSNorm
    as one kernel (shared.model.decode_norm) instead of two XLA kernels."""
    x: jax.Array          # [B,1,D] the residual stream before the MLP output
    partials: jax.Array   # [B,S,D] float32: the MLP down projection's split-K partial products

    def resolve(self):
        return self.x + self.partials.sum(1).astype(self.x.dtype)[:, None]


def add_norm(norm, x, decode_kernels: str | None = None):
    """(x, norm(x)) for a residual stream x [B,T,D] or a PendingResidual (then x is resolved first). On decode
    steps with the Pallas kernels ("pallas" / "pallas_interpret") an RMSNorm runs as shared.model.decode_norm's
    kernel, the pending add included."""
    kernels, interpret = kernel_mode(decode_kernels)
    kernel = (kernels and isinstance(norm, RMSNorm)
              and decode_norm.usable(x.x.dtype if isinstance(x, PendingResidual) else x.dtype,
                                     norm.scale.shape[0], interpret=interpret))
    if isinstance(x, PendingResidual):
        if not kernel:
            x = x.resolve()
            return x, norm(x)
        new_x, normed = decode_norm.sharded_add_rmsnorm(x.x[:, 0], norm.scale[...], partials=x.partials,
                                                        eps=norm.eps, interpret=interpret)
        return new_x[:, None], normed[:, None]
    if kernel and x.shape[1] == 1:
        return x, decode_norm.sharded_add_rmsnorm(x[:, 0], norm.scale[...], eps=norm.eps,
                                                  interpret=interpret)[:, None]
    return x, norm(x)


# ---------------------------------------------------------------- attention


@dataclasses.dataclass
class AttentionContext:
    """What every attention layer of one forward pass needs besides its input."""
    positions: jax.Array                 # [B,T] RoPE positions
    segment_ids: jax.Array | None = None  # [B,T] packed documents (0 = padding); None = one document per row
    cache_index: jax.Array | None = None  # scalar: where this chunk's keys go in the KV cache (decode mode)
    kv_valid: jax.Array | None = None     # [B,S] bool: cache slots that may be attended (e.g. not left padding)
    implementation: str = "xla"
    # Single-token steps over a cache: "xla" (masked dense attention over every slot) or "pallas" /
    # "pallas_interpret" (shared.model.decode_attention: one kernel that visits only slots kv_start..index).
    decode_attention: str = "xla"
    kv_start: jax.Array | None = None     # [B] first visible cache slot (the kernel's form of kv_valid)
    # A layer may hand the next one a PendingResidual (its MLP's residual add left to the next layer's norm
    # kernel): set by the decoder's per-layer Python loop on decode steps, where the next layer follows directly.
    defer_residual: bool = False


def _mask(ctx: AttentionContext, cfg, q_len: int, k_len: int):
    """Boolean [B or 1, 1, T, S] mask for the XLA path."""
    if ctx.cache_index is None:
        q_idx = jnp.arange(q_len)[:, None]
        k_idx = jnp.arange(k_len)[None, :]
    else:
        q_idx = ctx.cache_index + jnp.arange(q_len)[:, None]
        k_idx = jnp.arange(k_len)[None, :]
    mask = jnp.ones((q_len, k_len), bool)
    if cfg.causal:
        mask &= k_idx <= q_idx
    if cfg.sliding_window:
        mask &= q_idx - k_idx < cfg.sliding_window
        if not cfg.causal:
            mask &= k_idx - q_idx < cfg.sliding_window
    mask = mask[None, None]
    if ctx.cache_index is not None:
        mask = mask & (k_idx < ctx.cache_index + q_len)[None, None]
        if ctx.kv_valid is not None:
            mask = mask & ctx.kv_valid[:, None, None, :]
    elif ctx.segment_ids is not None:
        seg = ctx.segment_ids
        mask = mask & (seg[:, None, :, None] == seg[:, None, None, :])
    return mask


def xla_attention(q, k, v, mask):
    """q [B,T,H,D], k/v [B,S,K,D] with H = K * G; softmax in float32."""
    b, t, h, d = q.shape
    kv = k.shape[2]
    q = q.reshape(b, t, kv, h // kv, d)
    scores = jnp.einsum("btkgd,bskd->bkgts", q, k, preferred_element_type=jnp.float32) / math.sqrt(d)
    scores = jnp.where(mask[:, :, None], scores, jnp.finfo(jnp.float32).min)
    probs = jax.nn.softmax(scores, axis=-1)
    # A query row with no visible key (padding) gives uniform probs over masked keys: zero it instead.
    probs = jnp.where(mask[:, :, None], probs, 0.0).astype(v.dtype)
    out = jnp.einsum("bkgts,bskd->btkgd", probs, v)
    return out.reshape(b, t, h, d)


class Attention(nnx.Module):
    def __init__(self, cfg, *, rngs: nnx.Rngs):
        self.cfg = cfg
        d, h, k, hd = cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        pd, std = cfg.param_dtype, cfg.init_std
        self.q = param(rngs, (d, h, hd), (sh.EMBED, sh.HEADS, sh.HEAD_DIM), std=std, dtype=pd)
        self.k = param(rngs, (d, k, hd), (sh.EMBED, sh.KV_HEADS, sh.HEAD_DIM), std=std, dtype=pd)
        self.v = param(rngs, (d, k, hd), (sh.EMBED, sh.KV_HEADS, sh.HEAD_DIM), std=std, dtype=pd)
        self.o = param(rngs, (h, hd, d), (sh.HEADS, sh.HEAD_DIM, sh.EMBED), std=std / math.sqrt(2 * cfg.n_layers),
                       dtype=pd)
        if cfg.qkv_bias:
            self.q_bias = param(rngs, (h, hd), (sh.HEADS, sh.HEAD_DIM), init="zeros", dtype=pd)
            self.k_bias = param(rngs, (k, hd), (sh.KV_HEADS, sh.HEAD_DIM), init="zeros", dtype=pd)
            self.v_bias = param(rngs, (k, hd), (sh.KV_HEADS, sh.HEAD_DIM), init="zeros", dtype=pd)
        if cfg.qk_norm:
            self.q_norm = make_norm(cfg, hd, rngs=rngs, axes=(sh.HEAD_DIM,))
            self.k_norm = make_norm(cfg, hd, rngs=rngs, axes=(sh.HEAD_DIM,))

    def __call__(self, x, ctx: AttentionContext, cache: dict | None = None, residual=None):
        """(attention output [B,T,D], or residual + it when `residual` is given; the updated cache). On the fused
        decode path the residual add is the o projection's epilogue."""
        cfg = self.cfg
        inv_freq = rope_inv_freq(cfg)
        if cache is not None and self._can_fuse_decode(x, cache, ctx):
            out, new_cache = self._fused_decode(self._decode_qkv(x, ctx), cache, ctx, inv_freq)
            return self._decode_output(out, ctx, residual), new_cache
        q, k, v = self._project(x)
        q = apply_rope(q, ctx.positions, inv_freq)
        k = apply_rope(k, ctx.positions, inv_freq)
        q = sh.constrain(q, (sh.ACT_BATCH, sh.ACT_LENGTH, sh.ACT_HEADS, sh.ACT_HEAD_DIM))
        k = sh.constrain(k, (sh.ACT_BATCH, sh.ACT_LENGTH, sh.ACT_KV_HEADS, sh.ACT_HEAD_DIM))

        new_cache = None
        if cache is not None:
            out, new_cache = self._with_cache(q, k, v, cache, ctx)
        elif ctx.implementation == "cudnn":
            out = self._fused(q, k, v, ctx)
        elif ctx.implementation == "xla":
            out = xla_attention(q, k, v, _mask(ctx, cfg, q.shape[1], k.shape[1]))
        elif ctx.implementation == "splash":
            out = splash_attention(q, k, v, ctx.segment_ids, causal=cfg.causal, sliding_window=cfg.sliding_window)
        elif ctx.implementation == "tokamax":
            out = self._tokamax(q, k, v)
        else:
            raise ValueError(f"model.attention: unknown implementation {ctx.implementation!r} "
                             "(xla | cudnn | splash | tokamax)")
        out = sh.constrain(out, (sh.ACT_BATCH, sh.ACT_LENGTH, sh.ACT_HEADS, sh.ACT_HEAD_DIM))
        y = jnp.einsum("bthk,hkd->btd", out, self.o[...].astype(x.dtype))
        return (y if residual is None else residual + y), new_cache

    def _project(self, x):
        """q [B,T,H,Dh], k and v [B,T,K,Dh]: projections, biases and qk-norm (before RoPE)."""
        cfg = self.cfg
        dt = x.dtype
        h, kv = cfg.n_heads, cfg.n_kv_heads
        if self._packed():
            # packed [D, H+2K, Dh] q/k/v weights (pack_attention_weights, decode): one GEMM, one output array
            qkv = jnp.einsum("btd,dhk->bthk", x, self.q[...].astype(dt))
            if cfg.qkv_bias:
                qkv = qkv + self.q_bias[...].astype(dt)
            q, k, v = qkv[:, :, :h], qkv[:, :, h:h + kv], qkv[:, :, h + kv:]
        else:
            q = jnp.einsum("btd,dhk->bthk", x, self.q[...].astype(dt))
            k = jnp.einsum("btd,dhk->bthk", x, self.k[...].astype(dt))
            v = jnp.einsum("btd,dhk->bthk", x, self.v[...].astype(dt))
            if cfg.qkv_bias:
                q, k, v = (q + self.q_bias[...].astype(dt), k + self.k_bias[...].astype(dt),
                           v + self.v_bias[...].astype(dt))
        if cfg.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        return q, k, v

    def _packed(self) -> bool:
        return self.q.shape[1] == self.cfg.n_heads + 2 * self.cfg.n_kv_heads

    def _can_fuse_decode(self, x, cache, ctx) -> bool:
        """A single-token step that shared.model.decode_attention.fused_decode_attention can run whole (RoPE,
        the KV-slot write and attention in one kernel): a Pallas decode path, a per-layer cache of x's dtype
        and a causal model without a sliding window."""
        cfg = self.cfg
        return (x.shape[1] == 1 and kernel_mode(ctx.decode_attention)[0] and cfg.causal
                and not cfg.sliding_window and cache["k"].shape[0] == 1 and cache["k"].dtype == x.dtype
                and decode_attention.fused_supported(cache["k"].shape[2], cfg.head_dim))

    def _decode_qkv(self, x, ctx):
        """[B, H+2K, Dh]: this decode token's q/k/v before RoPE. With packed weights (and no qk-norm) one
        shared.model.decode_matmul kernel (GEMM + bias, no split-K partials) writes it; else XLA's ops."""
        cfg = self.cfg
        b, d = x.shape[0], x.shape[-1]
        heads = cfg.n_heads + 2 * cfg.n_kv_heads
        interpret = kernel_mode(ctx.decode_attention)[1]
        if (self._packed() and not cfg.qk_norm
                and decode_matmul.usable(x.dtype, d, heads * cfg.head_dim, interpret=interpret)):
            bias = self.q_bias[...].astype(x.dtype).reshape(-1) if cfg.qkv_bias else None
            qkv = decode_matmul.sharded_matmul(x[:, 0], self.q[...].astype(x.dtype).reshape(d, -1), bias=bias,
                                               interpret=interpret)
            return qkv.reshape(b, heads, cfg.head_dim)
        q, k, v = self._project(x)
        return jnp.concatenate([q, k.astype(q.dtype), v.astype(q.dtype)], axis=2)[:, 0]

    def _decode_output(self, out, ctx, residual):
        """The o projection of the attention output [B,H,Dh] -> [B,1,D], plus `residual` if given (then one
        shared.model.decode_matmul kernel with the add as its epilogue, where the shapes allow)."""
        b, heads, head_dim = out.shape
        o = self.o[...].astype(out.dtype)
        d = o.shape[-1]
        interpret = kernel_mode(ctx.decode_attention)[1]
        if residual is not None and decode_matmul.usable(out.dtype, heads * head_dim, d, interpret=interpret):
            y = decode_matmul.sharded_matmul(out.reshape(b, heads * head_dim), o.reshape(heads * head_dim, d),
                                             residual=residual[:, 0].astype(out.dtype), interpret=interpret)
            return y[:, None].astype(residual.dtype)
        y = jnp.einsum("bhk,hkd->bd", out, o)[:, None]
        return y if residual is None else residual + y

    def _fused_decode(self, qkv, cache, ctx, inv_freq):
        """(attention output [B,H,D], updated cache) of one decode step in one kernel per layer: q/k/v [B, H+2K,
        D] go in before RoPE (one array straight from the projection GEMM, instead of separate RoPE, and K and V
        slot-write kernels)."""
        b = qkv.shape[0]
        start = ctx.kv_start if ctx.kv_start is not None else jnp.zeros((b,), jnp.int32)
        slot = jnp.broadcast_to(jnp.asarray(ctx.cache_index, jnp.int32), (b,))
        out, k_cache, v_cache = decode_attention.sharded_fused_decode_attention(
            qkv, cache["k"][0], cache["v"][0], start, slot, ctx.positions[:, 0], inv_freq, heads=self.cfg.n_heads,
            interpret=kernel_mode(ctx.decode_attention)[1])
        return out, {"k": k_cache[None], "v": v_cache[None], "layer": cache["layer"]}

    def _with_cache(self, q, k, v, cache, ctx):
        """(attention output, updated cache) for this chunk's q/k/v [B,T,*,D] and a cache {"k", "v": [L,B,S,K,D]
        (L = 1 for a per-layer cache), "layer": this layer's index}. Only this chunk's slots are written (in
        place in the decode loop's carry); attention then reads the layer's slots written so far."""
        cfg = self.cfg
        dt = q.dtype
        t, s = q.shape[1], cache["k"].shape[2]
        idx, layer = ctx.cache_index, cache["layer"]
        if ctx.decode_attention not in ("xla", "pallas", "pallas_interpret"):
            raise ValueError(f"decode_attention: unknown {ctx.decode_attention!r} (xla | pallas | pallas_interpret)")
        zero = jnp.zeros((), jnp.int32)
        where = (layer, zero, jnp.asarray(idx, jnp.int32), zero, zero)
        full_k = jax.lax.dynamic_update_slice(cache["k"], k.astype(cache["k"].dtype)[None], where)
        full_v = jax.lax.dynamic_update_slice(cache["v"], v.astype(cache["v"].dtype)[None], where)
        new_cache = {"k": full_k, "v": full_v, "layer": layer}
        k_all = jax.lax.dynamic_index_in_dim(full_k, layer, 0, keepdims=False).astype(dt)
        v_all = jax.lax.dynamic_index_in_dim(full_v, layer, 0, keepdims=False).astype(dt)
        if (t == 1 and ctx.decode_attention != "xla" and decode_attention.supported(s, q.shape[-1])
                and cfg.causal and not cfg.sliding_window):
            start = ctx.kv_start if ctx.kv_start is not None else jnp.zeros((q.shape[0],), jnp.int32)
            end = jnp.broadcast_to(jnp.asarray(idx, jnp.int32) + 1, start.shape)   # this step's slot included
            out = decode_attention.sharded_decode_attention(q[:, 0], k_all, v_all, start, end,
                                                            interpret=kernel_mode(ctx.decode_attention)[1])
            return out[:, None], new_cache
        if isinstance(idx, int) and cfg.causal:
            # A static write position: slots past this chunk are never visible (causal), so leave them out
            # (a prefill from slot 0 then attends over its own T keys, not the whole cache).
            visible = min(s, idx + t)
            mask = _mask(ctx, cfg, t, s)[..., :visible]
            if ctx.implementation == "cudnn" and not cfg.sliding_window and q.dtype in (jnp.bfloat16, jnp.float16):
                # every query also sees itself, so no softmax row is empty (left-padding queries): their
                # outputs stay finite; they only ever feed padding slots, which no real token attends to
                mask = mask | (jnp.arange(visible)[None, :] == idx + jnp.arange(t)[:, None])[None, None]
                out = jax.nn.dot_product_attention(q, k_all[:, :visible], v_all[:, :visible], mask=mask,
                                                   implementation="cudnn")
                return out, new_cache
            return xla_attention(q, k_all[:, :visible], v_all[:, :visible], mask), new_cache
        return xla_attention(q, k_all, v_all, _mask(ctx, cfg, t, s)), new_cache

    def _fused(self, q, k, v, ctx):
        """cuDNN flash attention. It takes no segment ids: packed rows attend across documents here
        (positions still restart per document), the usual GPT pretraining practice."""
        cfg = self.cfg
        window = None
        if cfg.sliding_window:
            window = (cfg.sliding_window - 1, 0 if cfg.causal else cfg.sliding_window - 1)
        return jax.nn.dot_product_attention(q, k, v, is_causal=cfg.causal, local_window_size=window,
                                            implementation="cudnn")

    def _tokamax(self, q, k, v):
        """tokamax's flash attention; model.tokamax_implementation names the kernel (mosaic, triton, cudnn, xla,
        xla_chunked), else the library picks. On an H200 with jax 0.11.2 and tokamax 0.0.12 only cudnn and xla run
        (Mosaic: Mesh(out_shape=) TypeError; Triton: pl.dot removed), and cudnn matches the cuDNN path's speed
        (bench/RESULTS.md, issue 38). Like the cuDNN path it takes no segment ids."""
        import tokamax  # optional dependency (pyproject extra "kernels"); the config check names it when missing
        from absl import flags

        if not flags.FLAGS.is_parsed():  # tokamax reads absl flags, which would otherwise parse this process's argv
            flags.FLAGS.mark_as_parsed()
        cfg = self.cfg
        window = None
        if cfg.sliding_window:
            window = (cfg.sliding_window - 1, 0 if cfg.causal else cfg.sliding_window - 1)
        return tokamax.dot_product_attention(q, k, v, is_causal=cfg.causal, local_window_size=window,
                                             implementation=getattr(cfg, "tokamax_implementation", "") or None)


# ---------------------------------------------------------------- MLP


class MLP(nnx.Module):
    """SwiGLU (gate, up, down) or GELU (up, down)."""

    def __init__(self, cfg, *, rngs: nnx.Rngs):
        self.kind = cfg.mlp
        d, f, pd, std = cfg.d_model, cfg.d_ff, cfg.param_dtype, cfg.init_std
        if cfg.mlp == "swiglu":
            self.gate = param(rngs, (d, f), (sh.EMBED, sh.MLP), std=std, dtype=pd)
        elif cfg.mlp != "gelu":
            raise ValueError(f"model.mlp: unknown {cfg.mlp!r} (swiglu | gelu)")
        self.up = param(rngs, (d, f), (sh.EMBED, sh.MLP), std=std, dtype=pd)
        self.down = param(rngs, (f, d), (sh.MLP, sh.EMBED), std=std / math.sqrt(2 * cfg.n_layers), dtype=pd)
        # model.remat="mlp": the backward recomputes this MLP's hidden activations (the [B,T,d_ff] tensors, most of
        # a layer's activation memory) and keeps everything else of the layer, attention included
        self.recompute = cfg.get("remat", "full") == "mlp"

    def __call__(self, x, decode_kernels: str | None = None, residual=None, defer: bool = False):
        """MLP(x), or residual + MLP(x) when `residual` is given. decode_kernels: "pallas" / "pallas_interpret" on
        a decode step (x [B,1,D]): the down projection runs as shared.model.decode_matmul's split-K kernel, its
        float32 partials summed where the residual add fuses them, or, with `defer`, returned unsummed as a
        PendingResidual(residual, partials) for the next layer's norm kernel to add."""
        dt = x.dtype
        if self.recompute and x.shape[1] > 1 and (self.kind != "swiglu" or self.gate.ndim == 2):
            weights = (self.gate[...].astype(dt) if self.kind == "swiglu" else None, self.up[...].astype(dt),
                       self.down[...].astype(dt))
            y = jax.checkpoint(functools.partial(_dense_mlp, self.kind), prevent_cse=False)(x, *weights)
            return y if residual is None else residual + y
        if self.kind == "swiglu" and self.gate.ndim == 3:
            # packed [D,2,F] gate+up weights (pack_mlp_weights, decode): one GEMM instead of two
            gate_up = jnp.einsum("btd,dcf->btcf", x, self.gate[...].astype(dt))
            hidden = jax.nn.silu(gate_up[..., 0, :]) * gate_up[..., 1, :]
        elif self.kind == "swiglu":
            up = jnp.einsum("btd,df->btf", x, self.up[...].astype(dt))
            hidden = jax.nn.silu(jnp.einsum("btd,df->btf", x, self.gate[...].astype(dt))) * up
        else:
            hidden = jax.nn.gelu(jnp.einsum("btd,df->btf", x, self.up[...].astype(dt)))
        hidden = sh.constrain(hidden, (sh.ACT_BATCH, sh.ACT_LENGTH, sh.ACT_MLP))
        down = self.down[...].astype(dt)
        splits, (kernels, interpret) = decode_matmul.DOWN_SPLITS, kernel_mode(decode_kernels)
        if (kernels and x.shape[1] == 1 and down.shape[0] % splits == 0
                and decode_matmul.usable(dt, down.shape[0] // splits, down.shape[1], interpret=interpret)):
            parts = decode_matmul.sharded_matmul_split_k(hidden[:, 0], down, splits=splits, interpret=interpret)
            if defer and residual is not None:
                return PendingResidual(residual, parts)
            y = parts.sum(1).astype(dt)[:, None]
        else:
            y = jnp.einsum("btf,fd->btd", hidden, down)
        return y if residual is None else residual + y


def _dense_mlp(kind, x, gate, up, down):
    """The MLP of a training forward as a pure function of its weights (what model.remat="mlp" recomputes)."""
    if kind == "swiglu":
        hidden = jax.nn.silu(jnp.einsum("btd,df->btf", x, gate)) * jnp.einsum("btd,df->btf", x, up)
    else:
        hidden = jax.nn.gelu(jnp.einsum("btd,df->btf", x, up))
    hidden = sh.constrain(hidden, (sh.ACT_BATCH, sh.ACT_LENGTH, sh.ACT_MLP))
    return jnp.einsum("btf,fd->btd", hidden, down)


def _states_of(module, state, cls):
    """(node, its sub-state) for every `cls` node inside `module`; `state` is `module`'s parameter state."""
    for path, node in nnx.iter_graph(module):
        if isinstance(node, cls):
            weights = state
            for key in path:
                weights = weights[key]
            yield node, weights


def _hold(weights, names, packed):
    """Every one of `names` in `weights` now holds `packed` (leaves are Variables in an nnx.State, arrays in a
    pure dict)."""
    for name in names:
        leaf = weights[name]
        weights[name] = leaf.replace(packed) if isinstance(leaf, nnx.Variable) else packed


def pack_mlp_weights(module, state):
    """`state` (the parameter state of `module`, e.g. one layer's) with the gate and up [D,F] weights of every
    SwiGLU `MLP` inside `module` packed into one [D,2,F] array, held by both `gate` and `up` (the MLP then runs
    one GEMM). For inference loops that reuse the weights many times (the sampler packs once per call, outside
    its decode loop); the training state is unchanged."""
    for node, weights in _states_of(module, state, MLP):
        if node.kind == "swiglu" and weights["gate"].ndim == 2:
            _hold(weights, ("gate", "up"), jnp.stack([weights["gate"][...], weights["up"][...]], axis=1))
    return state


def pack_attention_weights(module, state):
    """`state` with the q, k, v [D, *, Dh] weights (and biases) of every `Attention` inside `module` packed
    along the head axis into one [D, H+2K, Dh] array held by q, k and v alike (the layer then runs one
    projection GEMM whose output the fused decode kernel reads whole). For inference loops, as
    pack_mlp_weights."""
    for node, weights in _states_of(module, state, Attention):
        heads = node.cfg.n_heads + 2 * node.cfg.n_kv_heads
        for names in (("q", "k", "v"), ("q_bias", "k_bias", "v_bias")):
            if names[0] in weights and weights[names[0]].shape[-2] != heads:
                axis = weights[names[0]].ndim - 2   # the head axis
                _hold(weights, names, jnp.concatenate([weights[name][...] for name in names], axis=axis))
    return state


def rms_norm_ref(x: Any, eps: float):  # used by a few projects for parameter-free norms
    x32 = x.astype(jnp.float32)
    return (x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, -1, keepdims=True) + eps)).astype(x.dtype)

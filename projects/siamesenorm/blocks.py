"""SiameseNorm (arXiv 2602.08064) and the normalisation baselines it is compared against, as BLOCKS entries.

Equations: ../shared/papers/siamesenorm.md (section numbers below refer to it). `N` is `make_norm(cfg)`
(RMSNorm in the experiments), every norm has its own gain, `F` is the shared Attention or MLP, `b` the
0-based block index, `c_b` the depth divisor (`depth_divisor`).

  siamesenorm/siamese         §1.2 (released DeiT code): per sublayer Xn = Npost(X); O = F(Nin(Xn + Npre(Y)));
                              X = Xn + O / c_b; Y = Y + O. Readout Nfinal(Na(X) + Nb(Y)).
  siamesenorm/siamese_hybrid  §1.4 (released OLMo code, the LM tables): HybridNorm X-stream.
                              attn: O = AttnQKVnorm(alpha*X + Nay(Y)); X = X + O/c_b; Y = Y + O.
                              mlp:  X = Nffn(X); U = MLP(Nin(X + Nfy(Y))); X = X + U/c_b; Y = Y + U.
  siamesenorm/hybridnorm      §3.6: X = X + AttnQKVnorm(X)/c; X = Nffn(X); X = X + MLP(X)/c; final norm.
                              c = 1 unless depth_scaling is set (the "original + depth scaling" ablation).
  siamesenorm/deepnorm        §3.3: X = N(alpha*X + F(X)), alpha = (2L)^(1/4); v, o and MLP init times
                              beta = (8L)^(-1/4); no final norm.
  siamesenorm/mixln           §3.4: blocks b < floor(mixln_post_fraction * L) Post-Norm, the rest Pre-Norm.
  siamesenorm/periln          §3.5: X = X + Nout(F(Nin(X))); optional norm of the embedding; final norm.
  siamesenorm/residual        §3.8 (ResiDual): O = F(Xp); Xp = N(Xp + O); Xd = Xd + O; out Xp + Nd(Xd).
Pre-Norm and Post-Norm are the shared `prenorm` and `postnorm` blocks.

Options live in `config.model.block_options` (`block_options()` gives every key with its default).

Two things the Block contract does not pass are carried here:
  * the block index (for c_b, Mix-LN's switch, the first block's embedding norm): a scalar int32 counter
    rides in the scan carry next to the stream(s), set to 0 by `enter` and incremented by every block;
  * parameters of the readout (`exit` is a static function): every block owns the readout norms and
    the last one (counter == L-1) applies them, so only the last layer's copies receive gradient. The
    L-1 idle copies cost 2*d*(L-1) parameters (norm gains, < 0.1 % of the model).
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import ml_collections
from flax import nnx

from shared import sharding as sh
from shared.config import register_validator
from shared.model.blocks import RESIDUAL, Block
from shared.model.layers import MLP, Attention, _mask, apply_rope, make_norm, param, rope_inv_freq, xla_attention
from shared.model.splash_attention import splash_attention
from shared.registry import BLOCKS

PREFIX = "siamesenorm/"
DEPTH_SCALINGS = ("auto", "block", "sublayer", "none")
READOUTS = ("both", "x", "y")
DUAL_INITS = ("embed", "zeros")

DEFAULTS = dict(
    depth_scaling="auto",       # auto: the block's own default (siamese*: block; hybridnorm: none)
                                # block: c_b = sqrt(2(b+1)) (released code, Q1); sublayer: c = sqrt(l+1) with
                                # l = 2b + s the sublayer index (the paper's Algorithm-1 notation); none: c = 1
    input_norm=True,            # siamese*: renormalise the fused sublayer input (Nin); False = the ablation
    readout="both",             # siamese*: Nfinal(Na(X) + Nb(Y)) | x: Nfinal(Na(X)) | y: Nfinal(Nb(Y))
    v_norm=True,                # hybrid forms: per-head RMSNorm on v as well as q, k (HybridNorm's QKV-norm)
    hybrid_first_prenorm=False,  # hybridnorm: HybridNorm* (block 0 is Pre-Norm for both sublayers)
    mixln_post_fraction=0.25,   # mixln: share of (the first) blocks that are Post-Norm
    periln_embed_norm=True,     # periln: normalise the embedding before block 0
    residual_dual_init="embed",  # residual: the dual (un-normalised) stream starts as the embedding or zeros
)


def block_options() -> ml_collections.ConfigDict:
    """Every option of this project's blocks at its default, for `config.model.block_options`."""
    return ml_collections.ConfigDict(dict(DEFAULTS))


def option(cfg, key: str):
    return cfg.block_options.get(key, DEFAULTS[key])


def depth_divisor(mode: str, layer, sublayer: int):
    """c in `X <- X + O / c` for block `layer` (0-based, may be traced) and sublayer 0 (attn) / 1 (mlp)."""
    if mode == "block":
        return jnp.sqrt(2.0 * (layer + 1))
    if mode == "sublayer":
        return jnp.sqrt(2.0 * layer + sublayer + 1.0)
    if mode == "none":
        return 1.0
    raise ValueError(f"model.block_options.depth_scaling={mode!r}: expected one of {DEPTH_SCALINGS[1:]}")


def depth_scaled(o, mode: str, layer, sublayer: int):
    """o / c in o's dtype (a float32 divisor would promote a bf16 stream and break the scan carry)."""
    return o if mode == "none" else o / depth_divisor(mode, layer, sublayer).astype(o.dtype)


def _resolve_depth_scaling(cfg, default: str) -> str:
    mode = option(cfg, "depth_scaling")
    return default if mode == "auto" else mode


@register_validator
def check_block_options(config, mesh_shape) -> None:
    if not str(config.model.block).startswith(PREFIX):
        return
    choices = dict(depth_scaling=DEPTH_SCALINGS, readout=READOUTS, residual_dual_init=DUAL_INITS)
    for key, allowed in choices.items():
        value = option(config.model, key)
        if value not in allowed:
            raise ValueError(f"model.block_options.{key}={value!r}: expected one of {', '.join(allowed)}")
    fraction = option(config.model, "mixln_post_fraction")
    if not 0.0 <= float(fraction) <= 1.0:
        raise ValueError(f"model.block_options.mixln_post_fraction={fraction}: must be in [0, 1]")


# ---------------------------------------------------------------- pieces


class Gain(nnx.Module):
    """x * g with g a learnable [d] vector (init 1). Named `scale` so weight decay skips it, like norm gains."""

    def __init__(self, cfg, *, rngs: nnx.Rngs):
        self.scale = param(rngs, (cfg.d_model,), (sh.NORM,), init="ones", dtype=cfg.param_dtype)

    def __call__(self, x):
        return x * self.scale[...].astype(x.dtype)


class QKVNormAttention(Attention):
    """HybridNorm's attention: per-head norms on q and k (and v with `v_norm`) before RoPE (§1.4).

    The shared Attention normalises q and k only; v's norm sits inside the computation, so the forward is
    written out here (same projections, RoPE, KV cache and kernels as the parent)."""

    def __init__(self, cfg, *, rngs: nnx.Rngs):
        super().__init__(cfg, rngs=rngs)
        head_norm = dict(rngs=rngs, axes=(sh.HEAD_DIM,))
        if not cfg.qk_norm:
            self.q_norm = make_norm(cfg, cfg.head_dim, **head_norm)
            self.k_norm = make_norm(cfg, cfg.head_dim, **head_norm)
        self.use_v_norm = bool(option(cfg, "v_norm"))
        if self.use_v_norm:
            self.v_norm = make_norm(cfg, cfg.head_dim, **head_norm)

    def __call__(self, x, ctx, cache=None):
        cfg, dt = self.cfg, x.dtype
        q = jnp.einsum("btd,dhk->bthk", x, self.q[...].astype(dt))
        k = jnp.einsum("btd,dhk->bthk", x, self.k[...].astype(dt))
        v = jnp.einsum("btd,dhk->bthk", x, self.v[...].astype(dt))
        if cfg.qkv_bias:
            q, k, v = q + self.q_bias[...].astype(dt), k + self.k_bias[...].astype(dt), v + self.v_bias[...].astype(dt)
        q, k = self.q_norm(q), self.k_norm(k)
        if self.use_v_norm:
            v = self.v_norm(v)
        inv_freq = rope_inv_freq(cfg)
        q = sh.constrain(apply_rope(q, ctx.positions, inv_freq),
                         (sh.ACT_BATCH, sh.ACT_LENGTH, sh.ACT_HEADS, sh.ACT_HEAD_DIM))
        k = sh.constrain(apply_rope(k, ctx.positions, inv_freq),
                         (sh.ACT_BATCH, sh.ACT_LENGTH, sh.ACT_KV_HEADS, sh.ACT_HEAD_DIM))
        new_cache = None
        if cache is not None:  # as in the shared Attention: write this chunk's slots, read the layer's slab
            layer, zero = cache["layer"], jnp.zeros((), jnp.int32)
            start = (layer, zero, jnp.asarray(ctx.cache_index, jnp.int32), zero, zero)
            full_k = jax.lax.dynamic_update_slice(cache["k"], k.astype(cache["k"].dtype)[None], start)
            full_v = jax.lax.dynamic_update_slice(cache["v"], v.astype(cache["v"].dtype)[None], start)
            new_cache = {"k": full_k, "v": full_v, "layer": layer}
            k_all = jax.lax.dynamic_index_in_dim(full_k, layer, 0, keepdims=False).astype(dt)
            v_all = jax.lax.dynamic_index_in_dim(full_v, layer, 0, keepdims=False).astype(dt)
            out = xla_attention(q, k_all, v_all, _mask(ctx, cfg, q.shape[1], k_all.shape[1]))
        elif ctx.implementation == "cudnn":
            out = self._fused(q, k, v, ctx)
        elif ctx.implementation == "xla":
            out = xla_attention(q, k, v, _mask(ctx, cfg, q.shape[1], k.shape[1]))
        elif ctx.implementation == "splash":  # the TPU default (tpu_configs.presets.ATTENTION_BY_PLATFORM)
            out = splash_attention(q, k, v, ctx.segment_ids, causal=cfg.causal, sliding_window=cfg.sliding_window)
        else:
            raise ValueError(f"model.attention: unknown implementation {ctx.implementation!r} (xla | cudnn | splash)")
        out = sh.constrain(out, (sh.ACT_BATCH, sh.ACT_LENGTH, sh.ACT_HEADS, sh.ACT_HEAD_DIM))
        return jnp.einsum("bthk,hkd->btd", out, self.o[...].astype(dt)), new_cache


def _is_last(layer, cfg):
    return layer == cfg.n_layers - 1


def _stream(x):
    return sh.constrain(x, RESIDUAL)


class IndexedBlock(Block):
    """Carry (x, layer): one stream plus the block counter."""

    @staticmethod
    def enter(x, cfg):
        return x, jnp.zeros((), jnp.int32)

    @staticmethod
    def exit(h, cfg):
        return h[0]

    def __call__(self, h, ctx, cache=None):
        x, layer = h
        x, cache = self.forward(x, layer, ctx, cache)
        return (_stream(x), layer + 1), cache


class TwoStreamBlock(Block):
    """Carry (x, y, layer); the last block replaces x by the readout, which `exit` returns."""

    @staticmethod
    def enter(x, cfg):
        return x, x, jnp.zeros((), jnp.int32)

    @staticmethod
    def exit(h, cfg):
        return h[0]

    def __call__(self, h, ctx, cache=None):
        x, y, layer = h
        x, y, cache = self.forward(x, y, layer, ctx, cache)
        x = jnp.where(_is_last(layer, self.cfg), self.readout(x, y), x)
        return (_stream(x), _stream(y), layer + 1), cache


# ---------------------------------------------------------------- SiameseNorm


class _SiameseReadout:
    def _make_readout(self, cfg, rngs):
        self.readout_mode = option(cfg, "readout")
        if self.readout_mode in ("both", "x"):
            self.readout_x = make_norm(cfg, rngs=rngs)
        if self.readout_mode in ("both", "y"):
            self.readout_y = make_norm(cfg, rngs=rngs)

    def readout(self, x, y):
        if self.readout_mode == "x":
            return self.readout_x(x)
        if self.readout_mode == "y":
            return self.readout_y(y)
        return self.readout_x(x) + self.readout_y(y)


@BLOCKS.register(PREFIX + "siamese")
class SiameseBlock(_SiameseReadout, TwoStreamBlock):
    """Vanilla SiameseNorm (§1.2): a Post-Norm X-stream and a Pre-Norm Y-stream sharing every sublayer."""

    def __init__(self, cfg, *, rngs: nnx.Rngs):
        self.cfg = cfg
        self.depth_scaling = _resolve_depth_scaling(cfg, "block")
        self.input_norm = bool(option(cfg, "input_norm"))
        self.attn_post, self.attn_pre = make_norm(cfg, rngs=rngs), make_norm(cfg, rngs=rngs)
        self.mlp_post, self.mlp_pre = make_norm(cfg, rngs=rngs), make_norm(cfg, rngs=rngs)
        if self.input_norm:
            self.attn_in, self.mlp_in = make_norm(cfg, rngs=rngs), make_norm(cfg, rngs=rngs)
        self.attn = Attention(cfg, rngs=rngs)
        self.mlp = MLP(cfg, rngs=rngs)
        self._make_readout(cfg, rngs)

    def forward(self, x, y, layer, ctx, cache):
        xn = self.attn_post(x)
        z = xn + self.attn_pre(y)
        o, cache = self.attn(self.attn_in(z) if self.input_norm else z, ctx, cache)
        x, y = _stream(xn + depth_scaled(o, self.depth_scaling, layer, 0)), _stream(y + o)

        xn = self.mlp_post(x)
        z = xn + self.mlp_pre(y)
        o = self.mlp(self.mlp_in(z) if self.input_norm else z)
        return xn + depth_scaled(o, self.depth_scaling, layer, 1), y + o, cache


@BLOCKS.register(PREFIX + "siamese_hybrid")
class SiameseHybridBlock(_SiameseReadout, TwoStreamBlock):
    """SiameseNorm with a HybridNorm X-stream (§1.4, `MODEL_TYPE=hybrid_pre`, the paper's LM runs)."""

    def __init__(self, cfg, *, rngs: nnx.Rngs):
        self.cfg = cfg
        self.depth_scaling = _resolve_depth_scaling(cfg, "block")
        self.input_norm = bool(option(cfg, "input_norm"))
        self.attn_x_gain = Gain(cfg, rngs=rngs)       # alpha[b], init 1
        self.attn_y_norm = make_norm(cfg, rngs=rngs)
        self.attn = QKVNormAttention(cfg, rngs=rngs)
        self.mlp_x_norm = make_norm(cfg, rngs=rngs)   # HybridNorm's FFN post-norm of the X-stream
        self.mlp_y_norm = make_norm(cfg, rngs=rngs)
        if self.input_norm:
            self.mlp_in = make_norm(cfg, rngs=rngs)
        self.mlp = MLP(cfg, rngs=rngs)
        self._make_readout(cfg, rngs)

    def forward(self, x, y, layer, ctx, cache):
        o, cache = self.attn(self.attn_x_gain(x) + self.attn_y_norm(y), ctx, cache)
        x, y = _stream(x + depth_scaled(o, self.depth_scaling, layer, 0)), _stream(y + o)

        x = self.mlp_x_norm(x)
        z = x + self.mlp_y_norm(y)
        u = self.mlp(self.mlp_in(z) if self.input_norm else z)
        return x + depth_scaled(u, self.depth_scaling, layer, 1), y + u, cache


# ---------------------------------------------------------------- baselines


@BLOCKS.register(PREFIX + "hybridnorm")
class HybridNormBlock(IndexedBlock):
    """HybridNorm (§3.6): QKV-norm attention on the raw stream, post-norm-style FFN; HybridNorm* and the
    depth-scaled "original" of the ablation are options."""

    def __init__(self, cfg, *, rngs: nnx.Rngs):
        self.depth_scaling = _resolve_depth_scaling(cfg, "none")
        self.first_prenorm = bool(option(cfg, "hybrid_first_prenorm"))
        if self.first_prenorm:
            self.attn_norm = make_norm(cfg, rngs=rngs)
        self.attn = QKVNormAttention(cfg, rngs=rngs)
        self.mlp_norm = make_norm(cfg, rngs=rngs)
        self.mlp = MLP(cfg, rngs=rngs)

    def forward(self, x, layer, ctx, cache):
        pre = jnp.logical_and(self.first_prenorm, layer == 0)  # HybridNorm*: block 0 is Pre-Norm
        a, cache = self.attn(jnp.where(pre, self.attn_norm(x), x) if self.first_prenorm else x, ctx, cache)
        x = _stream(x + depth_scaled(a, self.depth_scaling, layer, 0))
        n = self.mlp_norm(x)
        base = jnp.where(pre, x, n)  # the FFN's residual base: the normalised stream, or x when Pre-Norm
        return base + depth_scaled(self.mlp(n), self.depth_scaling, layer, 1), cache


def deepnorm_constants(n_layers: int) -> tuple[float, float]:
    """(alpha, beta) of DeepNorm for a decoder-only model of n_layers blocks."""
    return (2 * n_layers) ** 0.25, (8 * n_layers) ** -0.25


@BLOCKS.register(PREFIX + "deepnorm")
class DeepNormBlock(Block):
    """DeepNorm (§3.3): X = N(alpha X + F(X)); value, output and MLP init scaled by beta."""
    final_norm = False

    def __init__(self, cfg, *, rngs: nnx.Rngs):
        self.alpha, beta = deepnorm_constants(cfg.n_layers)
        self.attn = Attention(cfg, rngs=rngs)
        self.attn_norm = make_norm(cfg, rngs=rngs)
        self.mlp = MLP(cfg, rngs=rngs)
        self.mlp_norm = make_norm(cfg, rngs=rngs)
        for weight in (self.attn.v, self.attn.o, self.mlp.up, self.mlp.down, getattr(self.mlp, "gate", None)):
            if weight is not None:
                weight.set_value(weight.get_value() * beta)

    def __call__(self, x, ctx, cache=None):
        a, cache = self.attn(x, ctx, cache)
        x = _stream(self.attn_norm(self.alpha * x + a))
        return _stream(self.mlp_norm(self.alpha * x + self.mlp(x))), cache


@BLOCKS.register(PREFIX + "mixln")
class MixLNBlock(IndexedBlock):
    """Mix-LN (§3.4): Post-Norm in the first floor(fraction * L) blocks, Pre-Norm after; final norm."""

    def __init__(self, cfg, *, rngs: nnx.Rngs):
        self.n_post = math.floor(float(option(cfg, "mixln_post_fraction")) * cfg.n_layers)
        self.attn_norm = make_norm(cfg, rngs=rngs)
        self.attn = Attention(cfg, rngs=rngs)
        self.mlp_norm = make_norm(cfg, rngs=rngs)
        self.mlp = MLP(cfg, rngs=rngs)

    def forward(self, x, layer, ctx, cache):
        post = layer < self.n_post
        a, cache = self.attn(jnp.where(post, x, self.attn_norm(x)), ctx, cache)
        x = _stream(jnp.where(post, self.attn_norm(x + a), x + a))
        m = self.mlp(jnp.where(post, x, self.mlp_norm(x)))
        return jnp.where(post, self.mlp_norm(x + m), x + m), cache


@BLOCKS.register(PREFIX + "periln")
class PeriLNBlock(IndexedBlock):
    """Peri-LN (§3.5): X = X + Nout(F(Nin(X))) for both sublayers; block 0 may first normalise the embedding."""

    def __init__(self, cfg, *, rngs: nnx.Rngs):
        self.embed_norm_on = bool(option(cfg, "periln_embed_norm"))
        if self.embed_norm_on:
            self.embed_norm = make_norm(cfg, rngs=rngs)  # only block 0's copy is used
        self.attn_in, self.attn_out = make_norm(cfg, rngs=rngs), make_norm(cfg, rngs=rngs)
        self.mlp_in, self.mlp_out = make_norm(cfg, rngs=rngs), make_norm(cfg, rngs=rngs)
        self.attn = Attention(cfg, rngs=rngs)
        self.mlp = MLP(cfg, rngs=rngs)

    def forward(self, x, layer, ctx, cache):
        if self.embed_norm_on:
            x = jnp.where(layer == 0, self.embed_norm(x), x)
        a, cache = self.attn(self.attn_in(x), ctx, cache)
        x = _stream(x + self.attn_out(a))
        return x + self.mlp_out(self.mlp(self.mlp_in(x))), cache


@BLOCKS.register(PREFIX + "residual")
class ResiDualBlock(TwoStreamBlock):
    """ResiDual (§3.8): sublayers read only the Post-Norm stream Xp; Xd accumulates raw outputs.
    Output Xp + Nd(Xd), no final norm."""
    final_norm = False

    @staticmethod
    def enter(x, cfg):
        dual = jnp.zeros_like(x) if option(cfg, "residual_dual_init") == "zeros" else x
        return x, dual, jnp.zeros((), jnp.int32)

    def __init__(self, cfg, *, rngs: nnx.Rngs):
        self.cfg = cfg
        self.attn = Attention(cfg, rngs=rngs)
        self.attn_norm = make_norm(cfg, rngs=rngs)
        self.mlp = MLP(cfg, rngs=rngs)
        self.mlp_norm = make_norm(cfg, rngs=rngs)
        self.dual_norm = make_norm(cfg, rngs=rngs)  # readout; only the last block's copy is used

    def forward(self, xp, xd, layer, ctx, cache):
        o, cache = self.attn(xp, ctx, cache)
        xp, xd = _stream(self.attn_norm(xp + o)), _stream(xd + o)
        o = self.mlp(xp)
        return self.mlp_norm(xp + o), xd + o, cache

    def readout(self, xp, xd):
        return xp + self.dual_norm(xd)


NAMES = tuple(name for name in BLOCKS.names() if name.startswith(PREFIX))

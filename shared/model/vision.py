"""A small ViT: images -> patch tokens -> bidirectional pre-norm blocks -> final norm, and the projector that maps
its outputs into a language model's embedding space (spec ../shared/papers/gap.md, sections 4.2 and 5).

The blocks are the decoder's own (`blocks.PreNormBlock` with `layers.Attention` / `layers.MLP`), built from a
model config derived from the `vision` sub-config with `causal=False`; layers are stacked and scanned as in
`transformer.Decoder`, and every parameter carries logical axes, so `shared.sharding` places the encoder like the
decoder. Not registered: shared/registry.py has no registry for encoders (a new one must also be listed in
WORKSPACE.md, tests/test_docs.py), and BLOCKS / HEADS entries are parts the Decoder looks up, which this is not.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_collections
from flax import nnx

from shared import sharding as sh
from shared.config.base import model_config
from shared.model.blocks import RESIDUAL, PreNormBlock
from shared.model.layers import AttentionContext, make_norm, param
from shared.model.transformer import REMAT_POLICIES, freeze

# The keys of the `vision` sub-config and their (tiny, test-sized) defaults. The GAP reproduction uses image 84,
# patch 28, d_model 192, 4 layers, 3 heads of 64, d_ff 768 (spec 4.2).
VISION_DEFAULTS = dict(
    image_size=28,       # square images [B, image_size, image_size, channels]
    channels=1,
    patch=7,             # square patches; image_size must be a multiple
    d_model=64,          # d_vision: width of the encoder and of its outputs
    n_layers=2,
    n_heads=4,
    head_dim=16,
    d_ff=128,
    dtype="float32",     # compute dtype (parameters stay float32)
    mlp="gelu",          # ViT's MLP; "swiglu" works too (layers.MLP)
    norm="layernorm",    # ViT's norm; NORMS registry (rmsnorm works too)
    norm_eps=1e-6,
    qkv_bias=True,       # as ViT
    init_std=0.02,
    remat="none",        # transformer.REMAT_POLICIES; the paper's encoder is frozen, so usually no backward at all
)


def vision_config(**overrides) -> ml_collections.ConfigDict:
    """The `vision` sub-config: VISION_DEFAULTS with `overrides`; an unknown key is an error naming the known ones."""
    unknown = sorted(set(overrides) - set(VISION_DEFAULTS))
    if unknown:
        raise KeyError(f"vision config: unknown keys {unknown}; known: {sorted(VISION_DEFAULTS)}")
    return ml_collections.ConfigDict({**VISION_DEFAULTS, **overrides})


def n_patches(vcfg) -> int:
    if vcfg.image_size % vcfg.patch:
        raise ValueError(f"vision: image_size {vcfg.image_size} is not a multiple of patch {vcfg.patch}")
    return (vcfg.image_size // vcfg.patch) ** 2


def encoder_model_config(vcfg) -> ml_collections.FrozenConfigDict:
    """The model config the shared blocks read, from a `vision` sub-config: the base model config with the
    encoder's sizes, full (non-causal, unwindowed) multi-head attention and no qk-norm."""
    m = model_config()
    for key in ("d_model", "n_layers", "n_heads", "head_dim", "d_ff", "dtype", "mlp", "norm", "norm_eps", "qkv_bias",
                "init_std", "remat"):
        m[key] = vcfg[key]
    m.n_kv_heads = vcfg.n_heads
    m.causal = False          # every patch sees every patch
    m.sliding_window = 0
    m.qk_norm = False
    m.max_seq_len = n_patches(vcfg)
    m.heads = []
    return freeze(m)


def patchify(images, patch: int):
    """images [B,H,W,C] -> [B, (H/p)*(W/p), p*p*C]: patches in row-major order (left to right, then down), each
    flattened as (row in patch, column in patch, channel)."""
    if images.ndim != 4:
        raise ValueError(f"patchify: images must be [B,H,W,C], got shape {tuple(images.shape)}")
    b, h, w, c = images.shape
    if h % patch or w % patch:
        raise ValueError(f"patchify: image height and width ({h}, {w}) of images {tuple(images.shape)} must be "
                         f"multiples of patch {patch}")
    x = images.reshape(b, h // patch, patch, w // patch, patch, c)
    x = x.transpose(0, 1, 3, 2, 4, 5)   # [B, rows, cols, p, p, C]
    return x.reshape(b, (h // patch) * (w // patch), patch * patch * c)


class PatchEmbed(nnx.Module):
    """patches @ W + b + pos: a linear map of each flattened patch to d_model plus a learned absolute position
    embedding per patch. No CLS token: the outputs are the patch tokens themselves (GAP feeds each to the decoder)."""

    def __init__(self, vcfg, *, rngs: nnx.Rngs):
        self.patch, self.image_size, self.channels = vcfg.patch, vcfg.image_size, vcfg.channels
        self.dtype = jnp.dtype(vcfg.dtype)
        d, n = vcfg.d_model, n_patches(vcfg)
        self.kernel = param(rngs, (vcfg.patch * vcfg.patch * vcfg.channels, d), (None, sh.EMBED), std=vcfg.init_std)
        self.bias = param(rngs, (d,), (sh.EMBED,), init="zeros")
        self.pos = param(rngs, (n, d), (None, sh.EMBED), std=vcfg.init_std)

    def __call__(self, images):
        expected = (self.image_size, self.image_size, self.channels)
        if tuple(images.shape[1:]) != expected:
            raise ValueError(f"PatchEmbed: images {tuple(images.shape)}, expected [B, {', '.join(map(str, expected))}]")
        x = patchify(images.astype(self.dtype), self.patch)
        x = jnp.einsum("bnp,pd->bnd", x, self.kernel[...].astype(self.dtype))
        return x + self.bias[...].astype(self.dtype) + self.pos[...].astype(self.dtype)


class VisionEncoder(nnx.Module):
    """images [B,H,W,C] -> [B, N, d_vision]: PatchEmbed, n_layers bidirectional pre-norm blocks, final norm."""

    def __init__(self, vcfg, *, rngs: nnx.Rngs):
        self.vcfg = freeze(vcfg)
        cfg = encoder_model_config(vcfg)
        self.cfg = cfg
        self.patch_embed = PatchEmbed(self.vcfg, rngs=rngs)

        # stacked layers (leading axis n_layers), scanned in __call__: one compiled block however deep, as Decoder
        @nnx.split_rngs(splits=cfg.n_layers)
        @nnx.vmap(in_axes=(0,), out_axes=0, axis_size=cfg.n_layers)
        def make_layers(r):
            return PreNormBlock(cfg, rngs=r)

        self.layers = make_layers(rngs)
        self.final_norm = make_norm(cfg, rngs=rngs)

    def __call__(self, images, *, attention: str = "xla"):
        """attention: layers.Attention's implementation (xla | cudnn | splash | tokamax)."""
        x = sh.constrain(self.patch_embed(images), RESIDUAL)
        b, n, _ = x.shape
        # Positions come from the learned table of PatchEmbed. layers.Attention always applies RoPE (it has no
        # switch); at position 0 the rotation is the identity (cos 0 = 1, sin 0 = 0), so all-zero positions turn
        # RoPE off exactly instead of adding a second, 1-D position code over the 2-D grid.
        ctx = AttentionContext(positions=jnp.zeros((b, n), jnp.int32), implementation=attention)
        graphdef, layer_state = nnx.split(self.layers)

        def body(h, params):
            h, _ = nnx.merge(graphdef, params)(h, ctx)
            return h, None

        policy = REMAT_POLICIES[self.cfg.remat]
        if policy is not None:
            body = jax.checkpoint(body, policy=policy, prevent_cse=False)
        x, _ = jax.lax.scan(body, x, layer_state)
        return self.final_norm(x)


class Projector(nnx.Module):
    """Linear(d_in -> d_out) - GELU - Linear(d_out -> d_out): vision features into the language model's input
    embedding space (spec 4.2: e_vis = Projector(ViT(image)))."""

    def __init__(self, d_in: int, d_out: int, *, init_std: float = 0.02, dtype="float32", rngs: nnx.Rngs):
        self.dtype = jnp.dtype(dtype)
        self.w1 = param(rngs, (d_in, d_out), (sh.EMBED, sh.MLP), std=init_std)
        self.b1 = param(rngs, (d_out,), (sh.MLP,), init="zeros")
        self.w2 = param(rngs, (d_out, d_out), (sh.MLP, sh.EMBED), std=init_std)
        self.b2 = param(rngs, (d_out,), (sh.EMBED,), init="zeros")

    def __call__(self, x):
        dt = self.dtype
        x = x.astype(dt)
        hidden = jax.nn.gelu(jnp.einsum("...i,ij->...j", x, self.w1[...].astype(dt)) + self.b1[...].astype(dt))
        return jnp.einsum("...i,ij->...j", hidden, self.w2[...].astype(dt)) + self.b2[...].astype(dt)


def encode_frozen(encoder: VisionEncoder, images, **kwargs):
    """The encoder's outputs with no gradient to its parameters (or the images): GAP keeps the ViT frozen, and its
    embeddings are the latent targets v*, which must not be pulled toward the predictions."""
    return jax.lax.stop_gradient(encoder(images, **kwargs))


def build_vision(vcfg, d_lm: int | None = None, seed: int = 0):
    """(VisionEncoder, Projector to d_lm or None) from a `vision` sub-config, with one parameter seed."""
    rngs = nnx.Rngs(params=seed)
    encoder = VisionEncoder(vcfg, rngs=rngs)
    projector = None if d_lm is None else Projector(vcfg.d_model, d_lm, init_std=vcfg.init_std, dtype=vcfg.dtype,
                                                    rngs=rngs)
    return encoder, projector

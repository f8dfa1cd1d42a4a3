"""GAP model (../shared/papers/gap.md §1.1-1.7, §4.2-4.5): frozen-able ViT + projector -> e_vis spliced at the image
slots of a shared Decoder, plus the latent span's inputs (mode none | slots | feedback) and the losses.

    cfg = gap_model_config("tiny")                         # or gap_model_config() for the spec 4.2 sizes
    model = GapModel(cfg, rngs=nnx.Rngs(params=0))         # head from cfg.latent_head ("pca" needs fit=)
    fit = pca_of_images(model, images)                     # frozen e_vis -> shared.latent.pca_fit
    model.set_head("pca", fit=fit)
    out, zs = model.forward(batch, mode="feedback", k=9)   # out: Decoder dict ("logits", "hidden", "prefinal")
    loss, metrics = gap_loss(model, batch, mode="feedback", k=9, lam=1.0, latent_loss="mse")

A batch is the fixed layout of projects/gap/layout.py: tokens/targets/loss_mask [B,SEQ_LEN], image/aux_image
[B,84,84,1], has_latent [B], answer_pos [B,A] (positions whose targets are the answer tokens, -1 = padding, as gridops.encode; a
bool/float [B,SEQ_LEN] mask over token positions also works).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
from flax import nnx

from projects.gap import layout
from shared import sharding as sh
from shared.config.base import model_config
from shared.latent import latent_cos, latent_mse, latent_rollout, make_head, pca_fit
from shared.model.layers import param
from shared.model.transformer import Decoder
from shared.model.vision import Projector, VisionEncoder, vision_config

MODES = ("none", "slots", "feedback")
LATENT_LOSSES = ("mse", "cos", "none")

# spec 4.2: decoder D 256, 8 layers, 4 heads, SwiGLU 704, RMSNorm, RoPE 1e4, init 0.02, untied; ViT 84/28, 192, 4x3, 768
_PRESETS = {
    "full": dict(
        model=dict(d_model=256, n_layers=8, n_heads=4, n_kv_heads=4, head_dim=64, d_ff=704, dtype="bfloat16"),
        vision=dict(d_model=192, n_layers=4, n_heads=3, head_dim=64, d_ff=768, dtype="bfloat16")),
    "tiny": dict(
        model=dict(d_model=32, n_layers=2, n_heads=2, n_kv_heads=2, head_dim=16, d_ff=64, dtype="float32"),
        vision=dict(d_model=32, n_layers=1, n_heads=2, head_dim=16, d_ff=64, dtype="float32")),
}


def gap_model_config(preset: str = "full", **overrides) -> ml_collections.ConfigDict:
    """{model: the Decoder's model config, vision: the ViT sub-config, k, latent_head, frozen_vision, slot_std}.
    preset "full" = spec 4.2 sizes, "tiny" = tests/CI. overrides: top-level keys; `model=` / `vision=` take dicts
    merged into the sub-configs (an unknown key is an error)."""
    if preset not in _PRESETS:
        raise KeyError(f"gap_model_config: unknown preset {preset!r}; known: {sorted(_PRESETS)}")
    p = _PRESETS[preset]
    m = model_config()
    base = dict(vocab_size=layout.VOCAB_SIZE, mlp="swiglu", norm="rmsnorm", block="prenorm", rope_theta=1e4,
                init_std=0.02, tie_embeddings=False, max_seq_len=layout.SEQ_LEN, remat="none", attention="xla",
                head_chunk_tokens=0)
    for key, value in {**base, **p["model"], **dict(overrides.pop("model", {}))}.items():
        if key not in m:
            raise KeyError(f"gap_model_config: unknown model key {key!r}")
        m[key] = value
    v = vision_config(image_size=layout.IMAGE_SIZE, channels=1, patch=layout.CELL,
                      **{**p["vision"], **dict(overrides.pop("vision", {}))})
    cfg = ml_collections.ConfigDict(dict(model=m, vision=v, k=9, latent_head="none", frozen_vision=False,
                                         slot_std=0.02))
    for key, value in overrides.items():
        if key not in cfg:
            raise KeyError(f"gap_model_config: unknown key {key!r}; known: {sorted(cfg.keys())}")
        cfg[key] = value
    return cfg


class GapModel(nnx.Module):
    """encoder (ViT) -> projector (d_v -> D) -> e_vis at layout.IMAGE_POS of the decoder; optional latent head
    (feedback mode) and K learned slot constants (slots mode)."""

    def __init__(self, cfg, *, rngs: nnx.Rngs, fit=None, ema_norm=None):
        self.cfg = ml_collections.FrozenConfigDict(cfg)
        mcfg, vcfg = self.cfg.model, self.cfg.vision
        self.d_model = int(mcfg.d_model)
        self.frozen_vision = bool(cfg.frozen_vision)
        self.encoder = VisionEncoder(vcfg, rngs=rngs)
        self.projector = Projector(vcfg.d_model, mcfg.d_model, init_std=vcfg.init_std, dtype=vcfg.dtype, rngs=rngs)
        self.decoder = Decoder(mcfg, rngs=rngs)
        self.slots = param(rngs, (cfg.k, mcfg.d_model), (None, sh.EMBED), std=cfg.slot_std)
        self.head = nnx.data(None)   # data (a submodule slot), so set_head may fill it later
        if cfg.latent_head != "none":
            self.head = make_head(cfg.latent_head, self.d_model, fit=fit, ema_norm=ema_norm, rngs=rngs)

    def set_head(self, name: str, *, fit=None, ema_norm=None, seed: int = 0):
        """Attach (replace) the latent head: shared.latent.make_head(name, D, fit=, ema_norm=)."""
        self.head = make_head(name, self.d_model, fit=fit, ema_norm=ema_norm, rngs=nnx.Rngs(params=seed))

    def embed_images(self, images, *, frozen: bool | None = None):
        """images [B,84,84,1] -> e_vis [B,9,D] = projector(encoder(images)); frozen (default cfg.frozen_vision):
        stop_gradient (stage B keeps ViT + projector frozen)."""
        e = self.projector(self.encoder(jnp.asarray(images)))
        frozen = self.frozen_vision if frozen is None else frozen
        return jax.lax.stop_gradient(e) if frozen else e

    def _image_inputs(self, batch):
        tokens = jnp.asarray(batch["tokens"])
        b, t = tokens.shape
        e_vis = self.embed_images(batch["image"])
        index = jnp.asarray(layout.IMAGE_POS, jnp.int32)
        embeds = jnp.zeros((b, t, self.d_model), e_vis.dtype).at[:, index].set(e_vis)
        mask = jnp.zeros((b, t), bool).at[:, index].set(True)
        return tokens, embeds, mask, e_vis

    def forward(self, batch, *, mode: str = "none", k: int | None = None, grad: bool = True,
                hidden: str = "prefinal", return_evis: bool = False):
        """-> (out, zs): out the Decoder's dict over the whole sequence, zs [B,K,D] the latent inputs (None in mode
        none). slots: the K constants at latent_pos(k) for has_latent rows; feedback: pass 1 = free-running
        rollout from tokens[:, :latent_pos[0]] with the head (grad: through the recurrence or stop-gradient per
        fed input), pass 2 = teacher-forced forward with zs at latent_pos(k) for has_latent rows. Rows without
        has_latent keep their token embeddings at those positions. return_evis: also return e_vis (3-tuple)."""
        if mode not in MODES:
            raise ValueError(f"forward: mode {mode!r}; expected one of {MODES}")
        k = self.cfg.k if k is None else int(k)
        tokens, embeds, mask, e_vis = self._image_inputs(batch)
        b = tokens.shape[0]
        zs = None
        if mode != "none":
            pos = layout.latent_pos(k)
            if mode == "slots":
                if k != self.slots.shape[0]:
                    raise ValueError(f"forward(mode='slots'): k={k} but the model has {self.slots.shape[0]} slots")
                zs = jnp.broadcast_to(self.slots[...].astype(embeds.dtype)[None], (b, k, self.d_model))
            else:
                if self.head is None:
                    raise ValueError("forward(mode='feedback'): the model has no latent head (set_head)")
                p = pos[0]
                zs = latent_rollout(self.decoder, self.head, tokens[:, :p], k, embeds=embeds[:, :p],
                                    embed_mask=mask[:, :p], grad=grad)["zs"]
            has = jnp.asarray(batch["has_latent"]).astype(bool)
            index = jnp.asarray(pos, jnp.int32)
            embeds = embeds.at[:, index].set(jnp.where(has[:, None, None], zs.astype(embeds.dtype),
                                                       embeds[:, index]))
            mask = mask.at[:, index].set(has[:, None])
        out = self.decoder(tokens, embeds=embeds, embed_mask=mask, hidden=hidden)
        return (out, zs, e_vis) if return_evis else (out, zs)


# ---------------------------------------------------------------- losses and metrics


def text_loss(out, batch):
    """token-mean cross-entropy of out["logits"] [B,T,V] vs targets over loss_mask."""
    logits = out["logits"].astype(jnp.float32)
    ce = optax.softmax_cross_entropy_with_integer_labels(logits, jnp.asarray(batch["targets"]))
    w = jnp.asarray(batch["loss_mask"]).astype(jnp.float32)
    return jnp.sum(ce * w) / jnp.maximum(jnp.sum(w), 1.0)


def latent_targets(model: GapModel, batch):
    """v* [B,9,D]: the frozen e_vis of the auxiliary (moved-grid) image, stop_gradient."""
    return model.embed_images(batch["aux_image"], frozen=True)


def _masked_median(x, mask):
    """median of x over mask (nan when empty)."""
    return jnp.nanmedian(jnp.where(mask, x.astype(jnp.float32), jnp.nan))


def gap_loss(model: GapModel, batch, *, mode: str = "feedback", k: int | None = None, lam: float = 1.0,
             latent_loss: str = "mse", grad: bool = True):
    """L = text_loss + lam * latent loss (rows with has_latent only; mse | cos vs v*, or none) -> (loss, metrics):
    text_loss, latent_loss, z_norm_median (fed latents, has_latent rows; nan if none), evis_norm_median (image)."""
    if latent_loss not in LATENT_LOSSES:
        raise ValueError(f"gap_loss: latent_loss {latent_loss!r}; expected one of {LATENT_LOSSES}")
    out, zs, e_vis = model.forward(batch, mode=mode, k=k, grad=grad, hidden="none", return_evis=True)
    lt = text_loss(out, batch)
    ll = jnp.float32(0.0)
    has = jnp.asarray(batch["has_latent"]).astype(bool)
    if zs is not None and latent_loss != "none":
        targets = latent_targets(model, batch)
        if targets.shape != zs.shape:
            raise ValueError(f"gap_loss: zs {tuple(zs.shape)} vs targets v* {tuple(targets.shape)} (K must be "
                             f"{layout.N_IMAGE} to match the image tokens)")
        ll = (latent_mse if latent_loss == "mse" else latent_cos)(zs, targets, has)
    loss = lt + lam * ll
    evis_norm = jnp.median(jnp.linalg.norm(e_vis.astype(jnp.float32), axis=-1))
    if zs is None:
        z_norm = jnp.float32(jnp.nan)
    else:
        norms = jnp.linalg.norm(zs.astype(jnp.float32), axis=-1)
        z_norm = _masked_median(norms, jnp.broadcast_to(has[:, None], norms.shape))
    return loss, {"loss": loss, "text_loss": lt, "latent_loss": ll, "z_norm_median": z_norm,
                  "evis_norm_median": evis_norm}


def _answer_mask(batch, t: int):
    """[B,T] bool over the positions whose *targets* are answer tokens (gridops.encode's answer_pos: int [B,A],
    -1 = padding; a bool/float [B,T] mask works too)."""
    pos = batch["answer_pos"]
    if pos.ndim == 2 and pos.shape[1] == t and pos.dtype in (np.bool_, np.float32, jnp.bool_, jnp.float32):
        return jnp.asarray(pos).astype(bool)
    pos = jnp.asarray(pos, jnp.int32)
    if pos.ndim == 1:
        pos = pos[:, None]
    hits = (pos[:, :, None] == jnp.arange(t)[None, None]) & (pos[:, :, None] >= 0)
    return hits.any(axis=1)


def answer_accuracy(model: GapModel, batch, *, mode: str = "none", k: int | None = None, out=None):
    """Teacher-forced exact match: a row is correct when argmax logits[p] == targets[p] at every answer position p
    (the previous tokens given, parser included: an upper bound on greedy generation). -> (mean accuracy, per-row
    correct [B] bool). Rows with no answer position count as incorrect."""
    if out is None:
        out, _ = model.forward(batch, mode=mode, k=k, grad=False, hidden="none")
    targets = jnp.asarray(batch["targets"])
    amask = _answer_mask(batch, targets.shape[1])
    pred = jnp.argmax(out["logits"], axis=-1)
    ok = (pred == targets) | ~amask
    correct = ok.all(axis=1) & amask.any(axis=1)
    return jnp.mean(correct.astype(jnp.float32)), correct


def pca_of_images(model: GapModel, images, explained: float = 0.95):
    """shared.latent.pca_fit on the frozen e_vis [N*9, D] of images [N,84,84,1] (spec §1.3, offline)."""
    e = np.asarray(model.embed_images(images, frozen=True), np.float64)
    return pca_fit(e.reshape(-1, e.shape[-1]), explained=explained)

"""Latent rollout, the two-pass training forward, latent losses and interventions (../shared/papers/gap.md §1.1,
§1.6-1.7, §4.7).

    r = latent_rollout(model, head, prompt, K, grad=False)   # prompt [B,P] ends with <latent>
    r["zs"] [B,K,D]; r["cache"], r["cache_index"] (= P + K): append </latent> there and decode on
    out, zs = two_pass_forward(model, head, tokens, latent_pos)            # pass 1 rollout + pass 2 teacher-forced
    out, zs = two_pass_forward(model, head, tokens, latent_pos, zs=v_star)  # teacher-forced latents (no pass 1)
    loss = ce(out["logits"], labels) + lam * latent_mse(zs, v_star, has_latent)

The model is a shared.model Decoder (embeds/embed_mask, hidden="prefinal", KV cache); the head is any
`head(h_pre, h_post) -> u` (shared.latent.heads). Call these inside jax.jit / nnx.jit (merge the modules there).
"""
from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp

from shared.model.transformer import init_cache

INTERVENTIONS = ("zeros", "noise", "mean", "swap", "oracle")


def _last(out):
    """(h_pre, h_post) [B,D] at the chunk's last position."""
    return out["prefinal"][:, -1], out["hidden"][:, -1]


def latent_rollout(model, head, tokens, K: int, *, embeds=None, embed_mask=None, grad: bool = True,
                   extra: int = 0, cache_dtype=None) -> dict:
    """K free-running latent steps after a prompt whose last token is <latent> (spec §1.6-1.7, Monet pass 1).

    tokens [B,P]; embeds [B,P,D] / embed_mask [B,P] optional input vectors for the prompt (image features).
    z_1 = head(h at the prompt's last position); step t feeds z_t as the input embedding of position P+t-1 (its
    token id is ignored) and z_{t+1} = head(h there). All K latents are fed, so the returned cache holds prompt +
    z_1..z_K and the next token (</latent>) goes at cache_index = P + K; the cache has P + K + extra slots.
    grad=False: each *fed* input is stop_gradient'ed (Monet: 'each step's input is detached'); the returned zs keep
    their own graph (the head and the model step that made them), only the recurrence through fed inputs is cut.

    Returns {"zs" [B,K,D], "cache", "cache_index" (int32 scalar P+K), "out" (the model output of the last step, at
    z_K's position: its "logits" [B,1,V] predict </latent>), "h_pre"/"h_post" [B,D] there}.

    A Python loop, not lax.scan: K is small (spec: 4-10), so unrolling costs little compile time, and the loop
    calls the nnx modules directly (a scan would need split/merge of model and head around the body and a
    carried cache of the same structure at every step); each step is one T=1 cache decode.
    """
    if K < 1:
        raise ValueError(f"latent_rollout: K must be >= 1, got {K}")
    b, p = tokens.shape
    cfg = model.cfg
    cache = init_cache(cfg, b, p + K + extra, dtype=cache_dtype)
    out = model(tokens, embeds=embeds, embed_mask=embed_mask, cache=cache, cache_index=jnp.int32(0),
                hidden="prefinal")
    cache = out["cache"]
    h_pre, h_post = _last(out)
    dummy = jnp.zeros((b, 1), tokens.dtype)
    fed_mask = jnp.ones((b, 1), bool)
    zs = []
    for t in range(K):
        z = head(h_pre, h_post)
        zs.append(z)
        fed = z if grad else jax.lax.stop_gradient(z)
        out = model(dummy, embeds=fed[:, None], embed_mask=fed_mask, cache=cache, cache_index=jnp.int32(p + t),
                    hidden="prefinal")
        cache = out["cache"]
        h_pre, h_post = _last(out)
    return {"zs": jnp.stack(zs, axis=1), "cache": cache, "cache_index": jnp.int32(p + K), "out": out,
            "h_pre": h_pre, "h_post": h_post}


def _check_latent_pos(latent_pos, t: int, contiguous: bool) -> tuple[int, ...]:
    pos = tuple(int(i) for i in latent_pos)
    if not pos:
        raise ValueError("latent_pos is empty")
    if pos[0] < 1 or pos[-1] >= t:
        raise ValueError(f"latent_pos {pos} must lie in [1, {t}) (a <latent> token precedes the first slot)")
    if any(b <= a for a, b in zip(pos, pos[1:])):
        raise ValueError(f"latent_pos {pos} must be strictly increasing")
    if contiguous and pos != tuple(range(pos[0], pos[0] + len(pos))):
        raise ValueError(f"latent_pos {pos}: generated latents fill consecutive slots after <latent> (pass zs= "
                         "for other layouts)")
    return pos


def two_pass_forward(model, head, tokens, latent_pos: Sequence[int], *, zs=None, embeds=None, embed_mask=None,
                     grad: bool = True, hidden: str = "prefinal", **decoder_kwargs):
    """Monet/GAP training forward (spec §1.7) -> (pass-2 outputs, zs [B,K,D]).

    tokens [B,T]; latent_pos: K static slot positions, the same for the whole batch (tokens[:, latent_pos[0]-1]
    is <latent>). embeds/embed_mask [B,T,...]: other input vectors (image features), kept outside latent_pos.
    zs None: pass 1 = latent_rollout(tokens[:, :latent_pos[0]], K, grad=grad) generates them (slots must be
    consecutive); zs given [B,K,D] (e.g. the targets v*): teacher-forced latents, no pass 1.
    Pass 2 = one full teacher-forced forward with zs written at latent_pos; zs keep their graph into pass 2, so a
    CE on later text trains the head and the rollout (up to the grad flag's cut).
    """
    b, t = tokens.shape
    pos = _check_latent_pos(latent_pos, t, contiguous=zs is None)
    k = len(pos)
    p = pos[0]
    if zs is None:
        prompt_e = None if embeds is None else embeds[:, :p]
        prompt_m = None if embed_mask is None else embed_mask[:, :p]
        zs = latent_rollout(model, head, tokens[:, :p], k, embeds=prompt_e, embed_mask=prompt_m, grad=grad)["zs"]
    d = model.cfg.d_model
    if zs.shape != (b, k, d):
        raise ValueError(f"two_pass_forward: zs {tuple(zs.shape)} must be [B,K,D] = {(b, k, d)}")
    index = jnp.asarray(pos, jnp.int32)
    base = jnp.zeros((b, t, d), zs.dtype) if embeds is None else embeds.astype(zs.dtype)
    mask = jnp.zeros((b, t), bool) if embed_mask is None else embed_mask.astype(bool)
    full_embeds = base.at[:, index].set(zs)
    full_mask = mask.at[:, index].set(True)
    out = model(tokens, embeds=full_embeds, embed_mask=full_mask, hidden=hidden, **decoder_kwargs)
    return out, zs


# ---------------------------------------------------------------- losses


def _slot_weights(mask, shape):
    """mask None | [B] (has_latent) | [B,K] -> float32 [B,K]."""
    b, k = shape[:2]
    if mask is None:
        return jnp.ones((b, k), jnp.float32)
    mask = jnp.asarray(mask).astype(jnp.float32)
    if mask.shape == (b,):
        mask = jnp.broadcast_to(mask[:, None], (b, k))
    if mask.shape != (b, k):
        raise ValueError(f"latent loss: mask {tuple(mask.shape)} must be [B] or [B,K] = {(b, k)}")
    return mask


def latent_mse(zs, targets, mask=None):
    """mean over masked slots of ||z - v*||^2 / D (spec §1.3 L_lat); zs, targets [B,K,D]; 0 when nothing is masked."""
    if zs.shape != targets.shape:
        raise ValueError(f"latent_mse: zs {tuple(zs.shape)} vs targets {tuple(targets.shape)}")
    w = _slot_weights(mask, zs.shape)
    per_slot = jnp.mean(jnp.square(zs.astype(jnp.float32) - targets.astype(jnp.float32)), axis=-1)
    return jnp.sum(per_slot * w) / jnp.maximum(jnp.sum(w), 1.0)


def latent_cos(zs, targets, mask=None, eps: float = 1e-6):
    """mean over masked slots of 1 - cos(z, v*) (Monet's stage-3 alignment loss)."""
    if zs.shape != targets.shape:
        raise ValueError(f"latent_cos: zs {tuple(zs.shape)} vs targets {tuple(targets.shape)}")
    w = _slot_weights(mask, zs.shape)
    z, v = zs.astype(jnp.float32), targets.astype(jnp.float32)
    cos = jnp.sum(z * v, -1) / (jnp.linalg.norm(z, axis=-1) * jnp.linalg.norm(v, axis=-1) + eps)
    return jnp.sum((1.0 - cos) * w) / jnp.maximum(jnp.sum(w), 1.0)


# ---------------------------------------------------------------- interventions (spec §1.6, §4.7)


def intervene(kind: str, zs, *, key=None, norm=None, mu=None, targets=None):
    """Replace generated latents zs [B,K,D] by a placeholder with the same slot count:
        zeros   all zero
        noise   Gaussian rows rescaled to `norm` (scalar or broadcastable to [B,K]; e.g. the mean ||e_vis||); key
        mean    mu [D] repeated (the PCA mean / mean visual embedding)
        swap    the latents of another example: roll by one along the batch
        oracle  the targets v* [B,K,D]
    """
    if kind == "zeros":
        return jnp.zeros_like(zs)
    if kind == "noise":
        if key is None or norm is None:
            raise ValueError("intervene('noise'): needs key and norm")
        g = jax.random.normal(key, zs.shape, jnp.float32)
        scale = jnp.broadcast_to(jnp.asarray(norm, jnp.float32), zs.shape[:2])[..., None]
        return (g * scale / jnp.linalg.norm(g, axis=-1, keepdims=True)).astype(zs.dtype)
    if kind == "mean":
        if mu is None:
            raise ValueError("intervene('mean'): needs mu [D]")
        mu = jnp.asarray(mu)
        if mu.shape != zs.shape[-1:]:
            raise ValueError(f"intervene('mean'): mu {tuple(mu.shape)} must be [D] = {zs.shape[-1:]}")
        return jnp.broadcast_to(mu.astype(zs.dtype), zs.shape)
    if kind == "swap":
        return jnp.roll(zs, 1, axis=0)
    if kind == "oracle":
        if targets is None or targets.shape != zs.shape:
            raise ValueError(f"intervene('oracle'): needs targets of shape {tuple(zs.shape)}")
        return jnp.asarray(targets).astype(zs.dtype)
    raise ValueError(f"intervene: unknown kind {kind!r}; expected one of {', '.join(INTERVENTIONS)}")

"""The masked-diffusion (MDM) loss as a Trainer loss_fn, and the helpers the variance tools reuse.

For each sample: t ~ t-sampler (weight w = 1/p(t)), p = (1 - eps) t + eps (LLaDA's p_mask), K masks from the
mask-sampler, per mask
    l_k = sum_i token_weight_i * M_ki * (-log p_theta(x0_i | x0 with M_k masked)) / q_ki
(token_weight = 1/|eligible| on eligible tokens: the LLaDA SFT normalisation by answer length), and the
sample's loss is w * mean_k l_k. The step's loss is the mean over samples with >= 1 eligible token
(metrics["weight"] counts them, so gradient accumulation is exact).

Batches (shared.train.sft rows or shared.data packed text):
  with "prompt_mask" (SFT rows): x0 = targets (prompt, completion, eos, padding). stage "sft": the prompt is
      never masked; answer_padding "eos" (LLaDA): the padding after the answer is EOS and part of the answer
      (the model learns where an answer ends, which fixed-length decoding needs); "exclude" (StableDLLM):
      padding is neither masked nor attended. stage "pretrain": every token of the row is maskable.
  without (packed text, stage "pretrain"): x0 = inputs, eligible = segment_ids > 0.
"""
from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import ml_collections
from flax import nnx

from shared.diffusion.samplers import MaskDraw, make_mask_sampler, make_t_sampler
from shared.train.losses import token_cross_entropy

STAGES = ("sft", "pretrain")
ANSWER_PADDING = ("eos", "exclude")


def diffusion_config() -> ml_collections.ConfigDict:
    """The config.diffusion group an experiment adds (`c.diffusion = diffusion_config()`); read with defaults."""
    d = ml_collections.ConfigDict()
    d.stage = "sft"                 # sft: prompt never masked | pretrain: every token maskable
    d.mask_id = -1                  # [MASK] token id; -1 = the tokenizer's vocab_size (first id it never emits)
    d.eps = 1e-3                    # p_mask = (1 - eps) t + eps
    d.answer_padding = "eos"        # eos (LLaDA) | exclude (StableDLLM)
    d.t_sampler = "uniform"         # T_SAMPLERS name
    d.t_options = ml_collections.ConfigDict()
    d.mask_sampler = "independent"  # MASK_SAMPLERS name
    d.mask_options = ml_collections.ConfigDict()
    d.decode_steps = 0              # LLaDA decoding: steps (0 = one token per step)
    d.decode_block = 32             # semi-autoregressive block length
    d.decode_tokens = 32            # response length generated for greedy evaluation
    d.elbo_masks = 4                # held-out ELBO: masks per example (uniform t)
    return d


def diffusion_options(config) -> ml_collections.ConfigDict:
    """config.diffusion over the defaults (a config without the group gets every default)."""
    out = diffusion_config()
    given = config.get("diffusion", None) if hasattr(config, "get") else None
    if given is not None:
        for key, value in given.items():
            if key not in out:
                raise ValueError(f"diffusion.{key}: unknown key; known: {', '.join(sorted(out.keys()))}")
            out[key] = value
    if out.stage not in STAGES:
        raise ValueError(f"diffusion.stage={out.stage!r}: expected one of {STAGES}")
    if out.answer_padding not in ANSWER_PADDING:
        raise ValueError(f"diffusion.answer_padding={out.answer_padding!r}: expected one of {ANSWER_PADDING}")
    return out


def p_mask(t, eps: float):
    return (1.0 - eps) * t + eps


def mdm_inputs(batch: dict, stage: str, answer_padding: str, eos_id: int | None):
    """(x0, eligible float, segment_ids, positions) for the MDM forward, from an SFT or packed-text batch."""
    if "prompt_mask" in batch:
        targets = batch["targets"]
        real = batch["loss_mask"] > 0
        row_used = jnp.any(real, axis=-1, keepdims=True)
        if answer_padding == "eos":
            if eos_id is None:
                raise ValueError("diffusion.answer_padding='eos' needs the tokenizer's eos id")
            x0 = jnp.where(real, targets, eos_id)
            present = jnp.broadcast_to(row_used, targets.shape)
        else:
            x0, present = targets, real
        if stage == "sft":
            eligible = present & (batch["prompt_mask"] < 0.5)
        else:
            eligible = present
        segment_ids = present.astype(jnp.int32)
        positions = jnp.broadcast_to(jnp.arange(targets.shape[1], dtype=jnp.int32), targets.shape)
        return x0, eligible.astype(jnp.float32), segment_ids, positions
    if stage != "pretrain":
        raise ValueError("diffusion.stage='sft' needs SFT rows with a 'prompt_mask' (task data from shared.train.sft)")
    x0 = batch["inputs"]
    segment_ids = batch.get("segment_ids")
    eligible = (segment_ids > 0) if segment_ids is not None else jnp.ones(x0.shape, bool)
    positions = batch.get("positions")
    if positions is None:
        positions = jnp.broadcast_to(jnp.arange(x0.shape[1], dtype=jnp.int32), x0.shape)
    return x0, eligible.astype(jnp.float32), segment_ids, positions


def model_logits_fn(graphdef, params, attention: str, segment_ids=None, positions=None):
    """logits_fn(tokens [N,T]) -> the model's logits over [N,T] as a ChunkedLogits (read chunk by chunk by
    token_cross_entropy; `.dense()` gives [N,T,V]); segment_ids/positions [B,T] are tiled over the N = K*B rows
    of a K-mask draw."""
    model = nnx.merge(graphdef, params)

    def logits_fn(tokens):
        reps = tokens.shape[0] // (positions.shape[0] if positions is not None else tokens.shape[0])
        pos = None if positions is None else jnp.tile(positions, (reps, 1))
        seg = None if segment_ids is None else jnp.tile(segment_ids, (reps, 1))
        return model(tokens, pos, seg, attention=attention, logits="chunked")["logits"]

    return logits_fn


def masked_losses(logits_fn: Callable, x0, draw: MaskDraw, mask_id: int):
    """Per-mask, per-sample losses float32[K, B] (the sum in the module doc) in one forward over K*B rows."""
    k, b, t = draw.masks.shape
    noisy = jnp.where(draw.masks, mask_id, x0[None]).reshape(k * b, t)
    logits = logits_fn(noisy)
    nll, _ = token_cross_entropy(logits, jnp.tile(x0, (k, 1)))
    nll = nll.reshape(k, b, t)
    terms = jnp.where(draw.masks, nll / draw.probs, 0.0)
    return jnp.sum(terms * draw.token_weight[None], axis=-1)


def mdm_loss_fn(config, attention: str, *, mask_id: int, eos_id: int | None = None, t_sampler=None,
                mask_sampler=None, options=None):
    """The Trainer loss_fn `(graphdef, params, batch, rng) -> (loss, metrics)` of the module doc. t_sampler /
    mask_sampler default to the ones config.diffusion names."""
    opts = options if options is not None else diffusion_options(config)
    t_sampler = t_sampler or make_t_sampler(opts.t_sampler, opts.t_options)
    mask_sampler = mask_sampler or make_mask_sampler(opts.mask_sampler, opts.mask_options)
    eps = float(opts.eps)

    def loss_fn(graphdef, params, batch, rng):
        x0, eligible, segment_ids, positions = mdm_inputs(batch, opts.stage, opts.answer_padding, eos_id)
        t_rng, m_rng = jax.random.split(rng)
        t, weight = t_sampler(t_rng, x0.shape[0])
        draw = mask_sampler(m_rng, x0, eligible, p_mask(t, eps))
        logits_fn = model_logits_fn(graphdef, params, attention, segment_ids, positions)
        per_mask = masked_losses(logits_fn, x0, draw, mask_id)
        per_sample = weight * per_mask.mean(0)
        used = (eligible.sum(-1) > 0).astype(jnp.float32)
        count = used.sum()
        loss = jnp.sum(per_sample * used) / jnp.maximum(count, 1.0)
        masked = draw.masks.astype(jnp.float32).sum((0, 2)) / draw.masks.shape[0]
        metrics = {"loss": loss, "weight": count,
                   "t_mean": jnp.sum(t * used) / jnp.maximum(count, 1.0),
                   "is_weight_max": jnp.max(weight),
                   "masked_fraction": jnp.sum(masked) / jnp.maximum(eligible.sum(), 1.0)}
        return loss, metrics

    return loss_fn


def elbo_loss_fn(config, attention: str, *, mask_id: int, eos_id: int | None = None, masks: int = 1):
    """The uniform-t, independent-mask MDM loss (the held-out ELBO, comparable across training methods)."""
    opts = diffusion_options(config)
    return mdm_loss_fn(config, attention, mask_id=mask_id, eos_id=eos_id, options=opts,
                       t_sampler=make_t_sampler("uniform"),
                       mask_sampler=make_mask_sampler("independent", {"samples": int(masks)}))


def resolve_mask_id(options, tokenizer_vocab: int, model_vocab: int) -> int:
    mask_id = int(options.mask_id)
    if mask_id < 0:
        mask_id = int(tokenizer_vocab)
    if not 0 <= mask_id < model_vocab:
        raise ValueError(f"diffusion.mask_id={mask_id} is outside model.vocab_size={model_vocab}; raise "
                         f"model.vocab_size or set diffusion.mask_id")
    return mask_id


def evaluate_loss(loss_fn, graphdef, params, batches, seed: int = 0, repeats: int = 1) -> float:
    """Mean loss (weighted by metrics["weight"]) of `loss_fn` over batches x repeats fresh rngs."""
    run = jax.jit(lambda p, b, r: loss_fn(graphdef, p, b, r))
    total, weight = 0.0, 0.0
    rng = jax.random.key(seed)
    for batch in batches:
        for _ in range(repeats):
            rng, sub = jax.random.split(rng)
            loss, metrics = run(params, batch, sub)
            w = float(metrics.get("weight", 1.0))
            total += float(loss) * w
            weight += w
    return total / max(weight, 1e-9)


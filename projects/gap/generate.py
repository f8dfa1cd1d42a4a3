"""Greedy answers of a GapModel on the KV cache (spec ../shared/papers/gap.md §1.6), for evaluation.

    tokens = generate(model, batch, mode="feedback")          # int32 [B, MAX_NEW]: what follows the prompt
    answers = [gridops.decode_answer(row) for row in tokens]  # the words after the last </parser> / </latent>

Paths, each from the fixed 37-token prompt (images spliced at layout.IMAGE_POS):
  "none"      greedy tokens straight after the prompt (T0, and T1's parser text, which the model writes itself)
  "slots"     the prompt, <latent>, the K learned constants, </latent>, then greedy tokens
  "feedback"  the prompt and <latent>, K free-running latents from the head (shared.latent.latent_rollout),
              </latent>, then greedy tokens
  "auto"      the model opens the span itself: rows whose first greedy token is <latent> take the latent path
              ("feedback", or "slots" with auto_latent="slots"), the others the direct one. Both run for every row
              and each row keeps its own (static shapes; twice the evaluation cost, none of it in training).
Returned tokens are the latent path's after </latent> (so the parser, then the answer) or the direct path's;
after <eos> they are PAD.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from projects.gap import layout
from shared.latent import latent_rollout
from shared.model import init_cache

MAX_NEW = 16   # <parser> + 11 grid tokens + </parser> + a two-digit answer + <eos>
GENERATE_MODES = ("none", "slots", "feedback", "auto")


def _greedy(decoder, cache, index: int, logits, max_new: int):
    """max_new greedy tokens from `logits` (the last position's), fed one at a time at cache positions index, ...;
    PAD after each row's <eos>. A Python loop: max_new is small and every step is the same T = 1 decode."""
    out, done = [], None
    for i in range(max_new):
        token = jnp.argmax(logits, axis=-1).astype(jnp.int32)
        if done is not None:
            token = jnp.where(done, layout.PAD, token)
        out.append(token)
        done = (token == layout.EOS) if done is None else (done | (token == layout.EOS))
        if i + 1 < max_new:
            step = decoder(token[:, None], cache=cache, cache_index=jnp.int32(index + i))
            cache, logits = step["cache"], step["logits"][:, -1]
    return jnp.stack(out, axis=1)


def _direct(model, tokens, embeds, mask, max_new: int):
    b, p = tokens.shape
    cache = init_cache(model.decoder.cfg, b, p + max_new)
    out = model.decoder(tokens, embeds=embeds, embed_mask=mask, cache=cache, cache_index=jnp.int32(0))
    return _greedy(model.decoder, out["cache"], p, out["logits"][:, -1], max_new)


def _latent(model, tokens, embeds, mask, k: int, kind: str, max_new: int):
    """The prompt + <latent> + K latent inputs + </latent>, then greedy tokens."""
    b, p = tokens.shape
    opened = jnp.concatenate([tokens, jnp.full((b, 1), layout.ID["<latent>"], tokens.dtype)], axis=1)
    embeds = jnp.concatenate([embeds, jnp.zeros_like(embeds[:, :1])], axis=1)
    mask = jnp.concatenate([mask, jnp.zeros_like(mask[:, :1])], axis=1)
    if kind == "feedback":
        if model.head is None:
            raise ValueError("generate(mode='feedback'): the model has no latent head (set_head)")
        rollout = latent_rollout(model.decoder, model.head, opened, k, embeds=embeds, embed_mask=mask, grad=False,
                                 extra=1 + max_new)
        cache, index = rollout["cache"], p + 1 + k
    else:   # slots: the K constants as the span's inputs, prefilled with the prompt
        if k != model.slots.shape[0]:
            raise ValueError(f"generate(mode='slots'): k={k} but the model has {model.slots.shape[0]} slots")
        slots = jnp.broadcast_to(model.slots[...].astype(embeds.dtype)[None], (b, k, embeds.shape[-1]))
        span = jnp.concatenate([opened, jnp.full((b, k), layout.LATSLOT, tokens.dtype)], axis=1)
        span_embeds = jnp.concatenate([embeds, slots], axis=1)
        span_mask = jnp.concatenate([mask, jnp.ones((b, k), bool)], axis=1)
        cache = init_cache(model.decoder.cfg, b, p + 1 + k + 1 + max_new)
        cache = model.decoder(span, embeds=span_embeds, embed_mask=span_mask, cache=cache,
                              cache_index=jnp.int32(0))["cache"]
        index = p + 1 + k
    close = jnp.full((b, 1), layout.ID["</latent>"], tokens.dtype)
    out = model.decoder(close, cache=cache, cache_index=jnp.int32(index))
    return _greedy(model.decoder, out["cache"], index + 1, out["logits"][:, -1], max_new)


def generate(model, batch, *, mode: str = "none", k: int | None = None, max_new: int = MAX_NEW,
             auto_latent: str = "feedback"):
    """Greedy tokens after the prompt (or after </latent>): int32 [B, max_new]. See the module doc."""
    if mode not in GENERATE_MODES:
        raise ValueError(f"generate: mode {mode!r}; expected one of {GENERATE_MODES}")
    k = model.cfg.k if k is None else int(k)
    tokens, embeds, mask, _ = model._image_inputs(batch)
    p = layout.PROMPT_LEN
    tokens, embeds, mask = tokens[:, :p], embeds[:, :p], mask[:, :p]
    if mode == "none":
        return _direct(model, tokens, embeds, mask, max_new)
    if mode in ("slots", "feedback"):
        return _latent(model, tokens, embeds, mask, k, mode, max_new)
    direct = _direct(model, tokens, embeds, mask, max_new)
    latent = _latent(model, tokens, embeds, mask, k, auto_latent, max_new)
    opens = direct[:, 0] == layout.ID["<latent>"]
    return jnp.where(opens[:, None], latent, direct)


def opened_latent(model, batch) -> jax.Array:
    """[B] bool: the model's first greedy token after the prompt is <latent> (how often it chooses to imagine)."""
    return generate(model, batch, mode="none", max_new=1)[:, 0] == layout.ID["<latent>"]

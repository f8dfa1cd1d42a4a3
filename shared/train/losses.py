"""Training losses (LOSSES registry).

Contract of a loss: `fn(logits, batch, config) -> (loss, metrics)`.
  logits   what the Decoder returns under "logits": in training a shared.model.chunked_head.ChunkedLogits
           (hidden states + head weight; `token_cross_entropy`, `token_sums` and `.stats(targets)` read it
           chunk by chunk), or a float[B, T, V] array of any dtype (computed in float32 here). A loss that
           truly needs every logit may call `.dense()`, which materialises [B, T, V].
  batch    dict with "targets" int32[B, T] (the next token at each position) and "loss_mask" float32[B, T];
           possibly "segment_ids", "positions", "inputs", and for SFT "prompt_mask" float/int[B, T], aligned
           with "targets": 1 where the *target* token belongs to the prompt (so the last prompt position,
           whose target is the first completion token, must be 0 and does count).
  config   the full experiment config (config.train.z_loss is read).
  loss     scalar float32: the mean over counted tokens of the per-token loss (cross entropy + z-loss term);
           this is what is differentiated.
  metrics  float32 scalars:
             loss      = the returned loss (xent + z_loss)
             xent      mean cross entropy (nats/token) without the z-loss term
             z_loss    mean z-loss term actually added (z_loss * logsumexp(logits)^2)
             accuracy  fraction of counted tokens whose argmax equals the target
             tokens    number of counted tokens (positions with weight > 0)
             loss_sum  sum over tokens of weight * per-token loss   } sum form, for exact
             weight    sum of the token weights (the mask)          } gradient accumulation

Exact accumulation over micro-batches: a plain mean of per-micro-batch means is wrong when micro-batches
count different numbers of tokens. Instead, per micro-batch differentiate `metrics["loss_sum"]`, add up the
gradients and the `weight`s, and divide the summed gradient by the summed weight: that is the gradient of
the global token mean. For metrics, sum the dicts of `token_sums(...)` over micro-batches and call
`metrics_from_sums` once (or weight each mean metric by its micro-batch's `weight`).
"""
from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from shared.model.chunked_head import ChunkedLogits, token_stats
from shared.registry import LOSSES


def token_cross_entropy(logits, targets: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Per-token (negative log-likelihood, log partition function), both float32[B, T].

    logits: a float[B, T, V] array, or the ChunkedLogits a Decoder returns with logits="chunked" (the statistics
    are then computed chunk by chunk, never holding [tokens, vocab]). nll = logsumexp(logits) - logits[target].
    The target logit is picked with a one-hot product (not a gather) so a vocab-sharded logits array reduces
    across shards instead of being all-gathered.
    """
    stats = token_stats(logits, targets)
    return stats.nll, stats.log_z


def _xent_parts(logits, targets: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(nll, log_z, correct): `correct` compares the target logit with the row's max (a tie counts as
    correct) instead of a separate argmax pass."""
    stats = token_stats(logits, targets)
    return stats.nll, stats.log_z, (stats.target >= stats.max).astype(jnp.float32)


def token_sums(logits: jax.Array, targets: jax.Array, weights: jax.Array, z_loss: float = 0.0
               ) -> dict[str, jax.Array]:
    """Sum-form statistics over weighted tokens; add these across micro-batches, then `metrics_from_sums`."""
    weights = weights.astype(jnp.float32)
    if isinstance(logits, ChunkedLogits):   # chunked, the gradient of loss_sum made in the forward
        sums = logits.xent_sums(targets, weights, z_loss)
        sums.update(weight=jnp.sum(weights), tokens=jnp.sum((weights > 0).astype(jnp.float32)))
        return sums
    nll, log_z, correct = _xent_parts(logits, targets)
    z_term = z_loss * jnp.square(log_z)  # PaLM / MaxText z-loss: keeps the softmax normaliser near 1
    xent_sum = jnp.sum(nll * weights)
    z_loss_sum = jnp.sum(z_term * weights)
    return {
        "loss_sum": xent_sum + z_loss_sum,
        "xent_sum": xent_sum,
        "z_loss_sum": z_loss_sum,
        "correct_sum": jnp.sum(correct * weights),
        "weight": jnp.sum(weights),
        "tokens": jnp.sum((weights > 0).astype(jnp.float32)),
    }


def metrics_from_sums(sums: dict[str, jax.Array]) -> tuple[jax.Array, dict[str, jax.Array]]:
    """(mean loss, metrics) from `token_sums` (possibly summed over micro-batches); 0 when nothing counts."""
    weight = sums["weight"]
    safe_weight = jnp.where(weight > 0, weight, 1.0)  # no 0/0 (and no NaN gradient) on an all-masked batch
    loss = sums["loss_sum"] / safe_weight
    metrics = {
        "loss": loss,
        "xent": sums["xent_sum"] / safe_weight,
        "z_loss": sums["z_loss_sum"] / safe_weight,
        "accuracy": sums["correct_sum"] / safe_weight,
        "tokens": sums["tokens"],
        "loss_sum": sums["loss_sum"],
        "weight": weight,
    }
    return loss, metrics


def _z_loss_weight(config: Any) -> float:
    train = getattr(config, "train", None) if config is not None else None
    return float(getattr(train, "z_loss", 0.0) or 0.0) if train is not None else 0.0


def _batch_field(batch: dict, key: str, loss_name: str) -> jax.Array:
    if key not in batch:
        raise KeyError(f"{loss_name}: batch has no {key!r} (batch keys: {', '.join(sorted(batch))})")
    return batch[key]


@LOSSES.register("lm_xent")
def lm_xent(logits: jax.Array, batch: dict, config: Any) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Next-token cross entropy over tokens with loss_mask > 0, plus config.train.z_loss * logsumexp^2."""
    targets = _batch_field(batch, "targets", "lm_xent")
    weights = _batch_field(batch, "loss_mask", "lm_xent")
    return metrics_from_sums(token_sums(logits, targets, weights, _z_loss_weight(config)))


@LOSSES.register("sft_xent")
def sft_xent(logits: jax.Array, batch: dict, config: Any) -> tuple[jax.Array, dict[str, jax.Array]]:
    """lm_xent where prompt tokens (prompt_mask == 1) do not count: only completion tokens are learned."""
    targets = _batch_field(batch, "targets", "sft_xent")
    prompt_mask = _batch_field(batch, "prompt_mask", "sft_xent").astype(jnp.float32)
    weights = _batch_field(batch, "loss_mask", "sft_xent").astype(jnp.float32) * (1.0 - prompt_mask)
    return metrics_from_sums(token_sums(logits, targets, weights, _z_loss_weight(config)))

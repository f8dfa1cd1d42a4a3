"""Bradley-Terry pairwise loss and pairwise metrics (jnp for the training step, numpy for evaluation).

    L = mean_i w_i [ -(1 - eps) log sigmoid(d_i) - eps log sigmoid(-d_i) ] / mean_i w_i,  d_i = r_w - r_l - m_i

eps = label smoothing (conservative BT), m_i = margin (Llama-2's margin loss); w_i = 0 drops padding pairs.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def _weight(x, weight):
    return jnp.ones_like(x, jnp.float32) if weight is None else weight.astype(jnp.float32)


def bradley_terry_loss(r_chosen: jax.Array, r_rejected: jax.Array, *, weight: jax.Array | None = None,
                       margin: jax.Array | float = 0.0, label_smoothing: float = 0.0) -> jax.Array:
    d = r_chosen.astype(jnp.float32) - r_rejected.astype(jnp.float32) - margin
    per_pair = -(1.0 - label_smoothing) * jax.nn.log_sigmoid(d) - label_smoothing * jax.nn.log_sigmoid(-d)
    w = _weight(d, weight)
    return (w * per_pair).sum() / jnp.maximum(w.sum(), 1e-9)


def pairwise_metrics(r_chosen: jax.Array, r_rejected: jax.Array, weight: jax.Array | None = None) -> dict:
    """accuracy (r_w > r_l; a tie counts one half), margin = mean(r_w - r_l), reward_mean and reward_abs (mean
    |r| over both responses: drift of the unanchored BT scale)."""
    d = r_chosen.astype(jnp.float32) - r_rejected.astype(jnp.float32)
    w = _weight(d, weight)
    total = jnp.maximum(w.sum(), 1e-9)
    correct = jnp.where(d > 0, 1.0, jnp.where(d == 0, 0.5, 0.0))
    both = jnp.concatenate([r_chosen, r_rejected]).astype(jnp.float32)
    w2 = jnp.concatenate([w, w])
    return {"accuracy": (w * correct).sum() / total, "margin": (w * d).sum() / total,
            "reward_mean": (w2 * both).sum() / (2 * total), "reward_abs": (w2 * jnp.abs(both)).sum() / (2 * total)}


def accuracy_by_group(r_chosen: np.ndarray, r_rejected: np.ndarray, groups: np.ndarray) -> dict:
    """{group: accuracy} for numpy scores and a group label per pair (e.g. RM-Bench domains, HS3 natural vs
    adversarial); ties count one half."""
    d = np.asarray(r_chosen, np.float64) - np.asarray(r_rejected, np.float64)
    correct = np.where(d > 0, 1.0, np.where(d == 0, 0.5, 0.0))
    groups = np.asarray(groups)
    return {g.item() if hasattr(g, "item") else g: float(correct[groups == g].mean()) for g in np.unique(groups)}

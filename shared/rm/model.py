"""The reward model's forward on pair rows and its Trainer loss_fn.

One decoder pass over the 2B sequences [chosen rows; rejected rows]; the scalar head and the final hidden state
are read at each sequence's last real token (last-token pooling, as HF's sequence-classification RMs and
`shared.rewards.ScalarRewardModel` do). Right padding and causal attention: padding after the last token never
reaches it, so no segment ids are needed.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from shared.rm.losses import bradley_terry_loss, pairwise_metrics


def pooled_outputs(graphdef, params, tokens: jax.Array, last: jax.Array, attention: str):
    """(reward [N], hidden [N, D]) at position `last` of each row, float32."""
    model = nnx.merge(graphdef, params)
    out = model(tokens, hidden="last", attention=attention)
    hidden = jnp.take_along_axis(out["hidden"], last[:, None, None].astype(jnp.int32), axis=1)[:, 0]
    reward = jnp.take_along_axis(out["scalar"], last[:, None].astype(jnp.int32), axis=1)[:, 0]
    return reward.astype(jnp.float32), hidden.astype(jnp.float32)


def pair_forward(graphdef, params, batch: dict, attention: str) -> dict:
    """{"r_chosen", "r_rejected": [B], "h_chosen", "h_rejected": [B, D]} of a batch of pair rows."""
    b = batch["chosen"].shape[0]
    tokens = jnp.concatenate([batch["chosen"], batch["rejected"]], axis=0)
    last = jnp.concatenate([batch["chosen_last"], batch["rejected_last"]], axis=0)
    reward, hidden = pooled_outputs(graphdef, params, tokens, last, attention)
    return {"r_chosen": reward[:b], "r_rejected": reward[b:], "h_chosen": hidden[:b], "h_rejected": hidden[b:]}


def rm_loss_fn(config, attention: str, hooks: dict | None = None, aux: dict | None = None, step=None):
    """loss_fn(graphdef, params, batch, rng) -> (loss, metrics): BT (config.rm margin / label smoothing /
    centring) plus every hook's term with `aux` held constant. Without hooks this is also the eval loss."""
    rm = config.rm
    hooks = hooks or {}
    step = jnp.zeros((), jnp.int32) if step is None else step

    def loss_fn(graphdef, params, batch, rng):
        del rng
        features = pair_forward(graphdef, params, batch, attention)
        weight = batch["weight"]
        margin = float(rm.margin)
        if float(rm.get("margin_scale", 0.0)) and "margin" in batch:
            margin = margin + float(rm.margin_scale) * batch["margin"]
        bt = bradley_terry_loss(features["r_chosen"], features["r_rejected"], weight=weight, margin=margin,
                                label_smoothing=float(rm.label_smoothing))
        metrics = dict(pairwise_metrics(features["r_chosen"], features["r_rejected"], weight), bt_loss=bt)
        loss = bt
        if float(rm.get("center_coef", 0.0)):
            both = jnp.concatenate([features["r_chosen"], features["r_rejected"]])
            loss = loss + float(rm.center_coef) * (jnp.concatenate([weight, weight]) * both ** 2).sum() / \
                jnp.maximum(2 * weight.sum(), 1e-9)
        for name, hook in hooks.items():
            term, hook_metrics = hook.loss(jax.lax.stop_gradient(aux[name]), features, batch, step)
            loss = loss - bt + term if hook.replaces_bt else loss + term
            metrics.update(hook_metrics)
        metrics.update(loss=loss, weight=weight.sum())
        return loss, metrics

    return loss_fn

"""The jitted training and evaluation steps.

A *loss function* here is `loss_fn(graphdef, params, batch, rng) -> (loss, metrics)` where `loss` is a mean
over the micro-batch and `metrics["weight"]` (default 1) is what that mean was taken over (tokens for LM
losses). Micro-batches are combined as weighted means, so gradient accumulation over k micro-batches equals
one step on the whole batch. Tasks that need their own forward (masked diffusion, reward models, RL) pass
their own loss_fn and reuse everything else.
"""
from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from shared import sharding as sh
from shared.registry import LOSSES

SUMMED_METRICS = ("weight", "tokens", "loss_sum")

LossFn = Callable[[Any, Any, dict, jax.Array], tuple[jax.Array, dict]]


def lm_loss_fn(config, attention: str) -> LossFn:
    """The default: decoder forward on a packed batch, then LOSSES[config.train.loss] on its (chunked) logits."""
    loss_impl = LOSSES.get(config.train.loss)

    def loss_fn(graphdef, params, batch, rng):
        del rng
        model = nnx.merge(graphdef, params)
        out = model(batch["inputs"], batch.get("positions"), batch.get("segment_ids"), attention=attention,
                    logits="chunked")
        return loss_impl(out["logits"], batch, config)

    return loss_fn


def _split_micro(batch: dict, k: int) -> dict:
    """[B, ...] -> [k, B/k, ...] taking rows i*k + j for micro-batch j, so every device feeds every micro-batch."""
    return jax.tree.map(lambda x: x.reshape(x.shape[0] // k, k, *x.shape[1:]).swapaxes(0, 1), batch)


def _weighted(metrics: dict) -> tuple[jax.Array, dict]:
    weight = jnp.asarray(metrics.get("weight", 1.0), jnp.float32)
    sums = {name: (jnp.asarray(v, jnp.float32) if name in SUMMED_METRICS else jnp.asarray(v, jnp.float32) * weight)
            for name, v in metrics.items()}
    sums["weight"] = weight
    return weight, sums


def _unweighted(sums: dict) -> dict:
    weight = jnp.maximum(sums["weight"], 1e-9)
    return {name: (v if name in SUMMED_METRICS else v / weight) for name, v in sums.items()}


def make_train_step(graphdef, loss_fn: LossFn, optimizer: optax.GradientTransformation, schedule, config,
                    mesh=None, micro_batches: int | None = None):
    """Returns `step(state, batch) -> (state, metrics)`; jit it with donate_argnums=0.

    micro_batches: gradient accumulation over this many micro-batches of the batch (default
    config.train.micro_batches); the batch's rows must divide by it.

    state: {"params", "opt", "step", "rng", "nonfinite"}. A step whose loss or gradient is not finite leaves
    params and optimizer state unchanged and counts itself in state["nonfinite"]; the trainer decides
    (train.nan_policy) whether to stop or go on.
    """
    k = int(config.train.micro_batches if micro_batches is None else micro_batches)
    inject_nan_step = int(config.train.get("inject_nan_step", -1))

    def grads_of(params, batch, rng, step):
        def objective(p):
            loss, metrics = loss_fn(graphdef, p, batch, rng)
            if inject_nan_step >= 0:
                loss = jnp.where(step == inject_nan_step, jnp.nan, loss)
                metrics = dict(metrics, loss=loss)
            weight, sums = _weighted(metrics)
            return loss * weight, sums

        return jax.grad(objective, has_aux=True)(params)

    def step_fn(state, batch):
        params = state["params"]
        rng, step_rng = jax.random.split(state["rng"])
        if k == 1:
            grads, sums = grads_of(params, batch, step_rng, state["step"])
        else:
            micro = _split_micro(batch, k)

            def accumulate(carry, xs):
                mb, i = xs
                mb = {name: sh.constrain(x, (sh.ACT_BATCH,) + (None,) * (x.ndim - 1)) for name, x in mb.items()}
                g, s = grads_of(params, mb, jax.random.fold_in(step_rng, i), state["step"])
                acc_g, acc_s = carry
                return (jax.tree.map(jnp.add, acc_g, g), jax.tree.map(jnp.add, acc_s, s)), None

            zero_g = jax.tree.map(jnp.zeros_like, params)
            _, zero_s = jax.eval_shape(lambda: grads_of(params, jax.tree.map(lambda x: x[0], micro), step_rng,
                                                        state["step"]))
            zero_s = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), zero_s)
            (grads, sums), _ = jax.lax.scan(accumulate, (zero_g, zero_s), (micro, jnp.arange(k)))
        weight = jnp.maximum(sums["weight"], 1e-9)
        grads = jax.tree.map(lambda g: g / weight, grads)
        metrics = _unweighted(sums)
        grad_norm = optax.global_norm(grads)
        finite = jnp.isfinite(metrics["loss"]) & jnp.isfinite(grad_norm)
        updates, new_opt = optimizer.update(grads, state["opt"], params)
        # Zeroing the update (fused into the parameter add) instead of selecting between two parameter trees.
        updates = jax.tree.map(lambda u: jnp.where(finite, u, jnp.zeros_like(u)), updates)
        new_state = {
            "params": optax.apply_updates(params, updates),
            "opt": jax.tree.map(lambda n, o: jnp.where(finite, n, o), new_opt, state["opt"]),
            "step": state["step"] + 1,
            "rng": rng,
            "nonfinite": state["nonfinite"] + (1 - finite.astype(jnp.int32)),
        }
        metrics = dict(metrics, grad_norm=grad_norm, lr=schedule(state["step"]), finite=finite.astype(jnp.float32),
                       param_norm=optax.global_norm(params))
        return new_state, metrics

    return step_fn


def make_eval_step(graphdef, loss_fn: LossFn):
    """Returns `eval_step(params, batch) -> summed metrics`; `finish_eval` turns summed metrics into means."""

    def eval_fn(params, batch):
        loss, metrics = loss_fn(graphdef, params, batch, jax.random.key(0))
        _, sums = _weighted(dict(metrics, loss=loss))
        return sums

    return eval_fn


def finish_eval(sums: list[dict]) -> dict:
    total = jax.tree.map(lambda *xs: sum(float(x) for x in xs), *sums)
    return {name: float(v) for name, v in _unweighted(total).items()}

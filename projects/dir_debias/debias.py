"""DIR and the baselines of the spec (../shared/papers/dir_debias.md, sections 1.3-1.6 and 4.3) as reward-model
loss hooks (shared.rm.hooks). Each reads config.dir (experiments/dir_debias/_common.py: dir_config()).

    dir_debias/club     DIR: + gamma * sum_m w_m * I_CLUB(Z; A_m), with q_psi (one MLP per attribute) refit by
                        dir.inner_steps AdamW steps per RM step on the detached representation, before the RM's
                        gradient (which sees the refit q_psi as a constant).
    dir_debias/pearson  ALBM-like linear penalty: + gamma * sum_m w_m |corr_batch(r, v_m)| over the 2B responses.
    dir_debias/poe      product of experts: the BT logit becomes (r_w - r_l) + sum_m beta_m * s_m with s_m the
                        antisymmetric attribute and beta a bias-only expert fit on the detached RM logit by its own
                        optimizer; at test time the expert is dropped (plain r).

Z is the pair representation: h_w - h_l ("difference", the code's default) or [h_w; h_l] ("concat").
dir.club_batch = n > 0 computes the CLUB contrast within groups of n pairs (the released code's N = 8 over
8 GPUs x 1 pair) instead of over the whole (micro-)batch; the batch must divide into such groups.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from shared.mi import categorical_club, categorical_nll, mlp_apply, mlp_init
from shared.mi.mlp import mlp_sizes
from shared.rm.hooks import LOSS_HOOKS, LossHook
from shared.rm.losses import bradley_terry_loss
from projects.dir_debias.attributes import parse_attributes


def pair_representation(features: dict, mode: str) -> jax.Array:
    if mode == "difference":
        return features["h_chosen"] - features["h_rejected"]
    if mode == "concat":
        return jnp.concatenate([features["h_chosen"], features["h_rejected"]], axis=-1)
    raise ValueError(f"dir.representation={mode!r}: expected 'difference' or 'concat'")


def grouped_club(log_q: jax.Array, labels: jax.Array, weight: jax.Array, group: int) -> jax.Array:
    """Categorical CLUB over the batch (group 0) or the mean over consecutive groups of `group` pairs."""
    if not group or group >= log_q.shape[0]:
        return categorical_club(log_q, labels, weight)
    n = log_q.shape[0]
    if n % group:
        raise ValueError(f"dir.club_batch={group} does not divide the (micro-)batch of {n} pairs")
    k = log_q.shape[1]
    return jax.vmap(categorical_club)(log_q.reshape(n // group, group, k), labels.reshape(n // group, group),
                                      weight.reshape(n // group, group)).mean()


def _warm(step, warmup: int):
    return jnp.where(step >= warmup, 1.0, 0.0) if warmup else 1.0


@LOSS_HOOKS.register("dir_debias/club")
class CLUBPenalty(LossHook):
    def __init__(self, config):
        super().__init__(config)
        d = config.dir
        self.attributes = parse_attributes(d)
        self.gamma, self.mode = float(d.gamma), str(d.representation)
        self.inner_steps, self.hidden, self.group = int(d.inner_steps), int(d.q_hidden), int(d.club_batch)
        self.warmup = int(d.warmup_steps)
        # PyTorch AdamW defaults of the reference code (betas 0.9/0.999, wd 0.01); lr dir.q_lr.
        self.optimizer = optax.adamw(float(d.q_lr), b1=0.9, b2=0.999, eps=1e-8, weight_decay=float(d.q_weight_decay))

    def init(self, rng, d_model):
        d_in = d_model * (2 if self.mode == "concat" else 1)
        q = [mlp_init(jax.random.fold_in(rng, m), mlp_sizes(d_in, self.hidden, attribute.num_classes))
             for m, (attribute, _) in enumerate(self.attributes)]
        return {"q": q, "opt": self.optimizer.init(q)}

    def estimator_loss(self, q, z, batch) -> jax.Array:
        """-sum_m mean_i log q_m(a_i | z_i): q's maximum-likelihood objective."""
        return sum(categorical_nll(jax.nn.log_softmax(mlp_apply(q[m], z)), attribute.labels(batch), batch["weight"])
                   for m, (attribute, _) in enumerate(self.attributes))

    def update(self, aux, features, batch, rng, step):
        z = jax.lax.stop_gradient(pair_representation(features, self.mode))

        def inner(carry, _):
            q, opt = carry
            loss, grads = jax.value_and_grad(self.estimator_loss)(q, z, batch)
            updates, opt = self.optimizer.update(grads, opt, q)
            return (optax.apply_updates(q, updates), opt), loss

        (q, opt), losses = jax.lax.scan(inner, (aux["q"], aux["opt"]), None, length=self.inner_steps)
        return {"q": q, "opt": opt}, {"dir/q_nll": losses[-1]}

    def estimates(self, q, features, batch) -> list[jax.Array]:
        z = pair_representation(features, self.mode)
        return [grouped_club(jax.nn.log_softmax(mlp_apply(q[m], z)), attribute.labels(batch), batch["weight"],
                             self.group) for m, (attribute, _) in enumerate(self.attributes)]

    def loss(self, aux, features, batch, step):
        mis = self.estimates(aux["q"], features, batch)
        penalty = sum(w * mi for (_, w), mi in zip(self.attributes, mis))
        metrics = {f"dir/mi_{a.name}": mi for (a, _), mi in zip(self.attributes, mis)}
        metrics["dir/mi"] = penalty
        return self.gamma * _warm(step, self.warmup) * penalty, metrics


def weighted_corr(x: jax.Array, y: jax.Array, w: jax.Array) -> jax.Array:
    total = jnp.maximum(w.sum(), 1e-9)
    mx, my = (w * x).sum() / total, (w * y).sum() / total
    cov = (w * (x - mx) * (y - my)).sum() / total
    vx, vy = (w * (x - mx) ** 2).sum() / total, (w * (y - my) ** 2).sum() / total
    return cov / jnp.sqrt(vx * vy + 1e-12)


@LOSS_HOOKS.register("dir_debias/pearson")
class PearsonPenalty(LossHook):
    def __init__(self, config):
        super().__init__(config)
        self.attributes = parse_attributes(config.dir)
        self.gamma, self.warmup = float(config.dir.gamma), int(config.dir.warmup_steps)

    def loss(self, aux, features, batch, step):
        r = jnp.concatenate([features["r_chosen"], features["r_rejected"]])
        w = jnp.concatenate([batch["weight"], batch["weight"]]).astype(jnp.float32)
        corrs = [weighted_corr(r, jnp.concatenate(a.values(batch)), w) for a, _ in self.attributes]
        penalty = sum(wt * jnp.abs(c) for (_, wt), c in zip(self.attributes, corrs))
        metrics = {f"pearson/corr_{a.name}": c for (a, _), c in zip(self.attributes, corrs)}
        return self.gamma * _warm(step, self.warmup) * penalty, metrics


@LOSS_HOOKS.register("dir_debias/poe")
class ProductOfExperts(LossHook):
    replaces_bt = True

    def __init__(self, config):
        super().__init__(config)
        self.attributes = parse_attributes(config.dir)
        self.inner_steps = int(config.dir.inner_steps)
        self.optimizer = optax.adam(float(config.dir.poe_lr))

    def init(self, rng, d_model):
        beta = jnp.zeros((len(self.attributes),), jnp.float32)
        return {"beta": beta, "opt": self.optimizer.init(beta)}

    def bias_logit(self, beta, batch):
        return sum(beta[m] * a.signed(batch) for m, (a, _) in enumerate(self.attributes))

    def update(self, aux, features, batch, rng, step):
        diff = features["r_chosen"] - features["r_rejected"]

        def expert_loss(beta):
            return bradley_terry_loss(diff + self.bias_logit(beta, batch), jnp.zeros_like(diff), weight=batch["weight"])

        def inner(carry, _):
            beta, opt = carry
            loss, grads = jax.value_and_grad(expert_loss)(beta)
            updates, opt = self.optimizer.update(grads, opt, beta)
            return (optax.apply_updates(beta, updates), opt), loss

        (beta, opt), _ = jax.lax.scan(inner, (aux["beta"], aux["opt"]), None, length=self.inner_steps)
        return {"beta": beta, "opt": opt}, {f"poe/beta_{a.name}": beta[m] for m, (a, _) in enumerate(self.attributes)}

    def loss(self, aux, features, batch, step):
        logit = features["r_chosen"] - features["r_rejected"] + self.bias_logit(aux["beta"], batch)
        return bradley_terry_loss(logit, jnp.zeros_like(logit), weight=batch["weight"]), {}

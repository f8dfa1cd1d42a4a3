"""CLIPO: a group-level InfoNCE among correct rollouts, turned into a clamped reward bonus (clipo.md, A.2-A.4).

Per RL step, with h [N, d] the rollouts' mean-pooled final normed hidden states (constants: no gradient reaches
the policy), correctness c [N] and groups of G consecutive rows:

    z = l2norm(h W^T)                 W [k, d]: the projection head, trained by its own AdamW
    S_ij = z_i . z_j / tau            within a group
    anchor i is valid when c_i = 1, some other j in its group has c_j = 1 and some j has c_j = 0
    L_i = -S_{i j*} + logsumexp_{a in group, a != i} S_ia      j* ~ uniform over the other correct rollouts
    bonus_i = max(c0 - lambda * c_i * L_i, clamp)               (L_i = 0 for anchors that are not valid)
    R'_i = R_i + bonus_i                                        before the advantage estimator

The head takes one AdamW step per RL step on the mean L over valid anchors, after the bonus is computed.
Modes: "trained" (CLIPO), "fixed" (the head frozen at its random init: CLIPO-fixed), "shuffled" (the trained
head's bonuses permuted among the correct rollouts of each group: CLIPO-shuffled), "off" (nothing: the base
algorithm). The first `warmup_steps` RL steps train the head only (the policy is held still).
"""
from __future__ import annotations

import functools
import os

import jax
import jax.numpy as jnp
import numpy as np
import optax

from projects.clipo.config import MODES, clipo_config
from shared.rl.learner import RLHook

HEAD_FILE = "clipo_head.npz"


def init_head(key, d_model: int, proj_dim: int) -> jax.Array:
    """W [proj_dim, d_model] ~ U(-1/sqrt(d), 1/sqrt(d)), torch.nn.Linear's default (bias-free) init."""
    bound = 1.0 / np.sqrt(d_model)
    return jax.random.uniform(key, (proj_dim, d_model), jnp.float32, -bound, bound)


def project(w, h):
    z = h @ w.T
    return z / jnp.maximum(jnp.linalg.norm(z, axis=-1, keepdims=True), 1e-12)


def group_masks(correct, group_size: int):
    """(positive [B,G,G], denominator [B,G,G], valid [B,G]) masks of the group-level InfoNCE."""
    c = jnp.asarray(correct, bool).reshape(-1, group_size)
    other = ~jnp.eye(group_size, dtype=bool)[None]
    positive = c[:, :, None] & c[:, None, :] & other
    has_negative = (~c).any(-1, keepdims=True)
    valid = c & positive.any(-1) & has_negative
    return positive, jnp.broadcast_to(other, positive.shape), valid


def infonce_per_anchor(w, h, correct, positive_index, group_size: int, tau: float):
    """(L [N], valid [N]): each anchor's InfoNCE loss with the positive positive_index[i] (an index within its
    group), 0 where the anchor is not valid."""
    z = project(w, h).reshape(-1, group_size, w.shape[0])
    s = jnp.einsum("bik,bjk->bij", z, z) / tau
    _, denominator, valid = group_masks(correct, group_size)
    lse = jax.nn.logsumexp(jnp.where(denominator, s, -jnp.inf), axis=-1)
    s_pos = jnp.take_along_axis(s, positive_index.reshape(-1, group_size, 1), axis=-1)[..., 0]
    loss = jnp.where(valid, lse - s_pos, 0.0)
    return loss.reshape(-1), valid.reshape(-1)


def head_loss(w, h, correct, positive_index, group_size: int, tau: float):
    """Mean InfoNCE over valid anchors (0 when there is none): the head's training objective."""
    loss, valid = infonce_per_anchor(w, h, correct, positive_index, group_size, tau)
    return loss.sum() / jnp.maximum(valid.sum(), 1)


def sample_positives(correct: np.ndarray, group_size: int, rng: np.random.Generator) -> np.ndarray:
    """int [N]: for each correct rollout, one other correct rollout of its group drawn uniformly (its index
    within the group); 0 where there is none (such anchors are not valid, so the index is unused)."""
    c = np.asarray(correct, bool).reshape(-1, group_size)
    out = np.zeros(c.shape, np.int32)
    for b, i in zip(*np.nonzero(c)):
        others = [j for j in np.flatnonzero(c[b]) if j != i]
        if others:
            out[b, i] = others[rng.integers(len(others))]
    return out.reshape(-1)


def contrastive_bonus(loss, correct, weight: float, clamp: float, offset: float = 0.0) -> np.ndarray:
    """max(offset - weight * c * L, clamp) per rollout (clipo.md A.2)."""
    c = np.asarray(correct, np.float32)
    return np.maximum(offset - weight * c * np.asarray(loss, np.float32), clamp).astype(np.float32)


def shuffle_within_groups(bonus: np.ndarray, correct: np.ndarray, group_size: int,
                          rng: np.random.Generator) -> np.ndarray:
    """The bonuses permuted among the correct rollouts of each group (the CLIPO-shuffled control)."""
    out = np.array(bonus, np.float32).reshape(-1, group_size)
    c = np.asarray(correct, bool).reshape(-1, group_size)
    for b in range(out.shape[0]):
        idx = np.flatnonzero(c[b])
        out[b, idx] = out[b, rng.permutation(idx)]
    return out.reshape(-1)


def pair_cosines(h: np.ndarray, correct: np.ndarray, group_size: int) -> dict:
    """Mean cosine of the raw pooled states over (correct, correct) and (correct, incorrect) pairs within groups
    ("clipo/pos_cos", "clipo/neg_cos"; absent when there is no such pair): how the policy's own representation
    separates correct from incorrect rollouts."""
    h = np.asarray(h, np.float64)
    u = (h / np.maximum(np.linalg.norm(h, axis=-1, keepdims=True), 1e-12)).reshape(-1, group_size, h.shape[-1])
    cos = np.einsum("bik,bjk->bij", u, u)
    c = np.asarray(correct, bool).reshape(-1, group_size)
    other = ~np.eye(group_size, dtype=bool)[None]
    pairs = {"clipo/pos_cos": c[:, :, None] & c[:, None, :] & other, "clipo/neg_cos": c[:, :, None] & ~c[:, None, :]}
    return {name: float(cos[mask].mean()) for name, mask in pairs.items() if mask.any()}


def clipo_options(config) -> dict:
    """config.clipo (see projects/clipo/config.py) with defaults for missing keys."""
    options = clipo_config().to_dict()
    if "clipo" in config:
        options.update(config.clipo.to_dict())
    return options


class ClipoHook(RLHook):
    """CLIPO as an RL hook: switched on by train.hooks = [..., "clipo/contrastive"] and config.clipo.mode."""

    def __init__(self, config):
        super().__init__(config)
        o = clipo_options(config)
        if o["mode"] not in MODES:
            raise ValueError(f"clipo.mode={o['mode']!r}: must be one of {', '.join(MODES)}")
        self.options = o
        self.mode = o["mode"]
        self.needs_hidden = self.mode != "off"
        self.group_size = int(config.rl.group_size)
        self.warmup_steps = int(o["warmup_steps"]) if self.mode != "off" else 0
        self.w = init_head(jax.random.fold_in(jax.random.key(int(config.seed)), 0xC11), int(config.model.d_model),
                           int(o["proj_dim"]))
        self.optimizer = optax.adamw(float(o["head_lr"]), b1=0.9, b2=0.999, eps=1e-8,
                                     weight_decay=float(o["head_weight_decay"]))
        self.opt_state = self.optimizer.init(self.w)
        self.step = 0  # RL step of the head's last update (checkpointed with it)
        self.in_rl_loop = False  # train.hooks also reach the SFT warm start's Trainer: save nothing there
        g, tau = self.group_size, float(o["tau"])
        self._losses = jax.jit(functools.partial(infonce_per_anchor, group_size=g, tau=tau))
        self._grad = jax.jit(jax.grad(functools.partial(head_loss, group_size=g, tau=tau)))
        self._apply = jax.jit(self._apply_update)

    def _apply_update(self, w, opt_state, grad):
        updates, opt_state = self.optimizer.update(grad, opt_state, w)
        return optax.apply_updates(w, updates), opt_state

    # ------------------------------------------------------------------ the RL-hook interface
    def freezes_policy(self, step: int) -> bool:
        return step <= self.warmup_steps

    def on_rewards(self, learner, step, scored, rng) -> dict:
        if self.mode == "off":
            return {}
        hidden = scored.rollout.hidden
        if hidden is None:
            raise ValueError("clipo/contrastive: the rollout has no pooled hidden states (Rollout.hidden)")
        correct = learner.correct(scored)
        bonus, metrics = self.bonus_and_update(hidden, correct, rng, step)
        scored.rewards += bonus
        return metrics

    def bonus_and_update(self, hidden, correct, rng: np.random.Generator, step: int) -> tuple[np.ndarray, dict]:
        """The reward bonus [N] from the current head, then one head step (unless fixed) and metrics."""
        o, g = self.options, self.group_size
        h = jnp.asarray(hidden, jnp.float32)
        c = jnp.asarray(correct, bool)
        positives = jnp.asarray(sample_positives(correct, g, rng))
        loss, valid = jax.device_get(self._losses(self.w, h, c, positives))
        bonus = contrastive_bonus(loss, correct, float(o["weight"]), float(o["clamp"]), float(o["offset"]))
        if self.mode == "shuffled":
            bonus = shuffle_within_groups(bonus, correct, g, rng)
        head_loss_value = float(loss.sum() / max(valid.sum(), 1))
        if self.mode != "fixed" and valid.any():
            grad = self._grad(self.w, h, c, positives)
            self.w, self.opt_state = self._apply(self.w, self.opt_state, grad)
        self.step = step
        correct = np.asarray(correct, bool)
        metrics = {"clipo/head_loss": head_loss_value, "clipo/valid_anchor_frac": float(valid.mean()),
                   "clipo/correct_frac": float(correct.mean()),
                   "clipo/bonus_mean_correct": float(bonus[correct].mean()) if correct.any() else 0.0,
                   "clipo/bonus_std_valid": float(bonus[valid].std()) if valid.any() else 0.0,
                   "clipo/clamped_frac_valid": float((bonus[valid] <= float(o["clamp"]) + 1e-6).mean())
                   if valid.any() else 0.0, **pair_cosines(hidden, correct, g)}
        return bonus, metrics

    # ------------------------------------------------------------------ checkpoints
    def on_save(self, trainer, step: int) -> None:
        if self.mode == "off" or not self.in_rl_loop or not trainer.is_main:
            return
        path = os.path.join(trainer.workdir, HEAD_FILE)
        leaves = jax.tree.leaves(jax.device_get(self.opt_state))
        with open(path + ".tmp", "wb") as f:
            np.savez(f, step=np.int64(step), w=np.asarray(self.w),
                     **{f"opt_{i}": np.asarray(x) for i, x in enumerate(leaves)})
        os.replace(path + ".tmp", path)

    def on_fit_start(self, learner) -> dict:
        """Restores the head saved with the checkpoint the learner resumes from."""
        self.in_rl_loop = True
        path = os.path.join(learner.workdir, HEAD_FILE)
        if self.mode == "off" or learner.start_step == 0 or not os.path.exists(path):
            return {}
        with np.load(path) as saved:
            if int(saved["step"]) != learner.start_step:
                print(f"[clipo] {path} is from step {int(saved['step'])}, the run resumes at "
                      f"{learner.start_step}; keeping it anyway", flush=True)
            self.w = jnp.asarray(saved["w"])
            treedef = jax.tree.structure(self.opt_state)
            count = treedef.num_leaves
            self.opt_state = jax.tree.unflatten(treedef, [jnp.asarray(saved[f"opt_{i}"]) for i in range(count)])
            self.step = int(saved["step"])
        print(f"[clipo] restored the projection head from {path} (step {self.step})", flush=True)
        return {}

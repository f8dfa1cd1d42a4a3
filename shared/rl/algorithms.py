"""Policy-optimization building blocks: advantages, ratios, clipped surrogates, KL estimators, aggregation.

Implements ../shared/papers/rl_base_algorithms.md (sections 1-3): PPO+GAE, GRPO, Dr. GRPO, the DAPO
pieces (clip-higher, token-mean, dynamic-sampling filter, overlong shaping), GSPO, REINFORCE++ (and its
group baseline), RLOO and GMPO. Every function is pure, static-shaped and mask-driven, so it jits.

Conventions (shared by the RL helpers):
  N = B*G rollouts stored group-contiguous (rollout i belongs to prompt i // G), so a group statistic is a
  reshape to [B, G]; completions right-padded to T; mask[N,T] is 1 on generated tokens (EOS included) and 0
  on padding (and on tool/observation tokens for agents). Outcome advantages are broadcast over the tokens
  of their response and are 0 where mask is 0.

Registries (shared.registry), chosen by config.rl.advantage / config.rl.policy_loss:
  ADVANTAGES     advantage estimators: a plain function fn(rewards, mask, group_size, rl_cfg, values=None)
                 -> A[N,T] (needs no critic), or an `Estimator(fn, needs_critic=True)` whose fn gets the critic's
                 values[N,T] and returns `Estimate(advantages, returns)` (returns: the critic's value targets).
                 Calling either gives A[N,T]; `Estimator.estimate` gives the Estimate. The learner builds a
                 critic role (shared/rl/roles.py, CRITICS[rl.critic]) only for an estimator that needs one.
                 rewards is R[N] (the outcome, written at the last valid token when token rewards are needed)
                 or r[N,T] token rewards (e.g. with a KL penalty folded in; outcome methods use R = sum_t r).
                 "grpo", "drgrpo", "rloo", "reinforce++", "reinforce++-baseline" (plain), "gae" (an Estimator
                 with a critic). Projects register either with shared.rl.roles.register_advantage.
  POLICY_LOSSES  fn(logp, logp_old, advantages, mask, rl_cfg, *, logp_ref=None, eps_low=None, eps_high=None)
                 -> (loss, metrics). "ppo-clip" (token ratio, aggregated with rl_cfg.loss_agg), "gspo"
                 (sequence ratio, seq-mean-token-mean), "gmpo" (geometric mean of token ratios).
                 With rl_cfg.kl_coef > 0 and not rl_cfg.kl_in_reward, logp_ref is required and
                 kl_coef * aggregate(kl) is added with the same aggregation as the policy term.
                 metrics["weight"] is the local denominator of that aggregation (tokens or sequences), so the
                 trainer's weighted-mean gradient accumulation (shared/train/step.py) reproduces the global
                 aggregation exactly, independent of the micro-batch size.

rl_cfg is an ml_collections.ConfigDict, a dict, any object with attributes, or None; missing knobs take the
defaults of `rl_config()`.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
import jax.numpy as jnp
import ml_collections

from shared.config.base import rl_config  # the knobs live in the config schema
from shared.registry import ADVANTAGES, POLICY_LOSSES

LOG_RATIO_CLIP = 20.0  # verl clamps log(pi/pi_old) to +-20 before exp
SEQ_LOG_RATIO_MAX = 10.0  # verl clamps the GSPO sequence log-ratio at 10
WHITEN_EPS = 1e-8
AGG_MODES = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")
KL_KINDS = ("k1", "k2", "k3", "k3+")
KL_ALIASES = {"kl": "k1", "mse": "k2", "low_var_kl": "k3", "low_var_kl+": "k3+"}  # verl's names




_DEFAULTS = rl_config()


def _knob(rl_cfg: Any, name: str) -> Any:
    default = _DEFAULTS[name]
    if rl_cfg is None:
        return default
    if isinstance(rl_cfg, dict):
        return rl_cfg.get(name, default)
    return getattr(rl_cfg, name, default)


def _f32(x) -> jax.Array:
    return jnp.asarray(x, jnp.float32)


def masked_mean(x: jax.Array, mask: jax.Array, axis=None) -> jax.Array:
    """sum(x*m)/sum(m), 0 where the mask is empty."""
    x, mask = _f32(x), _f32(mask)
    total = jnp.sum(mask, axis=axis)
    return jnp.sum(jnp.where(mask > 0, x * mask, 0.0), axis=axis) / jnp.where(total > 0, total, 1.0)


def _check_2d(name: str, x: jax.Array, shape: tuple) -> None:
    if x.shape != shape:
        raise ValueError(f"{name} has shape {x.shape}, expected {shape} (the mask's [N, T])")


# ----------------------------------------------------------------------------------------------------------
# 1.4 group statistics and outcome advantages


def _to_groups(x: jax.Array, group_size: int) -> jax.Array:
    group_size = int(group_size)
    if group_size < 1 or x.shape[0] % group_size:
        raise ValueError(f"group_size={group_size} must be >= 1 and divide the number of rollouts {x.shape[0]}")
    return x.reshape(x.shape[0] // group_size, group_size, *x.shape[1:])


def group_mean_std(rewards: jax.Array, ddof: int = 1) -> tuple[jax.Array, jax.Array]:
    """rewards[B, G] -> (mean[B], std[B]) over each group, std with `ddof` (unbiased by default, as verl/TRL/
    Tunix). A group of one sample gets mean 0 and std 1 (verl's special case: A = R, plain REINFORCE)."""
    rewards = _f32(rewards)
    if rewards.ndim != 2:
        raise ValueError(f"group_mean_std expects rewards [B, G], got shape {rewards.shape}")
    if rewards.shape[1] == 1:
        return jnp.zeros(rewards.shape[0], jnp.float32), jnp.ones(rewards.shape[0], jnp.float32)
    return jnp.mean(rewards, axis=1), jnp.std(rewards, axis=1, ddof=ddof)


def all_equal(grouped: jax.Array, where: jax.Array | None = None) -> jax.Array:
    """[B, 1] bool: whether each group's values (those `where` marks, when given) are all equal. max == min is the
    exact test: the float32 mean of equal values that are not dyadic (0.7, 1/3) is off by an ulp, and the std of
    such a group is ~6e-8 instead of 0, which divided by (std + 1e-6) would give every member |A| ~ 0.06."""
    if where is None:
        return jnp.max(grouped, axis=1, keepdims=True) == jnp.min(grouped, axis=1, keepdims=True)
    high = jnp.max(jnp.where(where, grouped, -jnp.inf), axis=1, keepdims=True)
    low = jnp.min(jnp.where(where, grouped, jnp.inf), axis=1, keepdims=True)
    return high <= low


def zero_if_all_equal(advantages: jax.Array, grouped: jax.Array, where: jax.Array | None = None) -> jax.Array:
    """advantages[B, G] with the groups whose values are all equal set to exactly 0 (no learning signal), whatever
    rounding the group statistics left; other groups unchanged (bit-for-bit). Groups of one sample keep theirs
    (verl's A = R)."""
    if grouped.shape[1] == 1:
        return advantages
    return jnp.where(all_equal(grouped, where), 0.0, advantages)


def adv_grpo(rewards: jax.Array, group_size: int, eps: float = 1e-6, scale_by_std: bool = True) -> jax.Array:
    """GRPO: A_i = (R_i - mean_g R) / (std_g R + eps); Dr. GRPO (scale_by_std=False): A_i = R_i - mean_g R.
    rewards[N] -> A[N]."""
    grouped = _to_groups(_f32(rewards), group_size)
    mean, std = group_mean_std(grouped)
    centered = grouped - mean[:, None]
    if scale_by_std:
        centered = centered / (std[:, None] + eps)
    return zero_if_all_equal(centered, grouped).reshape(-1)


def adv_rloo(rewards: jax.Array, group_size: int) -> jax.Array:
    """RLOO: A_i = R_i - mean_{j != i} R_j = G/(G-1) * (R_i - mean_g R). rewards[N] -> A[N].
    G = 1 leaves A = R (verl; Tunix would return zeros)."""
    grouped = _to_groups(_f32(rewards), group_size)
    g = grouped.shape[1]
    if g == 1:
        return grouped.reshape(-1)
    leave_one_out = (jnp.sum(grouped, axis=1, keepdims=True) - grouped) / (g - 1)
    return zero_if_all_equal(grouped - leave_one_out, grouped).reshape(-1)


def whiten(x: jax.Array, mask: jax.Array, shift_mean: bool = True, eps: float = WHITEN_EPS) -> jax.Array:
    """verl masked_whiten: (x - mean_m x) / sqrt(var_m x + eps) over all masked entries of the batch, with the
    unbiased (Bessel) variance as verl; shift_mean=False adds the mean back. Unmasked entries are left as the
    formula gives them (callers mask)."""
    x, mask = _f32(x), _f32(mask)
    count = jnp.sum(mask)
    mean = masked_mean(x, mask)
    var = masked_mean(jnp.square(x - mean), mask)
    var = var * jnp.where(count > 1, count / jnp.maximum(count - 1, 1.0), 1.0)
    out = (x - mean) * jax.lax.rsqrt(var + eps)
    if shift_mean:  # masked entries all equal: exactly 0 (the float32 mean of equal values can be an ulp off)
        masked = mask > 0
        same = jnp.max(jnp.where(masked, x, -jnp.inf)) <= jnp.min(jnp.where(masked, x, jnp.inf))
        return jnp.where(same, 0.0, out)
    return out + mean


def token_level_rewards(rewards: jax.Array, mask: jax.Array) -> jax.Array:
    """R[N] -> r[N,T] with R_i at the last masked position of row i (verl/SSP/MARCH layout); rows with an
    empty mask get no reward."""
    rewards, mask = _f32(rewards), _f32(mask)
    t = mask.shape[1]
    positions = jnp.arange(t)
    last = jnp.max(jnp.where(mask > 0, positions, -1), axis=1)  # -1 for an empty row
    return jnp.where(positions[None, :] == last[:, None], rewards[:, None], 0.0)


def as_token_rewards(rewards: jax.Array, mask: jax.Array) -> jax.Array:
    """Accepts R[N] (placed at the last valid token) or r[N,T] (returned as is)."""
    rewards = _f32(rewards)
    if rewards.ndim == 1:
        if rewards.shape[0] != mask.shape[0]:
            raise ValueError(f"rewards has {rewards.shape[0]} entries but mask has {mask.shape[0]} rows")
        return token_level_rewards(rewards, mask)
    _check_2d("rewards", rewards, mask.shape)
    return rewards


def sequence_rewards(rewards: jax.Array, mask: jax.Array) -> jax.Array:
    """R[N] as is, or r[N,T] summed over tokens (verl: outcome estimators read token_level_rewards.sum(-1))."""
    rewards = _f32(rewards)
    if rewards.ndim == 2:
        _check_2d("rewards", rewards, mask.shape)
        return jnp.sum(rewards, axis=1)
    if rewards.shape != (mask.shape[0],):
        raise ValueError(f"rewards has shape {rewards.shape}, expected [{mask.shape[0]}] or the mask's {mask.shape}")
    return rewards


def discounted_returns(token_rewards: jax.Array, mask: jax.Array, gamma: float) -> jax.Array:
    """G[i,t] = sum_{k>=t, mask} gamma^(#masked steps) r[i,k] (REINFORCE++). Masked-out positions are transparent
    (the return is carried through them undiscounted, as GAE does), so the return resets after EOS and tool
    tokens inside a response do not cut credit. Returns G[N,T] (0 on trailing padding)."""
    r, mask = _f32(token_rewards), _f32(mask)

    def step(running, xs):
        r_t, m_t = xs
        running = jnp.where(m_t > 0, r_t + gamma * running, running)
        return running, running

    _, returns = jax.lax.scan(step, jnp.zeros(r.shape[0], jnp.float32), (r.T, mask.T), reverse=True)
    return returns.T * mask


def adv_rfpp(token_rewards: jax.Array, mask: jax.Array, gamma: float = 1.0) -> jax.Array:
    """REINFORCE++: A = masked_whiten(discounted returns) over the whole batch (no groups). -> A[N,T]."""
    mask = _f32(mask)
    return whiten(discounted_returns(token_rewards, mask, gamma), mask) * mask


def adv_rfpp_baseline(rewards: jax.Array, mask: jax.Array, group_size: int) -> jax.Array:
    """REINFORCE++-baseline: A_i = R_i - mean_g R broadcast to tokens, then global masked_whiten. -> A[N,T]."""
    mask = _f32(mask)
    centered = adv_grpo(rewards, group_size, scale_by_std=False)
    return whiten(centered[:, None] * mask, mask) * mask


def adv_gae(token_rewards: jax.Array, values: jax.Array, mask: jax.Array, gamma: float = 1.0, lam: float = 1.0,
            whiten_advantages: bool = True) -> tuple[jax.Array, jax.Array]:
    """GAE as verl iterates it, t = T-1 .. 0:
        delta_t = r_t + gamma*V_next - V_t;  A_t = delta_t + gamma*lam*A_next;  returns_t = A_t + V_t
    where V_next/A_next come from the next *masked* position (masked-out tokens are transparent). A is then
    whitened over the masked tokens (if whiten_advantages). -> (A[N,T], returns[N,T]), both 0 off the mask."""
    r, v, mask = _f32(token_rewards), _f32(values), _f32(mask)
    _check_2d("values", v, mask.shape)

    def step(carry, xs):
        next_value, next_adv = carry
        r_t, v_t, m_t = xs
        delta = r_t + gamma * next_value - v_t
        adv = delta + gamma * lam * next_adv
        on = m_t > 0
        next_value = jnp.where(on, v_t, next_value)
        next_adv = jnp.where(on, adv, next_adv)
        return (next_value, next_adv), next_adv

    zeros = jnp.zeros(r.shape[0], jnp.float32)
    _, adv = jax.lax.scan(step, (zeros, zeros), (r.T, v.T, mask.T), reverse=True)
    adv = adv.T
    returns = (adv + v) * mask
    if whiten_advantages:
        adv = whiten(adv, mask)
    return adv * mask, returns


# ----------------------------------------------------------------------------------------------------------
# 1.2 KL estimators and 2.4 DAPO pieces


def kl(logp: jax.Array, logp_ref: jax.Array, kind: str = "k3") -> jax.Array:
    """Per-token KL(pi || pi_ref) estimate on sampled tokens, delta = logp_ref - logp:
      k1  -delta                     (unbiased, can be negative)
      k2  delta^2 / 2
      k3  exp(delta) - delta - 1     (>= 0; delta clamped to +-20 and the value to [-10, 10] as verl)
      k3+ value of k3, gradient of k2 (straight-through, verl's "low_var_kl+")
    verl's names kl / mse / low_var_kl are accepted too."""
    kind = KL_ALIASES.get(kind, kind)
    if kind not in KL_KINDS:
        raise ValueError(f"unknown kl kind {kind!r}; known: {', '.join(KL_KINDS)} (or {', '.join(KL_ALIASES)})")
    delta = _f32(logp_ref) - _f32(logp)
    if kind == "k1":
        return -delta
    k2 = 0.5 * jnp.square(delta)
    if kind == "k2":
        return k2
    d = jnp.clip(delta, -LOG_RATIO_CLIP, LOG_RATIO_CLIP)
    k3 = jnp.clip(jnp.exp(d) - d - 1.0, -10.0, 10.0)
    if kind == "k3":
        return k3
    return jax.lax.stop_gradient(k3) + k2 - jax.lax.stop_gradient(k2)


def apply_kl_penalty(token_rewards: jax.Array, logp: jax.Array, logp_ref: jax.Array, mask: jax.Array,
                     kl_coef: float, kind: str = "k1") -> jax.Array:
    """KL in the reward (PPO, REINFORCE++): r[i,t] - kl_coef * kl[i,t] on masked tokens (verl apply_kl_penalty;
    its default estimator is k1). The KL is not differentiated."""
    penalty = jax.lax.stop_gradient(kl(logp, logp_ref, kind)) * _f32(mask)
    return _f32(token_rewards) - kl_coef * penalty


def overlong_penalty(lengths: jax.Array, max_len: int, cache_len: int, factor: float = 1.0) -> jax.Array:
    """DAPO overlong reward shaping, added to the task reward (verl DAPORewardManager):
        min(-(L - (max_len - cache_len)) / cache_len * factor, 0)
    i.e. 0 up to max_len - cache_len, then a linear ramp reaching -factor at max_len (and beyond it keeps
    falling, as verl). lengths[N] -> [N]."""
    if cache_len <= 0 or cache_len > max_len:
        raise ValueError(f"overlong_penalty: cache_len={cache_len} must be in (0, max_len={max_len}]")
    exceed = _f32(lengths) - (max_len - cache_len)
    return jnp.minimum(-exceed / cache_len * factor, 0.0)


def filter_informative_groups(rewards: jax.Array, group_size: int | None = None) -> jax.Array:
    """DAPO dynamic sampling: keep[B] is True for groups whose rewards are not all equal (std > 0), i.e. whose
    GRPO advantages are not all zero. rewards is [B, G], or [N] with group_size."""
    rewards = _f32(rewards)
    if rewards.ndim == 1:
        if group_size is None:
            raise ValueError("filter_informative_groups: rewards [N] needs group_size")
        rewards = _to_groups(rewards, group_size)
    # max > min is the exact form of std > 0 (no rounding from computing the std).
    return jnp.max(rewards, axis=1) > jnp.min(rewards, axis=1)


def mask_truncated_completions(mask: jax.Array, finished: jax.Array) -> jax.Array:
    """DAPO overlong filtering (TRL mask_truncated_completions): zero the loss mask of completions that did not
    finish (no EOS / stop string within T)."""
    return _f32(mask) * _f32(finished)[:, None]


# ----------------------------------------------------------------------------------------------------------
# 1.1 ratio and clipped surrogate, 1.3 aggregation


def ratio(logp: jax.Array, logp_old: jax.Array, mask: jax.Array, level: str = "token") -> jax.Array:
    """Importance ratio pi/pi_old.
    token:    rho[N,T] = exp(clip(logp - logp_old, -20, 20)), 1 off the mask.
    sequence: s[N,1]   = exp(min(mean_t over the mask of (logp - logp_old), 10))  (GSPO)."""
    log_ratio = jnp.where(_f32(mask) > 0, _f32(logp) - _f32(logp_old), 0.0)
    if level == "token":
        return jnp.exp(jnp.clip(log_ratio, -LOG_RATIO_CLIP, LOG_RATIO_CLIP))
    if level == "sequence":
        log_s = masked_mean(log_ratio, mask, axis=1)[:, None]
        return jnp.exp(jnp.minimum(log_s, SEQ_LOG_RATIO_MAX))
    raise ValueError(f"ratio: unknown level {level!r}; known: token, sequence")


def pg_clip(rho: jax.Array, advantages: jax.Array, eps_low=0.2, eps_high=0.2, dual_clip: float | None = None,
            mask: jax.Array | None = None) -> tuple[jax.Array, dict]:
    """Per-token PPO-clip loss  l = max(-rho*A, -clip(rho, 1-eps_low, 1+eps_high)*A); with dual clip c (> 1)
    l = min(l, -c*A) where A < 0. eps_low/eps_high are scalars or [N,T] tensors (per-token eps, e.g. ETR).
    rho may be [N,T] or [N,1] (sequence level). Returns (l[N,T], metrics) with the masked-token fractions
    clipfrac_high (A > 0, rho > 1+eps_high), clipfrac_low (A < 0, rho < 1-eps_low), clipfrac (their sum) and
    dual_clipfrac (A < 0, rho > c)."""
    rho, adv = _f32(rho), _f32(advantages)
    eps_low, eps_high = _f32(eps_low), _f32(eps_high)
    # The clipped branch of the max is active exactly on these tokens; selecting it with `where` gives the same
    # value as the max and an exact gradient (0 on the clipped side), with no tie at rho = 1.
    clipped_high = (adv > 0) & (rho > 1.0 + eps_high)
    clipped_low = (adv < 0) & (rho < 1.0 - eps_low)
    clipped_rho = jnp.clip(rho, 1.0 - eps_low, 1.0 + eps_high)
    loss = jnp.where(clipped_high | clipped_low, -clipped_rho * adv, -rho * adv)
    loss = jnp.broadcast_to(loss, jnp.broadcast_shapes(rho.shape, adv.shape))
    dual = jnp.zeros(loss.shape, bool)
    if dual_clip:
        if dual_clip <= 1.0:
            raise ValueError(f"dual_clip={dual_clip} must be > 1 (or 0/None for off)")
        dual = (adv < 0) & (loss > -dual_clip * adv)
        loss = jnp.where(dual, -dual_clip * adv, loss)
    m = jnp.ones(loss.shape, jnp.float32) if mask is None else _f32(mask)
    high = masked_mean(jnp.broadcast_to(clipped_high, loss.shape), m)
    low = masked_mean(jnp.broadcast_to(clipped_low, loss.shape), m)
    metrics = {"clipfrac": high + low, "clipfrac_high": high, "clipfrac_low": low,
               "dual_clipfrac": masked_mean(dual, m)}
    return loss, metrics


def _lengths(mask: jax.Array) -> jax.Array:
    return jnp.sum(_f32(mask), axis=1)


def aggregation_weight(mask: jax.Array, mode: str) -> jax.Array:
    """The local count `aggregate` divides by (before any L_max constant): masked tokens for token-mean, else
    the number of sequences with at least one masked token (N'). Sum it over micro-batches to get the global
    normalizer."""
    _check_mode(mode)
    mask = _f32(mask)
    if mode == "token-mean":
        return jnp.sum(mask)
    return jnp.sum(_lengths(mask) > 0).astype(jnp.float32)


def _check_mode(mode: str) -> None:
    if mode not in AGG_MODES:
        raise ValueError(f"unknown loss aggregation mode {mode!r} (rl.loss_agg); known: {', '.join(AGG_MODES)}")


def aggregate(loss: jax.Array, mask: jax.Array, mode: str = "token-mean", normalizer=None,
              max_len: int | None = None) -> jax.Array:
    """Reduce a per-token loss l[N,T] to a scalar (spec 1.3), N' = sequences with L_i > 0:
      token-mean               sum m*l / sum m
      seq-mean-token-mean      (1/N') sum_i (sum_t m*l) / L_i
      seq-mean-token-sum       (1/N') sum_i sum_t m*l
      seq-mean-token-sum-norm  sum m*l / (N' * L_max)     (Dr. GRPO constant; L_max = max_len or T)
    `normalizer` replaces the count (sum m, or N') by a global one when the trainer accumulates micro-batches;
    the L_max constant still applies."""
    _check_mode(mode)
    loss, mask = _f32(loss), _f32(mask)
    _check_2d("loss", loss, mask.shape)
    count = aggregation_weight(mask, mode) if normalizer is None else _f32(normalizer)
    count = jnp.where(count > 0, count, 1.0)
    token_loss = jnp.where(mask > 0, loss * mask, 0.0)
    if mode == "seq-mean-token-mean":
        lengths = _lengths(mask)
        per_seq = jnp.sum(token_loss, axis=1) / jnp.where(lengths > 0, lengths, 1.0)
        return jnp.sum(per_seq) / count
    total = jnp.sum(token_loss)
    if mode == "seq-mean-token-sum-norm":
        return total / (count * (max_len or mask.shape[1]))
    return total / count


def value_loss(values: jax.Array, values_old: jax.Array, returns: jax.Array, mask: jax.Array,
               clip: float | None = 0.2, mode: str = "token-mean", normalizer=None,
               max_len: int | None = None) -> jax.Array:
    """PPO value loss 1/2 * agg(max((V - ret)^2, (clip(V, V_old - c, V_old + c) - ret)^2)); clip=None: unclipped."""
    v, ret = _f32(values), _f32(returns)
    loss = jnp.square(v - ret)
    if clip is not None:
        v_clipped = jnp.clip(v, _f32(values_old) - clip, _f32(values_old) + clip)
        loss = jnp.maximum(loss, jnp.square(v_clipped - ret))
    return 0.5 * aggregate(loss, mask, mode, normalizer, max_len)


def token_entropy(logits: jax.Array) -> jax.Array:
    """Entropy of softmax(logits) per position, float32: logits[..., V] -> [...]."""
    logits = _f32(logits)
    log_probs = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.sum(jnp.exp(log_probs) * log_probs, axis=-1)


def entropy_from_logits(logits: jax.Array, mask: jax.Array) -> jax.Array:
    """Masked token mean of the policy entropy (nats), for logging: logits[N,T,V], mask[N,T] -> scalar."""
    return masked_mean(token_entropy(logits), mask)


# ----------------------------------------------------------------------------------------------------------
# Registries: advantages


@dataclasses.dataclass(frozen=True)
class Estimate:
    """What an advantage estimator gives: A[N,T], and for an estimator with a critic the value targets[N,T]."""
    advantages: jax.Array
    returns: jax.Array | None = None


@dataclasses.dataclass(frozen=True)
class Estimator:
    """An ADVANTAGES entry that says what it needs. fn(rewards, mask, group_size, rl_cfg, values=None) returns
    A[N,T] or an Estimate; needs_critic: the learner builds a critic role and passes its values[N,T] (and
    trains it on Estimate.returns). Called like a plain entry, it returns A[N,T]."""
    fn: Callable[..., Any]
    needs_critic: bool = False

    def estimate(self, rewards, mask, group_size, rl_cfg=None, values=None) -> Estimate:
        if self.needs_critic and values is None:
            raise ValueError(f"advantage estimator {getattr(self.fn, '__name__', self.fn)!r} needs values[N,T] "
                             "from a critic")
        out = self.fn(rewards, mask, group_size, rl_cfg) if values is None else \
            self.fn(rewards, mask, group_size, rl_cfg, values=values)
        return out if isinstance(out, Estimate) else Estimate(out)

    def __call__(self, rewards, mask, group_size, rl_cfg=None, values=None) -> jax.Array:
        return self.estimate(rewards, mask, group_size, rl_cfg, values).advantages


def _broadcast(adv: jax.Array, mask: jax.Array) -> jax.Array:
    return adv[:, None] * _f32(mask)


@ADVANTAGES.register("grpo")
def grpo_advantages(rewards, mask, group_size, rl_cfg=None, values=None):
    """GRPO: group-normalised outcome (std-scaled unless rl.scale_by_std is False), broadcast over tokens."""
    del values
    r = sequence_rewards(rewards, mask)
    return _broadcast(adv_grpo(r, group_size, _knob(rl_cfg, "adv_eps"), _knob(rl_cfg, "scale_by_std")), mask)


@ADVANTAGES.register("drgrpo")
def drgrpo_advantages(rewards, mask, group_size, rl_cfg=None, values=None):
    """Dr. GRPO: R_i - mean_g R (never std-scaled), broadcast over tokens."""
    del rl_cfg, values
    return _broadcast(adv_grpo(sequence_rewards(rewards, mask), group_size, scale_by_std=False), mask)


@ADVANTAGES.register("rloo")
def rloo_advantages(rewards, mask, group_size, rl_cfg=None, values=None):
    """RLOO: leave-one-out baseline, broadcast over tokens."""
    del rl_cfg, values
    return _broadcast(adv_rloo(sequence_rewards(rewards, mask), group_size), mask)


@ADVANTAGES.register("reinforce++")
def reinforce_pp_advantages(rewards, mask, group_size, rl_cfg=None, values=None):
    """REINFORCE++: whitened discounted token returns over the whole batch (no groups: works with G = 1)."""
    del group_size, values
    return adv_rfpp(as_token_rewards(rewards, mask), mask, _knob(rl_cfg, "gamma"))


@ADVANTAGES.register("reinforce++-baseline")
def reinforce_pp_baseline_advantages(rewards, mask, group_size, rl_cfg=None, values=None):
    """REINFORCE++-baseline: group-mean baseline, then global whitening."""
    del rl_cfg, values
    return adv_rfpp_baseline(sequence_rewards(rewards, mask), mask, group_size)


def gae_estimate(rewards, mask, group_size, rl_cfg=None, values=None) -> Estimate:
    """PPO's GAE with a critic: Estimate(A, returns), the returns being the critic's value targets."""
    del group_size
    if values is None:
        raise ValueError("advantage 'gae' needs values[N,T] from a critic (rl.advantage='gae')")
    adv, returns = adv_gae(as_token_rewards(rewards, mask), values, mask, _knob(rl_cfg, "gamma"),
                           _knob(rl_cfg, "lam"), _knob(rl_cfg, "whiten_advantages"))
    return Estimate(adv, returns)


ADVANTAGES.register("gae", Estimator(gae_estimate, needs_critic=True))


# ----------------------------------------------------------------------------------------------------------
# Registries: policy losses


def _ratio_metrics(logp, logp_old, rho, mask) -> dict:
    mask = _f32(mask)
    rho = jnp.broadcast_to(_f32(rho), mask.shape)
    return {"ppo_kl": masked_mean(_f32(logp_old) - _f32(logp), mask),
            "ratio_mean": masked_mean(rho, mask),
            "ratio_max": jnp.max(jnp.where(mask > 0, rho, 0.0))}


def _finish(pg_loss, metrics, logp, logp_ref, mask, rl_cfg, mode, max_len):
    """Adds the KL-in-loss term (same aggregation as the policy term) and the bookkeeping metrics."""
    loss = pg_loss
    metrics = dict(metrics, pg_loss=pg_loss)
    kl_coef = _knob(rl_cfg, "kl_coef")
    if kl_coef and not _knob(rl_cfg, "kl_in_reward"):
        if logp_ref is None:
            raise ValueError("rl.kl_coef > 0 with rl.kl_in_reward=False: the policy loss needs logp_ref")
        kl_loss = aggregate(kl(logp, logp_ref, _knob(rl_cfg, "kl_kind")), mask, mode, max_len=max_len)
        loss = loss + kl_coef * kl_loss
        metrics["kl_loss"] = kl_loss
    metrics["loss"] = loss
    metrics["weight"] = aggregation_weight(mask, mode)
    return loss, {k: _f32(v) for k, v in metrics.items()}


def _eps(rl_cfg, eps_low, eps_high):
    return (_knob(rl_cfg, "eps_low") if eps_low is None else eps_low,
            _knob(rl_cfg, "eps_high") if eps_high is None else eps_high)


@POLICY_LOSSES.register("ppo-clip")
def ppo_clip_loss(logp, logp_old, advantages, mask, rl_cfg=None, *, logp_ref=None, eps_low=None, eps_high=None):
    """Token-level PPO-clip (GRPO, Dr. GRPO, DAPO, RLOO, REINFORCE++, PPO): pg_clip on the token ratio, aggregated
    with rl.loss_agg; clip-higher via eps_low/eps_high (scalars or [N,T] overrides), rl.dual_clip optional."""
    mask = _f32(mask)
    for name, x in (("logp", logp), ("logp_old", logp_old), ("advantages", advantages)):
        _check_2d(name, jnp.asarray(x), mask.shape)
    eps_low, eps_high = _eps(rl_cfg, eps_low, eps_high)
    rho = ratio(logp, logp_old, mask, "token")
    per_token, metrics = pg_clip(rho, advantages, eps_low, eps_high, _knob(rl_cfg, "dual_clip") or None, mask)
    mode, max_len = _knob(rl_cfg, "loss_agg"), _knob(rl_cfg, "loss_agg_max_len") or None
    pg_loss = aggregate(per_token, mask, mode, max_len=max_len)
    metrics.update(_ratio_metrics(logp, logp_old, rho, mask))
    return _finish(pg_loss, metrics, logp, logp_ref, mask, rl_cfg, mode, max_len)


@POLICY_LOSSES.register("gspo")
def gspo_loss(logp, logp_old, advantages, mask, rl_cfg=None, *, logp_ref=None, eps_low=None, eps_high=None):
    """GSPO in its token form (verl loss_mode=gspo, Tunix gspo-token): s[i,t] = sg(s_i) * exp(logp - sg(logp))
    with s_i the length-normalised sequence ratio, clipped like PPO, aggregated seq-mean-token-mean (always,
    as verl forces). Equals mean_i -min(s_i A_i, clip(s_i) A_i) in value and gradient for per-sequence A, and
    also accepts token-level A."""
    mask = _f32(mask)
    for name, x in (("logp", logp), ("logp_old", logp_old), ("advantages", advantages)):
        _check_2d(name, jnp.asarray(x), mask.shape)
    logp32 = _f32(logp)
    log_ratio = jnp.where(mask > 0, logp32 - _f32(logp_old), 0.0)
    log_s = masked_mean(log_ratio, mask, axis=1)[:, None]
    log_rho = jax.lax.stop_gradient(log_s) + logp32 - jax.lax.stop_gradient(logp32)
    rho = jnp.exp(jnp.minimum(log_rho, SEQ_LOG_RATIO_MAX))
    eps_low, eps_high = _eps(rl_cfg, eps_low, eps_high)
    per_token, metrics = pg_clip(rho, advantages, eps_low, eps_high, None, mask)
    mode = "seq-mean-token-mean"
    pg_loss = aggregate(per_token, mask, mode)
    metrics.update(_ratio_metrics(logp, logp_old, rho, mask))
    return _finish(pg_loss, metrics, logp, logp_ref, mask, rl_cfg, mode, None)


@POLICY_LOSSES.register("gmpo")
def gmpo_loss(logp, logp_old, advantages, mask, rl_cfg=None, *, logp_ref=None, eps_low=None, eps_high=None):
    """GMPO (verl loss_mode=geo_mean): per token clip log rho to <= eps_high where A > 0 and >= -eps_low where
    A < 0 (log space), s_i = exp(mean_t clipped log rho), l_i = -A_i * s_i with A_i the token mean of A, mean over
    sequences. eps are log-ratio bounds here (GMPO paper: 0.4)."""
    mask = _f32(mask)
    for name, x in (("logp", logp), ("logp_old", logp_old), ("advantages", advantages)):
        _check_2d(name, jnp.asarray(x), mask.shape)
    adv = _f32(advantages)
    eps_low, eps_high = _eps(rl_cfg, eps_low, eps_high)
    log_ratio = jnp.clip(jnp.where(mask > 0, _f32(logp) - _f32(logp_old), 0.0), -LOG_RATIO_CLIP, LOG_RATIO_CLIP)
    clipped_high = (adv > 0) & (log_ratio > eps_high)
    clipped_low = (adv < 0) & (log_ratio < -eps_low)
    log_ratio_c = jnp.where(clipped_high, eps_high, jnp.where(clipped_low, -eps_low, log_ratio))
    s = jnp.exp(masked_mean(log_ratio_c, mask, axis=1))
    seq_adv = masked_mean(adv, mask, axis=1)
    per_token = jnp.broadcast_to((-seq_adv * s)[:, None], mask.shape)
    mode = "seq-mean-token-mean"
    pg_loss = aggregate(per_token, mask, mode)
    high, low = masked_mean(clipped_high, mask), masked_mean(clipped_low, mask)
    metrics = {"clipfrac": high + low, "clipfrac_high": high, "clipfrac_low": low}
    metrics.update(_ratio_metrics(logp, logp_old, s[:, None], mask))
    return _finish(pg_loss, metrics, logp, logp_ref, mask, rl_cfg, mode, None)

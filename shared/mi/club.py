"""CLUB: the contrastive log-ratio upper bound of I(X; Y) (Cheng et al., ICML 2020).

    I(X; Y) <= I_CLUB = E_p(x,y)[log q(y|x)] - E_p(x) E_p(y)[log q(y|x)]

with q(y|x) a variational conditional fitted by maximum likelihood (`*_nll`) on the same samples. It is an
upper bound when q is close to p(y|x) (exactly: when KL(p(x,y) || q(x,y)) <= KL(p(x)p(y) || q(x,y))); with a poor q
it can be anything, including negative (DIR does not clip it).

Categorical (the DIR paper's bias term, `CLUBForCategorical` of github.com/Qwen-Applications/DIR):
  log_q [N, K] = log_softmax(net(z)), labels a [N]:
  I = 1/N sum_i log_q[i, a_i] - 1/N^2 sum_{i,j} log_q[i, a_j]
    = 1/N sum_i log_q[i, a_i] - 1/N sum_i sum_k pi_k log_q[i, k],   pi_k = label frequency in the batch,
  so the negative term costs O(N*K) instead of the reference code's O(N^2*K) (`categorical_club_pairwise`).
Gaussian (the original CLUB): q(y|x) = N(mu(x), diag exp(logvar(x))); the log(2 pi) and log-variance terms cancel in
the difference, as in the reference implementation.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp


def _weights(n: int, weight):
    return jnp.ones((n,), jnp.float32) if weight is None else weight.astype(jnp.float32)


def categorical_club(log_q: jax.Array, labels: jax.Array, weight: jax.Array | None = None) -> jax.Array:
    """O(N*K) categorical CLUB estimate from log q(k | z_i) [N, K] and labels [N] (int). `weight` [N] (0/1)
    leaves padding rows out of both terms and out of the label frequencies."""
    n, k = log_q.shape
    w = _weights(n, weight)
    total = jnp.maximum(w.sum(), 1.0)
    one_hot = jax.nn.one_hot(labels, k, dtype=jnp.float32)
    positive = (w * (log_q * one_hot).sum(-1)).sum() / total
    freq = (w[:, None] * one_hot).sum(0) / total  # pi_k
    negative = (w * (log_q @ freq)).sum() / total
    return positive - negative


def categorical_club_pairwise(log_q: jax.Array, labels: jax.Array) -> jax.Array:
    """The reference code's O(N^2) form: mean_i log_q[i, a_i] - mean_{i,j} log_q[i, a_j] (tests and audits)."""
    positive = jnp.take_along_axis(log_q, labels[:, None], axis=1)[:, 0].mean()
    negative = log_q[:, labels].mean()  # [N, N]: row i, column j -> log q(a_j | z_i)
    return positive - negative


def categorical_nll(log_q: jax.Array, labels: jax.Array, weight: jax.Array | None = None) -> jax.Array:
    """q's learning loss: -mean_i log q(a_i | z_i)."""
    n = log_q.shape[0]
    w = _weights(n, weight)
    picked = jnp.take_along_axis(log_q, labels[:, None].astype(jnp.int32), axis=1)[:, 0]
    return -(w * picked).sum() / jnp.maximum(w.sum(), 1.0)


def gaussian_log_likelihood(mu: jax.Array, logvar: jax.Array, y: jax.Array) -> jax.Array:
    """log N(y; mu, diag exp(logvar)) summed over the last axis, without the constant (it cancels in CLUB)."""
    return (-0.5 * (y - mu) ** 2 / jnp.exp(logvar) - 0.5 * logvar).sum(-1)


def gaussian_nll(mu: jax.Array, logvar: jax.Array, y: jax.Array) -> jax.Array:
    """q's learning loss: -mean_i log q(y_i | x_i) (up to the constant)."""
    return -gaussian_log_likelihood(mu, logvar, y).mean()


def gaussian_club(mu: jax.Array, logvar: jax.Array, y: jax.Array) -> jax.Array:
    """Exact Gaussian CLUB over all N^2 (x_i, y_j) pairs: mu, logvar [N, D] = q's parameters at x_i, y [N, D]."""
    mu, logvar, y = jnp.asarray(mu), jnp.asarray(logvar), jnp.asarray(y)
    positive = (-0.5 * (y - mu) ** 2 / jnp.exp(logvar)).sum(-1)                       # [N]
    # E_j (y_j - mu_i)^2 = (mean_j y_j - mu_i)^2 + var_j(y_j): O(N*D), identical to the N^2 average.
    y_mean, y_var = y.mean(0), y.var(0)
    negative = (-0.5 * ((y_mean[None] - mu) ** 2 + y_var[None]) / jnp.exp(logvar)).sum(-1)
    return (positive - negative).mean()


def gaussian_club_sampled(mu: jax.Array, logvar: jax.Array, y: jax.Array, rng: jax.Array) -> jax.Array:
    """CLUB-S: the negative term from one random y_{pi(i)} per x_i (unbiased, O(N*D))."""
    mu, logvar, y = jnp.asarray(mu), jnp.asarray(logvar), jnp.asarray(y)
    perm = jax.random.permutation(rng, y.shape[0])
    positive = (-0.5 * (y - mu) ** 2 / jnp.exp(logvar)).sum(-1)
    negative = (-0.5 * (y[perm] - mu) ** 2 / jnp.exp(logvar)).sum(-1)
    return (positive - negative).mean()

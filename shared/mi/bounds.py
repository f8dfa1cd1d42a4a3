"""Lower bounds on I(X; Y) from a critic's score matrix `scores[i, j] = T(x_i, y_j)` over N samples of p(x, y)
(the diagonal holds the joint samples; off-diagonal pairs stand in for p(x)p(y)).

    InfoNCE (van den Oord et al. 2018):  mean_i [T_ii - logsumexp_j T_ij] + log N      (<= log N)
    MINE / Donsker-Varadhan (Belghazi et al. 2018):  mean_i T_ii - log mean_{i != j} exp T_ij
    NWJ (Nguyen, Wainwright, Jordan 2010):  mean_i T_ii - mean_{i != j} exp(T_ij - 1)
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp


def infonce_lower_bound(scores: jax.Array) -> jax.Array:
    n = scores.shape[0]
    return (jnp.diag(scores) - jax.nn.logsumexp(scores, axis=1)).mean() + math.log(n)


def _off_diagonal(scores: jax.Array) -> jax.Array:
    n = scores.shape[0]
    return jnp.where(jnp.eye(n, dtype=bool), -jnp.inf, scores)


def mine_lower_bound(scores: jax.Array) -> jax.Array:
    n = scores.shape[0]
    log_mean_exp = jax.nn.logsumexp(_off_diagonal(scores)) - math.log(n * (n - 1))
    return jnp.diag(scores).mean() - log_mean_exp


def nwj_lower_bound(scores: jax.Array) -> jax.Array:
    n = scores.shape[0]
    log_mean_exp = jax.nn.logsumexp(_off_diagonal(scores) - 1.0) - math.log(n * (n - 1))
    return jnp.diag(scores).mean() - jnp.exp(log_mean_exp)

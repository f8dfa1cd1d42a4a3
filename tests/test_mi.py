"""shared.mi: CLUB (categorical and Gaussian) against closed forms and brute-force numpy, the InfoNCE / MINE /
NWJ bounds with the optimal critic against the true MI of correlated Gaussians, and the held-out probes."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from shared.mi import (categorical_club, categorical_club_pairwise, categorical_nll, estimate_lower_bound,
                       fit_club, gaussian_club, gaussian_club_sampled, gaussian_nll, infonce_lower_bound,
                       mine_lower_bound, nwj_lower_bound, probe_accuracy)


def correlated_gaussians(n, d, rho, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d))
    y = rho * x + math.sqrt(1 - rho ** 2) * rng.standard_normal((n, d))
    return x.astype(np.float32), y.astype(np.float32)


def test_categorical_club_linear_form_equals_the_reference_pairwise_form_and_numpy():
    rng = np.random.default_rng(0)
    log_q = jax.nn.log_softmax(jnp.asarray(rng.standard_normal((12, 3)), jnp.float32))
    labels = jnp.asarray(rng.integers(0, 3, 12))
    lq, a = np.asarray(log_q, np.float64), np.asarray(labels)
    reference = np.mean(lq[np.arange(12), a]) - np.mean([lq[i, a[j]] for i in range(12) for j in range(12)])
    assert float(categorical_club(log_q, labels)) == pytest.approx(reference, abs=1e-5)
    assert float(categorical_club_pairwise(log_q, labels)) == pytest.approx(reference, abs=1e-5)
    weight = jnp.asarray([1.0] * 8 + [0.0] * 4)  # padding rows drop out of both terms and of the frequencies
    assert float(categorical_club(log_q, labels, weight)) == pytest.approx(
        float(categorical_club_pairwise(log_q[:8], labels[:8])), abs=1e-5)
    assert float(categorical_nll(log_q, labels)) == pytest.approx(-np.mean(lq[np.arange(12), a]), abs=1e-5)


def test_categorical_club_with_the_true_posterior_matches_its_closed_form_and_bounds_the_mi():
    # a ~ Bernoulli(1/2), z | a ~ N(+-mu, 1): q(a=1 | z) = sigmoid(2 mu z) is the true posterior.
    mu, n = 1.0, 200_000
    rng = np.random.default_rng(1)
    a = rng.integers(0, 2, n)
    z = (2 * a - 1) * mu + rng.standard_normal(n)
    logits = np.stack([-mu * z, mu * z], 1)  # log q up to a per-row constant removed by log_softmax
    estimate = float(categorical_club(jax.nn.log_softmax(jnp.asarray(logits, jnp.float32)), jnp.asarray(a)))
    grid = np.linspace(-9, 9, 20001)
    dz = grid[1] - grid[0]
    pdf = 0.5 * (np.exp(-(grid - mu) ** 2 / 2) + np.exp(-(grid + mu) ** 2 / 2)) / math.sqrt(2 * math.pi)
    p1 = 1 / (1 + np.exp(-2 * mu * grid))
    log_q1, log_q0 = -np.logaddexp(0, -2 * mu * grid), -np.logaddexp(0, 2 * mu * grid)
    closed = np.sum(pdf * (p1 * log_q1 + (1 - p1) * log_q0 - 0.5 * (log_q1 + log_q0))) * dz
    true_mi = math.log(2) - np.sum(pdf * -(p1 * np.log(p1) + (1 - p1) * np.log1p(-p1))) * dz
    assert estimate == pytest.approx(closed, abs=0.01)
    assert closed >= true_mi > 0.2


def test_gaussian_club_equals_brute_force_and_the_sampled_form_is_unbiased():
    rng = np.random.default_rng(2)
    mu, logvar, y = (rng.standard_normal((9, 3)).astype(np.float32) for _ in range(3))
    var = np.exp(logvar)
    positive = np.mean([-0.5 * np.sum((y[i] - mu[i]) ** 2 / var[i]) for i in range(9)])
    negative = np.mean([-0.5 * np.sum((y[j] - mu[i]) ** 2 / var[i]) for i in range(9) for j in range(9)])
    exact = float(gaussian_club(jnp.asarray(mu), jnp.asarray(logvar), jnp.asarray(y)))
    assert exact == pytest.approx(positive - negative, rel=1e-4)
    sampled = jax.vmap(lambda k: gaussian_club_sampled(mu, logvar, y, k))(jax.random.split(jax.random.key(0), 1000))
    assert float(sampled.mean()) == pytest.approx(exact, abs=0.1 * abs(exact) + 0.05)


def test_fitted_gaussian_club_matches_the_closed_form_and_upper_bounds_the_true_mi():
    # y = rho x + sqrt(1 - rho^2) eps in d dims: I = -d/2 log(1 - rho^2); CLUB with q = p(y|x) is d rho^2/(1-rho^2).
    d, rho = 2, 0.5
    x, y = correlated_gaussians(4000, d, rho, seed=3)
    params = {"w": jnp.zeros((d, d)), "b": jnp.zeros(d), "v": jnp.zeros((d, d)), "c": jnp.zeros(d)}

    def q(p):
        return x @ p["w"] + p["b"], x @ p["v"] + p["c"]

    optimizer = optax.adam(0.05)
    state = optimizer.init(params)

    @jax.jit
    def step(p, s):
        grads = jax.grad(lambda p: gaussian_nll(*q(p), y))(p)
        updates, s = optimizer.update(grads, s, p)
        return optax.apply_updates(p, updates), s

    for _ in range(400):
        params, state = step(params, state)
    closed_club, true_mi = d * rho ** 2 / (1 - rho ** 2), -d / 2 * math.log(1 - rho ** 2)
    estimate = float(gaussian_club(*q(params), jnp.asarray(y)))
    assert estimate == pytest.approx(closed_club, abs=0.06)
    assert estimate > true_mi + 0.2


def test_lower_bounds_with_the_optimal_critic_approach_the_true_mi():
    d, rho, n = 1, 0.8, 512
    x, y = correlated_gaussians(n, d, rho, seed=4)
    true_mi = -d / 2 * math.log(1 - rho ** 2)
    # T(x_i, y_j) = log p(y_j | x_i) / p(y_j): the density ratio the bounds are tight at.
    s2 = 1 - rho ** 2
    log_ratio = (-(y[None, :, 0] - rho * x[:, None, 0]) ** 2 / (2 * s2) - 0.5 * math.log(s2)
                 + y[None, :, 0] ** 2 / 2)
    scores = jnp.asarray(log_ratio, jnp.float32)
    assert float(mine_lower_bound(scores)) == pytest.approx(true_mi, abs=0.08)
    assert float(nwj_lower_bound(scores + 1.0)) == pytest.approx(true_mi, abs=0.08)
    infonce = float(infonce_lower_bound(scores))
    assert true_mi - 0.1 < infonce <= min(true_mi + 0.05, math.log(n))
    independent = jnp.zeros((n, n))
    assert float(infonce_lower_bound(independent)) == pytest.approx(0.0, abs=1e-5)
    assert float(mine_lower_bound(independent)) == pytest.approx(0.0, abs=1e-5)


def test_held_out_estimators_and_probes_see_dependence_and_independence():
    x, y = correlated_gaussians(1200, 1, 0.9, seed=5)
    true_mi = -0.5 * math.log(1 - 0.81)
    dependent = estimate_lower_bound(x[:600], y[:600], x[600:], y[600:], kind="infonce", steps=300, seed=0)
    assert 0.4 < dependent <= true_mi + 0.1
    rng = np.random.default_rng(6)
    noise = rng.standard_normal((1200, 1)).astype(np.float32)
    independent = estimate_lower_bound(x[:600], noise[:600], x[600:], noise[600:], kind="infonce", steps=300)
    assert abs(independent) < 0.1
    # labels decodable from z (a linear rule) vs labels independent of z
    z = rng.standard_normal((800, 8)).astype(np.float32)
    a = (z[:, 0] + 0.5 * z[:, 1] > 0).astype(np.int32)
    linear = probe_accuracy(z[:400], a[:400], z[400:], a[400:], 2, steps=200)
    assert linear["accuracy"] > 0.93
    shuffled = rng.permutation(a)
    chance = probe_accuracy(z[:400], shuffled[:400], z[400:], shuffled[400:], 2, steps=200)
    assert abs(chance["accuracy"] - chance["majority"]) < 0.1
    assert fit_club(z[:400], a[:400], z[400:], a[400:], 2, hidden=0, steps=200) > 0.3
    assert abs(fit_club(z[:400], shuffled[:400], z[400:], shuffled[400:], 2, hidden=0, steps=200)) < 0.05

"""CLIPO's contrastive bonus against a numpy re-implementation of clipo.md A.2: the InfoNCE value and its
gradient, which groups get a bonus, the clamp, the shuffled and fixed controls, the positive sampling."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from projects.clipo.config import add_clipo
from projects.clipo.contrastive import (ClipoHook, contrastive_bonus, head_loss, infonce_per_anchor,
                                        sample_positives, shuffle_within_groups)
from shared.config.base import base_config

G = 4
# Group 0 is mixed (3 correct, 1 incorrect); group 1 has one correct; group 2 all correct; group 3 none correct;
# group 4 mixed (2 correct).
CORRECT = np.array([1, 1, 0, 1,  1, 0, 0, 0,  1, 1, 1, 1,  0, 0, 0, 0,  0, 1, 1, 0], bool)
VALID = np.array([1, 1, 0, 1,  0, 0, 0, 0,  0, 0, 0, 0,  0, 0, 0, 0,  0, 1, 1, 0], bool)


def reference_losses(w, h, correct, positive, tau):
    """Per-anchor InfoNCE of clipo.md A.2, written out with loops in float64."""
    w, h = np.asarray(w, np.float64), np.asarray(h, np.float64)
    z = h @ w.T
    z /= np.linalg.norm(z, axis=1, keepdims=True)
    losses = np.zeros(len(h))
    for i in range(len(h)):
        group = range(i // G * G, i // G * G + G)
        others = [j for j in group if j != i]
        positives = [j for j in others if correct[j]]
        negatives = [j for j in others if not correct[j]]
        if not (correct[i] and positives and negatives):
            continue
        s = {j: z[i] @ z[j] / tau for j in others}
        j_star = i // G * G + positive[i]
        assert j_star in positives
        losses[i] = -s[j_star] + np.log(sum(np.exp(s[j]) for j in others))
    return losses


def setup(seed=0, d=8, k=5):
    rng = np.random.default_rng(seed)
    h = rng.normal(size=(len(CORRECT), d)).astype(np.float32)
    w = rng.normal(size=(k, d)).astype(np.float32) / np.sqrt(d)
    positive = sample_positives(CORRECT, G, rng)
    return w, h, positive


@pytest.mark.parametrize("tau", [0.05, 0.5])
def test_infonce_value_matches_the_reference(tau):
    w, h, positive = setup()
    loss, valid = infonce_per_anchor(jnp.asarray(w), jnp.asarray(h), jnp.asarray(CORRECT), jnp.asarray(positive),
                                     G, tau)
    np.testing.assert_array_equal(np.asarray(valid), VALID)
    np.testing.assert_allclose(np.asarray(loss), reference_losses(w, h, CORRECT, positive, tau), rtol=2e-4,
                               atol=2e-4)
    assert np.all(np.asarray(loss)[VALID] > 0) and np.all(np.asarray(loss)[~VALID] == 0)


def test_infonce_gradient_matches_finite_differences_of_the_reference():
    tau = 0.5
    w, h, positive = setup(seed=1)
    grad = np.asarray(jax.grad(head_loss)(jnp.asarray(w), jnp.asarray(h), jnp.asarray(CORRECT),
                                          jnp.asarray(positive), G, tau))

    def mean_loss(w64):
        return reference_losses(w64, h, CORRECT, positive, tau).sum() / VALID.sum()

    numeric = np.zeros_like(w, np.float64)
    eps = 1e-5
    for index in np.ndindex(*w.shape):
        up, down = w.astype(np.float64), w.astype(np.float64)
        up[index] += eps
        down[index] -= eps
        numeric[index] = (mean_loss(up) - mean_loss(down)) / (2 * eps)
    np.testing.assert_allclose(grad, numeric, rtol=2e-3, atol=2e-4)
    assert np.abs(numeric).max() > 1e-2  # the check is not vacuous


def test_bonus_is_zero_without_a_valid_anchor_and_clamped():
    # Hand values: -0.2 * L, clamped at -0.5; incorrect rollouts get the offset (0).
    bonus = contrastive_bonus([0.5, 3.0, 7.0, 10.0], [1, 1, 0, 1], weight=0.2, clamp=-0.5)
    np.testing.assert_allclose(bonus, [-0.1, -0.5, 0.0, -0.5], atol=1e-7)
    np.testing.assert_allclose(contrastive_bonus([2.0], [1], weight=0.2, clamp=-0.3, offset=0.1), [-0.3])

    w, h, positive = setup()
    loss, _ = infonce_per_anchor(jnp.asarray(w), jnp.asarray(h), jnp.asarray(CORRECT), jnp.asarray(positive), G, 0.05)
    bonus = contrastive_bonus(np.asarray(loss), CORRECT, 0.2, -0.5)
    assert np.all(bonus[~VALID] == 0)  # one correct, all correct, none correct, and every incorrect rollout
    assert np.all(bonus[VALID] < 0) and np.all(bonus >= -0.5)
    # Every correct rollout still outranks every incorrect one: R' in {0} U [0.5, 1].
    shaped = CORRECT + bonus
    assert shaped[CORRECT].min() >= 0.5 and np.all(shaped[~CORRECT] == 0)


def test_shuffled_control_permutes_bonuses_among_a_groups_correct_rollouts():
    rng = np.random.default_rng(0)
    bonus = np.array([-0.1, -0.2, 0.0, -0.3,  0, 0, 0, 0,  0, 0, 0, 0,  0, 0, 0, 0,  0, -0.4, -0.05, 0], np.float32)
    seen = set()
    for _ in range(30):
        out = shuffle_within_groups(bonus, CORRECT, G, rng)
        for b in range(len(CORRECT) // G):
            rows = slice(b * G, b * G + G)
            correct = CORRECT[rows]
            assert sorted(out[rows][correct]) == sorted(bonus[rows][correct])  # same multiset per group
            np.testing.assert_array_equal(out[rows][~correct], bonus[rows][~correct])
        seen.add(tuple(out[:4]))
    assert len(seen) == 6  # all 3! orders of group 0's correct rollouts occur


def test_positives_are_uniform_over_the_other_correct_rollouts():
    rng = np.random.default_rng(0)
    draws = np.array([sample_positives(CORRECT, G, rng) for _ in range(2000)])
    assert set(draws[:, 0]) == {1, 3} and set(draws[:, 1]) == {0, 3} and set(draws[:, 3]) == {0, 1}
    assert set(draws[:, 17]) == {2} and set(draws[:, 18]) == {1}
    assert abs((draws[:, 0] == 1).mean() - 0.5) < 0.05


def hook(mode, **overrides):
    c = base_config()
    c.rl.group_size = G
    c.model.d_model = 8
    add_clipo(c, mode=mode, proj_dim=5, **overrides)
    c.lock()
    return ClipoHook(c)


def test_the_head_takes_one_adamw_step_on_the_mean_loss_and_the_fixed_head_none():
    _, h, _ = setup()
    trained = hook("trained")
    w0 = np.asarray(trained.w)
    rng_state = np.random.default_rng(5)
    positive = sample_positives(CORRECT, G, np.random.default_rng(5))
    bonus, metrics = trained.bonus_and_update(h, CORRECT, rng_state, step=1)
    # The bonus comes from the head before its step.
    expected = reference_losses(w0, h, CORRECT, positive, 0.05)
    np.testing.assert_allclose(bonus, np.maximum(-0.2 * expected, -0.5), rtol=1e-3, atol=1e-4)
    assert metrics["clipo/head_loss"] == pytest.approx(expected.sum() / VALID.sum(), rel=1e-3)
    assert metrics["clipo/valid_anchor_frac"] == pytest.approx(VALID.mean())
    # One AdamW step: the first update is -lr * (sign(g) + wd * w) elementwise (bias-corrected moments).
    grad = np.asarray(jax.grad(head_loss)(jnp.asarray(w0), jnp.asarray(h), jnp.asarray(CORRECT),
                                          jnp.asarray(positive), G, 0.05))
    np.testing.assert_allclose(np.asarray(trained.w), w0 - 1e-3 * (np.sign(grad) + 0.01 * w0), atol=2e-6)

    fixed = hook("fixed")
    np.testing.assert_array_equal(np.asarray(fixed.w), w0)  # the same random init (seed)
    fixed.bonus_and_update(h, CORRECT, np.random.default_rng(5), step=1)
    np.testing.assert_array_equal(np.asarray(fixed.w), w0)

    nothing = hook("trained")
    bonus, _ = nothing.bonus_and_update(h, np.zeros_like(CORRECT), np.random.default_rng(0), step=1)
    assert np.all(bonus == 0)
    np.testing.assert_array_equal(np.asarray(nothing.w), w0)  # no valid anchor: no step


def test_warmup_holds_the_policy_only_in_clipo_modes():
    assert [hook("trained", warmup_steps=2).freezes_policy(s) for s in (1, 2, 3)] == [True, True, False]
    assert not hook("off", warmup_steps=2).freezes_policy(1)
    assert not hook("off").needs_hidden and hook("shuffled").needs_hidden

"""shared/rl/algorithms.py against hand-computed numbers and numpy references (rl_base_algorithms.md section 3).

The six spec tests come first (test_spec_*), then the extra checks of each building block.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from shared.registry import ADVANTAGES, POLICY_LOSSES, UnknownNameError
from shared.rl import algorithms as alg

N, T = 6, 5


def ragged_mask():
    """Right-padded responses of lengths 5, 3, 1, 4, 0 (an empty one), 2."""
    lengths = np.array([5, 3, 1, 4, 0, 2])
    return (np.arange(T)[None, :] < lengths[:, None]).astype(np.float32)


def random_logp(seed, shape=(N, T)):
    rng = np.random.default_rng(seed)
    return np.log(rng.uniform(0.05, 0.95, size=shape)).astype(np.float32)


def cfg(**overrides):
    c = alg.rl_config()
    c.update(overrides)
    return c


def numpy_whiten(x, mask):
    vals = x[mask > 0].astype(np.float64)
    return (x - vals.mean()) / np.sqrt(vals.var(ddof=1) + 1e-8)


def aggregation_weights(mask, mode, max_len=None):
    """d aggregate(l) / d l[i,t] for each mode, from the formulas of spec 1.3."""
    lengths = mask.sum(1)
    n_seq = (lengths > 0).sum()
    if mode == "token-mean":
        return mask / mask.sum()
    if mode == "seq-mean-token-mean":
        return mask / (np.maximum(lengths, 1)[:, None] * n_seq)
    if mode == "seq-mean-token-sum":
        return mask / n_seq
    return mask / (n_seq * (max_len or mask.shape[1]))


# ---------------------------------------------------------------------------------------------------------
# Spec section 3, tests 1-6


def test_spec_1_advantage_sanity_numbers():
    rewards = np.array([1.0, 0.0, 0.0, 0.0], np.float32)
    np.testing.assert_allclose(alg.adv_grpo(rewards, 4, eps=1e-6), [1.5, -0.5, -0.5, -0.5], rtol=1e-5)
    np.testing.assert_allclose(alg.adv_grpo(rewards, 4, scale_by_std=False), [0.75, -0.25, -0.25, -0.25],
                               rtol=1e-6)
    np.testing.assert_allclose(alg.adv_rloo(rewards, 4), [1.0, -1 / 3, -1 / 3, -1 / 3], rtol=1e-6)
    # Through the registries: broadcast over the masked tokens, 0 on padding.
    mask = np.array([[1, 1, 0], [1, 0, 0], [1, 1, 1], [0, 0, 0]], np.float32)
    expected = {"grpo": [1.5, -0.5, -0.5, -0.5], "drgrpo": [0.75, -0.25, -0.25, -0.25],
                "rloo": [1.0, -1 / 3, -1 / 3, -1 / 3]}
    for name, per_seq in expected.items():
        adv = ADVANTAGES.get(name)(rewards, mask, 4, cfg())
        np.testing.assert_allclose(adv, np.array(per_seq)[:, None] * mask, rtol=1e-5, atol=1e-7, err_msg=name)
    # All-equal group -> all zero; a group of one -> A = R (verl's mean 0, std 1).
    np.testing.assert_array_equal(alg.adv_grpo(np.array([0.7, 0.7, 0.7]), 3), [0, 0, 0])
    np.testing.assert_allclose(alg.adv_grpo(np.array([0.3, -2.0]), 1), [0.3, -2.0], rtol=1e-6)
    mean, std = alg.group_mean_std(np.array([[1.0, 2.0, 4.0]]))
    np.testing.assert_allclose([mean[0], std[0]], [7 / 3, np.std([1, 2, 4], ddof=1)], rtol=1e-6)


CLIPPED_LOSSES = [  # (policy loss, loss_agg, extra knobs)
    ("ppo-clip", "token-mean", {}),
    ("ppo-clip", "seq-mean-token-mean", {}),
    ("ppo-clip", "seq-mean-token-sum", {}),
    ("ppo-clip", "seq-mean-token-sum-norm", {}),
    ("ppo-clip", "seq-mean-token-sum-norm", {"loss_agg_max_len": 16}),
    ("ppo-clip", "token-mean", {"eps_low": 0.2, "eps_high": 0.28, "dual_clip": 3.0}),
    ("gspo", "seq-mean-token-mean", {"eps_low": 3e-4, "eps_high": 4e-4}),
    ("gmpo", "seq-mean-token-mean", {"eps_low": 0.4, "eps_high": 0.4}),
]


@pytest.mark.parametrize("name,mode,knobs", CLIPPED_LOSSES)
def test_spec_2_gradient_at_ratio_one_is_minus_advantage_times_grad_logp(name, mode, knobs):
    mask = ragged_mask()
    logp = random_logp(0)
    rng = np.random.default_rng(1)
    per_seq = name != "ppo-clip"  # gspo/gmpo take sequence-level advantages
    adv = (rng.normal(size=(N, 1)) if per_seq else rng.normal(size=(N, T))).astype(np.float32) * mask
    rl_cfg = cfg(policy_loss=name, loss_agg=mode, **knobs)
    loss_fn = POLICY_LOSSES.get(name)

    loss, metrics = loss_fn(jnp.asarray(logp), jnp.asarray(logp), adv, mask, rl_cfg)
    grad = jax.grad(lambda lp: loss_fn(lp, jnp.asarray(logp), adv, mask, rl_cfg)[0])(jnp.asarray(logp))

    weights = aggregation_weights(mask, mode, knobs.get("loss_agg_max_len"))
    np.testing.assert_allclose(grad, -adv * weights, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(loss, np.sum(-adv * weights), rtol=1e-5, atol=1e-7)
    assert float(metrics["clipfrac"]) == 0.0 and abs(float(metrics["ppo_kl"])) < 1e-7
    np.testing.assert_allclose(metrics["ratio_mean"], 1.0, rtol=1e-6)
    expected_weight = mask.sum() if mode == "token-mean" else (mask.sum(1) > 0).sum()
    assert float(metrics["weight"]) == expected_weight


def test_spec_2_gspo_equals_grpo_seq_mean_token_mean_at_ratio_one():
    mask = ragged_mask()
    logp = jnp.asarray(random_logp(2))
    adv = ADVANTAGES.get("grpo")(np.array([1, 0, 0, 1, 1, 0], np.float32), mask, 3, cfg())
    grpo_cfg = cfg(loss_agg="seq-mean-token-mean")
    gspo_cfg = cfg(eps_low=3e-4, eps_high=4e-4)

    def loss_of(name, rl_cfg):
        return lambda lp: POLICY_LOSSES.get(name)(lp, jax.lax.stop_gradient(lp), adv, mask, rl_cfg)[0]

    np.testing.assert_allclose(loss_of("gspo", gspo_cfg)(logp), loss_of("ppo-clip", grpo_cfg)(logp), rtol=1e-6)
    np.testing.assert_allclose(jax.grad(loss_of("gspo", gspo_cfg))(logp),
                               jax.grad(loss_of("ppo-clip", grpo_cfg))(logp), rtol=1e-5, atol=1e-8)


def test_spec_3_kl_estimators():
    logp, logp_ref = random_logp(3), random_logp(4)
    for kind in ("k1", "k2", "k3", "k3+"):
        np.testing.assert_array_equal(alg.kl(logp, logp, kind), np.zeros_like(logp))
    k3 = np.asarray(alg.kl(logp, logp_ref, "k3"))
    assert (k3 >= 0).all() and (k3 > 0).any()
    delta = logp_ref - logp
    np.testing.assert_allclose(k3, np.exp(delta) - delta - 1, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(alg.kl(logp, logp_ref, "k1"), -delta, rtol=1e-6)
    np.testing.assert_allclose(alg.kl(logp, logp_ref, "k2"), 0.5 * delta ** 2, rtol=1e-5)
    # k3+: the value of k3, the gradient of k2 (= logp - logp_ref).
    np.testing.assert_allclose(alg.kl(logp, logp_ref, "k3+"), k3, rtol=1e-6)
    grad = jax.grad(lambda lp: jnp.sum(alg.kl(lp, logp_ref, "k3+")))(jnp.asarray(logp))
    np.testing.assert_allclose(grad, -delta, rtol=1e-5, atol=1e-6)
    # Monte Carlo on a 4-way categorical: E_pi[k1] = E_pi[k3] = KL(pi || ref) for on-policy samples.
    pi, ref = np.array([0.4, 0.3, 0.2, 0.1]), np.array([0.1, 0.2, 0.3, 0.4])
    exact = np.sum(pi * np.log(pi / ref))
    n = 100_000
    samples = np.random.default_rng(5).choice(4, size=n, p=pi)
    logp_s, logp_ref_s = np.log(pi)[samples].astype(np.float32), np.log(ref)[samples].astype(np.float32)
    for kind in ("k1", "k3"):
        values = np.asarray(alg.kl(logp_s, logp_ref_s, kind), np.float64)
        tolerance = 5 * values.std() / np.sqrt(n)  # 5 standard errors: deterministic seed, far from flaky
        assert abs(values.mean() - exact) < tolerance, (kind, values.mean(), exact, tolerance)
    k1 = np.asarray(alg.kl(logp_s, logp_ref_s, "k1"), np.float64)
    k3 = np.asarray(alg.kl(logp_s, logp_ref_s, "k3"), np.float64)
    assert abs(k1.mean() - k3.mean()) < 5 * (k1 - k3).std() / np.sqrt(n)
    assert k3.std() < k1.std()  # why k3 is called low-variance


def test_spec_4_aggregation_modes_coincide_when_all_lengths_equal_t():
    loss = np.random.default_rng(6).normal(size=(N, T)).astype(np.float32)
    full = np.ones((N, T), np.float32)
    token_mean = float(alg.aggregate(loss, full, "token-mean"))
    np.testing.assert_allclose(token_mean, loss.mean(), rtol=1e-6)
    np.testing.assert_allclose(alg.aggregate(loss, full, "seq-mean-token-mean"), token_mean, rtol=1e-6)
    np.testing.assert_allclose(alg.aggregate(loss, full, "seq-mean-token-sum"), T * token_mean, rtol=1e-6)
    np.testing.assert_allclose(alg.aggregate(loss, full, "seq-mean-token-sum-norm"), token_mean, rtol=1e-6)
    np.testing.assert_allclose(alg.aggregate(loss, full, "seq-mean-token-sum-norm", max_len=4 * T),
                               token_mean / 4, rtol=1e-6)


def test_spec_5_gae_with_unit_gamma_lambda_and_zero_values_gives_outcome_reward():
    mask = ragged_mask()
    outcome = np.array([1.0, -0.5, 2.0, 0.25, 3.0, -1.0], np.float32)
    adv, returns = alg.adv_gae(alg.token_level_rewards(outcome, mask), np.zeros((N, T)), mask, gamma=1.0, lam=1.0,
                               whiten_advantages=False)
    np.testing.assert_allclose(adv, outcome[:, None] * mask, rtol=1e-6)
    np.testing.assert_allclose(returns, outcome[:, None] * mask, rtol=1e-6)
    whitened, _ = alg.adv_gae(alg.token_level_rewards(outcome, mask), np.zeros((N, T)), mask)
    np.testing.assert_allclose(whitened, numpy_whiten(outcome[:, None] * mask, mask) * mask, rtol=1e-5, atol=1e-6)


def test_spec_6_per_token_eps_tensors_reduce_to_the_scalar_case():
    mask = ragged_mask()
    rng = np.random.default_rng(9)
    logp = random_logp(7)
    logp_old = logp + rng.normal(scale=0.5, size=(N, T)).astype(np.float32)  # off-policy: clipped both sides
    adv = rng.normal(size=(N, T)).astype(np.float32) * mask
    rl_cfg = cfg(eps_low=0.2, eps_high=0.28, dual_clip=3.0)
    loss_fn = POLICY_LOSSES.get("ppo-clip")

    def run(**eps):
        f = lambda lp: loss_fn(lp, logp_old, adv, mask, rl_cfg, **eps)  # noqa: E731
        (loss, metrics), grad = jax.value_and_grad(f, has_aux=True)(jnp.asarray(logp))
        return loss, metrics, grad

    scalar = run()
    tensor = run(eps_low=np.full((N, T), 0.2, np.float32), eps_high=np.full((N, T), 0.28, np.float32))
    assert 0 < float(scalar[1]["clipfrac_low"]) and 0 < float(scalar[1]["clipfrac_high"])
    np.testing.assert_allclose(tensor[0], scalar[0], rtol=1e-6)
    np.testing.assert_allclose(tensor[2], scalar[2], rtol=1e-6)
    for key in scalar[1]:
        np.testing.assert_allclose(tensor[1][key], scalar[1][key], rtol=1e-6, err_msg=key)


# ---------------------------------------------------------------------------------------------------------
# Building blocks


def numpy_pg_clip(rho, adv, eps_low, eps_high, dual_clip=None):
    loss = np.maximum(-rho * adv, -np.clip(rho, 1 - eps_low, 1 + eps_high) * adv)
    if dual_clip:
        loss = np.where(adv < 0, np.minimum(loss, -dual_clip * adv), loss)
    return loss


def test_pg_clip_matches_the_max_formula_with_per_token_eps():
    rng = np.random.default_rng(10)
    shape = (64, 64)  # enough tokens that every branch (each clip side, eps_low above/below eps_high) occurs
    rho = np.exp(rng.normal(scale=0.4, size=shape)).astype(np.float32)
    adv = rng.normal(size=shape).astype(np.float32)
    eps_low = rng.uniform(0.05, 0.4, size=shape).astype(np.float32)
    eps_high = rng.uniform(0.05, 0.4, size=shape).astype(np.float32)
    for dual in (None, 2.0):
        loss, metrics = alg.pg_clip(rho, adv, eps_low, eps_high, dual)
        np.testing.assert_allclose(loss, numpy_pg_clip(rho, adv, eps_low, eps_high, dual), rtol=1e-6)
    high = ((adv > 0) & (rho > 1 + eps_high)).mean()
    low = ((adv < 0) & (rho < 1 - eps_low)).mean()
    np.testing.assert_allclose([metrics["clipfrac_high"], metrics["clipfrac_low"]], [high, low], rtol=1e-6)
    np.testing.assert_allclose(metrics["dual_clipfrac"], ((adv < 0) & (rho > 2.0)).mean(), rtol=1e-6)


def test_clip_zeroes_the_gradient_on_the_clipped_side_only():
    # Token: (ratio, advantage). eps 0.2: band [0.8, 1.2].
    rho = np.array([[1.5, 0.5, 0.5, 1.5]], np.float32)
    adv = np.array([[1.0, 1.0, -1.0, -1.0]], np.float32)
    loss, grad = jax.value_and_grad(lambda r: jnp.sum(alg.pg_clip(r, adv, 0.2, 0.2)[0]))(jnp.asarray(rho))
    # A>0, rho>1.2: clipped (no push up); A>0, rho<0.8: -A; A<0, rho<0.8: clipped; A<0, rho>1.2: -A.
    np.testing.assert_allclose(grad, [[0.0, -1.0, 0.0, 1.0]])
    np.testing.assert_allclose(loss, -1.2 - 0.5 + 0.8 + 1.5, rtol=1e-6)


def test_dual_clip_caps_negative_advantage_loss():
    rho = np.array([[5.0, 2.0, 5.0]], np.float32)
    adv = np.array([[-2.0, -2.0, 2.0]], np.float32)
    loss_fn = lambda r: alg.pg_clip(r, adv, 0.2, 0.2, dual_clip=3.0)[0]  # noqa: E731
    np.testing.assert_allclose(loss_fn(rho), [[3.0 * 2.0, 2.0 * 2.0, -1.2 * 2.0]], rtol=1e-6)
    grad = jax.grad(lambda r: jnp.sum(loss_fn(r)))(jnp.asarray(rho))
    np.testing.assert_allclose(grad, [[0.0, 2.0, 0.0]])  # capped, unclipped (-A), clipped
    with pytest.raises(ValueError, match="dual_clip"):
        alg.pg_clip(rho, adv, 0.2, 0.2, dual_clip=0.5)


def test_gspo_off_policy_matches_the_sequence_formula():
    mask = ragged_mask()
    logp_old = random_logp(11)
    logp = logp_old + np.random.default_rng(12).normal(scale=0.3, size=(N, T)).astype(np.float32)
    seq_adv = np.array([1.0, -1.0, 0.5, -0.5, 0.0, 2.0], np.float32)
    adv = seq_adv[:, None] * mask
    rl_cfg = cfg(eps_low=0.05, eps_high=0.08)

    def sequence_form(lp):
        s = alg.ratio(lp, logp_old, mask, level="sequence")[:, 0]
        per_seq = -jnp.minimum(s * seq_adv, jnp.clip(s, 0.95, 1.08) * seq_adv)
        valid = mask.sum(1) > 0
        return jnp.sum(jnp.where(valid, per_seq, 0.0)) / valid.sum()

    gspo = lambda lp: POLICY_LOSSES.get("gspo")(lp, logp_old, adv, mask, rl_cfg)[0]  # noqa: E731
    np.testing.assert_allclose(gspo(jnp.asarray(logp)), sequence_form(jnp.asarray(logp)), rtol=1e-5)
    np.testing.assert_allclose(jax.grad(gspo)(jnp.asarray(logp)), jax.grad(sequence_form)(jnp.asarray(logp)),
                               rtol=1e-4, atol=1e-7)
    s = np.exp((np.where(mask > 0, logp - logp_old, 0)).sum(1) / np.maximum(mask.sum(1), 1))
    assert ((s > 1.08) | (s < 0.95))[mask.sum(1) > 0].any()  # the case exercises the clip


def test_gmpo_clips_log_ratio_by_sign_of_advantage():
    mask = np.ones((2, 2), np.float32)
    logp_old = np.zeros((2, 2), np.float32)
    logp = np.array([[0.6, -0.6], [0.6, -0.6]], np.float32)
    adv = np.array([[0.5, 1.5], [-1.0, -1.0]], np.float32)  # token-level A enters as its sequence mean (1, -1)
    loss, metrics = POLICY_LOSSES.get("gmpo")(logp, logp_old, adv, mask, cfg(eps_low=0.4, eps_high=0.4))
    # A>0: log rho clipped above at 0.4 -> s = exp((0.4 - 0.6)/2); A<0: clipped below at -0.4 -> exp((0.6-0.4)/2).
    expected = 0.5 * (-np.exp(-0.1) + np.exp(0.1))
    np.testing.assert_allclose(loss, expected, rtol=1e-6)
    np.testing.assert_allclose(metrics["clipfrac"], 0.5)


def test_aggregate_against_numpy_and_micro_batch_accumulation():
    mask = ragged_mask()
    loss = np.random.default_rng(13).normal(size=(N, T)).astype(np.float32)
    for mode in alg.AGG_MODES:
        expected = np.sum(loss * aggregation_weights(mask, mode, 8), dtype=np.float64)
        np.testing.assert_allclose(alg.aggregate(loss, mask, mode, max_len=8), expected, rtol=1e-5, err_msg=mode)
        # Two micro-batches combined as the trainer does (sum of loss * weight, divided by the summed weight).
        parts = [(loss[:3], mask[:3]), (loss[3:], mask[3:])]
        total = sum(float(alg.aggregate(l, m, mode, max_len=8)) * float(alg.aggregation_weight(m, mode))
                    for l, m in parts)
        weight = sum(float(alg.aggregation_weight(m, mode)) for _, m in parts)
        np.testing.assert_allclose(total / weight, expected, rtol=1e-5, err_msg=mode)
        # An explicit global normalizer on one micro-batch gives its share of the global value.
        global_count = float(alg.aggregation_weight(mask, mode))
        shares = sum(float(alg.aggregate(l, m, mode, normalizer=global_count, max_len=8)) for l, m in parts)
        np.testing.assert_allclose(shares, expected, rtol=1e-5, err_msg=mode)
    with pytest.raises(ValueError, match="token-mean"):
        alg.aggregate(loss, mask, "token-sum")


def test_gae_hand_computed_with_discount_masked_middle_token_and_padding():
    gamma, lam = 0.9, 0.8
    rewards = np.array([[0, 0, 1], [0, 0, 1], [1, 0, 0]], np.float32)
    values = np.array([[0.5, 0.2, 0.4], [0.5, 9.0, 0.4], [0.3, 5.0, 5.0]], np.float32)
    mask = np.array([[1, 1, 1], [1, 0, 1], [1, 0, 0]], np.float32)
    adv, returns = alg.adv_gae(rewards, values, mask, gamma, lam, whiten_advantages=False)
    # Row 0: d2 = 1 - .4 = .6; d1 = .9*.4 - .2 = .16 -> .16 + .72*.6; d0 = .9*.2 - .5 -> d0 + .72*A1.
    a1 = 0.16 + 0.72 * 0.6
    row0 = [-0.32 + 0.72 * a1, a1, 0.6]
    # Row 1: the masked token is transparent: t=0 sees V_next = .4 and A_next = .6.
    row1 = [0.9 * 0.4 - 0.5 + 0.72 * 0.6, 0.0, 0.6]
    row2 = [0.7, 0.0, 0.0]  # trailing padding: V_next = 0
    expected = np.array([row0, row1, row2], np.float32)
    np.testing.assert_allclose(adv, expected, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(returns, (expected + values) * mask, rtol=1e-5, atol=1e-7)
    whitened, _ = alg.adv_gae(rewards, values, mask, gamma, lam)
    np.testing.assert_allclose(whitened, numpy_whiten(expected, mask) * mask, rtol=1e-5, atol=1e-6)
    registry_adv = ADVANTAGES.get("gae")(np.array([1.0, 1.0, 1.0]), mask, 1, cfg(gamma=gamma, lam=lam,
                                         whiten_advantages=False), values=values)
    np.testing.assert_allclose(registry_adv, expected, rtol=1e-5, atol=1e-7)  # R at the last valid token
    with pytest.raises(ValueError, match="values"):
        ADVANTAGES.get("gae")(np.ones(3), mask, 1, cfg())


def test_rloo_leave_one_out_by_hand():
    rewards = np.array([1, 0, 0, 0, 1, 1, 0, 2], np.float32)
    np.testing.assert_allclose(alg.adv_rloo(rewards, 4), [1, -1 / 3, -1 / 3, -1 / 3, 0, 0, -4 / 3, 4 / 3],
                               rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(alg.adv_rloo(np.array([0.5, 2.0]), 1), [0.5, 2.0])  # G = 1: A = R (verl)


def test_reinforce_pp_discounted_returns_by_hand():
    rewards = np.array([[-0.1, -0.2, 0.7, 0.0], [0.5, 0.0, 0.0, 0.0], [-0.1, 0.0, 0.9, 1.0]], np.float32)
    mask = np.array([[1, 1, 1, 0], [1, 0, 0, 0], [1, 0, 1, 1]], np.float32)
    returns = alg.discounted_returns(rewards, mask, 0.5)
    # Row 2 has a masked (tool) token at t=1: transparent, so t=0 sees the return of t=2 discounted once.
    expected = np.array([[-0.1 + 0.5 * 0.15, -0.2 + 0.5 * 0.7, 0.7, 0], [0.5, 0, 0, 0],
                         [-0.1 + 0.5 * 1.4, 0, 0.9 + 0.5 * 1.0, 1.0]], np.float32)
    np.testing.assert_allclose(returns, expected, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(alg.adv_rfpp(rewards, mask, 0.5), numpy_whiten(expected, mask) * mask,
                               rtol=1e-5, atol=1e-6)
    registry = ADVANTAGES.get("reinforce++")(rewards, mask, 1, cfg(gamma=0.5))
    np.testing.assert_allclose(registry, numpy_whiten(expected, mask) * mask, rtol=1e-5, atol=1e-6)


def test_reinforce_pp_baseline_and_kl_in_reward():
    mask = ragged_mask()
    outcome = np.array([1, 0, 0, 2, 1, 1], np.float32)
    centered = outcome - np.repeat(outcome.reshape(2, 3).mean(1), 3)
    expected = numpy_whiten(centered[:, None] * mask, mask) * mask
    np.testing.assert_allclose(ADVANTAGES.get("reinforce++-baseline")(outcome, mask, 3, cfg()), expected,
                               rtol=1e-5, atol=1e-6)
    # KL folded into token rewards: -beta * k1 on every masked token, the outcome at the last one.
    logp, logp_ref = random_logp(14), random_logp(15)
    token = alg.apply_kl_penalty(alg.token_level_rewards(outcome, mask), logp, logp_ref, mask, 0.1, "k1")
    last = np.zeros((N, T), np.float32)
    for i, length in enumerate(mask.sum(1).astype(int)):
        if length:
            last[i, length - 1] = outcome[i]
    np.testing.assert_allclose(token, last - 0.1 * (logp - logp_ref) * mask, rtol=1e-5, atol=1e-6)
    # Outcome estimators read token rewards as their sum.
    np.testing.assert_allclose(ADVANTAGES.get("grpo")(last, mask, 3, cfg()),
                               ADVANTAGES.get("grpo")(outcome * (mask.sum(1) > 0), mask, 3, cfg()), rtol=1e-6)


def test_overlong_penalty_values():
    lengths = np.array([5, 6, 7, 8, 10, 12])
    np.testing.assert_allclose(alg.overlong_penalty(lengths, max_len=10, cache_len=4),
                               [0, 0, -0.25, -0.5, -1.0, -1.5], atol=1e-7)
    np.testing.assert_allclose(alg.overlong_penalty(lengths, 10, 4, factor=2.0), [0, 0, -0.5, -1, -2, -3], atol=1e-7)
    with pytest.raises(ValueError, match="cache_len"):
        alg.overlong_penalty(lengths, 10, 0)


def test_filter_informative_groups_and_truncation_mask():
    grouped = np.array([[1, 1, 1], [0, 1, 0], [0, 0, 0], [0.5, 0.5, 0.25]], np.float32)
    np.testing.assert_array_equal(alg.filter_informative_groups(grouped), [False, True, False, True])
    np.testing.assert_array_equal(alg.filter_informative_groups(grouped.reshape(-1), 3), [False, True, False, True])
    mask = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(alg.mask_truncated_completions(mask, np.array([True, False])), [[1] * 3, [0] * 3])


def test_kl_in_the_loss_uses_the_policy_aggregation():
    mask = ragged_mask()
    logp, logp_ref = random_logp(16), random_logp(17)
    adv = np.random.default_rng(18).normal(size=(N, T)).astype(np.float32) * mask
    base_cfg = cfg(loss_agg="seq-mean-token-mean")
    base, _ = POLICY_LOSSES.get("ppo-clip")(logp, logp, adv, mask, base_cfg)
    with_kl, metrics = POLICY_LOSSES.get("ppo-clip")(logp, logp, adv, mask, cfg(loss_agg="seq-mean-token-mean",
                                                     kl_coef=0.04), logp_ref=logp_ref)
    kl_term = np.sum(np.asarray(alg.kl(logp, logp_ref, "k3")) * aggregation_weights(mask, "seq-mean-token-mean"))
    np.testing.assert_allclose(with_kl - base, 0.04 * kl_term, rtol=1e-4)
    np.testing.assert_allclose(metrics["kl_loss"], kl_term, rtol=1e-5)
    with pytest.raises(ValueError, match="logp_ref"):
        POLICY_LOSSES.get("ppo-clip")(logp, logp, adv, mask, cfg(kl_coef=0.04))
    # In the reward instead: the loss ignores logp_ref.
    in_reward, _ = POLICY_LOSSES.get("ppo-clip")(logp, logp, adv, mask, cfg(loss_agg="seq-mean-token-mean",
                                                 kl_coef=0.04, kl_in_reward=True))
    np.testing.assert_allclose(in_reward, base)


def test_value_loss_and_entropy_against_numpy():
    mask = ragged_mask()
    rng = np.random.default_rng(19)
    v, v_old, ret = (rng.normal(size=(N, T)).astype(np.float32) for _ in range(3))
    clipped = np.clip(v, v_old - 0.2, v_old + 0.2)
    per_token = np.maximum((v - ret) ** 2, (clipped - ret) ** 2)
    np.testing.assert_allclose(alg.value_loss(v, v_old, ret, mask, 0.2),
                               0.5 * (per_token * mask).sum() / mask.sum(), rtol=1e-5)
    np.testing.assert_allclose(alg.value_loss(v, v_old, ret, mask, None),
                               0.5 * ((v - ret) ** 2 * mask).sum() / mask.sum(), rtol=1e-5)
    logits = rng.normal(scale=2.0, size=(N, T, 7)).astype(np.float32)
    p = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    entropy = -(p * np.log(p)).sum(-1)
    np.testing.assert_allclose(alg.token_entropy(logits), entropy, rtol=1e-5)
    np.testing.assert_allclose(alg.entropy_from_logits(logits, mask), (entropy * mask).sum() / mask.sum(), rtol=1e-5)


def test_policy_loss_jits_and_reports_ratio_metrics():
    mask = ragged_mask()
    logp, logp_old = random_logp(20), random_logp(21)
    adv = np.random.default_rng(22).normal(size=(N, T)).astype(np.float32) * mask
    rl_cfg = cfg(eps_high=0.28)
    loss_fn = jax.jit(lambda *a: POLICY_LOSSES.get("ppo-clip")(*a, rl_cfg))
    loss, metrics = loss_fn(logp, logp_old, adv, mask)
    rho = np.exp(logp - logp_old)
    expected = np.sum(numpy_pg_clip(rho, adv, 0.2, 0.28) * mask) / mask.sum()
    np.testing.assert_allclose(loss, expected, rtol=1e-5)
    np.testing.assert_allclose(metrics["ratio_mean"], (rho * mask).sum() / mask.sum(), rtol=1e-5)
    np.testing.assert_allclose(metrics["ratio_max"], rho[mask > 0].max(), rtol=1e-5)
    np.testing.assert_allclose(metrics["ppo_kl"], ((logp_old - logp) * mask).sum() / mask.sum(), rtol=1e-5)


def test_registry_names_config_and_errors():
    assert {"grpo", "drgrpo", "rloo", "reinforce++", "reinforce++-baseline", "gae"} <= set(ADVANTAGES.names())
    assert {"ppo-clip", "gspo", "gmpo"} <= set(POLICY_LOSSES.names())
    defaults = alg.rl_config()
    assert defaults.advantage in ADVANTAGES and defaults.policy_loss in POLICY_LOSSES
    assert defaults.loss_agg in alg.AGG_MODES and defaults.kl_kind in alg.KL_KINDS
    with pytest.raises(UnknownNameError, match="Did you mean 'grpo'"):
        ADVANTAGES.get("grp0")
    with pytest.raises(UnknownNameError, match="ppo-clip"):
        POLICY_LOSSES.get("ppo")
    with pytest.raises(ValueError, match="group_size=4"):
        ADVANTAGES.get("grpo")(np.zeros(6), np.ones((6, 2)), 4, None)
    with pytest.raises(ValueError, match="unknown kl kind"):
        alg.kl(np.zeros(2), np.zeros(2), "k4")
    # Knobs come from a ConfigDict, a dict or None (defaults).
    rewards, mask = np.array([1.0, 0.0]), np.ones((2, 1), np.float32)
    np.testing.assert_allclose(ADVANTAGES.get("grpo")(rewards, mask, 2, {"scale_by_std": False}), [[0.5], [-0.5]])
    np.testing.assert_allclose(ADVANTAGES.get("grpo")(rewards, mask, 2, None)[:, 0], alg.adv_grpo(rewards, 2))


# ---------------------------------------------------------------------------------------------------------
# All-equal groups carry no signal: exactly zero advantage, whatever rounding the group statistics leave


@pytest.mark.parametrize("g", [2, 3, 5, 7, 8, 13, 16, 33, 64])
def test_all_equal_groups_with_non_dyadic_rewards_get_exactly_zero_advantage(g):
    # 8 x 0.7 used to give A = +0.056 for every member (the float32 mean an ulp off, divided by std + 1e-6)
    rng = np.random.default_rng(g)
    values = [0.1, 0.3, 0.7, 0.9, 1 / 3, 2 / 3, 0.45, 1.7]
    varied = rng.uniform(0, 1, size=g).astype(np.float32)
    rewards = np.concatenate([np.full(g, v, np.float32) for v in values] + [varied])
    mask = np.ones((rewards.size, 3), np.float32)
    equal = slice(0, len(values) * g)
    for name in ("grpo", "drgrpo", "rloo"):
        adv = np.asarray(ADVANTAGES.get(name)(rewards, mask, g, cfg()))
        np.testing.assert_array_equal(adv[equal], 0.0, err_msg=name)
    # REINFORCE++-baseline centres exactly, then whitens over the batch: the batch mean of the centred values
    # (0 in exact arithmetic) is rounding, ~1e-8 next to the varied group
    adv = np.asarray(ADVANTAGES.get("reinforce++-baseline")(rewards, mask, g, cfg()))
    assert np.abs(adv[equal]).max() < 1e-6
    # groups that are not all equal keep the formula (verl's float32 numbers), unchanged by the zeroing
    r = varied.astype(np.float64)
    expected = {"grpo": (r - r.mean()) / (r.std(ddof=1) + 1e-6), "drgrpo": r - r.mean(),
                "rloo": g / (g - 1) * (r - r.mean())}
    for name, ref in expected.items():
        adv = np.asarray(ADVANTAGES.get(name)(rewards, mask, g, cfg()))
        np.testing.assert_allclose(adv[-g:, 0], ref, rtol=2e-5, atol=2e-6, err_msg=name)
    # a whole batch of equal rewards: REINFORCE++'s batch whitening gives 0 too
    for value in values:
        same = np.full(4 * g, value, np.float32)
        for name in ("reinforce++", "reinforce++-baseline"):
            np.testing.assert_array_equal(ADVANTAGES.get(name)(same, np.ones((4 * g, 3), np.float32), g, cfg()), 0.0,
                                          err_msg=f"{name} {value}")


def test_all_equal_groups_are_zero_in_the_pairwise_and_combiner_normalizations():
    from shared.rewards.combine import group_normalize
    from shared.rl import pairwise as pw

    for g in (2, 5, 8, 64):
        x = np.concatenate([np.full(g, 0.7), np.full(g, 1 / 3)])
        np.testing.assert_array_equal(group_normalize(x, g, 1e-6), 0.0)
    # brpo-norm: members (all but the reference) with equal verdicts -> 0; round robin of a group of ties -> 0
    p = np.array([[1.0, 1.0, 0.0, 1.0], [-1.0, 0.0, -1.0, -1.0]], np.float32)
    np.testing.assert_array_equal(pw.adv_brpo(p, np.array([2, 1]), "norm"), 0.0)
    np.testing.assert_array_equal(pw.adv_round_robin(np.zeros((2, 5, 5), np.float32)), 0.0)
    # ETR's group variance level of an all-equal group is exactly 0
    from shared.rl.etr import group_pass_stats

    _, v, _ = group_pass_stats(np.full(16, 0.7), 8)
    np.testing.assert_array_equal(v, 0.0)

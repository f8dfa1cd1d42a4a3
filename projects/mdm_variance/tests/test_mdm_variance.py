"""mdm_variance: P-POTS keeps the estimator unbiased and lowers its variance, the A/B/C decomposition against
synthetic losses of known structure, the EMA control variate, the generated tasks."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from projects.mdm_variance import data, ppots, variance as V
from shared.diffusion import make_mask_sampler, make_t_sampler, masked_losses


def test_ppots_is_unbiased_for_the_uniform_elbo_and_lowers_the_variance():
    # a loss profile like an MDM's: expected loss g(t) grows with t, masking noise v(t) explodes as t -> 0
    g = lambda t: 1.0 + 2.0 * t ** 2  # noqa: E731
    v = lambda t: 0.3 / t  # noqa: E731
    ts = np.arange(1, 70) / 70
    profile = {"t": ts, "g": g(ts), "v": v(ts), "w": np.sqrt(v(ts) + g(ts) ** 2), "second": g(ts) ** 2 + v(ts)}
    options = {**ppots.DEFAULTS, "n_starts": 3}
    grid, density, info = ppots.density_from_profile(profile, options)
    assert info["epr_kl"] < 0.01
    sampler = ppots.PPOTSSampler({"n_starts": 3})
    from shared.diffusion import GridDensity
    sampler.density = GridDensity(grid, density)
    t, w = (np.asarray(x, np.float64) for x in sampler(jax.random.key(0), 400000))
    noise = np.random.default_rng(0).normal(size=t.shape)
    loss = w * (g(t) + np.sqrt(v(t)) * noise)                  # an unbiased per-sample loss at t, weighted 1/p(t)
    elbo = 1.0 + 2.0 / 3.0                                     # int_0^1 g(t) dt
    assert abs(loss.mean() - elbo) < 4 * loss.std() / np.sqrt(len(loss))
    u = 1.0 - np.asarray(jax.random.uniform(jax.random.key(1), (400000,)), np.float64)
    uniform_loss = g(u) + np.sqrt(v(u)) * noise
    assert loss.var() < 0.8 * uniform_loss.var()
    pred = ppots.predicted_variance(profile, grid, density)
    assert pred["predicted_ppots_marginal"] < pred["predicted_uniform_marginal"]
    assert pred["predicted_ppots_marginal"] >= pred["predicted_optimal_marginal"] - 1e-6


def test_epr_fit_recovers_an_epr_target():
    ts = np.arange(1, 70) / 70
    truth = ppots.epr_params(np.array([0.5, 0.2, -0.5, 1.0, 0.3, 0.1, 0.5]))
    _, kl = ppots.fit_epr(ts, ppots.epr_unnormalised(ts, truth), n_starts=3)
    assert kl < 1e-4


def test_decompose_recovers_known_components():
    rng = np.random.default_rng(0)
    a, b, c = 400, 30, 12
    l = (rng.normal(0, 1.5, (a, 1, 1)) + rng.normal(0, 1.0, (a, b, 1)) + rng.normal(0, 2.0, (a, b, c)))
    parts = V.decompose(l)
    assert parts["A"] == pytest.approx(4.0, rel=0.05)
    assert parts["B"] == pytest.approx(1.0, rel=0.1)
    assert parts["C"] == pytest.approx(2.25, rel=0.2)
    assert parts["sum"] == pytest.approx(parts["total"], rel=0.05)


def test_decomposition_of_a_model_with_known_structure():
    """Token NLLs mu_i fixed per x0 (the model ignores its input) and t ~ U[0.2, 0.8]: per-sample loss
    (1/(P q)) sum_i M_i mu_i. Then g(x0, t) = mean_i mu_i (B = 0), Var(l | x0, t) = (1-q)/(q P^2) sum_i mu_i^2
    (the spec's Theorem 1 with sigma = rho = 0), and C = Var_x0(mean_i mu_i)."""
    rng = np.random.default_rng(0)
    a, t_len, vocab, eps = 48, 16, 5, 1e-3
    x0 = jnp.asarray(rng.integers(0, vocab - 1, (a, t_len)), jnp.int32)
    table = rng.normal(size=(t_len, vocab)) * 2                      # logits per position (input ignored)
    logits_fn = lambda tokens: jnp.broadcast_to(jnp.asarray(table, jnp.float32), tokens.shape + (vocab,))  # noqa
    mu = -(table - np.log(np.exp(table).sum(-1, keepdims=True)))[np.arange(t_len)[None], np.asarray(x0)]
    loss_of_draw = jax.jit(lambda x, d: masked_losses(logits_fn, x, d, vocab - 1))
    l = V.sample_losses(loss_of_draw, x0, jnp.ones((a, t_len)), b=24, c=24,
                        t_sampler=make_t_sampler("clipped", {"low": 0.2, "high": 0.8}),
                        mask_sampler=make_mask_sampler("independent"), eps=eps)
    parts = V.decompose(l)
    fine = np.linspace(0.2, 0.8, 10001)
    q = (1 - eps) * fine + eps
    A = np.mean((mu ** 2).sum(1)) / t_len ** 2 * np.trapezoid((1 - q) / q, fine) / 0.6
    C = np.var(mu.mean(1), ddof=1)
    assert parts["A"] == pytest.approx(A, rel=0.1)
    assert abs(parts["B"]) < 0.1 * A
    assert parts["C"] == pytest.approx(C, rel=0.35, abs=0.05 * A)
    assert parts["sum"] == pytest.approx(parts["total"], rel=0.1)


def test_mirror_halves_a_on_the_known_structure_model():
    rng = np.random.default_rng(1)
    a, t_len, vocab = 16, 24, 5
    x0 = jnp.asarray(rng.integers(0, vocab - 1, (a, t_len)), jnp.int32)
    table = rng.normal(size=(t_len, vocab)) * 2
    logits_fn = lambda tokens: jnp.broadcast_to(jnp.asarray(table, jnp.float32), tokens.shape + (vocab,))  # noqa
    loss_of_draw = jax.jit(lambda x, d: masked_losses(logits_fn, x, d, vocab - 1))
    t_sampler = make_t_sampler("clipped", {"low": 0.1, "high": 0.4})
    kw = dict(b=8, c=32, t_sampler=t_sampler, eps=1e-3)
    single = V.decompose(V.sample_losses(loss_of_draw, x0, jnp.ones((a, t_len)),
                                         mask_sampler=make_mask_sampler("independent"), **kw))
    mirror = V.decompose(V.sample_losses(loss_of_draw, x0, jnp.ones((a, t_len)),
                                         mask_sampler=make_mask_sampler("mirror"), **kw))
    multi = V.decompose(V.sample_losses(loss_of_draw, x0, jnp.ones((a, t_len)),
                                        mask_sampler=make_mask_sampler("multi"), **kw))
    assert multi["A"] / single["A"] == pytest.approx(0.5, abs=0.1)   # two independent masks: A / 2
    assert mirror["A"] / single["A"] < multi["A"] / single["A"] - 0.05  # antithetic pairs (t < 1/2): below that


def test_ema_control_variate_keeps_the_mean_and_lowers_the_variance():
    rng = np.random.default_rng(0)
    cv = V.BinEMAControlVariate(bins=4, rate=0.1)
    plain, adjusted = [], []
    for step in range(400):
        t = rng.uniform(size=64)
        h = rng.normal(0, 0.1, 64)                                   # zero-mean control
        loss = 2 + t + (1 + 3 * t) * 5 * h + rng.normal(0, 0.1, 64)  # the loss moves with the control
        adj = cv(t, loss, h)
        if step >= 100:
            plain.append(loss)
            adjusted.append(adj)
    plain, adjusted = np.concatenate(plain), np.concatenate(adjusted)
    assert adjusted.mean() == pytest.approx(plain.mean(), abs=0.01)
    assert adjusted.var() < 0.2 * plain.var()


def test_generated_tasks_have_fixed_widths_gold_answers_and_disjoint_splits():
    for fn in (data.chain_arith, data.table_qa):
        train, test = fn("train", 300), fn("test", 60)
        assert len({len(e["prompt"]) for e in train + test}) == 1
        assert len({len(e["completion"]) for e in train + test}) == 1
        assert all(data.check_answer(e, e["completion"]) for e in train + test)
        assert not {e["prompt"] for e in train} & {e["prompt"] for e in test}
        assert fn("train", 5, seed=7) == train[:5]                   # the run seed does not change the data
    e = data.chain_arith("train", 1)[0]
    assert not data.check_answer(e, e["completion"].replace(f"####{e['answer']}", "####999"))
    assert data.check_answer({"answer": "37"}, "65*43=95;95*83=85;85+52=37####37....")
    assert data.chain_arith("train", 3, data_seed=5) != data.chain_arith("train", 3, data_seed=6)

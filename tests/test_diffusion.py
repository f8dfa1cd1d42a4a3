"""shared.diffusion: samplers (marginals, MIRROR's anti-correlation, importance weights), the MDM loss against a
numpy re-implementation, and LLaDA decoding against a numpy re-implementation of its loop."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from shared.diffusion import (GridDensity, llada_decode, make_mask_sampler, make_t_sampler, masked_losses,
                              mdm_inputs, p_mask)
from shared.diffusion.decode import transfer_counts


def draws(name, options, q, n=4000, b=1, t=64, x0=None, seed=0):
    sampler = make_mask_sampler(name, options)
    x0 = jnp.zeros((b, t), jnp.int32) if x0 is None else x0
    eligible = jnp.ones((b, t), jnp.float32)
    keys = jax.random.split(jax.random.key(seed), n)
    return jax.vmap(lambda k: sampler(k, x0, eligible, jnp.full((b,), q, jnp.float32)))(keys)


@pytest.mark.parametrize("q", [0.2, 0.5, 0.7])
def test_mirror_pairs_have_the_marginals_and_negative_correlation(q):
    d = draws("mirror", {}, q)
    m1, m2 = np.asarray(d.masks[:, 0], np.float64), np.asarray(d.masks[:, 1], np.float64)
    n = m1.size
    tol = 4 * np.sqrt(q * (1 - q) / n)
    assert abs(m1.mean() - q) < tol and abs(m2.mean() - q) < tol          # each mask: Bernoulli(q) per token
    cov = (m1 * m2).mean() - m1.mean() * m2.mean()
    assert cov == pytest.approx(max(0.0, 2 * q - 1) - q * q, abs=0.01)      # P(U<q, U>1-q) - q^2 < 0
    if q < 0.5:
        assert not np.any(m1 * m2)                                          # disjoint below 1/2
    if q > 0.5:
        assert np.all(np.maximum(m1, m2) == 1)                              # the union covers every token


def test_multisample_masks_are_independent():
    d = draws("multi", {}, 0.3)
    m1, m2 = np.asarray(d.masks[:, 0], np.float64), np.asarray(d.masks[:, 1], np.float64)
    assert d.masks.shape[1] == 2
    assert abs((m1 * m2).mean() - m1.mean() * m2.mean()) < 0.01


def test_isad_raises_the_delimiter_probability_and_stays_unbiased():
    x0 = jnp.asarray([[5, 7, 5, 9, 7, 7]], jnp.int32)
    d = draws("isad", {"rare_ids": [7], "delta": 0.3}, 0.2, n=20000, t=6, x0=x0)
    probs = np.asarray(d.probs[0, 0, 0])
    np.testing.assert_allclose(probs, [0.2, 0.5, 0.2, 0.2, 0.5, 0.5], rtol=1e-6)
    # E[M / q] = 1 per token: the 1/q weight keeps every token's expected loss weight at 1
    np.testing.assert_allclose(np.mean(np.asarray(d.masks[:, 0, 0]) / probs, axis=0), 1.0, atol=0.05)


def test_syrm_weights_split_alpha_between_response_and_syntax():
    sampler = make_mask_sampler("syrm", {"syntax_ids": [3], "alpha": 0.7})
    x0 = jnp.asarray([[3, 4, 3, 1, 2, 3]], jnp.int32)
    eligible = jnp.asarray([[0, 0, 0, 1, 1, 1]], jnp.float32)   # response = last three; prompt syntax at 0 and 2
    d = sampler(jax.random.key(0), x0, eligible, jnp.asarray([1.0]))
    w = np.asarray(d.token_weight[0])
    np.testing.assert_allclose(w, [0.15, 0, 0.15, 0.7 / 3, 0.7 / 3, 0.7 / 3], rtol=1e-6)
    assert np.asarray(d.masks[0, 0]).tolist() == [True, False, True, True, True, True]


def test_t_samplers():
    t, w = make_t_sampler("stratified", {"strata": 4})(jax.random.key(0), 8)
    assert np.all(np.floor(np.asarray(t) * 4) == [0, 0, 1, 1, 2, 2, 3, 3]) and np.all(np.asarray(w) == 1)
    t, _ = make_t_sampler("clipped", {"low": 0.2, "high": 0.8})(jax.random.key(0), 1000)
    assert 0.2 <= float(t.min()) and float(t.max()) <= 0.8


def test_grid_density_sampler_is_unbiased_for_the_uniform_integral():
    grid = np.linspace(0, 1, 11)
    density = 0.2 + grid ** 2 * 3                       # strongly non-uniform, exactly piecewise linear below
    sampler = GridDensity(grid, density)
    t, w = sampler(jax.random.key(1), 400000)
    t, w = np.asarray(t, np.float64), np.asarray(w, np.float64)
    # the draws follow the density: P(t < 0.5) = its CDF at 0.5
    assert np.mean(t < 0.5) == pytest.approx(np.interp(0.5, grid, sampler.cdf), abs=0.004)
    f = np.exp(2 * t) * (1 + np.sin(7 * t))             # E_p[w f(t)] = int_0^1 f(t) dt
    fine = np.linspace(0, 1, 200001)
    exact = np.trapezoid(np.exp(2 * fine) * (1 + np.sin(7 * fine)), fine)
    estimate = np.mean(w * f)
    assert abs(estimate - exact) < 4 * np.std(w * f) / np.sqrt(len(t))


def test_masked_losses_match_numpy():
    rng = np.random.default_rng(0)
    k, b, t, v, mask_id = 2, 3, 5, 7, 6
    x0 = rng.integers(0, 6, (b, t))
    table = rng.normal(size=(t, v))                                 # logits depend on the position only
    logits_fn = lambda tokens: jnp.broadcast_to(jnp.asarray(table, jnp.float32), tokens.shape + (v,))  # noqa: E731
    draw = make_mask_sampler("multi", {"samples": k})(jax.random.key(0), jnp.asarray(x0), jnp.ones((b, t)),
                                                       jnp.asarray([0.3, 0.5, 0.9]))
    got = np.asarray(masked_losses(logits_fn, jnp.asarray(x0), draw, mask_id))
    logp = table - np.log(np.exp(table).sum(-1, keepdims=True))
    nll = -logp[np.arange(t)[None], x0]                             # [b, t]
    masks, probs = np.asarray(draw.masks), np.asarray(draw.probs)
    want = (masks * nll[None] / probs).sum(-1) / t                  # eligible = all t tokens
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_sft_inputs_never_mask_the_prompt():
    batch = {"targets": jnp.asarray([[10, 11, 12, 13, 0, 0]]), "loss_mask": jnp.asarray([[1., 1, 1, 1, 0, 0]]),
             "prompt_mask": jnp.asarray([[1., 1, 0, 0, 0, 0]]), "inputs": jnp.zeros((1, 6), jnp.int32)}
    x0, eligible, seg, _ = mdm_inputs(batch, "sft", "eos", eos_id=2)
    assert np.asarray(x0).tolist() == [[10, 11, 12, 13, 2, 2]]       # LLaDA: padding is EOS, part of the answer
    assert np.asarray(eligible).tolist() == [[0, 0, 1, 1, 1, 1]]
    x0, eligible, seg, _ = mdm_inputs(batch, "sft", "exclude", eos_id=2)
    assert np.asarray(eligible).tolist() == [[0, 0, 1, 1, 0, 0]] and np.asarray(seg).tolist() == [[1, 1, 1, 1, 0, 0]]
    draw = make_mask_sampler("independent", {})(jax.random.key(0), x0, eligible, jnp.asarray([p_mask(1.0, 1e-3)]))
    assert not np.any(np.asarray(draw.masks)[..., :2])


def test_transfer_counts_follow_llada():
    assert np.asarray(transfer_counts(jnp.asarray([10, 4, 0]), 4)).tolist() == [[3, 3, 2, 2], [1, 1, 1, 1],
                                                                                 [0, 0, 0, 0]]


def order_dependent_logits(x, mask_id, vocab):
    """Logits whose argmax at position j is (number of revealed tokens + j) % (vocab - 1), so the result depends
    on the commit order; confidences differ by position."""
    x = np.asarray(x)
    revealed = (x != mask_id).sum(-1, keepdims=True)
    j = np.arange(x.shape[1])[None]
    target = (revealed + j) % (vocab - 1)
    logits = np.zeros(x.shape + (vocab,), np.float32)
    np.put_along_axis(logits, target[..., None], (1.0 + 0.37 * ((j * 7) % 5))[..., None].repeat(x.shape[0], 0), -1)
    return logits


def numpy_llada(x, gen_start, gen_length, steps, block_length, mask_id, vocab):
    x = np.array(x)
    blocks = gen_length // block_length
    per_block = steps // blocks
    for blk in range(blocks):
        lo, hi = gen_start + blk * block_length, gen_start + (blk + 1) * block_length
        counts = np.asarray(transfer_counts(jnp.asarray((x[:, lo:hi] == mask_id).sum(1)), per_block))
        for s in range(per_block):
            logits = order_dependent_logits(x, mask_id, vocab)
            logits[..., mask_id] = -np.inf
            pred = logits.argmax(-1)
            e = np.exp(logits - logits.max(-1, keepdims=True))
            conf = (e / e.sum(-1, keepdims=True)).max(-1)
            conf[:, hi:] = -np.inf
            conf[x != mask_id] = -np.inf
            for r in range(x.shape[0]):
                for pos in np.argsort(-conf[r], kind="stable")[: counts[r, s]]:
                    x[r, pos] = pred[r, pos]
    return x


def test_llada_decode_matches_the_reference_loop():
    vocab, mask_id = 9, 8
    x = np.full((2, 12), mask_id, np.int32)
    x[:, :4] = [[1, 2, 3, 4], [4, 3, 2, 1]]
    x[1, 6] = 5                                               # a revealed response token stays
    fn = lambda t: jnp.asarray(jax.pure_callback(  # noqa: E731
        lambda a: order_dependent_logits(a, mask_id, vocab), jax.ShapeDtypeStruct(t.shape + (vocab,), jnp.float32), t))
    got = np.asarray(llada_decode(fn, jnp.asarray(x), gen_start=4, gen_length=8, steps=4, block_length=4,
                                  mask_id=mask_id))
    want = numpy_llada(x, 4, 8, 4, 4, mask_id, vocab)
    assert got.tolist() == want.tolist()
    assert got[1, 6] == 5 and not np.any(got == mask_id)


def test_decoding_with_every_position_revealed_returns_the_input():
    x = jnp.asarray(np.random.default_rng(0).integers(0, 8, (3, 10)), jnp.int32)
    fn = lambda t: jax.nn.one_hot((t + 1) % 9, 9)  # noqa: E731  would change every token it were allowed to
    out = llada_decode(fn, x, gen_start=2, gen_length=8, steps=8, block_length=4, mask_id=8)
    assert np.asarray(out).tolist() == np.asarray(x).tolist()

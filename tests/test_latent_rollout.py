"""shared/latent heads + rollout (../shared/papers/gap.md §1.1-1.3, §1.6-1.7, §4.7): the K-step latent recurrence
with the KV cache equals a hand loop of full forwards, the grad flag cuts only the fed inputs, the PCA head writes
into its frozen affine subspace, the two-pass forward, latent losses and interventions."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from shared.latent import (Frozen, ema_update, intervene, latent_cos, latent_mse, latent_rollout, make_head,
                           pca_fit, two_pass_forward)
from shared.model import build_model
from tests.test_model import D, tiny_cfg, tokens

B, P, K = 2, 5, 3


@pytest.fixture(scope="module")
def model():
    cfg = tiny_cfg()
    graphdef, state = nnx.split(build_model(cfg, 0))
    return cfg, graphdef, state


def rng_normal(seed, shape, scale=1.0):
    return jnp.asarray(np.random.RandomState(seed).normal(0, scale, shape), jnp.float32)


def prompt_embeds(t=P):
    """Image-feature-like input vectors at prompt positions 1, 2."""
    mask = np.zeros((B, t), bool)
    mask[:, [1, 2]] = True
    return rng_normal(7, (B, t, D), 0.5), jnp.asarray(mask)


@functools.partial(jax.jit, static_argnums=(0, 1, 5, 6))
def rollout(graphdef, head_def, state, head_state, prompt, k, grad, embeds=None, embed_mask=None):
    r = latent_rollout(nnx.merge(graphdef, state), nnx.merge(head_def, head_state), prompt, k, grad=grad,
                       embeds=embeds, embed_mask=embed_mask)
    return r["zs"], r["out"]["logits"], r["cache_index"]


def test_raw_post_rollout_equals_a_hand_loop_of_full_forwards(model):
    cfg, graphdef, state = model
    head_def, head_state = nnx.split(make_head("raw_post", D))
    prompt = tokens(B, P)
    pe, pm = prompt_embeds()
    zs, last_logits, index = rollout(graphdef, head_def, state, head_state, prompt, K, False, pe, pm)
    assert zs.shape == (B, K, D) and int(index) == P + K

    # the hand loop: no cache, the whole sequence re-run each step; z_t = N_f(h_L) at the previous position
    decoder = nnx.merge(graphdef, state)
    forward = jax.jit(lambda s, e, m: nnx.merge(graphdef, s)(s_tokens, embeds=e, embed_mask=m, hidden="prefinal"))
    s_tokens = jnp.concatenate([prompt, jnp.zeros((B, K), prompt.dtype)], axis=1)
    embeds = jnp.zeros((B, P + K, D)).at[:, :P].set(pe)
    mask = jnp.zeros((B, P + K), bool).at[:, :P].set(pm)
    hand = []
    for t in range(K):
        out = forward(state, embeds, mask)
        z = out["hidden"][:, P - 1 + t]
        np.testing.assert_allclose(np.asarray(decoder.final_norm(out["prefinal"][:, P - 1 + t])), np.asarray(z),
                                   rtol=1e-5, atol=1e-5)
        hand.append(z)
        embeds, mask = embeds.at[:, P + t].set(z), mask.at[:, P + t].set(True)
    np.testing.assert_allclose(np.asarray(zs), np.asarray(jnp.stack(hand, 1)), rtol=1e-5, atol=1e-5)
    # the last step's output sits at z_K's position: the same logits as the full forward there
    full = forward(state, embeds, mask)["logits"][:, -1]
    np.testing.assert_allclose(np.asarray(last_logits[:, 0]), np.asarray(full), rtol=1e-5, atol=1e-5)
    # the latents are real: they differ from slot to slot
    assert float(jnp.abs(zs[:, 1] - zs[:, 0]).max()) > 1e-3


def test_grad_flag_cuts_the_recurrence_through_fed_inputs_only(model):
    """Linear head z = W RMSNorm(h_pre) + b: d<r, z_2>/db is r exactly when the fed z_1 is stop_gradient'ed (only
    z_2's direct dependence on b), and differs with grad=True (b also reaches z_2 through the fed z_1)."""
    cfg, graphdef, state = model
    head_def, head_state = nnx.split(make_head("linear", D, rngs=nnx.Rngs(params=3), std=0.3))
    prompt, r = tokens(B, P), rng_normal(11, (B, D))

    def loss(head_state, state, grad):
        zs, _, _ = rollout(graphdef, head_def, state, head_state, prompt, 2, grad)
        return jnp.sum(zs[:, 1] * r)

    grads = jax.jit(jax.grad(loss, argnums=(0, 1)), static_argnums=2)
    (cut, g_cut), (through, g_through) = grads(head_state, state, False), grads(head_state, state, True)
    np.testing.assert_allclose(np.asarray(cut["b"][...]), np.asarray(r.sum(0)), rtol=1e-5, atol=1e-5)
    assert float(jnp.abs(through["b"][...] - r.sum(0)).max()) > 1e-4
    # the model still gets a gradient with the cut (z_2's own step), but a different one
    e_cut, e_through = g_cut["embed"][...], g_through["embed"][...]
    assert float(jnp.abs(e_cut).max()) > 0
    assert float(jnp.abs(e_cut - e_through).max()) > 1e-6


def low_rank_fit(seed=0, n=64, rank=4):
    rs = np.random.RandomState(seed)
    X = rs.normal(0, 1, (n, rank)) @ rs.normal(0, 1, (rank, D)) + 0.5 + rs.normal(0, 1e-3, (n, D))
    return pca_fit(X, explained=0.99)


def test_pca_head_writes_into_the_frozen_affine_subspace(model):
    fit = low_rank_fit()
    assert fit.k == 4
    head = make_head("pca", D, fit=fit, rngs=nnx.Rngs(params=0))
    h_pre, h_post = rng_normal(1, (B, K, D), 3.0), rng_normal(2, (B, K, D))
    mu = np.asarray(fit.mu, np.float32)
    np.testing.assert_array_equal(np.asarray(head(h_pre, h_post)), np.broadcast_to(mu, (B, K, D)))  # W = b = 0
    params = nnx.state(head, nnx.Param)
    names = {"/".join(map(str, path)) for path, _ in nnx.to_flat_state(params)}
    assert names == {"w", "b", "norm/scale"}, names
    frozen = {"/".join(map(str, path)) for path, _ in nnx.to_flat_state(nnx.state(head, Frozen))}
    assert frozen == {"basis", "mu"}
    assert params["w"][...].shape == (fit.k, D)

    head.w[...] = rng_normal(3, (fit.k, D))
    head.b[...] = rng_normal(4, (fit.k,))
    u = np.asarray(head(h_pre, h_post), np.float64) - fit.mu
    inside = np.linalg.norm(u @ fit.basis, axis=-1) / np.linalg.norm(u, axis=-1)
    np.testing.assert_allclose(inside, 1.0, atol=1e-5)
    # in a rollout too: every generated latent lies in mu + span(P_k)
    cfg, graphdef, state = model
    head_def, head_state = nnx.split(head)
    zs, _, _ = rollout(graphdef, head_def, state, head_state, tokens(B, P), K, True)
    c = np.asarray(zs, np.float64) - fit.mu
    np.testing.assert_allclose(np.linalg.norm(c @ fit.basis, axis=-1) / np.linalg.norm(c, axis=-1), 1.0, atol=1e-5)


def test_ema_head_has_norm_m_and_the_update_rule():
    head = make_head("ema", D, ema_norm=2.5)
    h = rng_normal(5, (B, K, D), 40.0)
    u = head(h * 0.1, h)
    np.testing.assert_allclose(np.linalg.norm(np.asarray(u), axis=-1), 2.5, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(u / jnp.linalg.norm(u, axis=-1, keepdims=True)),
                               np.asarray(h / jnp.linalg.norm(h, axis=-1, keepdims=True)), rtol=1e-5, atol=1e-6)
    assert nnx.state(head, nnx.Param) == nnx.State({})
    np.testing.assert_allclose(ema_update(2.0, 4.0), 0.99 * 2.0 + 0.01 * 4.0)
    np.testing.assert_allclose(ema_update(2.0, 4.0, beta=0.5), 3.0)
    head.m[...] = ema_update(head.m[...], 4.0, beta=0.0)
    np.testing.assert_allclose(np.linalg.norm(np.asarray(head(h, h)), axis=-1), 4.0, rtol=1e-5)


def test_raw_heads_and_make_head_errors():
    h_pre, h_post = rng_normal(1, (B, D)), rng_normal(2, (B, D))
    np.testing.assert_array_equal(np.asarray(make_head("raw_post", D)(h_pre, h_post)), np.asarray(h_post))
    np.testing.assert_array_equal(np.asarray(make_head("raw_pre", D)(h_pre, h_post)), np.asarray(h_pre))
    lin = make_head("linear", D, rngs=nnx.Rngs(params=0))
    assert float(jnp.abs(lin.w[...]).max()) > 0 and float(jnp.abs(lin(h_pre, h_post)).max()) > 0  # not dead
    with pytest.raises(ValueError, match="unknown latent head 'pcaa'"):
        make_head("pcaa", D, rngs=nnx.Rngs(params=0))
    with pytest.raises(ValueError, match="needs fit"):
        make_head("pca", D, rngs=nnx.Rngs(params=0))
    with pytest.raises(ValueError, match="needs ema_norm"):
        make_head("ema", D)
    with pytest.raises(ValueError, match="the model d_model = 16"):
        make_head("pca", 16, fit=low_rank_fit(), rngs=nnx.Rngs(params=0))
    with pytest.raises(ValueError, match="must match"):
        make_head("raw_post", D)(h_pre, h_post[:, :4])


T = P + K + 3
LATENT_POS = tuple(range(P, P + K))


@functools.partial(jax.jit, static_argnums=(0, 1, 5))
def two_pass(graphdef, head_def, state, head_state, seq, latent_pos, zs=None, embeds=None, embed_mask=None):
    return two_pass_forward(nnx.merge(graphdef, state), nnx.merge(head_def, head_state), seq, latent_pos, zs=zs,
                            embeds=embeds, embed_mask=embed_mask)


def test_two_pass_teacher_forced_equals_a_direct_decoder_call(model):
    cfg, graphdef, state = model
    head_def, head_state = nnx.split(make_head("raw_post", D))
    seq, v_star = tokens(B, T), rng_normal(3, (B, K, D), 0.5)
    pe, pm = prompt_embeds(T)
    out, zs = two_pass(graphdef, head_def, state, head_state, seq, LATENT_POS, v_star, pe, pm)
    np.testing.assert_array_equal(np.asarray(zs), np.asarray(v_star))
    embeds = pe.at[:, P:P + K].set(v_star)
    mask = pm.at[:, P:P + K].set(True)
    direct = nnx.merge(graphdef, state)(seq, embeds=embeds, embed_mask=mask, hidden="prefinal")
    for key in ("logits", "hidden", "prefinal"):
        np.testing.assert_allclose(np.asarray(out[key]), np.asarray(direct[key]), rtol=1e-6, atol=1e-6)
    # non-contiguous slots are fine with given zs, not with generated ones
    spread = (P, P + 2, P + 4)
    out2, _ = two_pass(graphdef, head_def, state, head_state, seq, spread, v_star)
    direct2 = nnx.merge(graphdef, state)(seq, embeds=jnp.zeros((B, T, D)).at[:, spread].set(v_star),
                                         embed_mask=jnp.zeros((B, T), bool).at[:, spread].set(True))
    np.testing.assert_allclose(np.asarray(out2["logits"]), np.asarray(direct2["logits"]), rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="consecutive"):
        two_pass(graphdef, head_def, state, head_state, seq, spread)


def test_two_pass_generated_latents_reproduce_pass_one(model):
    """Pass 2 (no cache, all at once) sees the latents pass 1 (cache, step by step) made: with raw_post, N_f(h_L) at
    each slot's previous position in pass 2 is that slot's latent."""
    cfg, graphdef, state = model
    head_def, head_state = nnx.split(make_head("raw_post", D))
    seq = tokens(B, T)
    pe, pm = prompt_embeds(T)
    out, zs = two_pass(graphdef, head_def, state, head_state, seq, LATENT_POS, None, pe, pm)
    ref, _, _ = rollout(graphdef, head_def, state, head_state, seq[:, :P], K, True, pe[:, :P], pm[:, :P])
    np.testing.assert_allclose(np.asarray(zs), np.asarray(ref), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(out["hidden"][:, P - 1:P - 1 + K]), np.asarray(zs), rtol=1e-5, atol=1e-5)


def test_latent_losses_by_hand():
    zs, v = rng_normal(1, (B, K, D)), rng_normal(2, (B, K, D))
    z64, v64 = np.asarray(zs, np.float64), np.asarray(v, np.float64)
    mse = ((z64 - v64) ** 2).sum(-1) / D
    cos = 1 - (z64 * v64).sum(-1) / (np.linalg.norm(z64, axis=-1) * np.linalg.norm(v64, axis=-1))
    mask = np.array([[1, 0, 1], [0, 0, 1]], bool)
    np.testing.assert_allclose(float(latent_mse(zs, v)), mse.mean(), rtol=1e-5)
    np.testing.assert_allclose(float(latent_mse(zs, v, mask)), mse[mask].mean(), rtol=1e-5)
    np.testing.assert_allclose(float(latent_cos(zs, v, mask)), cos[mask].mean(), rtol=1e-5)
    has_latent = np.array([0, 1], bool)  # [B]: the whole example
    np.testing.assert_allclose(float(latent_mse(zs, v, has_latent)), mse[1].mean(), rtol=1e-5)
    assert float(latent_mse(zs, v, np.zeros(B, bool))) == 0.0
    assert float(latent_cos(v, v)) == pytest.approx(0.0, abs=1e-6)
    with pytest.raises(ValueError, match="mask"):
        latent_mse(zs, v, np.ones((K,), bool))


def test_interventions():
    zs, v, mu = rng_normal(1, (B, K, D)), rng_normal(2, (B, K, D)), rng_normal(3, (D,))
    assert np.all(np.asarray(intervene("zeros", zs)) == 0)
    noise = intervene("noise", zs, key=jax.random.key(0), norm=1.7)
    assert noise.shape == zs.shape
    np.testing.assert_allclose(np.linalg.norm(np.asarray(noise), axis=-1), 1.7, rtol=1e-5)
    other = intervene("noise", zs, key=jax.random.key(1), norm=1.7)
    assert float(jnp.abs(noise - other).max()) > 0.1
    np.testing.assert_array_equal(np.asarray(intervene("mean", zs, mu=mu)), np.broadcast_to(np.asarray(mu), zs.shape))
    swapped = np.asarray(intervene("swap", zs))
    np.testing.assert_array_equal(swapped, np.roll(np.asarray(zs), 1, axis=0))
    np.testing.assert_array_equal(swapped[0], np.asarray(zs)[-1])
    np.testing.assert_array_equal(np.asarray(intervene("oracle", zs, targets=v)), np.asarray(v))
    with pytest.raises(ValueError, match="needs key and norm"):
        intervene("noise", zs)
    with pytest.raises(ValueError, match="unknown kind"):
        intervene("shuffle", zs)

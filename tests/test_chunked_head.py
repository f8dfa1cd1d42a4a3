"""shared/model/chunked_head.py: per-token LM-head statistics chunk by chunk, equal to the dense path, with
bounded memory; the losses and the model that use it."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from shared import sharding as sh
from shared.config.base import base_config
from shared.model.chunked_head import ChunkedLogits, dense_stats, head_stats
from shared.train import losses

B, T, D, V = 3, 7, 16, 50


def case(seed=0, vocab=V, b=B, t=T):
    rng = np.random.default_rng(seed)
    hidden = jnp.asarray(rng.normal(size=(b, t, D)), jnp.float32)
    weight = jnp.asarray(0.5 * rng.normal(size=(vocab, D)), jnp.float32)
    targets = jnp.asarray(rng.integers(0, vocab, size=(b, t)), jnp.int32)
    mask = jnp.asarray(rng.random((b, t)) > 0.3, jnp.float32)
    cotangents = [jnp.asarray(rng.normal(size=(b, t)), jnp.float32) for _ in range(3)]
    return hidden, weight, targets, mask, cotangents


def objective(stats, mask, cotangents):
    """A scalar that weighs every differentiable statistic, masked: its gradient checks all three VJPs."""
    g_target, g_log_z, g_entropy = cotangents
    return jnp.sum(mask * (stats.target * g_target + stats.log_z * g_log_z + stats.entropy * g_entropy))


def numpy_stats(hidden, weight, targets):
    logits = np.einsum("btd,vd->btv", np.asarray(hidden, np.float64), np.asarray(weight, np.float64))
    top = logits.max(-1)
    log_z = top + np.log(np.exp(logits - top[..., None]).sum(-1))
    p = np.exp(logits - log_z[..., None])
    target = np.take_along_axis(logits, np.asarray(targets)[..., None], -1)[..., 0]
    return target, log_z, log_z - (p * logits).sum(-1), top


@pytest.mark.parametrize("chunk_tokens,chunk_vocab,vocab_axis", [
    (0, 0, 0),      # one chunk: the whole batch
    (6, 0, 0),      # 2 positions per chunk: 7 = 2+2+2+1, the last chunk overlaps
    (9, 0, 1),      # 3 per chunk, untied [D, V] layout
    (3, 16, 0),     # 1 position per chunk, vocabulary tiles of 16 (50 = 16+16+16+2, last tile overlaps)
    (12, 25, 1),    # tiles that divide the vocabulary
    (100, 64, 0),   # chunk and tile larger than the data
])
def test_chunked_stats_and_grads_equal_the_dense_path(chunk_tokens, chunk_vocab, vocab_axis):
    hidden, weight, targets, mask, cts = case()
    layout = weight if vocab_axis == 0 else weight.T

    def chunked(h, w):
        return objective(head_stats(h, w, targets, vocab_axis=vocab_axis, chunk_tokens=chunk_tokens,
                                    chunk_vocab=chunk_vocab), mask, cts)

    def dense(h, w):
        return objective(dense_stats(jnp.einsum("btd,vd->btv", h, w), targets), mask, cts)

    value, (dh, dw) = jax.value_and_grad(chunked, argnums=(0, 1))(hidden, layout)
    want, (want_dh, want_dw) = jax.value_and_grad(dense, argnums=(0, 1))(hidden, weight)
    dw = dw if vocab_axis == 0 else dw.T
    np.testing.assert_allclose(value, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dh, want_dh, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dw, want_dw, rtol=1e-5, atol=1e-5)
    stats = head_stats(hidden, layout, targets, vocab_axis=vocab_axis, chunk_tokens=chunk_tokens,
                       chunk_vocab=chunk_vocab)
    for got, ref in zip(stats, numpy_stats(hidden, weight, targets)):
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_entropy_gradient_matches_finite_differences():
    hidden, weight, targets, _, _ = case(seed=3, b=1, t=2)

    def entropy(h):
        return jnp.sum(head_stats(h, weight, targets, chunk_tokens=1, chunk_vocab=16).entropy)

    grad = np.asarray(jax.grad(entropy)(hidden), np.float64)
    h64 = np.asarray(hidden, np.float64)
    for index in [(0, 0, 0), (0, 1, 5), (0, 1, 15)]:
        eps = 1e-3
        up, down = h64.copy(), h64.copy()
        up[index] += eps
        down[index] -= eps
        numeric = (numpy_stats(up, weight, targets)[2].sum() - numpy_stats(down, weight, targets)[2].sum()) / (2 * eps)
        assert grad[index] == pytest.approx(numeric, rel=1e-3, abs=1e-4)


@pytest.mark.parametrize("chunk_tokens,chunk_vocab,vocab_axis", [
    (4, 16, 0),     # vocabulary tiles: the per-token statistics path, recomputed backward
    (4, 0, 0),      # whole vocabulary per chunk: the fused path (gradient made in the forward), last chunk overlaps
    (9, 0, 1),      # fused, untied [D, V] layout
    (0, 0, 0),      # fused, one chunk
])
def test_losses_read_chunked_logits_like_dense_logits(chunk_tokens, chunk_vocab, vocab_axis):
    hidden, weight, targets, mask, _ = case(seed=1)
    config = base_config()
    config.train.z_loss = 1e-2
    layout = weight if vocab_axis == 0 else weight.T
    lazy = ChunkedLogits(hidden, layout, vocab_axis, chunk_tokens, chunk_vocab)
    batch = {"targets": targets, "loss_mask": mask, "prompt_mask": jnp.zeros_like(mask).at[:, :2].set(1.0)}
    for name in ("lm_xent", "sft_xent"):
        fn = getattr(losses, name)

        def loss_of(h, w, dense):
            if dense:
                return fn(jnp.einsum("btd,vd->btv", h, w), batch, config)
            return fn(ChunkedLogits(h, w, vocab_axis, chunk_tokens, chunk_vocab), batch, config)

        (loss, metrics), grads = jax.value_and_grad(loss_of, argnums=(0, 1), has_aux=True)(hidden, layout, False)
        (want, want_metrics), want_grads = jax.value_and_grad(loss_of, argnums=(0, 1), has_aux=True)(
            hidden, weight, True)
        grads = grads if vocab_axis == 0 else (grads[0], grads[1].T)
        np.testing.assert_allclose(loss, want, rtol=1e-5)
        for key in want_metrics:
            np.testing.assert_allclose(metrics[key], want_metrics[key], rtol=1e-5, atol=1e-6, err_msg=key)
        for got, ref in zip(grads, want_grads):
            np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-6)
    assert lazy.shape == (B, T, V)
    np.testing.assert_allclose(lazy.dense(), jnp.einsum("btd,vd->btv", hidden, weight), rtol=1e-5, atol=1e-6)


def test_fused_xent_loss_sum_scales_with_its_cotangent_and_matches_eval():
    hidden, weight, targets, mask, _ = case(seed=4)
    lazy = ChunkedLogits(hidden, weight, chunk_tokens=6)

    def loss_sum(h, w, scale):
        return scale * losses.token_sums(ChunkedLogits(h, w, chunk_tokens=6), targets, mask, 1e-3)["loss_sum"]

    g1 = jax.grad(loss_sum, argnums=(0, 1))(hidden, weight, 1.0)
    g3 = jax.grad(loss_sum, argnums=(0, 1))(hidden, weight, 3.0)
    for a, b in zip(g1, g3):
        np.testing.assert_allclose(3 * a, b, rtol=1e-5, atol=1e-6)
    # under grad (the fused forward) and without it (the plain forward) the value is the same
    plain = losses.token_sums(lazy, targets, mask, 1e-3)["loss_sum"]
    traced, _ = jax.value_and_grad(loss_sum)(hidden, weight, 1.0)
    np.testing.assert_allclose(traced, plain, rtol=1e-6)


def test_model_chunked_logits_equal_its_dense_logits():
    from flax import nnx

    from shared.model import build_model

    cfg = base_config().model
    cfg.update(vocab_size=97, d_model=32, n_layers=2, n_heads=2, n_kv_heads=1, head_dim=16, d_ff=64,
               dtype="float32", remat="full", head_chunk_tokens=5, head_chunk_vocab=40)
    for tied in (True, False):
        cfg.tie_embeddings = tied
        model = build_model(cfg, seed=0)
        graphdef, params = nnx.split(model)
        tokens = jnp.asarray(np.random.default_rng(0).integers(0, 97, size=(2, 9)), jnp.int32)
        targets = jnp.roll(tokens, -1, axis=1)

        def nll(p, chunked):
            out = nnx.merge(graphdef, p)(tokens, attention="xla", logits="chunked" if chunked else "dense")
            return jnp.mean(losses.token_cross_entropy(out["logits"], targets)[0])

        value, grads = jax.value_and_grad(nll)(params, True)
        want, want_grads = jax.value_and_grad(nll)(params, False)
        np.testing.assert_allclose(value, want, rtol=1e-5)
        for got, ref in zip(jax.tree.leaves(grads), jax.tree.leaves(want_grads)):
            np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-6)


def compiled_temp_bytes(vocab, chunk_tokens, chunk_vocab, b=4, t=256, d=64):
    hidden = jax.ShapeDtypeStruct((b, t, d), jnp.float32)
    weight = jax.ShapeDtypeStruct((vocab, d), jnp.float32)
    targets = jax.ShapeDtypeStruct((b, t), jnp.int32)

    def loss(h, w, y):
        return jnp.mean(head_stats(h, w, y, chunk_tokens=chunk_tokens, chunk_vocab=chunk_vocab).nll)

    step = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))
    return step.lower(hidden, weight, targets).compile().memory_analysis().temp_size_in_bytes


def test_compiled_temp_memory_stays_bounded_when_the_vocabulary_grows_8x():
    small = compiled_temp_bytes(4096, chunk_tokens=64, chunk_vocab=1024)
    large = compiled_temp_bytes(32768, chunk_tokens=64, chunk_vocab=1024)
    dense_logits = 4 * 256 * 32768 * 4   # what a dense head's float32 logits alone would take at the large vocab
    # the large case adds only its float32 weight-gradient accumulator (vocab x d) over the small one
    assert large - small <= (32768 - 4096) * 64 * 4 * 2
    assert large < dense_logits / 4


def test_chunked_stats_on_eight_devices_equal_one_device():
    from jax.sharding import NamedSharding, PartitionSpec as P

    from shared.config.base import base_config as cfg_base

    mesh_cfg = cfg_base().mesh
    mesh_cfg.preset = "cpu_8"
    mesh = sh.make_mesh(mesh_cfg)
    hidden, weight, targets, mask, cts = case(seed=2, b=4, vocab=48)

    def run(h, w, y):
        return jax.value_and_grad(lambda h, w: objective(
            head_stats(h, w, y, chunk_tokens=4, chunk_vocab=0), mask, cts), argnums=(0, 1))(h, w)

    want = jax.jit(run)(hidden, weight, targets)
    with sh.use_mesh(mesh):
        rows = NamedSharding(mesh, P(("data", "fsdp")))
        vocab = NamedSharding(mesh, P("tensor", "fsdp"))
        got = jax.jit(run)(jax.device_put(hidden, rows), jax.device_put(weight, vocab),
                           jax.device_put(targets, rows))
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_head_stats_refuses_mismatched_shapes():
    hidden, weight, targets, _, _ = case()
    with pytest.raises(ValueError, match="disagree"):
        head_stats(hidden, weight, targets[:, :3])
    with pytest.raises(ValueError, match="model dimension"):
        head_stats(hidden, weight.T, targets, vocab_axis=0)

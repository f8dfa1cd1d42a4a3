"""shared/model/vision.py: patchify, PatchEmbed, the bidirectional ViT against a numpy reference, 8-device sharding,
the projector, and encode_frozen's zero gradients."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from shared import sharding as sh
from shared.model.vision import (PatchEmbed, Projector, VisionEncoder, build_vision, encode_frozen,
                                 encoder_model_config, patchify, vision_config)


def images(batch, cfg, seed=0):
    shape = (batch, cfg.image_size, cfg.image_size, cfg.channels)
    return jnp.asarray(np.random.RandomState(seed).uniform(size=shape), jnp.float32)


def randomized(module, seed=1, scale=0.3):
    """`module` (concrete or from nnx.eval_shape) with every parameter drawn from N(0, scale^2) on the host: norm
    gains, biases and position embeddings all differ from their ones/zeros init, so a reference that skipped any of
    them would fail. Host numpy, not jax.random: compiling threefry for every leaf takes seconds on a busy CPU."""
    graphdef, state = nnx.split(module)
    leaves, treedef = jax.tree.flatten(state)
    rng = np.random.RandomState(seed)
    leaves = [jnp.asarray(scale * rng.standard_normal(x.shape), x.dtype) for x in leaves]
    return nnx.merge(graphdef, jax.tree.unflatten(treedef, leaves))


def abstract(build, *args, **kwargs):
    return nnx.eval_shape(lambda: build(*args, **kwargs, rngs=nnx.Rngs(params=0)))


@functools.lru_cache(maxsize=None)
def encoder(**overrides):
    """A VisionEncoder with random parameters (`randomized`), once per configuration for the whole file; the real
    initialisation has its own test."""
    return randomized(abstract(VisionEncoder, vision_config(**overrides)))


def flat_params(module):
    return {k: np.asarray(v.get_value(), np.float64) for k, v in nnx.to_flat_state(nnx.state(module))}


# ------------------------------------------------------------------------------------------ numpy references


def np_patchify(x, p):
    b, h, w, c = x.shape
    out = np.empty((b, (h // p) * (w // p), p * p * c), x.dtype)
    for i in range(h // p):
        for j in range(w // p):
            out[:, i * (w // p) + j] = x[:, i * p:(i + 1) * p, j * p:(j + 1) * p, :].reshape(b, -1)
    return out


def np_layernorm(x, scale, bias, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * scale + bias


def np_gelu(x):  # jax.nn.gelu's default: the tanh approximation
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def np_softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def np_encoder(params, imgs, cfg):
    """Patch embed -> pre-norm blocks (full attention, qkv bias, GELU MLP) -> final LayerNorm, in float64."""
    eps = cfg.norm_eps
    x = np_patchify(np.asarray(imgs, np.float64), cfg.patch) @ params[("patch_embed", "kernel")]
    x = x + params[("patch_embed", "bias")] + params[("patch_embed", "pos")]
    for layer in range(cfg.n_layers):
        w = {k[1:]: v[layer] for k, v in params.items() if k[0] == "layers"}
        h = np_layernorm(x, w[("attn_norm", "scale")], w[("attn_norm", "bias")], eps)
        q = np.einsum("btd,dhk->bhtk", h, w[("attn", "q")]) + w[("attn", "q_bias")][:, None]
        k = np.einsum("btd,dhk->bhtk", h, w[("attn", "k")]) + w[("attn", "k_bias")][:, None]
        v = np.einsum("btd,dhk->bhtk", h, w[("attn", "v")]) + w[("attn", "v_bias")][:, None]
        probs = np_softmax(q @ k.transpose(0, 1, 3, 2) / np.sqrt(cfg.head_dim))   # no mask: bidirectional
        x = x + np.einsum("bhtk,hkd->btd", probs @ v, w[("attn", "o")])
        h = np_layernorm(x, w[("mlp_norm", "scale")], w[("mlp_norm", "bias")], eps)
        x = x + np_gelu(h @ w[("mlp", "up")]) @ w[("mlp", "down")]
    return np_layernorm(x, params[("final_norm", "scale")], params[("final_norm", "bias")], eps)


# ------------------------------------------------------------------------------------------ tests


def test_patchify_matches_a_numpy_loop_and_names_bad_shapes():
    x = np.arange(2 * 6 * 4 * 3, dtype=np.float32).reshape(2, 6, 4, 3)   # every value distinct
    out = np.asarray(patchify(jnp.asarray(x), 2))
    assert out.shape == (2, 6, 12)
    np.testing.assert_array_equal(out, np_patchify(x, 2))
    # first patch of image 0: rows 0-1, columns 0-1, all channels, in (row, column, channel) order
    np.testing.assert_array_equal(out[0, 0], np.concatenate([x[0, 0, 0], x[0, 0, 1], x[0, 1, 0], x[0, 1, 1]]))
    np.testing.assert_array_equal(out[0, 1], x[0, 0:2, 2:4].reshape(-1))   # next patch: to the right
    with pytest.raises(ValueError, match=r"\(6, 4\).*\(2, 6, 4, 3\).*multiples of patch 4"):
        patchify(jnp.asarray(x), 4)
    with pytest.raises(ValueError, match=r"\[B,H,W,C\].*\(6, 4\)"):
        patchify(jnp.zeros((6, 4)), 2)


def test_patch_embed_is_patches_times_w_plus_b_plus_pos():
    cfg = vision_config()
    embed = randomized(abstract(PatchEmbed, cfg))
    imgs = images(3, cfg)
    p = flat_params(embed)
    expected = np_patchify(np.asarray(imgs, np.float64), cfg.patch) @ p[("kernel",)] + p[("bias",)] + p[("pos",)]
    out = embed(imgs)
    assert out.shape == (3, 16, cfg.d_model)
    np.testing.assert_allclose(out, expected, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match=r"expected \[B, 28, 28, 1\]"):
        embed(jnp.zeros((1, 28, 28, 3)))


def test_config_is_bidirectional_and_rejects_unknown_keys():
    cfg = encoder_model_config(vision_config(n_layers=3))
    assert not cfg.causal and cfg.n_kv_heads == cfg.n_heads and cfg.n_layers == 3 and cfg.max_seq_len == 16
    with pytest.raises(KeyError, match="unknown keys.*'n_layer'"):
        vision_config(n_layer=3)
    with pytest.raises(ValueError, match="image_size 30 is not a multiple of patch 7"):
        VisionEncoder(vision_config(image_size=30), rngs=nnx.Rngs(params=0))


def test_initialisation_follows_init_std_and_gives_each_layer_its_own_weights():
    cfg = vision_config()

    @jax.jit   # one program: eager init dispatches (and compiles) every op on its own
    def build():
        enc, proj = build_vision(cfg, d_lm=32)
        return nnx.state(enc), nnx.state(proj)

    enc_state, proj_state = build()
    p = {k: np.asarray(v.get_value()) for k, v in nnx.to_flat_state(enc_state)}
    q = {k: np.asarray(v.get_value()) for k, v in nnx.to_flat_state(proj_state)}
    std = cfg.init_std
    assert p[("patch_embed", "kernel")].shape == (49, 64) and p[("patch_embed", "pos")].shape == (16, 64)
    assert p[("layers", "attn", "q")].shape == (2, 64, 4, 16)   # stacked: [n_layers, d, heads, head_dim]
    for key, want in [(("patch_embed", "kernel"), std), (("patch_embed", "pos"), std), (("layers", "attn", "q"), std),
                      (("layers", "attn", "o"), std / np.sqrt(2 * cfg.n_layers)), (("layers", "mlp", "up"), std)]:
        assert abs(p[key].std() / want - 1) < 0.1, (key, p[key].std(), want)
    assert abs(q[("w1",)].std() / std - 1) < 0.1 and q[("w2",)].shape == (32, 32)
    for key in [("patch_embed", "bias"), ("layers", "attn", "q_bias"), ("final_norm", "bias"), ("b1",), ("b2",)]:
        assert not (p | q)[key].any(), key
    assert (p[("final_norm", "scale")] == 1).all() and (p[("layers", "attn_norm", "scale")] == 1).all()
    assert not np.allclose(p[("layers", "attn", "q")][0], p[("layers", "attn", "q")][1])   # split rngs per layer


@pytest.mark.parametrize("n_layers", [1, 2])
def test_encoder_equals_numpy_reference(n_layers):
    cfg = vision_config(n_layers=n_layers)
    model = encoder(n_layers=n_layers)
    imgs = images(2, cfg)
    out = jax.jit(lambda m, x: m(x))(model, imgs)
    assert out.shape == (2, 16, cfg.d_model) and out.dtype == jnp.float32
    np.testing.assert_allclose(out, np_encoder(flat_params(model), imgs, cfg), atol=1e-5, rtol=1e-5)


def test_last_patch_changes_the_first_position():
    cfg = vision_config()
    model = functools.partial(jax.jit(lambda m, x: m(x)), encoder())
    imgs = images(1, cfg)
    moved = imgs.at[:, -cfg.patch:, -cfg.patch:, :].add(1.0)   # only the last (bottom-right) patch
    a, b = model(imgs), model(moved)
    assert float(jnp.abs(a[:, 0] - b[:, 0]).max()) > 1e-4         # a causal model would leave position 0 alone
    # and the encoder knows where each patch is: swapping two patches does not just swap their outputs
    swapped = imgs.at[:, :cfg.patch, :cfg.patch].set(imgs[:, -cfg.patch:, -cfg.patch:])
    swapped = swapped.at[:, -cfg.patch:, -cfg.patch:].set(imgs[:, :cfg.patch, :cfg.patch])
    c = model(swapped)
    assert float(jnp.abs(c[:, 0] - a[:, -1]).max()) > 1e-4


def test_sharded_run_on_8_devices_equals_one_device():
    cfg = vision_config()
    graphdef, state = nnx.split(encoder())
    imgs = images(4, cfg)
    one = jax.jit(lambda s, x: nnx.merge(graphdef, s)(x))(state, imgs)

    mesh = jax.sharding.Mesh(np.array(jax.devices()).reshape(2, 2, 2), sh.MESH_AXES)   # data, fsdp, tensor
    shardings = sh.state_shardings(state, mesh)
    sharded_state = jax.tree.map(lambda x, s: jax.device_put(x, s), state, shardings)
    up = sharded_state["layers"]["mlp"]["up"].get_value()
    assert up.sharding.spec == jax.sharding.PartitionSpec(None, "fsdp", "tensor")
    assert up.addressable_shards[0].data.shape == (cfg.n_layers, cfg.d_model // 2, cfg.d_ff // 2)
    sharded_imgs = jax.device_put(imgs, sh.batch_sharding(mesh, ndim=4))
    with sh.use_mesh(mesh):
        out = jax.jit(lambda s, x: nnx.merge(graphdef, s)(x))(sharded_state, sharded_imgs)
    assert out.sharding.spec[0] == ("data", "fsdp")   # rows stay split over the batch axes
    np.testing.assert_allclose(out, one, atol=1e-5, rtol=1e-5)


def test_projector_against_numpy():
    proj = randomized(abstract(Projector, 64, 32))
    x = jnp.asarray(np.random.RandomState(3).standard_normal((2, 5, 64)), jnp.float32)
    p = flat_params(proj)
    expected = np_gelu(np.asarray(x, np.float64) @ p[("w1",)] + p[("b1",)]) @ p[("w2",)] + p[("b2",)]
    np.testing.assert_allclose(proj(x), expected, atol=1e-5, rtol=1e-5)


def test_encode_frozen_gives_zero_gradients_to_the_encoder():
    cfg = vision_config(n_layers=1)
    graphdef, state = nnx.split(encoder(n_layers=1))
    imgs = images(2, cfg)
    target = jnp.asarray(np.random.RandomState(0).standard_normal((2, 16, cfg.d_model)), jnp.float32)

    def loss(state, encode):
        return jnp.sum((encode(nnx.merge(graphdef, state), imgs) - target) ** 2)

    @jax.jit   # both gradients in one program
    def grads(state):
        return jax.grad(loss)(state, encode_frozen), jax.grad(loss)(state, VisionEncoder.__call__)

    frozen, live = grads(state)
    assert all(float(jnp.abs(g).max()) == 0.0 for g in jax.tree.leaves(frozen))
    # without stop_gradient the same loss reaches every parameter (but the key bias: softmax ignores q.b_k, which
    # is the same for every key)
    for key, g in nnx.to_flat_state(live):
        if key[-1] != "k_bias":
            assert float(jnp.abs(g.get_value()).max()) > 0.0, key

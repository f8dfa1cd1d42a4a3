"""shared/model: KV-cache decode, packing, causal vs bidirectional, 8-device sharding, hidden states, remat, RoPE."""
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from shared import sharding as sh
from shared.config.base import model_config
from shared.model import build_model, create_sharded, init_cache
from shared.model.layers import rope_inv_freq

VOCAB, D, L, HEADS, KV, HEAD_DIM, FF = 64, 32, 2, 4, 2, 8, 64


def tiny_cfg(**overrides):
    cfg = model_config()
    # A large init std so attention patterns and every layer really shape the logits (0.02 gives ~uniform).
    defaults = dict(vocab_size=VOCAB, d_model=D, n_layers=L, n_heads=HEADS, n_kv_heads=KV, head_dim=HEAD_DIM,
                    d_ff=FF, dtype="float32", attention="xla", remat="none", init_std=0.3, max_seq_len=64)
    for key, value in {**defaults, **overrides}.items():
        cfg[key] = value
    return cfg


def split(cfg, seed=0):
    return nnx.split(build_model(cfg, seed))


def graphdef_of(cfg):
    return nnx.split(nnx.eval_shape(lambda: build_model(cfg)))[0]


def forward_fn(graphdef):
    """jit(state, tokens, positions, segment_ids) -> the decoder's output dict."""
    @jax.jit
    def forward(state, tokens, positions=None, segment_ids=None):
        return nnx.merge(graphdef, state)(tokens, positions, segment_ids, attention="xla")
    return forward


def tokens(batch, length, seed=0):
    return jnp.asarray(np.random.RandomState(seed).randint(0, VOCAB, size=(batch, length)), jnp.int32)


# ------------------------------------------------------------------------------------------ KV cache


@pytest.mark.parametrize("overrides", [dict(n_kv_heads=HEADS), dict(n_kv_heads=KV),
                                       dict(n_kv_heads=KV, sliding_window=3)],
                         ids=["mha", "gqa", "gqa_sliding_window"])
def test_kv_cache_decode_equals_full_forward(overrides):
    cfg = tiny_cfg(**overrides)
    graphdef, state = split(cfg)
    total, prompt = 10, 4
    seq = tokens(2, total)
    full = forward_fn(graphdef)(state, seq)["logits"]

    @jax.jit
    def step(state, chunk, cache, index):
        out = nnx.merge(graphdef, state)(chunk, cache=cache, cache_index=index, attention="xla")
        return out["logits"], out["cache"]

    cache = init_cache(cfg, 2, total)
    logits, cache = step(state, seq[:, :prompt], cache, jnp.int32(0))
    np.testing.assert_allclose(logits, full[:, :prompt], atol=1e-5, rtol=1e-5)
    for i in range(prompt, total):
        logits, cache = step(state, seq[:, i:i + 1], cache, jnp.int32(i))
        np.testing.assert_allclose(logits[:, 0], full[:, i], atol=1e-5, rtol=1e-5, err_msg=f"position {i}")
    if cfg.sliding_window:  # the window really limits attention: full attention differs at the last position
        unwindowed = forward_fn(graphdef_of(tiny_cfg(**{**overrides, "sliding_window": 0})))(state, seq)["logits"]
        assert np.abs(unwindowed[:, -1] - full[:, -1]).max() > 1e-3


@pytest.mark.parametrize("overrides", [dict(n_kv_heads=KV), dict(n_kv_heads=KV, sliding_window=3)],
                         ids=["gqa", "gqa_sliding_window"])
def test_tokamax_attention_equals_ours_in_logits_and_grads(overrides):
    """model.attention="tokamax" (the library's XLA path on CPU; its GPU kernels are compared in bench/) gives our
    attention's logits and gradients: causal, grouped-query heads, the sliding window."""
    graphdef, state = split(tiny_cfg(**overrides))
    seq = tokens(2, 9)

    def loss(state, attention):
        logits = nnx.merge(graphdef, state)(seq, attention=attention)["logits"]
        return optax.softmax_cross_entropy_with_integer_labels(logits[:, :-1], seq[:, 1:]).mean(), logits

    (l_ours, logits_ours), g_ours = jax.jit(jax.value_and_grad(lambda s: loss(s, "xla"), has_aux=True))(state)
    (l_tk, logits_tk), g_tk = jax.jit(jax.value_and_grad(lambda s: loss(s, "tokamax"), has_aux=True))(state)
    np.testing.assert_allclose(logits_tk, logits_ours, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(l_tk, l_ours, rtol=1e-6)
    for a, b in zip(jax.tree.leaves(g_tk), jax.tree.leaves(g_ours)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_tokamax_implementation_reaches_the_library():
    """model.tokamax_implementation picks tokamax's kernel: xla_chunked gives our logits on CPU, and a GPU-only kernel
    (triton) is refused by the library on CPU, so the value is passed through, not dropped."""
    import tokamax  # noqa: F401  (the test extra installs it)

    seq = tokens(2, 9)
    graphdef, state = split(tiny_cfg(n_kv_heads=KV))
    ours = nnx.merge(graphdef, state)(seq, attention="xla")["logits"]
    chunked_def, _ = split(tiny_cfg(n_kv_heads=KV, tokamax_implementation="xla_chunked"))
    chunked = nnx.merge(chunked_def, state)(seq, attention="tokamax")["logits"]
    np.testing.assert_allclose(chunked, ours, atol=1e-5, rtol=1e-5)
    triton_def, _ = split(tiny_cfg(n_kv_heads=KV, tokamax_implementation="triton"))
    with pytest.raises(NotImplementedError, match="cpu"):
        nnx.merge(triton_def, state)(seq, attention="tokamax")


# ------------------------------------------------------------------------------------------ packing


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "bidirectional"])
def test_packed_documents_do_not_attend_across_the_boundary(causal):
    graphdef, state = split(tiny_cfg(causal=causal))
    forward = forward_fn(graphdef)
    first, second = tokens(1, 5, seed=1), tokens(1, 7, seed=2)
    packed = jnp.concatenate([first, second], axis=1)
    segment_ids = jnp.asarray([[1] * 5 + [2] * 7], jnp.int32)
    positions = jnp.asarray([list(range(5)) + list(range(7))], jnp.int32)

    together = forward(state, packed, positions, segment_ids)["logits"]
    np.testing.assert_allclose(together[:, :5], forward(state, first)["logits"], atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(together[:, 5:], forward(state, second)["logits"], atol=1e-5, rtol=1e-5)
    # Without segment ids the second document sees the first (and, bidirectional, the first sees the second).
    mixed = forward(state, packed, positions, None)["logits"]
    assert np.abs(mixed[:, 5:] - together[:, 5:]).max() > 1e-3
    if not causal:
        assert np.abs(mixed[:, :5] - together[:, :5]).max() > 1e-3


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "bidirectional"])
def test_a_later_token_changes_earlier_logits_only_when_bidirectional(causal):
    graphdef, state = split(tiny_cfg(causal=causal))
    forward = forward_fn(graphdef)
    seq = tokens(1, 8)
    changed = seq.at[0, 6].set((seq[0, 6] + 1) % VOCAB)
    before, after = forward(state, seq)["logits"], forward(state, changed)["logits"]
    earlier_change = np.abs(before[:, :6] - after[:, :6]).max()
    if causal:
        assert earlier_change == 0.0
    else:
        assert earlier_change > 1e-3
    assert np.abs(before[:, 6:] - after[:, 6:]).max() > 1e-3


# ------------------------------------------------------------------------------------------ sharding


def loss_fn(graphdef, state, batch):
    logits = nnx.merge(graphdef, state)(batch["inputs"], attention="xla")["logits"]
    return optax.softmax_cross_entropy_with_integer_labels(logits, batch["targets"]).mean()


TRAIN_CFG = dict(n_kv_heads=KV, tie_embeddings=False)  # GQA, and a separate LM head to shard
SEQ = tokens(4, 9)
BATCH = {"inputs": SEQ[:, :-1], "targets": SEQ[:, 1:]}


@functools.lru_cache(maxsize=None)
def loss_and_grads(remat: str):
    """One-device (loss, grads) of TRAIN_CFG at `remat`, shared by the remat and sharding tests."""
    graphdef, state = split(tiny_cfg(remat=remat, **TRAIN_CFG))
    return state, jax.jit(jax.value_and_grad(lambda s, b: loss_fn(graphdef, s, b)))(state, BATCH)


def test_sharded_loss_and_grads_equal_one_device():
    cfg = tiny_cfg(remat="none", **TRAIN_CFG)
    state, (loss_one, grads_one) = loss_and_grads("none")
    mesh = jax.sharding.Mesh(np.array(jax.devices()).reshape(2, 2, 2), sh.MESH_AXES)
    graphdef, sharded_state = create_sharded(cfg, mesh)
    up = sharded_state["layers"]["mlp"]["up"].get_value()
    assert up.sharding.spec == jax.sharding.PartitionSpec(None, "fsdp", "tensor")
    assert up.addressable_shards[0].data.shape == (L, D // 2, FF // 2)  # a quarter of [L, D, F]
    # Same seed, same values (jit and eager may round the init's std * normal differently in the last bit).
    for a, b in zip(jax.tree.leaves(sharded_state), jax.tree.leaves(state)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0, atol=1e-6)
    sharded_state = jax.tree.map(lambda a, b: jax.device_put(b, a.sharding), sharded_state, state)

    sharded_batch = jax.device_put(BATCH, sh.batch_sharding(mesh))
    with sh.use_mesh(mesh):
        value_and_grad = jax.jit(jax.value_and_grad(lambda s, b: loss_fn(graphdef, s, b)))
        loss_sharded, grads_sharded = value_and_grad(sharded_state, sharded_batch)
    np.testing.assert_allclose(loss_sharded, loss_one, rtol=1e-5)
    flat_one, flat_sharded = dict(nnx.to_flat_state(grads_one)), dict(nnx.to_flat_state(grads_sharded))
    assert flat_one.keys() == flat_sharded.keys()
    for key, grad in flat_one.items():
        np.testing.assert_allclose(np.asarray(flat_sharded[key].get_value()), np.asarray(grad.get_value()),
                                   rtol=1e-5, atol=1e-6, err_msg=str(key))
    assert float(jnp.abs(flat_one[("layers", "mlp", "up")].get_value()).max()) > 1e-3


def test_remat_policies_give_the_same_loss_and_grads():
    _, (loss_none, grads_none) = loss_and_grads("none")
    for remat in ("full", "dots", "mlp"):
        _, (loss, grads) = loss_and_grads(remat)
        np.testing.assert_allclose(loss, loss_none, rtol=1e-6)
        for a, b in zip(jax.tree.leaves(grads), jax.tree.leaves(grads_none)):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)  # recomputation reassociates sums


def test_remat_mlp_saves_no_mlp_hidden_activation_and_keeps_attention(capsys):
    """model.remat="mlp": of the backward's saved residuals none has the MLP's [..., d_ff] width (remat "none"
    saves several) and the attention probabilities stay saved (remat "full" saves none of them)."""
    from shared.config.validate import REMAT_MODES
    from jax.ad_checkpoint import print_saved_residuals

    from shared.model.transformer import REMAT_POLICIES
    assert tuple(REMAT_POLICIES) == REMAT_MODES

    def saved(remat):
        graphdef, state = split(tiny_cfg(remat=remat, **TRAIN_CFG))
        print_saved_residuals(lambda s: loss_fn(graphdef, s, BATCH), state)
        lines = [x.split(" ")[0] for x in capsys.readouterr().out.splitlines() if "from the argument" not in x]
        b, t = BATCH["inputs"].shape
        mlp = [x for x in lines if x.endswith(f"[{L},{b},{t},{FF}]")]                      # per-layer [B,T,d_ff]
        probs = [x for x in lines if x.startswith(f"f32[{L},{b},") and x.endswith(f",{t},{t}]")]  # [B,...,T,T]
        return mlp, probs

    mlp_none, probs_none = saved("none")
    mlp_mlp, probs_mlp = saved("mlp")
    _, probs_full = saved("full")
    assert mlp_none and probs_none and not probs_full
    assert mlp_mlp == [] and probs_mlp, mlp_mlp


# ------------------------------------------------------------------------------------------ outputs


def np_rms_norm(x, scale, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * scale


def test_layer_hidden_pooled_and_scalar_head_against_numpy():
    cfg = tiny_cfg(heads=["lm", "scalar"])
    graphdef, state = split(cfg)
    seq = tokens(2, 6)
    mask = jnp.asarray([[1, 1, 1, 0, 0, 0], [1, 0, 1, 1, 1, 1]], jnp.int32)

    @jax.jit
    def forward(state, seq, mask):
        return nnx.merge(graphdef, state)(seq, hidden="layers", pool_mask=mask, attention="xla")

    out = forward(state, seq, mask)
    params = {k: np.asarray(v.get_value()) for k, v in nnx.to_flat_state(state)}
    layer_hidden = np.asarray(out["layer_hidden"])
    assert layer_hidden.shape == (L + 1, 2, 6, D)
    np.testing.assert_allclose(layer_hidden[0], params[("embed",)][np.asarray(seq)], rtol=1e-6)
    final = np_rms_norm(layer_hidden[-1], params[("final_norm", "scale")], cfg.norm_eps)
    np.testing.assert_allclose(out["hidden"], final, atol=1e-5, rtol=1e-5)
    assert not np.allclose(layer_hidden[1], layer_hidden[0])

    m = np.asarray(mask, np.float32)[..., None]
    np.testing.assert_allclose(out["pooled"], (final * m).sum(1) / m.sum(1), atol=1e-5, rtol=1e-5)
    assert out["scalar"].shape == (2, 6)
    expected = final @ params[("heads", "scalar", "kernel")] + params[("heads", "scalar", "bias")]
    np.testing.assert_allclose(out["scalar"], expected, atol=1e-5, rtol=1e-5)
    assert out["logits"].shape == (2, 6, VOCAB)


def test_qk_norm_and_qkv_bias_forward_uses_them():
    cfg = tiny_cfg(qk_norm=True, qkv_bias=True)
    graphdef, state = split(cfg)
    forward = forward_fn(graphdef)
    seq = tokens(2, 6)
    logits = forward(state, seq)["logits"]
    assert logits.shape == (2, 6, VOCAB) and bool(jnp.isfinite(logits).all())
    for path, change in [(("layers", "attn", "q_norm", "scale"), lambda x: 3.0 * x),
                         (("layers", "attn", "v_bias"), lambda x: x + 0.5)]:
        changed = nnx.from_flat_state([(k, v.replace(change(v.get_value())) if k == path else v)
                                       for k, v in nnx.to_flat_state(state)])
        assert np.abs(forward(changed, seq)["logits"] - logits).max() > 1e-3, path


# ------------------------------------------------------------------------------------------ RoPE


def hf_llama3_inv_freq(head_dim, theta, factor, low, high, original):
    """transformers' _compute_llama3_parameters, in numpy."""
    inv = 1.0 / (theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim))
    low_wavelen, high_wavelen = original / low, original / high
    wavelen = 2 * math.pi / inv
    out = np.where(wavelen > low_wavelen, inv / factor, inv)
    smooth = (original / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * out / factor + smooth * out
    medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
    return np.where(medium, smoothed, out)


def test_rope_inv_freq_scalings_match_hf_formulas():
    cfg = tiny_cfg(head_dim=64, rope_theta=500000.0)
    plain = 1.0 / (500000.0 ** (np.arange(0, 64, 2) / 64))
    np.testing.assert_allclose(rope_inv_freq(cfg), plain, rtol=1e-6)

    cfg.rope_scaling.update(dict(type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                 original_max_position=8192))
    expected = hf_llama3_inv_freq(64, 500000.0, 8.0, 1.0, 4.0, 8192)
    got = np.asarray(rope_inv_freq(cfg))
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    # All three regimes occur: unscaled high frequencies, divided low ones, and smoothed ones between.
    ratio = plain / got
    assert np.isclose(ratio, 1.0).any() and np.isclose(ratio, 8.0).any()
    assert ((ratio > 1.01) & (ratio < 7.99)).any()

    cfg.rope_scaling.update(dict(type="linear", factor=4.0))
    np.testing.assert_allclose(rope_inv_freq(cfg), plain / 4.0, rtol=1e-6)

"""projects/siamesenorm blocks: forwards against numpy references of the spec's equations, depth constants,
DeepNorm constants and init, gradients through both streams, KV-cache decode, HF export refusal, config checks."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import shared.builtin  # noqa: F401
from projects.siamesenorm import NAMES, block_options, deepnorm_constants, depth_divisor
from projects.siamesenorm.blocks import check_block_options
from projects.siamesenorm.tests import reference
from shared.config import base_config
from shared.config.base import model_config
from shared.model import build_model, init_cache
from shared.model.convert.hf import hf_config_from

VOCAB, T = 48, 6


def tiny_cfg(block, n_layers=3, **options):
    cfg = model_config()
    for key, value in dict(vocab_size=VOCAB, d_model=32, n_layers=n_layers, n_heads=4, n_kv_heads=2, head_dim=8,
                           d_ff=48, dtype="float32", attention="xla", remat="none", init_std=0.3, qk_norm=True,
                           norm_eps=1e-5, block=block).items():
        cfg[key] = value
    cfg.block_options = block_options()
    cfg.block_options.update(options)
    return cfg


def build(cfg, seed=0):
    """The model with every gain (norm scales, alpha) drawn from U(0.5, 1.5), so a swapped or skipped norm
    changes the logits."""
    model = build_model(cfg, seed)
    state = nnx.state(model, nnx.Param)
    rng = np.random.RandomState(seed + 1)
    gains = jax.tree_util.tree_map_with_path(
        lambda path, x: jnp.asarray(rng.uniform(0.5, 1.5, x.shape), x.dtype)
        if str(getattr(path[-1], "key", "")) == "scale" else x, state.to_pure_dict())
    state.replace_by_pure_dict(gains)
    nnx.update(model, state)
    return model


def tokens(batch=2, seed=0):
    return jnp.asarray(np.random.RandomState(seed).randint(0, VOCAB, (batch, T)), jnp.int32)


CASES = [  # (block, block_options): every block, and every option that changes the equations
    ("siamesenorm/siamese", {}),
    ("siamesenorm/siamese", dict(input_norm=False, depth_scaling="none", readout="x")),
    ("siamesenorm/siamese", dict(depth_scaling="sublayer", readout="y")),
    ("siamesenorm/siamese_hybrid", {}),
    ("siamesenorm/siamese_hybrid", dict(v_norm=False, input_norm=False, depth_scaling="none", readout="y")),
    ("siamesenorm/hybridnorm", {}),
    ("siamesenorm/hybridnorm", dict(depth_scaling="block", hybrid_first_prenorm=True)),
    ("siamesenorm/deepnorm", {}),
    ("siamesenorm/mixln", dict(mixln_post_fraction=0.5)),
    ("siamesenorm/periln", {}),
    ("siamesenorm/residual", {}),
    ("siamesenorm/residual", dict(residual_dual_init="zeros", qk_norm=False)),
]
# The X-stream (post-norm-like) and Y-stream (pre-norm-like) gains of each SiameseNorm form.
STREAM_GAINS = {"siamesenorm/siamese": (["attn_post", "mlp_post"], ["attn_pre", "mlp_pre"]),
                "siamesenorm/siamese_hybrid": (["attn_x_gain", "mlp_x_norm"], ["attn_y_norm", "mlp_y_norm"])}


def case_id(case):
    name, options = case
    return name.split("/")[-1] + "".join(f"-{k}={v}" for k, v in options.items())


def test_every_registered_block_has_a_reference_case():
    assert set(NAMES) == {name for name, _ in CASES}


def logits_and_layer_grads(model, seq):
    """(logits, per-layer max |gradient| of every parameter under the layers, as [L] arrays), one compile."""
    graphdef, state = nnx.split(model)

    @jax.jit
    def run(state):
        def loss(state):
            logits = nnx.merge(graphdef, state)(seq, attention="xla")["logits"]
            picked = jnp.take_along_axis(logits, seq[..., None], -1)[..., 0]
            return jnp.mean(jax.nn.logsumexp(logits, -1) - picked), logits
        return jax.grad(loss, has_aux=True)(state)

    grads, logits = run(state)
    per_layer = jax.tree.map(lambda g: np.abs(np.asarray(g)).reshape(g.shape[0], -1).max(1),
                             grads.to_pure_dict()["layers"])
    return np.asarray(logits), per_layer


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_forward_matches_numpy_reference_and_gradients_reach_every_block(case):
    name, options = case
    options = dict(options)
    qk_norm = options.pop("qk_norm", True)
    cfg = tiny_cfg(name, n_layers=3, **options)
    cfg.qk_norm = qk_norm
    model = build(cfg)
    seq = tokens()
    logits, grads = logits_and_layer_grads(model, seq)
    params = jax.tree.map(lambda x: np.asarray(x, np.float64), nnx.state(model, nnx.Param).to_pure_dict())
    expected = reference.forward(name, params, cfg, np.asarray(seq), {**block_options().to_dict(), **options})
    np.testing.assert_allclose(logits, expected, rtol=2e-4, atol=2e-4)

    # Every block's attention and MLP weights learn.
    for key in ("attn", "mlp"):
        for leaf, per_layer in jax.tree_util.tree_leaves_with_path(grads[key]):
            assert (per_layer > 1e-7).all(), f"{key}{jax.tree_util.keystr(leaf)}: grads per layer {per_layer}"
    if name in STREAM_GAINS:
        # Both streams are read in every block, even when the readout reads one stream only: the streams
        # are coupled through the shared sublayers (the off-diagonal blocks of the layer Jacobian).
        x_gains, y_gains = STREAM_GAINS[name]
        for key in x_gains + y_gains:
            assert (grads[key]["scale"] > 1e-7).all(), f"{key}: grads per layer {grads[key]['scale']}"
        for key in [k for k in ("readout_x", "readout_y") if k in grads]:  # only the last block's copy is used
            assert grads[key]["scale"][-1] > 1e-7 and (grads[key]["scale"][:-1] == 0).all(), key


def test_depth_divisor_constants():
    # Released code: c_b = sqrt(2(b+1)) for both sublayers (spec §1.2: 1.414, 4.90, 5.66 for blocks 0, 11, 15).
    for b, expected in [(0, 1.41421356), (11, 4.89897949), (15, 5.65685425)]:
        for s in (0, 1):
            assert float(depth_divisor("block", b, s)) == pytest.approx(expected, rel=1e-6)
    # Paper notation 1/sqrt(l+1), l = 2b + s: attn of block 0 -> 1, mlp of block 0 -> sqrt(2) = the code's value.
    assert float(depth_divisor("sublayer", 0, 0)) == pytest.approx(1.0)
    assert float(depth_divisor("sublayer", 0, 1)) == pytest.approx(math.sqrt(2))
    assert float(depth_divisor("sublayer", 3, 0)) == pytest.approx(math.sqrt(7))
    assert depth_divisor("none", 5, 1) == 1.0
    with pytest.raises(ValueError, match="depth_scaling"):
        depth_divisor("auto", 0, 0)


def test_deepnorm_constants_and_init():
    alpha, beta = deepnorm_constants(12)
    assert alpha == pytest.approx(24 ** 0.25) and beta == pytest.approx(96 ** -0.25)
    n_layers, std = 4, 0.02
    cfg = tiny_cfg("siamesenorm/deepnorm", n_layers=n_layers)
    cfg.init_std = std
    layers = nnx.state(build_model(cfg), nnx.Param).to_pure_dict()["layers"]
    beta = deepnorm_constants(n_layers)[1]
    out_std = std / math.sqrt(2 * n_layers)  # the shared layers' init of the attention output and MLP down
    expected = {("attn", "q"): std, ("attn", "k"): std, ("attn", "v"): std * beta, ("attn", "o"): out_std * beta,
                ("mlp", "gate"): std * beta, ("mlp", "up"): std * beta, ("mlp", "down"): out_std * beta}
    for (sub, name), value in expected.items():
        assert np.std(layers[sub][name]) == pytest.approx(value, rel=0.1), (sub, name)


@pytest.mark.parametrize("name", ["siamesenorm/siamese_hybrid", "siamesenorm/periln"])
def test_kv_cache_decode_equals_full_forward(name):
    """Prefill then one token at a time equals the full forward: the QKV-norm attention's cache path, and the
    block counter restarting with every call (Peri-LN normalises the embedding in block 0 only)."""
    cfg = tiny_cfg(name)
    model = build(cfg)
    graphdef, state = nnx.split(model)
    seq = tokens()
    full = np.asarray(model(seq, attention="xla")["logits"])

    @jax.jit
    def step(state, chunk, cache, index):
        out = nnx.merge(graphdef, state)(chunk, cache=cache, cache_index=index, attention="xla")
        return out["logits"], out["cache"]

    logits, cache = step(state, seq[:, :3], init_cache(cfg, 2, T), jnp.int32(0))
    np.testing.assert_allclose(logits, full[:, :3], atol=1e-5, rtol=1e-5)
    for i in range(3, T):
        logits, cache = step(state, seq[:, i:i + 1], cache, jnp.int32(i))
        np.testing.assert_allclose(logits[:, 0], full[:, i], atol=1e-5, rtol=1e-5, err_msg=f"{name} position {i}")


def test_bf16_streams_keep_their_dtype():
    """With bf16 compute (the GPU tables) every block traces: the carry keeps its dtypes through the scan
    (a float32 depth divisor would promote the stream). Tracing only (eval_shape), nothing compiles."""
    for name in NAMES:
        cfg = tiny_cfg(name, depth_scaling="block" if "hybridnorm" in name else "auto")
        cfg.dtype = "bfloat16"
        graphdef, state = nnx.split(nnx.eval_shape(lambda: build_model(cfg)))
        out = jax.eval_shape(lambda s, x: nnx.merge(graphdef, s)(x, attention="xla")["logits"], state, tokens())
        assert out.dtype == jnp.bfloat16, name


@pytest.mark.parametrize("name", NAMES)
def test_hf_export_refuses_blocks_no_hf_family_has(name):
    cfg = tiny_cfg(name)
    cfg.family = "qwen3"  # qk-norm on: everything but the block is a Qwen3 layout
    with pytest.raises(ValueError, match=f"model.block='{name}'"):
        hf_config_from(cfg)
    cfg.block = "prenorm"  # the check is about the block, not blanket
    assert hf_config_from(cfg)["model_type"] == "qwen3"


@pytest.mark.parametrize("key,value", [("depth_scaling", "layer"), ("readout", "sum"),
                                       ("residual_dual_init", "ones"), ("mixln_post_fraction", 1.5)])
def test_bad_block_options_name_the_key(key, value):
    config = base_config()
    config.model.block = "siamesenorm/siamese"
    config.model.block_options = block_options()
    config.model.block_options[key] = value
    with pytest.raises(ValueError, match=f"model.block_options.{key}="):
        check_block_options(config, {})
    config.model.block = "prenorm"  # other projects' configs are left alone
    check_block_options(config, {})

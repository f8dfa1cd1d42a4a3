"""shared/model/splash_attention.py: jax's Pallas TPU splash kernel, run through the Pallas interpreter on CPU,
against the XLA path (forward and q/k/v gradients, f32) for every mask the model builds; a whole Decoder with
attention=splash against attention=xla, one device and sharded over the 8 fake devices; and the train step
compiled for TPU v5e and v5p topologies (libtpu, no TPU)."""
import functools
import os
import re
import subprocess
import sys
import textwrap
import types

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from shared import sharding as sh
from shared.model import attention_implementation, create_sharded
from shared.model.layers import AttentionContext, _mask, xla_attention
from shared.model.splash_attention import block_size, padded_length, splash_attention
from tests.test_model import split, tiny_cfg, tokens

from conftest import REPO_ROOT

B, H, D = 2, 4, 8


def packed_segments(t):
    """Row 0: two documents then padding (segment 0); row 1: three documents, no padding."""
    seg = np.ones((B, t), np.int32)
    seg[0, t // 3:2 * t // 3], seg[0, 2 * t // 3:] = 2, 0
    seg[1, t // 4:t // 2], seg[1, t // 2:] = 5, 9
    return jnp.asarray(seg)


CASES = {  # name: (T, KV heads, causal, sliding window, packed); T not a multiple of 128 pads inside the wrapper
    "causal": (128, H, True, 0, False),
    "bidirectional": (40, H, False, 0, False),
    "sliding_window": (40, H, True, 5, False),
    "bidirectional_sliding_window": (40, 2, False, 7, False),
    "packed_with_padding_segment": (48, H, True, 0, True),
    "gqa_packed_sliding_window": (40, 2, True, 6, True),
    "mqa_bidirectional_packed": (40, 1, False, 0, True),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_and_grads_equal_the_xla_path(name):
    t, kv, causal, window, packed = CASES[name]
    rng = np.random.RandomState(0)
    q, k, v = (jnp.asarray(rng.randn(B, t, n, D), jnp.float32) for n in (H, kv, kv))
    seg = packed_segments(t) if packed else None
    cfg = types.SimpleNamespace(causal=causal, sliding_window=window)
    mask = _mask(AttentionContext(positions=None, segment_ids=seg), cfg, t, t)
    weight = jnp.asarray(rng.randn(B, t, H, D), jnp.float32)  # a loss that weighs every output differently

    def xla(q, k, v):
        return xla_attention(q, k, v, mask)

    def splash(q, k, v):
        return splash_attention(q, k, v, seg, causal=causal, sliding_window=window)

    def value_and_grads(f):
        return jax.jit(lambda q, k, v: (f(q, k, v), jax.grad(lambda *a: (f(*a) * weight).sum(), (0, 1, 2))(q, k, v)))

    (out_x, grads_x), (out_s, grads_s) = value_and_grads(xla)(q, k, v), value_and_grads(splash)(q, k, v)
    np.testing.assert_allclose(out_s, out_x, atol=2e-5, rtol=1e-5)
    for name_, a, b in zip("qkv", grads_s, grads_x):
        np.testing.assert_allclose(a, b, atol=5e-5, rtol=1e-4, err_msg=f"d{name_}")


def test_bf16_inputs_give_bf16_outputs_close_to_the_xla_path():
    rng = np.random.RandomState(1)
    q, k, v = (jnp.asarray(rng.randn(B, 128, n, D), jnp.bfloat16) for n in (H, 2, 2))
    cfg = types.SimpleNamespace(causal=True, sliding_window=0)
    out = jax.jit(lambda q, k, v: splash_attention(q, k, v, causal=True))(q, k, v)
    ref = xla_attention(q, k, v, _mask(AttentionContext(positions=None), cfg, 128, 128))
    assert out.dtype == jnp.bfloat16
    np.testing.assert_allclose(np.asarray(out, np.float32), np.asarray(ref, np.float32), atol=3e-2)


def test_sequence_padding_and_block_choice():
    assert [padded_length(t) for t in (1, 64, 128, 129, 2048)] == [128, 128, 128, 256, 2048]
    assert [block_size(t) for t in (128, 256, 384, 512, 1536, 2048)] == [128, 256, 128, 512, 512, 512]


def test_auto_picks_splash_on_tpu():
    cfg = tiny_cfg(attention="auto")
    assert [attention_implementation(cfg, None, p) for p in ("cpu", "gpu", "tpu")] == ["xla", "cudnn", "splash"]


# ------------------------------------------------------------------------------------------ the whole model

MODEL = dict(n_kv_heads=2, sliding_window=6, tie_embeddings=False, remat="full")  # GQA, a window in 24 tokens
SEQ = tokens(8, 25, seed=3)
SEGMENTS = jnp.asarray(np.repeat([[1] * 10 + [2] * 11 + [0] * 3], 8, 0), jnp.int32)  # two documents, padding
POSITIONS = jnp.asarray(np.repeat([list(range(10)) + list(range(11)) + [0] * 3], 8, 0), jnp.int32)


def model_loss(graphdef, attention):
    def loss(state, seq, positions, segments):
        logits = nnx.merge(graphdef, state)(seq[:, :-1], positions, segments, attention=attention)["logits"]
        return optax.softmax_cross_entropy_with_integer_labels(logits, seq[:, 1:]).mean(), logits
    return jax.jit(jax.value_and_grad(loss, has_aux=True))


@functools.lru_cache(maxsize=None)
def one_device(attention):
    """(state, ((loss, logits), grads)) of MODEL on one device, shared by the tests below."""
    graphdef, state = split(tiny_cfg(**MODEL))
    return state, model_loss(graphdef, attention)(state, SEQ, POSITIONS, SEGMENTS)


def assert_same(result, expected, atol):
    (loss, logits), grads = result
    (loss_ref, logits_ref), grads_ref = expected
    np.testing.assert_allclose(logits, logits_ref, atol=atol, rtol=1e-5)
    np.testing.assert_allclose(loss, loss_ref, rtol=1e-6)
    for a, b in zip(jax.tree.leaves(grads), jax.tree.leaves(grads_ref)):
        np.testing.assert_allclose(a, b, atol=atol / 10, rtol=1e-4)


def test_decoder_with_splash_equals_xla_forward_and_grads():
    assert_same(one_device("splash")[1], one_device("xla")[1], atol=1e-4)


@pytest.mark.parametrize("shape", [(1, 8, 1), (2, 2, 2)], ids=["fsdp8", "data2_fsdp2_tensor2"])
def test_sharded_splash_decoder_equals_one_device(shape):
    """Rows split over (data, fsdp) and, with tensor=2, heads (4) and KV heads (2) over tensor in the shard_map."""
    state, expected = one_device("splash")
    mesh = jax.sharding.Mesh(np.array(jax.devices()).reshape(shape), sh.MESH_AXES)
    graphdef, sharded = create_sharded(tiny_cfg(**MODEL), mesh)
    sharded = jax.tree.map(lambda a, b: jax.device_put(b, a.sharding), sharded, state)
    with sh.use_mesh(mesh):
        step = model_loss(graphdef, "splash")
        args = (sharded, *jax.device_put((SEQ, POSITIONS, SEGMENTS), sh.batch_sharding(mesh)))
        assert "splash" in step.lower(*args).as_text()  # the kernel, not a fallback
        assert_same(step(*args), expected, atol=1e-5)


# ------------------------------------------------------------------------------------------ TPU compile

AOT_SCRIPT = textwrap.dedent("""
    import re
    from shared import sharding as sh
    from shared.aot import Options, Slice, programs
    from shared.config import load_config
    for preset, overrides in [
            ("v5e_16", ["model.dtype=bfloat16", "mesh.tensor=2", "mesh.fsdp=-1"]),  # heads split over tensor
            ("v5p_8", ["model.dtype=bfloat16", "model.sliding_window=32", "data.seq_len=96", "model.n_kv_heads=1"])]:
        config = load_config("experiments/quickstart.py", ["model.attention=splash", *overrides])
        config.mesh.preset = preset
        sl = Slice.of(preset)
        (train,) = programs(config, sl, Options(steps=("train",)))  # the run's own jitted train step
        with sh.use_mesh(train.mesh, train.rules):
            compiled = train.fn.lower(*train.args, **train.kwargs).compile()
        kernels = sorted(set(re.findall(r"splash_mha_[a-z_]+", compiled.as_text())))
        print("compiled", preset, sl.chip, len(sl.devices), compiled.memory_analysis().temp_size_in_bytes,
              ",".join(kernels))
""")


def test_train_step_with_splash_compiles_for_tpu_v5e_and_v5p():
    pytest.importorskip("libtpu", reason="the TPU compiler comes with the tpu extra (CI installs it)")
    env = {**os.environ, "PYTHONPATH": REPO_ROOT, "JAX_PLATFORMS": "cpu"}
    env.pop("XLA_FLAGS", None)  # the 8 fake CPU devices of the tests are not the TPU slice
    out = subprocess.run([sys.executable, "-c", AOT_SCRIPT], cwd=REPO_ROOT, capture_output=True, text=True,
                         timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = dict(re.findall(r"compiled (\w+) (.*)", out.stdout))
    assert set(lines) == {"v5e_16", "v5p_8"}, out.stdout
    for preset, chips in (("v5e_16", "v5e 16"), ("v5p_8", "v5p 4")):
        assert lines[preset].startswith(chips)
        # forward (saving the softmax residuals) and both backward kernels, segmented (the batch's segment ids)
        assert lines[preset].split()[-1] == ("splash_mha_dkv_segmented_no_residuals,splash_mha_dq_segmented_"
                                            "no_residuals,splash_mha_fwd_segmented_residuals"), lines[preset]


def test_siamesenorm_hybrid_attention_with_splash_equals_xla():
    """projects/siamesenorm's own attention (v-norm inside) takes splash too: it is the TPU default."""
    from projects.siamesenorm.tests.test_blocks import build, tiny_cfg as siamese_cfg

    cfg = siamese_cfg("siamesenorm/siamese_hybrid")
    graphdef, state = nnx.split(build(cfg))
    seq = tokens(2, 12, seed=4)
    run = jax.jit(lambda s, attention: nnx.merge(graphdef, s)(seq, attention=attention)["logits"],
                  static_argnums=1)
    np.testing.assert_allclose(run(state, "splash"), run(state, "xla"), atol=1e-4, rtol=1e-5)

"""The decode-step Pallas kernels, interpreted on CPU: shared/model/decode_attention.py and
shared/rl/vocab_kernel.py against numpy, and the sampler with them against the sampler with XLA ops."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from shared import sharding as sh
from shared.model import create_sharded
from shared.model.decode_attention import BLOCK_SLOTS, decode_attention, supported
from shared.rl.sampler import Sampler, SamplingParams
from tests.test_sampler import BUCKETS, CFG, TOK, T, greedy, model, prompts_of, sampler, tiny_cfg  # noqa: F401


def numpy_attention(q, k, v, start, end):
    b, h, d = q.shape
    group = h // k.shape[2]
    out = np.zeros((b, h, d), np.float64)
    for row in range(b):
        if end[row] <= start[row]:
            continue  # nothing visible: zeros, as the dense path
        for head in range(h):
            keys = k[row, start[row]:end[row], head // group].astype(np.float64)
            scores = keys @ q[row, head].astype(np.float64) / np.sqrt(d)
            p = np.exp(scores - scores.max())
            out[row, head] = (p / p.sum()) @ v[row, start[row]:end[row], head // group].astype(np.float64)
    return out


@pytest.mark.parametrize("dtype,atol", [(np.float32, 2e-6), (jnp.bfloat16, 2e-2)])
def test_kernel_equals_numpy_over_the_visible_slots(dtype, atol):
    rng = np.random.default_rng(0)
    b, s, kv, group, d = 5, 2 * BLOCK_SLOTS, 2, 7, 16   # 7 query heads per KV head, padded inside to 16
    q = rng.normal(size=(b, kv * group, d)).astype(np.float32)
    k = rng.normal(size=(b, s, kv, d)).astype(np.float32)
    v = rng.normal(size=(b, s, kv, d)).astype(np.float32)
    # full cache; left padding; a range across the block edge; one slot; an empty range
    start = np.array([0, 5, BLOCK_SLOTS - 3, 40, 70])
    end = np.array([s, 100, BLOCK_SLOTS + 2, 41, 70])
    cast = lambda x: jnp.asarray(x, dtype)  # noqa: E731
    out = decode_attention(cast(q), cast(k), cast(v), jnp.asarray(start), jnp.asarray(end), interpret=True)
    ref = numpy_attention(*(np.asarray(cast(x), np.float32) for x in (q, k, v)), start, end)
    np.testing.assert_allclose(np.asarray(out, np.float32), ref, atol=atol)
    assert not np.any(np.asarray(out, np.float32)[4])  # empty range -> zeros
    # slots outside [start, end) do not matter: overwrite them and get the same answer
    k2, v2 = k.copy(), v.copy()
    k2[1, :5], v2[1, 100:] = 1e3, -1e3
    out2 = decode_attention(cast(q), cast(k2), cast(v2), jnp.asarray(start), jnp.asarray(end), interpret=True)
    np.testing.assert_array_equal(np.asarray(out2[1], np.float32), np.asarray(out[1], np.float32))


def test_unsupported_shapes_are_refused():
    assert supported(3 * BLOCK_SLOTS, 64) and not supported(BLOCK_SLOTS + 1, 64)
    assert not supported(BLOCK_SLOTS, 8) and not supported(BLOCK_SLOTS, 80)  # Triton: dot K >= 16, powers of two
    q, kv = jnp.zeros((1, 2, 16)), jnp.zeros((1, BLOCK_SLOTS + 1, 1, 16))
    with pytest.raises(ValueError, match="multiple of"):
        decode_attention(q, kv, kv, jnp.zeros(1, jnp.int32), jnp.ones(1, jnp.int32), interpret=True)


@pytest.fixture(scope="module")
def model16():
    """The sampler tests' model with head_dim 16 (the kernel's smallest)."""
    from flax import nnx

    from shared.model import build_model
    cfg = tiny_cfg()
    cfg.head_dim = 16
    graphdef = nnx.split(nnx.eval_shape(lambda: build_model(cfg)))[0]
    return cfg, graphdef, jax.jit(lambda: nnx.split(build_model(cfg, seed=0))[1])()


@pytest.mark.parametrize("layer_loop", ["scan", "python"])
def test_sampler_with_kernel_equals_dense_attention(model16, layer_loop, monkeypatch):
    from shared.model import decode_attention as kernel_module
    traced = []
    original = kernel_module.sharded_decode_attention
    monkeypatch.setattr(kernel_module, "sharded_decode_attention", lambda *a, **k: traced.append(1) or original(*a, **k))
    cfg, graphdef, params = model16
    sampler = Sampler(graphdef, cfg, eos_id=-1, pad_id=TOK.pad_id, tokenizer=TOK, batch_multiple=8,
                      layer_loop=layer_loop, decode_attention="xla")
    kernel = Sampler(graphdef, cfg, eos_id=-1, pad_id=TOK.pad_id, tokenizer=TOK, batch_multiple=8,
                     layer_loop=layer_loop, decode_attention="pallas_interpret")
    prompts = prompts_of([3, 11, 16], seed=4)  # left padding of 13, 5 and 0 slots in the 16 bucket
    for sampling in (greedy(), SamplingParams(max_new_tokens=T, temperature=1.0, n=2, prompt_buckets=BUCKETS)):
        a = sampler.generate(params, prompts, sampling, jax.random.key(5))
        b = kernel.generate(params, prompts, sampling, jax.random.key(5))
        np.testing.assert_array_equal(a.tokens, b.tokens)
        np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-5)
    assert traced  # the kernel ran (no silent fallback to the XLA path)
    with pytest.raises(ValueError, match="decode_attention"):
        Sampler(graphdef, CFG, eos_id=-1, pad_id=0, decode_attention="flash")


def test_kernel_sampler_sharded_on_8_devices_equals_single_device(model16):
    cfg = model16[0]
    mesh = jax.sharding.Mesh(np.array(jax.devices()).reshape(2, 2, 2), sh.MESH_AXES)
    graphdef, sharded = create_sharded(cfg, mesh)
    local = jax.tree.map(lambda x: jnp.asarray(np.asarray(x)), sharded)
    prompts = prompts_of([3, 8, 5], seed=6)
    multi = Sampler(graphdef, cfg, eos_id=-1, pad_id=0, mesh=mesh, layer_loop="python",
                    decode_attention="pallas_interpret")
    sampler = Sampler(graphdef, cfg, eos_id=-1, pad_id=0, decode_attention="xla")
    a = multi.generate(sharded, prompts, greedy(), jax.random.key(2))
    b = sampler.generate(local, prompts, greedy(), jax.random.key(2))
    np.testing.assert_array_equal(a.tokens, b.tokens)
    np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-5)


def test_vocab_kernel_equals_argmax_and_logsumexp():
    from shared.rl.vocab_kernel import argmax_and_logsumexp
    logits = np.random.default_rng(0).normal(size=(5, 1001)).astype(np.float32)  # 1001: not a tile multiple
    logits[1, [5, 900]] = 10.0          # a tie across tiles: the first index wins, as np.argmax
    logits[2, -1] = 50.0                # the max in the partial last tile
    logits[3, :] = -np.inf
    logits[3, 700] = 1.0                # all but one entry -inf (whole tiles of -inf)
    logits[4, [300, 301]] = 7.0         # a tie inside one tile
    token, lse = argmax_and_logsumexp(jnp.asarray(logits), interpret=True, tile=256)
    np.testing.assert_array_equal(token, np.argmax(logits, -1))
    top = logits.max(-1, keepdims=True)
    ref = np.log(np.exp(logits.astype(np.float64) - top).sum(-1)) + top[:, 0]
    np.testing.assert_allclose(lse, ref, rtol=1e-6)
    token16, lse16 = argmax_and_logsumexp(jnp.asarray(logits, jnp.bfloat16), interpret=True, tile=256)
    np.testing.assert_array_equal(token16, np.argmax(np.asarray(jnp.asarray(logits, jnp.bfloat16), np.float32), -1))
    np.testing.assert_allclose(lse16, ref, rtol=1e-2)


def test_inference_params_cast_and_pack_keep_the_forward():
    """inference_params (weights cast to bf16 once, gate/up packed into one GEMM, layers unstacked) gives the
    same logits as the model casting its float32 weights at every use, for a params nnx.State and a pure dict."""
    from flax import nnx

    from shared.model import build_model, init_cache
    from shared.model.transformer import inference_params
    cfg = tiny_cfg()
    cfg.dtype = "bfloat16"
    graphdef, params = nnx.split(build_model(cfg, seed=1))
    tokens = jnp.asarray(np.random.default_rng(0).integers(1, 200, size=(2, 8)))
    forward = jax.jit(lambda p, layers: nnx.merge(graphdef, p)(
        tokens, cache=init_cache(cfg, 2, 8, per_layer=True), cache_index=0, layer_params=layers)["logits"])
    reference = np.asarray(forward(params, None), np.float32)   # float32 weights, cast at every use
    for state in (params, nnx.to_pure_dict(params)):
        outer, layers = inference_params(graphdef, state, cfg)
        mlp, attn = layers[0]["mlp"], layers[0]["attn"]
        assert mlp["gate"].shape == (cfg.d_model, 2, cfg.d_ff) and mlp["gate"][...].dtype == jnp.bfloat16
        assert attn["q"][...].dtype == jnp.bfloat16 and layers[0]["attn_norm"]["scale"][...].dtype == jnp.float32
        np.testing.assert_allclose(np.asarray(forward(outer, layers), np.float32), reference, atol=1e-6)


gpu_only = pytest.mark.skipif(jax.default_backend() != "gpu", reason="compiled Triton kernels: GPU only")


@gpu_only
def test_compiled_kernels_equal_numpy_on_gpu():
    """The same checks as above with the kernels compiled by Triton (not interpreted), at decode-like shapes."""
    from shared.rl.vocab_kernel import argmax_and_logsumexp
    rng = np.random.default_rng(2)
    b, s, kv, group, d = 8, 3 * BLOCK_SLOTS, 2, 7, 64
    q, k, v = (rng.normal(size=shape).astype(np.float32) for shape in ((b, kv * group, d), (b, s, kv, d),
                                                                        (b, s, kv, d)))
    start = rng.integers(0, s // 2, size=b)
    end = start + rng.integers(1, s // 2, size=b)
    end[0] = start[0]                                       # one empty row
    cast = lambda x: jnp.asarray(x, jnp.bfloat16)  # noqa: E731
    out = decode_attention(cast(q), cast(k), cast(v), jnp.asarray(start), jnp.asarray(end))
    ref = numpy_attention(*(np.asarray(cast(x), np.float32) for x in (q, k, v)), start, end)
    np.testing.assert_allclose(np.asarray(out, np.float32), ref, atol=2e-2)
    logits = rng.normal(size=(16, 151936)).astype(np.float32) * 3
    token, lse = argmax_and_logsumexp(cast(logits))
    as_bf16 = np.asarray(cast(logits), np.float64)
    np.testing.assert_array_equal(token, np.argmax(as_bf16, -1))
    np.testing.assert_allclose(lse, np.log(np.exp(as_bf16 - as_bf16.max(-1, keepdims=True)).sum(-1))
                               + as_bf16.max(-1), rtol=1e-5)


@gpu_only
@pytest.mark.parametrize("layer_loop", ["scan", "python"])
def test_gpu_sampler_with_kernels_equals_xla_sampler(model16, layer_loop):
    """On GPU, bf16 compute: Pallas decode + vocabulary kernels and the cuDNN prompt pass against XLA ops
    everywhere. The paths round differently, so a few greedy tokens may flip; most must agree and the log-probs
    of agreeing rows must be close."""
    from flax import nnx

    from shared.model import build_model
    cfg = model16[0].copy_and_resolve_references()
    cfg.dtype = "bfloat16"
    graphdef = nnx.split(nnx.eval_shape(lambda: build_model(cfg)))[0]
    params = model16[2]
    prompts = prompts_of([3, 11, 16, 7, 9, 12, 5, 16], seed=8)
    xla = Sampler(graphdef, cfg, eos_id=-1, pad_id=TOK.pad_id, layer_loop=layer_loop, decode_attention="xla")
    fast = Sampler(graphdef, cfg, eos_id=-1, pad_id=TOK.pad_id, layer_loop=layer_loop, decode_attention="pallas",
                   attention="cudnn")
    for sampling in (greedy(), SamplingParams(max_new_tokens=T, temperature=1.0, n=2, prompt_buckets=BUCKETS)):
        a = xla.generate(params, prompts, sampling, jax.random.key(3))
        b = fast.generate(params, prompts, sampling, jax.random.key(3))
        same = (a.tokens == b.tokens).all(axis=1)
        assert same.mean() >= 0.75, (a.tokens, b.tokens)
        np.testing.assert_allclose(a.logprobs[same], b.logprobs[same], atol=0.1)

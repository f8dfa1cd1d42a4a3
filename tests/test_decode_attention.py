"""The decode-step Pallas kernels, interpreted on CPU: shared/model/decode_attention.py and
shared/model/vocab_kernel.py against numpy, and the sampler with them against the sampler with XLA ops."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from shared import sharding as sh
from shared.model import create_sharded
from shared.model.decode_attention import BLOCK_SLOTS, decode_attention, supported
from shared.model.sampler import Sampler, SamplingParams
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


def test_fused_kernel_equals_rope_cache_write_and_attention():
    """fused_decode_attention (RoPE on q and k, this step's k/v written into the cache, attention over
    [kv_start, slot]) against the model's own apply_rope, a cache update and numpy attention."""
    from shared.model.decode_attention import fused_decode_attention, fused_supported
    from shared.model.layers import apply_rope
    rng = np.random.default_rng(1)
    b, s, kv, group, d = 5, 2 * BLOCK_SLOTS, 2, 3, 32
    h, slot = kv * group, BLOCK_SLOTS + 5
    inv_freq = 1.0 / (10000.0 ** (np.arange(0, d, 2) / d))
    start = np.array([0, 5, BLOCK_SLOTS - 3, slot, slot + 1])   # ...; only this step's slot; nothing visible
    positions = np.array([slot, slot - 5, 7, 0, 3])
    for dtype, atol in ((np.float32, 2e-6), (jnp.bfloat16, 2e-2)):
        cast = lambda x: jnp.asarray(x, dtype)  # noqa: E731
        qkv = cast(rng.normal(size=(b, h + 2 * kv, d)))
        k, v = cast(rng.normal(size=(b, s, kv, d))), cast(rng.normal(size=(b, s, kv, d)))
        out, k_new, v_new = fused_decode_attention(qkv, jnp.array(k), jnp.array(v), jnp.asarray(start),
                                                   jnp.full((b,), slot), jnp.asarray(positions),
                                                   jnp.asarray(inv_freq), heads=h, interpret=True)
        pos = jnp.asarray(positions)[:, None]
        q_ref = apply_rope(qkv[:, None, :h], pos, jnp.asarray(inv_freq, jnp.float32))[:, 0]
        k_ref = k.at[:, slot].set(apply_rope(qkv[:, None, h:h + kv], pos, jnp.asarray(inv_freq, jnp.float32))[:, 0])
        v_ref = v.at[:, slot].set(qkv[:, h + kv:])
        # RoPE: the same f32 math as apply_rope, up to rounding order (one ulp of the stored dtype)
        rope_tol = 1e-6 if dtype == np.float32 else 8e-3
        np.testing.assert_allclose(np.asarray(k_new, np.float32), np.asarray(k_ref, np.float32), rtol=rope_tol,
                                   atol=1e-6)
        np.testing.assert_array_equal(np.asarray(v_new, np.float32), np.asarray(v_ref, np.float32))
        ref = numpy_attention(*(np.asarray(x, np.float32) for x in (q_ref, k_ref, v_ref)), start,
                              np.full(b, slot + 1))
        np.testing.assert_allclose(np.asarray(out, np.float32), ref, atol=atol)
        assert not np.any(np.asarray(out, np.float32)[4])
    assert fused_supported(BLOCK_SLOTS, 32) and not fused_supported(BLOCK_SLOTS, 16)


def test_kernels_lower_to_triton_for_gpu():
    """Every decode kernel lowers through Pallas' Triton path for a CUDA target, here on CPU (no GPU needed):
    catches what the interpreter accepts and the Triton lowering refuses (e.g. two indexers on one ref, which
    cost a GPU run to find once) before a GPU run."""
    from shared.model.decode_attention import fused_decode_attention
    from shared.model.vocab_kernel import argmax_and_logsumexp
    b, s, kv, group, d = 8, 3 * BLOCK_SLOTS, 2, 7, 64
    bf, heads = jnp.bfloat16, kv * group
    rows = jnp.zeros(b, jnp.int32)
    cache = jnp.zeros((b, s, kv, d), bf)
    calls = [
        (lambda q, c, r: decode_attention(q, c, c, r, r), (jnp.zeros((b, heads, d), bf), cache, rows)),
        (lambda qkv, c, r, f: fused_decode_attention(qkv, c, c, r, r, r, f, heads=heads),
         (jnp.zeros((b, heads + 2 * kv, d), bf), cache, rows, jnp.zeros(d // 2))),
        (lambda logits: argmax_and_logsumexp(logits), (jnp.zeros((b, 151936), bf),)),
    ]
    for fn, args in calls:
        text = jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",)).as_text()
        assert "__gpu$xla.gpu.triton" in text


_MODELS = {}


def kernel_model(head_dim):
    """The sampler tests' model with head_dim 16 (the plain kernel's smallest) or 32 (the fused kernel's)."""
    if head_dim not in _MODELS:
        from flax import nnx

        from shared.model import build_model
        cfg = tiny_cfg()
        cfg.head_dim = head_dim
        graphdef = nnx.split(nnx.eval_shape(lambda: build_model(cfg)))[0]
        _MODELS[head_dim] = cfg, graphdef, jax.jit(lambda: nnx.split(build_model(cfg, seed=0))[1])()
    return _MODELS[head_dim]


@pytest.mark.parametrize("layer_loop,head_dim,expected", [("scan", 16, "plain"), ("python", 16, "plain"),
                                                         ("scan", 32, "plain"), ("python", 32, "fused")])
def test_sampler_with_kernel_equals_dense_attention(layer_loop, head_dim, expected, monkeypatch):
    """The fused kernel runs for per-layer caches (python loop) and head dims of 32+; else the plain one."""
    from shared.model import decode_attention as kernel_module
    traced = []
    for name in ("sharded_decode_attention", "sharded_fused_decode_attention"):
        original = getattr(kernel_module, name)
        monkeypatch.setattr(kernel_module, name, lambda *a, _name=name, _original=original, **k:
                            traced.append(_name) or _original(*a, **k))
    cfg, graphdef, params = kernel_model(head_dim)
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
    # the kernel ran (no silent fallback to the XLA path), and only the expected one
    assert set(traced) == {"sharded_fused_decode_attention" if expected == "fused" else "sharded_decode_attention"}
    with pytest.raises(ValueError, match="decode_attention"):
        Sampler(graphdef, CFG, eos_id=-1, pad_id=0, decode_attention="flash")


@pytest.mark.parametrize("head_dim", [16, 32])
def test_kernel_sampler_sharded_on_8_devices_equals_single_device(head_dim):
    cfg = kernel_model(head_dim)[0]
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
    from shared.model.vocab_kernel import argmax_and_logsumexp
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
    """inference_params (weights cast to bf16 once, gate/up and q/k/v packed into one GEMM each, layers
    unstacked) gives the same logits as the model casting its float32 weights at every use, for a params
    nnx.State and a pure dict; with q/k/v biases in float32 (in bf16 XLA fuses the bias add differently into
    the one GEMM than into the three, so results differ by bf16 rounding: 0.1 on logits of 6)."""
    from flax import nnx

    from shared.model import build_model, init_cache
    from shared.model.transformer import inference_params
    for qkv_bias, dtype, atol in ((False, "bfloat16", 1e-6), (True, "float32", 2e-5)):
        cfg = tiny_cfg()
        cfg.dtype, cfg.qkv_bias = dtype, qkv_bias
        graphdef, params = nnx.split(build_model(cfg, seed=1))
        if qkv_bias:  # non-zero biases, so a misplaced one shows
            params = jax.tree.map(lambda x: x + 0.1 if x.ndim == 3 and x.shape[-1] == cfg.head_dim and
                                  x.shape[1] != cfg.d_model else x, params)
        tokens = jnp.asarray(np.random.default_rng(0).integers(1, 200, size=(2, 8)))
        forward = jax.jit(lambda p, layers: nnx.merge(graphdef, p)(
            tokens, cache=init_cache(cfg, 2, 8, per_layer=True), cache_index=0, layer_params=layers)["logits"])
        reference = np.asarray(forward(params, None), np.float32)   # float32 weights, cast at every use
        heads = cfg.n_heads + 2 * cfg.n_kv_heads
        for state in (params, nnx.to_pure_dict(params)):
            outer, layers = inference_params(graphdef, state, cfg)
            mlp, attn = layers[0]["mlp"], layers[0]["attn"]
            assert mlp["gate"].shape == (cfg.d_model, 2, cfg.d_ff) and mlp["gate"][...].dtype == jnp.dtype(dtype)
            assert attn["q"].shape == attn["v"].shape == (cfg.d_model, heads, cfg.head_dim)
            assert not qkv_bias or attn["k_bias"].shape == (heads, cfg.head_dim)
            assert attn["q"][...].dtype == jnp.dtype(dtype) and layers[0]["attn_norm"]["scale"][...].dtype == jnp.float32
            np.testing.assert_allclose(np.asarray(forward(outer, layers), np.float32), reference, atol=atol)


gpu_only = pytest.mark.skipif(jax.default_backend() != "gpu", reason="compiled Triton kernels: GPU only")


@gpu_only
def test_compiled_kernels_equal_numpy_on_gpu():
    """The same checks as above with the kernels compiled by Triton (not interpreted), at decode-like shapes."""
    from shared.model.vocab_kernel import argmax_and_logsumexp
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
    # the fused kernel (RoPE + this step's KV write + attention) at the same shapes
    from shared.model.decode_attention import fused_decode_attention
    from shared.model.layers import apply_rope
    slot, inv_freq = s - 7, 1.0 / (1e6 ** (np.arange(0, d, 2) / d))
    qkv = cast(rng.normal(size=(b, kv * group + 2 * kv, d)))
    positions = rng.integers(0, slot + 1, size=b)
    out, k_new, _ = fused_decode_attention(qkv, cast(k), cast(v), jnp.asarray(start), jnp.full((b,), slot),
                                           jnp.asarray(positions), jnp.asarray(inv_freq), heads=kv * group)
    pos, h = jnp.asarray(positions)[:, None], kv * group
    q_ref = apply_rope(qkv[:, None, :h], pos, jnp.asarray(inv_freq, jnp.float32))[:, 0]
    k_ref = cast(k).at[:, slot].set(apply_rope(qkv[:, None, h:h + kv], pos, jnp.asarray(inv_freq, jnp.float32))[:, 0])
    v_ref = cast(v).at[:, slot].set(qkv[:, h + kv:])
    np.testing.assert_allclose(np.asarray(k_new, np.float32), np.asarray(k_ref, np.float32), rtol=8e-3, atol=1e-6)
    ref = numpy_attention(*(np.asarray(x, np.float32) for x in (q_ref, k_ref, v_ref)), start, np.full(b, slot + 1))
    np.testing.assert_allclose(np.asarray(out, np.float32), ref, atol=2e-2)
    logits = rng.normal(size=(16, 151936)).astype(np.float32) * 3
    token, lse = argmax_and_logsumexp(cast(logits))
    as_bf16 = np.asarray(cast(logits), np.float64)
    np.testing.assert_array_equal(token, np.argmax(as_bf16, -1))
    np.testing.assert_allclose(lse, np.log(np.exp(as_bf16 - as_bf16.max(-1, keepdims=True)).sum(-1))
                               + as_bf16.max(-1), rtol=1e-5)


@gpu_only
@pytest.mark.parametrize("layer_loop,head_dim", [("scan", 16), ("python", 16), ("python", 32)])
def test_gpu_sampler_with_kernels_equals_xla_sampler(layer_loop, head_dim):
    """On GPU, bf16 compute: Pallas decode + vocabulary kernels and the cuDNN prompt pass against XLA ops
    everywhere. The paths round differently, so a few greedy tokens may flip; most must agree and the log-probs
    of agreeing rows must be close."""
    from flax import nnx

    from shared.model import build_model
    cfg = kernel_model(head_dim)[0].copy_and_resolve_references()
    cfg.dtype = "bfloat16"
    graphdef = nnx.split(nnx.eval_shape(lambda: build_model(cfg)))[0]
    params = kernel_model(head_dim)[2]
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

"""shared/model/decode_matmul.py: the decode step's GEMM kernels (q/k/v + bias, o + residual, the split-K down
projection), interpreted on CPU against numpy, lowered for a CUDA target, sharded, and inside the sampler against
the same sampler with XLA's ops."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from shared import sharding as sh
from shared.model import decode_matmul
from shared.model.sampler import Sampler, SamplingParams
from tests.test_decode_attention import gpu_only, kernel_model
from tests.test_sampler import BUCKETS, TOK, T, greedy, prompts_of

bf16 = jnp.bfloat16


def rounded(x):
    return np.asarray(jnp.asarray(x, jnp.float32).astype(bf16), np.float64)


def numpy_matmul(a, w, bias=None, residual=None):
    """(reference, magnitude): as the XLA ops the kernel replaces, the product rounded to bf16, then each add
    rounded again. magnitude bounds the intermediates, which set the size of a rounding step."""
    y = rounded(np.asarray(a, np.float64) @ np.asarray(w, np.float64))
    magnitude = np.abs(y)
    for addend in (bias, residual):
        if addend is not None:
            y = rounded(y + np.asarray(addend, np.float64))
            magnitude = magnitude + np.abs(np.asarray(addend, np.float64))
    return y, magnitude


def operands(rng, m, k, n):
    a, w = (jnp.asarray(rng.normal(size=shape) * scale, bf16) for shape, scale in (((m, k), 1.0), ((k, n), 0.05)))
    return a, w, jnp.asarray(rng.normal(size=n), bf16), jnp.asarray(rng.normal(size=(m, n)), bf16)


def assert_close_to_numpy(out, reference):
    """float32 accumulation in another order than numpy's float64 sum: rarely a bf16 step or two (of the largest
    intermediate: a sum that cancels keeps the step of its terms) apart."""
    ref, magnitude = reference
    out = np.asarray(out, np.float64)
    assert out.shape == ref.shape
    assert np.all(np.abs(out - ref) <= 2 ** -6 * magnitude + 1e-6)
    assert (out != ref).mean() < 0.02


@pytest.mark.parametrize("m,k,n", [(256, 256, 192), (5, 96, 48), (70, 128, 64)])
def test_matmul_bias_and_residual_equal_numpy(m, k, n):
    """Whole row blocks, one partial block (M = 5 < 16: rows past M masked) and a ragged last block (70)."""
    a, w, bias, residual = operands(np.random.default_rng(m), m, k, n)
    for extra in ({}, {"bias": bias}, {"residual": residual}):
        out = decode_matmul.matmul(a, w, interpret=True, **extra)
        assert out.shape == (m, n) and out.dtype == bf16
        assert_close_to_numpy(out, numpy_matmul(a, w, **extra))
    assert_split_k_equals_numpy(a, w, splits=2)


def assert_split_k_equals_numpy(a, w, splits):
    parts = decode_matmul.matmul_split_k(a, w, splits=splits, interpret=jax.default_backend() != "gpu")
    assert parts.shape == (a.shape[0], splits, w.shape[1]) and parts.dtype == jnp.float32
    k = a.shape[1] // splits
    a64, w64 = np.asarray(a, np.float64), np.asarray(w, np.float64)
    for part in range(splits):  # each partial is its own K range's product, in float32
        ref = a64[:, part * k:(part + 1) * k] @ w64[part * k:(part + 1) * k]
        np.testing.assert_allclose(np.asarray(parts[:, part]), ref, rtol=1e-5, atol=1e-5)


def test_tiles_fit_the_shape_or_the_kernel_is_refused():
    assert decode_matmul.tiles_for(256, 896, 1152) == decode_matmul.TILES          # Qwen2.5-0.5B q/k/v
    assert decode_matmul.tiles_for(256, 896, 896) == decode_matmul.TILES           # and o
    assert decode_matmul.tiles_for(3, 96, 48)[:3] == (16, 16, 32)                   # small M, K, N shrink
    assert decode_matmul.tiles_for(8, 40, 64) is None and not decode_matmul.supported(8, 64, 24)
    assert not decode_matmul.usable(jnp.float32, 896, 896) and decode_matmul.usable(bf16, 896, 896)
    assert decode_matmul.usable(jnp.float32, 896, 896, interpret=True)     # the interpreter is exact in f32
    with pytest.raises(ValueError, match="K=96 / 4 splits"):
        decode_matmul.matmul_split_k(jnp.zeros((8, 96), bf16), jnp.zeros((96, 64), bf16), splits=4, interpret=True)
    with pytest.raises(ValueError, match="K=40"):
        decode_matmul.matmul(jnp.zeros((8, 40), bf16), jnp.zeros((40, 64), bf16), interpret=True)


def test_matmul_lowers_to_triton_for_gpu():
    a, w, bias, residual = operands(np.random.default_rng(0), 256, 896, 1152)
    for fn, args in ((lambda a, w, b: decode_matmul.matmul(a, w, bias=b), (a, w, bias)),
                     (lambda a, w, r: decode_matmul.matmul(a, w, residual=r), (a, w, residual)),
                     (lambda a, w: decode_matmul.matmul(a, w), (a[:5], w)),
                     (lambda a, w: decode_matmul.matmul_split_k(a, w, splits=4), (a, w))):
        text = jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",)).as_text()
        assert "__gpu$xla.gpu.triton" in text


def bf16_kernel_model():
    """The fused-attention test model (head dim 32) computing in bf16, where the projection kernels run."""
    from flax import nnx

    from shared.model import build_model
    cfg, _, params = kernel_model(32)
    cfg = cfg.copy_and_resolve_references()
    cfg.dtype = "bfloat16"
    return cfg, nnx.split(nnx.eval_shape(lambda: build_model(cfg)))[0], params


def test_sampler_with_projection_kernels_equals_xla_projections(monkeypatch):
    """The same sampler (fused attention kernel, python layer loop, bf16) with and without the GEMM kernels:
    they reproduce XLA's rounding, so tokens are equal and log-probs nearly so. (The norm kernel, whose float32
    reductions run in another order than XLA's, is off in both: tests/test_decode_norm.py covers it.)"""
    from shared.model import decode_norm
    monkeypatch.setattr(decode_norm, "usable", lambda *a, **k: False)
    cfg, graphdef, params = bf16_kernel_model()
    calls = []
    for name in ("sharded_matmul", "sharded_matmul_split_k"):
        original = getattr(decode_matmul, name)
        monkeypatch.setattr(decode_matmul, name, lambda *a, _original=original, **k: calls.append(k)
                            or _original(*a, **k))
    make = lambda: Sampler(graphdef, cfg, eos_id=-1, pad_id=TOK.pad_id, batch_multiple=8,  # noqa: E731
                           layer_loop="python", decode_attention="pallas_interpret")
    kernels = make()
    prompts = prompts_of([3, 11, 16], seed=4)
    samplings = (greedy(), SamplingParams(max_new_tokens=T, temperature=1.0, n=2, prompt_buckets=BUCKETS))
    with_kernels = [kernels.generate(params, prompts, s, jax.random.key(5)) for s in samplings]
    # traced once per generate: per layer one call for q/k/v, one for o (+ the residual), one split-K down
    assert len(calls) == 3 * cfg.n_layers * len(samplings)
    assert sum(c.get("residual") is not None for c in calls) == cfg.n_layers * len(samplings)
    assert sum("splits" in c for c in calls) == cfg.n_layers * len(samplings)
    monkeypatch.setattr(decode_matmul, "usable", lambda *a, **k: False)
    without = make()
    for a, s in zip(with_kernels, samplings):
        b = without.generate(params, prompts, s, jax.random.key(5))
        np.testing.assert_array_equal(a.tokens, b.tokens)
        np.testing.assert_allclose(a.logprobs, b.logprobs, atol=2e-2)


def test_sharded_kernels_on_8_devices_equal_single_device():
    """Rows split over the batch shards, the weights whole on each (map_row_shards' `whole`): bit for bit the
    single-device result. (The sampler-level 8-device test with these kernels is in test_decode_attention.)"""
    a, w, bias, residual = operands(np.random.default_rng(5), 16, 64, 48)
    mesh = jax.sharding.Mesh(np.array(jax.devices()).reshape(2, 2, 2), sh.MESH_AXES)
    calls = [lambda a, w, r: decode_matmul.sharded_matmul(a, w, bias=r[0], interpret=True),
             lambda a, w, r: decode_matmul.sharded_matmul(a, w, residual=r, interpret=True),
             lambda a, w, r: decode_matmul.sharded_matmul_split_k(a, w, splits=2, interpret=True)]
    rows = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(("data", "fsdp")))
    for call in calls:
        alone = call(a, w, residual)
        with sh.use_mesh(mesh):
            split = jax.jit(call)(jax.device_put(a, rows), w, jax.device_put(residual, rows))
        np.testing.assert_array_equal(np.asarray(split, np.float32), np.asarray(alone, np.float32))


@gpu_only
def test_compiled_matmul_equals_numpy_on_gpu():
    """Compiled by Triton at the Qwen2.5-0.5B decode shapes (batch 256) and a masked small batch."""
    rng = np.random.default_rng(3)
    for m, k, n in ((256, 896, 1152), (256, 896, 896), (5, 896, 896)):
        a, w, bias, residual = operands(rng, m, k, n)
        assert_close_to_numpy(decode_matmul.matmul(a, w, bias=bias), numpy_matmul(a, w, bias=bias))
        assert_close_to_numpy(decode_matmul.matmul(a, w, residual=residual), numpy_matmul(a, w, residual=residual))
    assert_split_k_equals_numpy(*operands(rng, 256, 4864, 896)[:2], splits=decode_matmul.DOWN_SPLITS)

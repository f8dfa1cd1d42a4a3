"""shared/model/decode_norm.py: the decode step's residual add + RMSNorm kernel, interpreted on CPU against numpy,
lowered for a CUDA target, sharded, and inside the sampler (the MLP's residual add left pending for the next
layer's norm) against the same sampler with XLA's ops."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from shared import sharding as sh
from shared.model import decode_norm
from shared.model.sampler import Sampler, SamplingParams
from tests.test_decode_attention import gpu_only, kernel_model
from tests.test_decode_matmul import bf16_kernel_model
from tests.test_sampler import BUCKETS, TOK, T, greedy, prompts_of

bf16 = jnp.bfloat16
EPS = 1e-6


def operands(rng, m, d, dtype, splits=4):
    x = jnp.asarray(rng.normal(size=(m, d)) * 2.0, dtype)
    partials = jnp.asarray(rng.normal(size=(m, splits, d)), jnp.float32)
    scale = jnp.asarray(1.0 + 0.1 * rng.normal(size=d), jnp.float32)
    return x, partials, scale


def numpy_add_rmsnorm(x, scale, partials=None):
    """float64 with the rounding points of the XLA ops replaced: the partials' sum rounded to x's dtype, the add
    rounded, the normalised row rounded once."""
    dtype = x.dtype
    rnd = lambda v: np.asarray(jnp.asarray(v, jnp.float32).astype(dtype), np.float64)  # noqa: E731
    x = np.asarray(x, np.float64)
    if partials is not None:
        x = rnd(x + rnd(np.asarray(partials, np.float64).sum(1)))
    normed = rnd(x / np.sqrt((x * x).mean(-1, keepdims=True) + EPS) * np.asarray(scale, np.float64))
    return x, normed


def assert_close(out, ref, dtype):
    out = np.asarray(out, np.float64)
    assert out.shape == ref.shape
    if dtype == bf16:   # float32 sums in another order than float64's: at most one bf16 step, rarely
        step = 2.0 ** (np.floor(np.log2(np.maximum(np.abs(ref), 1e-30))) - 7)
        assert np.all(np.abs(out - ref) <= step)
        assert (out != ref).mean() < 0.02
    else:
        np.testing.assert_allclose(out, ref, rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [jnp.float32, bf16])
@pytest.mark.parametrize("m,d,rows", [(16, 96, 1), (5, 64, 4), (9, 512, 2)])
def test_add_rmsnorm_equals_numpy(m, d, rows, dtype):
    """96: three 32-wide column chunks; M = 5 and 9 with 4 / 2 rows per program: a partial last row block
    (masked); 512: two 256-wide chunks."""
    x, partials, scale = operands(np.random.default_rng(m + d), m, d, dtype)
    new_x, normed = decode_norm.add_rmsnorm(x, scale, partials=partials, rows=rows, interpret=True)
    assert new_x.dtype == normed.dtype == dtype
    ref_x, ref_normed = numpy_add_rmsnorm(x, scale, partials)
    assert_close(new_x, ref_x, dtype)
    assert_close(normed, ref_normed, dtype)
    alone = decode_norm.add_rmsnorm(x, scale, rows=rows, interpret=True)
    assert_close(alone, numpy_add_rmsnorm(x, scale)[1], dtype)


def test_add_rmsnorm_refusals():
    assert decode_norm.column_chunk(896) == 128 and decode_norm.column_chunk(4096) == decode_norm.MAX_CHUNK
    assert not decode_norm.supported(24) and not decode_norm.usable(bf16, 24, interpret=True)
    with pytest.raises(ValueError, match="model width 24"):
        decode_norm.add_rmsnorm(jnp.zeros((4, 24), bf16), jnp.ones((24,)), interpret=True)
    assert not decode_norm.usable(jnp.float32, 64) and decode_norm.usable(jnp.float32, 64, interpret=True)


def test_add_rmsnorm_lowers_to_triton_for_cuda():
    x, partials, scale = operands(np.random.default_rng(1), 256, 896, bf16)
    for kw in ({"partials": partials}, {}):
        text = jax.jit(lambda x, s, kw=kw: decode_norm.add_rmsnorm(x, s, **kw)).trace(x, scale).lower(
            lowering_platforms=("cuda",)).as_text()
        assert "__gpu$xla.gpu.triton" in text


def test_sharded_add_rmsnorm_on_8_devices_equals_single_device():
    x, partials, scale = operands(np.random.default_rng(2), 16, 64, bf16)
    mesh = jax.sharding.Mesh(np.array(jax.devices()).reshape(2, 2, 2), sh.MESH_AXES)
    rows = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(("data", "fsdp")))
    call = lambda x, s, p: decode_norm.sharded_add_rmsnorm(x, s, partials=p, interpret=True)  # noqa: E731
    alone = call(x, scale, partials)
    with sh.use_mesh(mesh):
        split = jax.jit(call)(jax.device_put(x, rows), scale, jax.device_put(partials, rows))
    for a, b in zip(split, alone):
        np.testing.assert_array_equal(np.asarray(a, np.float32), np.asarray(b, np.float32))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_sampler_with_norm_kernel_equals_xla_norms(dtype, monkeypatch):
    """The python-loop sampler with every projection kernel, with and without the norm kernel. With it, each
    layer's MLP leaves its residual add pending (layers.PendingResidual) for the next layer's norm kernel, the
    last one for the final norm: per traced step L + 1 kernel calls with the pending partials (layers 2..L and
    the final norm) and L + 1 without (layer 1's and every MLP's norm)."""
    cfg, graphdef, params = bf16_kernel_model() if dtype == "bfloat16" else kernel_model(32)
    calls = []
    original = decode_norm.sharded_add_rmsnorm
    monkeypatch.setattr(decode_norm, "sharded_add_rmsnorm", lambda *a, **k: calls.append(k) or original(*a, **k))
    make = lambda: Sampler(graphdef, cfg, eos_id=-1, pad_id=TOK.pad_id, batch_multiple=8,  # noqa: E731
                           layer_loop="python", decode_attention="pallas_interpret")
    prompts = prompts_of([3, 11, 16], seed=4)
    samplings = (greedy(), SamplingParams(max_new_tokens=T, temperature=1.0, n=2, prompt_buckets=BUCKETS))
    with_kernel = [make().generate(params, prompts, s, jax.random.key(5)) for s in samplings]
    n = cfg.n_layers
    assert sum(c.get("partials") is not None for c in calls) == n * len(samplings)   # L-1 layers + final norm
    assert sum(c.get("partials") is None for c in calls) == (n + 1) * len(samplings)
    monkeypatch.setattr(decode_norm, "usable", lambda *a, **k: False)
    for a, s in zip(with_kernel, samplings):
        b = make().generate(params, prompts, s, jax.random.key(5))
        if dtype == "float32" or s.temperature == 0:   # bf16 sampling: a one-step rounding difference may flip a draw
            np.testing.assert_array_equal(a.tokens, b.tokens)
            np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-5 if dtype == "float32" else 5e-2)


@gpu_only
def test_compiled_add_rmsnorm_equals_numpy_on_gpu():
    """Compiled by Triton at the Qwen2.5-0.5B decode width (batch 256) and a small batch."""
    rng = np.random.default_rng(3)
    for m in (256, 5):
        x, partials, scale = operands(rng, m, 896, bf16)
        for out, ref in zip(decode_norm.add_rmsnorm(x, scale, partials=partials),
                            numpy_add_rmsnorm(x, scale, partials)):
            assert_close(out, ref, bf16)
        assert_close(decode_norm.add_rmsnorm(x, scale), numpy_add_rmsnorm(x, scale)[1], bf16)

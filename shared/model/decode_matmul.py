"""A decode step's projections as Pallas GEMM kernels (Triton on GPU), each with its epilogue fused in.

Why: at decode shapes (M = the batch rows, a few hundred at most; K and N a model width) XLA runs the q/k/v
and o projections as split-K GEMMs (the output alone has too few tiles to fill the GPU) followed by a kernel
that sums the float32 partials and applies the bias or the residual add. Here one kernel per projection tiles
the output finely enough on its own (64 x 32 tiles, full K per program: no partials in memory) and applies the
epilogue before its single write:
  matmul(a, w, bias=b)             q/k/v projection + bias
  matmul(a, w, residual=r)         o projection + the residual add
  matmul_split_k(a, w, splits=4)   MLP down projection (K = d_ff is long, the [M, d_model] output small): float32
                                   partials, summed by XLA in the fusion that adds the residual (cuBLAS runs it
                                   on 28 thread blocks at M = 256)
Measured on H100s: bench/decode_kernels.py's proj/ variants (results/decode_kernels_h100_proj*.json) and the
whole sampler (bench/RESULTS.md, sixth round). The numerics are those of the XLA ops replaced: float32
accumulation, rounded to the model dtype, then the bias or residual added in float32 and rounded again.

Shapes: a [M, K]; w [K, N]; bias [N]; residual [M, N]. Any M (rows past M are masked); K and N multiples of the
blocks (`supported`). `interpret=True` runs the kernels through the Pallas interpreter (CPU tests).
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

# (block_m, block_n, block_k, num_warps, num_stages): chosen by bench/decode_kernels.py's proj/ sweep (H100)
TILES = (64, 32, 128, 4, 4)
MIN_BLOCK = 16   # a Triton tensor-core dot needs every dim >= 16
DOWN_SPLITS, DOWN_TILES = 4, (64, 64, 64, 4, 4)   # the MLP down projection's split-K kernel (same sweep)


def tiles_for(m: int, k: int, n: int, tiles: tuple = TILES) -> tuple | None:
    """`tiles` shrunk to the shape (block_m to M's power of two for small M, block_k/block_n halved until they
    divide K/N), or None if K or N has no power-of-two block >= 16 dividing it (the caller keeps XLA's op)."""
    block_m, block_n, block_k, *rest = tiles
    block_m = max(MIN_BLOCK, min(block_m, pl.next_power_of_2(m)))
    while block_n > MIN_BLOCK and n % block_n:
        block_n //= 2
    while block_k > MIN_BLOCK and k % block_k:
        block_k //= 2
    if n % block_n or k % block_k:
        return None
    return (block_m, block_n, block_k, *rest)


def supported(m: int, k: int, n: int) -> bool:
    return tiles_for(m, k, n) is not None


def row_block(m: int, block_m: int):
    """(load, store) of this program's block of rows of a whole [M, ...] ref: load(ref, *index) and
    store(ref, value, *index) index the dims after the rows; rows past M are masked (only when block_m does not
    divide M)."""
    from jax.experimental.pallas import triton as plgpu

    rows = pl.ds(pl.program_id(0) * block_m, block_m)
    if m % block_m == 0:
        def load(ref, *index):
            return ref[(rows, *index)]

        def store(ref, value, *index):
            ref[(rows, *index)] = value
    else:
        mask = ((pl.program_id(0) * block_m + jnp.arange(block_m)) < m)[:, None]

        def load(ref, *index):
            return plgpu.load(ref.at[(rows, *index)], mask=mask, other=0.0)

        def store(ref, value, *index):
            plgpu.store(ref.at[(rows, *index)], value, mask=mask)
    return load, store


def _accumulate(load, a_ref, w_ref, k_len: int, block_m: int, block_k: int, k_first=None):
    """float32 [block_m, block_n] sum over K [k_first, k_first + k_len) (k_first None: from 0) of this row block
    of a times w_ref's columns (w_ref [K, block_n])."""
    def step(i, acc):
        start = i * block_k if k_first is None else k_first + i * block_k
        ks = pl.ds(pl.multiple_of(start, block_k), block_k)
        return acc + jnp.dot(load(a_ref, ks), w_ref[ks, :], preferred_element_type=jnp.float32)

    return jax.lax.fori_loop(0, k_len // block_k, step, jnp.zeros((block_m, w_ref.shape[1]), jnp.float32))


def _columns(block_n: int):
    return pl.ds(pl.multiple_of(pl.program_id(1) * block_n, block_n), block_n)


def _kernel(a_ref, w_ref, *rest, m: int, k: int, block_m: int, block_k: int, bias: bool, residual: bool):
    # a_ref / residual / o_ref: the whole [M, *] arrays; w_ref [K, block_n]; bias [block_n]
    o_ref, dtype = rest[-1], rest[-1].dtype
    load, store = row_block(m, block_m)
    cols = _columns(w_ref.shape[1])
    y = _accumulate(load, a_ref, w_ref, k, block_m, block_k).astype(dtype)
    if bias:
        y = (y.astype(jnp.float32) + rest[0][...].astype(jnp.float32)[None, :]).astype(dtype)
    if residual:
        y = (y.astype(jnp.float32) + load(rest[bias], cols).astype(jnp.float32)).astype(dtype)
    store(o_ref, y, cols)


def _fit(m: int, k: int, n: int, tiles: tuple, what: str) -> tuple:
    fitted = tiles_for(m, k, n, tiles)
    if fitted is None:
        raise ValueError(f"decode_matmul.{what} and N={n} need power-of-two blocks >= {MIN_BLOCK} that divide them")
    return fitted


def _compiler_params(fitted: tuple, interpret: bool):
    if interpret:
        return None
    from jax.experimental.pallas import triton as plgpu
    return plgpu.CompilerParams(num_warps=fitted[3], num_stages=fitted[4])


@functools.partial(jax.jit, static_argnames=("interpret", "tiles"))
def matmul(a, w, *, bias=None, residual=None, interpret: bool = False, tiles: tuple = TILES):
    """a @ w (+ bias) (+ residual) in a's dtype. a [M,K]; w [K,N]; bias [N]; residual [M,N]."""
    (m, k), n = a.shape, w.shape[1]
    fitted = _fit(m, k, n, tiles, f"matmul: K={k}")
    block_m, block_n, block_k = fitted[:3]
    whole_rows = lambda width: pl.BlockSpec((m, width), lambda i, j: (0, 0))  # noqa: E731
    in_specs = [whole_rows(k), pl.BlockSpec((k, block_n), lambda i, j: (0, j))]
    args = [a, w.astype(a.dtype)]
    if bias is not None:
        in_specs.append(pl.BlockSpec((block_n,), lambda i, j: (j,)))
        args.append(bias)
    if residual is not None:
        in_specs.append(whole_rows(n))
        args.append(residual)
    return pl.pallas_call(
        functools.partial(_kernel, m=m, k=k, block_m=block_m, block_k=block_k, bias=bias is not None,
                          residual=residual is not None),
        grid=(pl.cdiv(m, block_m), n // block_n), in_specs=in_specs, out_specs=whole_rows(n),
        out_shape=jax.ShapeDtypeStruct((m, n), a.dtype), compiler_params=_compiler_params(fitted, interpret),
        interpret=interpret, name="decode_matmul")(*args)


def usable(a_dtype, k: int, n: int, *, interpret: bool = False) -> bool:
    """Whether the model path uses the kernel: K and N that power-of-two blocks divide, and 16-bit activations
    on a GPU (measured there; a float32 Triton dot rounds its inputs to TF32 where XLA's need not). The
    interpreter (CPU tests) computes exactly in any dtype."""
    return (interpret or jnp.dtype(a_dtype).itemsize == 2) and supported(1, k, n)


def sharded_matmul(a, w, *, bias=None, residual=None, interpret: bool = False):
    """matmul under the active `shared.sharding.use_mesh`: rows of a (and residual) split like the batch, the
    weights whole on every shard."""
    from shared import sharding as sh

    arrays = [a, w] + [x for x in (bias, residual) if x is not None]
    has_bias, has_residual = bias is not None, residual is not None

    def call(a, w, *rest):
        return matmul(a, w, bias=rest[0] if has_bias else None, residual=rest[-1] if has_residual else None,
                      interpret=interpret)

    return sh.map_row_shards(call, *arrays, whole=(1, 2) if has_bias else (1,))


def sharded_matmul_split_k(a, w, *, splits: int, interpret: bool = False):
    """matmul_split_k under the active `shared.sharding.use_mesh`, as sharded_matmul."""
    from shared import sharding as sh

    return sh.map_row_shards(functools.partial(matmul_split_k, splits=splits, interpret=interpret, tiles=DOWN_TILES),
                             a, w, whole=(1,))


def _split_k_kernel(a_ref, w_ref, o_ref, *, m: int, k_split: int, block_m: int, block_k: int):
    # program (i, j, s): rows block i, columns block j, K range s; o_ref [M, S, N] float32 (whole)
    load, store = row_block(m, block_m)
    part = pl.program_id(2)
    acc = _accumulate(load, a_ref, w_ref, k_split, block_m, block_k, k_first=part * k_split)
    store(o_ref, acc, part, _columns(w_ref.shape[1]))


@functools.partial(jax.jit, static_argnames=("splits", "interpret", "tiles"))
def matmul_split_k(a, w, *, splits: int, interpret: bool = False, tiles: tuple = TILES):
    """float32 partial products [M, splits, N] of a [M,K] @ w [K,N] over `splits` equal K ranges (their sum over
    axis 1 is a @ w): more programs than the output tiles alone for long K and short M (the MLP down projection;
    the caller sums the partials in the fusion that adds the residual)."""
    (m, k), n = a.shape, w.shape[1]
    fitted = _fit(m, k // splits if k % splits == 0 else 1, n, tiles, f"matmul_split_k: K={k} / {splits} splits")
    block_m, block_n, block_k = fitted[:3]
    return pl.pallas_call(
        functools.partial(_split_k_kernel, m=m, k_split=k // splits, block_m=block_m, block_k=block_k),
        grid=(pl.cdiv(m, block_m), n // block_n, splits),
        in_specs=[pl.BlockSpec((m, k), lambda i, j, s: (0, 0)), pl.BlockSpec((k, block_n), lambda i, j, s: (0, j))],
        out_specs=pl.BlockSpec((m, splits, n), lambda i, j, s: (0, 0, 0)),
        out_shape=jax.ShapeDtypeStruct((m, splits, n), jnp.float32),
        compiler_params=_compiler_params(fitted, interpret), interpret=interpret,
        name="decode_matmul_split_k")(a, w.astype(a.dtype))

"""A decode step's residual add + RMSNorm as one Pallas kernel (Triton on GPU).

Why: at decode shapes ([M, D] with M the batch rows, D a model width) XLA runs the residual add (with the sum of
the down projection's split-K partials) and the next layer's RMSNorm as two small kernels of ~2-3 us each, most
of it fixed cost, not bytes. Here one kernel reads the residual and the partials once, writes the new residual
stream and its normalised copy, and keeps the row in registers in between.

  add_rmsnorm(x, scale, partials=p)  ->  (x + sum_s p[:, s], RMSNorm(x + sum_s p[:, s]))
  add_rmsnorm(x, scale)              ->  RMSNorm(x)        (the MLP's norm, its residual add already done)

The numerics are those of the XLA ops replaced (shared.model.layers.MLP / RMSNorm): the float32 partials summed
and rounded to x's dtype, added to x in float32 and rounded again; the norm in float32 from the rounded sum,
rounded once at the end.

Shapes: x [M, D]; partials [M, S, D] float32; scale [D]. Any M (rows past M are masked); D a
multiple of 16 (it is processed in power-of-two column chunks). A program holds its row (D x (1 + S) values) in
registers: measured at D = 896 and 768 (bench/RESULTS.md, seventh round); far wider models may spill. `interpret=True`
runs the kernel through the Pallas interpreter (CPU tests).
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from shared.model.decode_matmul import row_block

ROWS, NUM_WARPS = 1, 4   # rows per program, Triton warps: chosen by bench/decode_kernels.py's proj/norms sweep (H200)
MAX_CHUNK = 256          # widest column chunk per load


def column_chunk(d: int) -> int | None:
    """The widest power-of-two column chunk <= MAX_CHUNK that divides D (>= 16), or None."""
    chunk = MAX_CHUNK
    while chunk >= 16 and d % chunk:
        chunk //= 2
    return chunk if chunk >= 16 else None


def supported(d: int) -> bool:
    return column_chunk(d) is not None


def _kernel(*refs, m: int, d: int, rows: int, chunk: int, eps: float, splits: int):
    # refs: x, partials (splits > 0), scale, x_out (splits > 0), normed_out; the whole arrays, this program's rows
    # sliced. Every load is issued before the first store (a store may alias a later load as far as Triton knows,
    # so interleaving them would serialise the row's loads); the row stays in registers in between.
    if splits:
        x_ref, parts_ref, scale_ref, x_out_ref, normed_ref = refs
    else:
        x_ref, scale_ref, normed_ref = refs
    load, store = row_block(m, rows)
    dtype = x_ref.dtype
    columns = [pl.ds(c * chunk, chunk) for c in range(d // chunk)]   # unrolled over the row's chunks
    xs = [load(x_ref, cols) for cols in columns]
    parts = [[load(parts_ref, jnp.int32(s), cols) for s in range(splits)] for cols in columns] if splits else []
    scales = [scale_ref[cols].astype(jnp.float32)[None, :] for cols in columns]
    if splits:
        xs = [(x.astype(jnp.float32) + sum(p[1:], p[0]).astype(dtype).astype(jnp.float32)).astype(dtype)
              for x, p in zip(xs, parts)]
    values = [x.astype(jnp.float32) for x in xs]
    squares = sum((x * x for x in values[1:]), values[0] * values[0])
    inv = jax.lax.rsqrt(jnp.sum(squares, axis=1) / d + eps)[:, None]
    if splits:
        for cols, x in zip(columns, xs):
            store(x_out_ref, x, cols)
    for cols, x, scale in zip(columns, values, scales):
        store(normed_ref, (x * inv * scale).astype(dtype), cols)


@functools.partial(jax.jit, static_argnames=("eps", "rows", "num_warps", "interpret"))
def add_rmsnorm(x, scale, *, partials=None, eps: float = 1e-6, rows: int = ROWS, num_warps: int = NUM_WARPS,
                interpret: bool = False):
    """(x + delta, RMSNorm(x + delta) * scale) with delta = partials.sum(1) rounded to x's dtype; without
    partials, RMSNorm(x) * scale alone. x [M,D]; partials [M,S,D] float32; scale [D]."""
    m, d = x.shape
    chunk = column_chunk(d)
    if chunk is None:
        raise ValueError(f"add_rmsnorm: model width {d} has no power-of-two column chunk >= 16 dividing it")
    splits = 0 if partials is None else partials.shape[1]
    inputs = [x, partials, scale] if splits else [x, scale]
    out_shape = [jax.ShapeDtypeStruct((m, d), x.dtype)] * (2 if splits else 1)
    compiler_params = None
    if not interpret:
        from jax.experimental.pallas import triton as plgpu
        compiler_params = plgpu.CompilerParams(num_warps=num_warps, num_stages=1)
    out = pl.pallas_call(
        functools.partial(_kernel, m=m, d=d, rows=rows, chunk=chunk, eps=eps, splits=splits),
        grid=(pl.cdiv(m, rows),), in_specs=[pl.BlockSpec(a.shape, lambda i, n=a.ndim: (0,) * n) for a in inputs],
        out_specs=[pl.BlockSpec((m, d), lambda i: (0, 0))] * len(out_shape), out_shape=out_shape,
        compiler_params=compiler_params, interpret=interpret, name="decode_add_rmsnorm")(*inputs)
    return tuple(out) if splits else out[0]


def usable(dtype, d: int, *, interpret: bool = False) -> bool:
    """Whether the model path uses the kernel: a model width it can chunk, 16-bit activations on a GPU (where it
    was measured) or any dtype interpreted (CPU tests)."""
    return supported(d) and (interpret or jnp.dtype(dtype).itemsize == 2)


def sharded_add_rmsnorm(x, scale, *, partials=None, eps: float = 1e-6, interpret: bool = False):
    """add_rmsnorm under the active `shared.sharding.use_mesh`: rows split like the batch, the scale whole."""
    from shared import sharding as sh

    def call(x, scale, *partials):
        return add_rmsnorm(x, scale, partials=partials[0] if partials else None, eps=eps, interpret=interpret)

    return sh.map_row_shards(call, x, scale, *([] if partials is None else [partials]), whole=(1,))

"""argmax and logsumexp of each vocabulary row in one read of the logits (a Pallas kernel, Triton on GPU).

Why: a decode step needs both for every row (the greedy token, and the sampled token's log-prob = logit -
logsumexp). As XLA reductions that is two passes over the [B, V] logits (max, then the sum of exp relative to
it); at B = 256 and V = 151,936 each pass reads 78 MB. Here each program reads one tile of one row once and
keeps (max, first index of the max, sum of exp relative to the max); the per-tile triples are merged in XLA.
`interpret=True` runs the same kernel through the Pallas interpreter (CPU tests).
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from shared import sharding as sh

TILE = 4096  # vocabulary entries per program


def _kernel(logits_ref, max_ref, index_ref, sumexp_ref, *, vocab: int, tile: int):
    from jax.experimental.pallas import triton as plgpu

    part = pl.program_id(1)
    columns = part * tile + jnp.arange(tile)
    x = plgpu.load(logits_ref.at[pl.ds(part * tile, tile)], mask=columns < vocab, other=-jnp.inf)
    x = x.astype(jnp.float32)
    top = jnp.max(x)
    first = jnp.min(jnp.where(x == top, columns, jnp.iinfo(jnp.int32).max))
    total = jnp.sum(jnp.exp(x - top))
    max_ref[...] = jnp.full((1,), top, jnp.float32)
    index_ref[...] = jnp.full((1,), first, jnp.int32)
    sumexp_ref[...] = jnp.full((1,), jnp.where(top == -jnp.inf, 0.0, total), jnp.float32)


@functools.partial(jax.jit, static_argnames=("interpret", "tile"))
def argmax_and_logsumexp(logits, *, interpret: bool = False, tile: int = TILE):
    """(argmax [B] int32 = first index of the max, as jnp.argmax; logsumexp [B] float32) of logits [B,V]
    (any float dtype; computed in float32)."""
    b, v = logits.shape
    parts = pl.cdiv(v, tile)
    compiler_params = None
    if not interpret:
        from jax.experimental.pallas import triton as plgpu
        compiler_params = plgpu.CompilerParams(num_warps=4, num_stages=1)
    part_spec = pl.BlockSpec((None, 1), lambda i, j: (i, j))
    tops, firsts, sums = pl.pallas_call(
        functools.partial(_kernel, vocab=v, tile=tile),
        grid=(b, parts),
        in_specs=[pl.BlockSpec((None, v), lambda i, j: (i, 0))],
        out_specs=[part_spec, part_spec, part_spec],
        out_shape=tile_triples((b, parts)),
        compiler_params=compiler_params,
        interpret=interpret,
        name="vocab_argmax_logsumexp",
    )(logits)
    return merge_tiles(tops, firsts, sums, axis=1)


def tile_triples(shape):
    """Output shapes of a per-tile reduction kernel: (max float32, first index of the max int32, sum of exp
    relative to the max float32), each of `shape`; merge_tiles combines them."""
    return [jax.ShapeDtypeStruct(shape, jnp.float32), jax.ShapeDtypeStruct(shape, jnp.int32),
            jax.ShapeDtypeStruct(shape, jnp.float32)]


def merge_tiles(tops, firsts, sums, axis: int):
    """(argmax, logsumexp) of whole rows from per-tile (max, first index of the max, sum of exp relative to the
    max) along `axis`; a tile that is all -inf (max -inf) adds nothing."""
    top = tops.max(axis=axis, keepdims=True)
    token = jnp.min(jnp.where(tops == top, firsts, jnp.iinfo(jnp.int32).max), axis=axis)
    scale = jnp.where(tops == -jnp.inf, 0.0, jnp.exp(tops - top))
    return token.astype(jnp.int32), jnp.squeeze(top, axis) + jnp.log((sums * scale).sum(axis=axis))


def sharded_argmax_and_logsumexp(logits, *, interpret: bool = False):
    """argmax_and_logsumexp under the active `shared.sharding.use_mesh`, one call per batch shard."""
    return sh.map_row_shards(functools.partial(argmax_and_logsumexp, interpret=interpret), logits)

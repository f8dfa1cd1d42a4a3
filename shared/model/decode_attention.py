"""Single-token (decode) attention over a static KV cache as one Pallas kernel (Triton on GPU).

Why: with XLA ops a decode step's attention is ~5 kernels per layer (QK^T batched GEMM with M = heads per KV
head = 7 for Qwen2.5-0.5B, max, sum, convert, PV GEMM), the f32 scores round-trip through memory and every slot
of the static cache is read whether written yet or not. Here one program per (row, KV head) streams that
head's K/V blocks once, keeps the online softmax in registers, and visits only the blocks that hold visible
slots [kv_start, kv_end): left padding and not-yet-written slots are skipped, not just masked.

Layout: q [B,H,D]; k/v caches [B,S,K,D] (the model's cache layout, read in place: no transpose copy);
kv_start/kv_end int32 [B]. H = K * G (grouped-query attention). Rows with an empty range get zeros (as the
XLA path). `interpret=True` runs the same kernel through the Pallas interpreter (CPU tests).
"""
from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from shared import sharding as sh

BLOCK_SLOTS = 64    # cache slots per inner-loop step; the cache length must be a multiple of it
MIN_QUERY_ROWS = 16  # a tensor-core dot needs >= 16 rows: a KV head's G query heads are loaded into this many


def supported(cache_len: int, head_dim: int = 64, block_slots: int = BLOCK_SLOTS) -> bool:
    """Shapes the kernel handles: whole cache blocks, and a head dim that is a power of two >= 16 (a Triton
    tensor-core dot needs K >= 16 in bf16; block dims are powers of two). Other shapes use the XLA path."""
    return cache_len % block_slots == 0 and head_dim >= 16 and head_dim & (head_dim - 1) == 0


def _kernel(start_ref, end_ref, q_ref, k_ref, v_ref, o_ref, *, group: int, rows: int, block_slots: int,
            scale: float):
    # q_ref/o_ref [H, D] (this row); k_ref/v_ref [S, D] (this row, this KV head); this program's query heads
    # are rows head*G .. head*G+G-1, read and written with a row mask (no padded copy of q in memory).
    from jax.experimental.pallas import triton as plgpu

    head = pl.program_id(1)
    start, end = start_ref[()], end_ref[()]
    query_rows = pl.ds(head * group, rows)
    row_mask = (jnp.arange(rows) < group)[:, None]
    q = plgpu.load(q_ref.at[query_rows, :], mask=row_mask, other=0.0)
    offsets = jnp.arange(block_slots)

    def visit(block, carry):
        acc, m, l = carry
        slots = pl.ds(pl.multiple_of(block * block_slots, block_slots), block_slots)
        scores = plgpu.dot(q, k_ref[slots, :], trans_b=True) * scale            # f32 [rows, block]
        index = block * block_slots + offsets
        visible = ((index >= start) & (index < end))[None, :]
        scores = jnp.where(visible, scores, -1e30)
        m_new = jnp.maximum(m, scores.max(axis=-1))
        correction = jnp.exp(m - m_new)
        p = jnp.where(visible, jnp.exp(scores - m_new[:, None]), 0.0)
        l = l * correction + p.sum(axis=-1)
        acc = acc * correction[:, None] + plgpu.dot(p.astype(v_ref.dtype), v_ref[slots, :])
        return acc, m_new, l

    init = (jnp.zeros((rows, q.shape[1]), jnp.float32), jnp.full((rows,), -1e30, jnp.float32),
            jnp.zeros((rows,), jnp.float32))
    first, last = start // block_slots, pl.cdiv(end, block_slots)
    acc, _, l = jax.lax.fori_loop(first, jnp.maximum(first, last), visit, init)
    out = (acc / jnp.maximum(l, 1e-30)[:, None]).astype(o_ref.dtype)   # nothing visible: zeros
    plgpu.store(o_ref.at[query_rows, :], out, mask=row_mask)


@functools.partial(jax.jit, static_argnames=("interpret", "num_warps", "block_slots"))
def decode_attention(q, k, v, kv_start, kv_end, *, interpret: bool = False, num_warps: int = 4,
                     block_slots: int = BLOCK_SLOTS):
    """softmax(q k^T / sqrt(D)) v over the visible slots [kv_start, kv_end) of each row.
    q [B,H,D]; k/v [B,S,K,D] -> [B,H,D]."""
    b, h, d = q.shape
    s, kv = k.shape[1], k.shape[2]
    if not supported(s, d, block_slots):
        raise ValueError(f"decode_attention: cache length {s} must be a multiple of {block_slots} and head dim {d} "
                         "a power of two >= 16")
    group = h // kv
    rows = max(MIN_QUERY_ROWS, pl.next_power_of_2(group))
    compiler_params = None
    if not interpret:
        from jax.experimental.pallas import triton as plgpu
        compiler_params = plgpu.CompilerParams(num_warps=num_warps, num_stages=2)
    row = pl.BlockSpec((None,), lambda i, j: (i,))
    heads = pl.BlockSpec((None, h, d), lambda i, j: (i, 0, 0))  # program (i, j) touches its G rows only
    cache = pl.BlockSpec((None, s, None, d), lambda i, j: (i, 0, j, 0))
    return pl.pallas_call(
        functools.partial(_kernel, group=group, rows=rows, block_slots=block_slots, scale=1.0 / math.sqrt(d)),
        grid=(b, kv),
        in_specs=[row, row, heads, cache, cache],
        out_specs=heads,
        out_shape=jax.ShapeDtypeStruct((b, h, d), q.dtype),
        compiler_params=compiler_params,
        interpret=interpret,
        name="decode_attention",
    )(kv_start.astype(jnp.int32), kv_end.astype(jnp.int32), q, k, v)


def sharded_decode_attention(q, k, v, kv_start, kv_end, *, interpret: bool = False):
    """decode_attention under the active `shared.sharding.use_mesh`, one call per batch shard."""
    return sh.map_row_shards(functools.partial(decode_attention, interpret=interpret), q, k, v, kv_start, kv_end)

"""Single-token (decode) attention over a static KV cache as one Pallas kernel (Triton on GPU).

Why: with XLA ops a decode step's attention is ~5 kernels per layer (QK^T batched GEMM with M = heads per KV
head = 7 for Qwen2.5-0.5B, max, sum, convert, PV GEMM), the f32 scores round-trip through memory and every slot
of the static cache is read whether written yet or not. Here one program per (row, KV head) streams that
head's K/V blocks once, keeps the online softmax in registers, and visits only the blocks that hold visible
slots [kv_start, kv_end): left padding and not-yet-written slots are skipped, not just masked.

Layout: q [B,H,D]; k/v caches [B,S,K,D] (the model's cache layout, read in place: no transpose copy);
kv_start/kv_end int32 [B]. H = K * G (grouped-query attention). Rows with an empty range get zeros (as the
XLA path). `interpret=True` runs the same kernel through the Pallas interpreter (CPU tests).

`fused_decode_attention` also takes over what XLA otherwise runs as three more kernels per layer: it reads
the step's q/k/v projections before RoPE ([B, H+2K, D], one array from the packed projection GEMM), applies
RoPE, writes this step's k/v into the cache slot in place (input/output aliasing) and attends over
[kv_start, slot]. Used for per-layer caches (the sampler's python layer loop) and head dims of 32+.
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


def _softmax_block(carry, scores, visible, values):
    """One cache block of the online softmax: carry (acc [rows, D], running max [rows], running sum [rows]),
    f32 scores [rows, block], visible [1, block], values [block, D]."""
    from jax.experimental.pallas import triton as plgpu

    acc, m, l = carry
    scores = jnp.where(visible, scores, -1e30)
    m_new = jnp.maximum(m, scores.max(axis=-1))
    correction = jnp.exp(m - m_new)
    p = jnp.where(visible, jnp.exp(scores - m_new[:, None]), 0.0)
    l = l * correction + p.sum(axis=-1)
    return acc * correction[:, None] + plgpu.dot(p.astype(values.dtype), values), m_new, l


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
        slots = pl.ds(pl.multiple_of(block * block_slots, block_slots), block_slots)
        scores = plgpu.dot(q, k_ref[slots, :], trans_b=True) * scale            # f32 [rows, block]
        index = block * block_slots + offsets
        return _softmax_block(carry, scores, ((index >= start) & (index < end))[None, :], v_ref[slots, :])

    init = (jnp.zeros((rows, q.shape[1]), jnp.float32), jnp.full((rows,), -1e30, jnp.float32),
            jnp.zeros((rows,), jnp.float32))
    first, last = start // block_slots, pl.cdiv(end, block_slots)
    acc, _, l = jax.lax.fori_loop(first, jnp.maximum(first, last), visit, init)
    out = (acc / jnp.maximum(l, 1e-30)[:, None]).astype(o_ref.dtype)   # nothing visible: zeros
    plgpu.store(o_ref.at[query_rows, :], out, mask=row_mask)


def _grid_setup(group: int, cache_len: int, head_dim: int, num_warps: int, interpret: bool, num_stages: int = 2):
    """What both kernels' grid of (row, KV head) programs needs: the padded query rows per program, the Triton
    parameters, and the block specs of a per-row scalar and of one row's one KV head of a [B,S,K,D] cache."""
    compiler_params = None
    if not interpret:
        from jax.experimental.pallas import triton as plgpu
        compiler_params = plgpu.CompilerParams(num_warps=num_warps, num_stages=num_stages)
    return (max(MIN_QUERY_ROWS, pl.next_power_of_2(group)), compiler_params,
            pl.BlockSpec((None,), lambda i, j: (i,)),
            pl.BlockSpec((None, cache_len, None, head_dim), lambda i, j: (i, 0, j, 0)))


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
    rows, compiler_params, row, cache = _grid_setup(group, s, d, num_warps, interpret)
    heads = pl.BlockSpec((None, h, d), lambda i, j: (i, 0, 0))  # program (i, j) touches its G rows only
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


# ---------------------------------------------------------------- fused: RoPE + KV-slot write + attention


def fused_supported(cache_len: int, head_dim: int, block_slots: int = BLOCK_SLOTS) -> bool:
    """The fused kernel splits each head into its two RoPE halves: each must be a tensor-core dot size."""
    return supported(cache_len, head_dim // 2, block_slots) and head_dim % 2 == 0


def _fused_kernel(start_ref, slot_ref, position_ref, inv_freq_ref, qkv_ref, k_ref, v_ref, o_ref, k_out_ref,
                  v_out_ref, *, heads: int, kv_heads: int, group: int, rows: int, half: int, block_slots: int,
                  scale: float):
    # qkv_ref [H+2K, D] (this row: the q/k/v projections before RoPE); k_ref/v_ref [S, D] (this row, this KV
    # head; the same buffers as k_out_ref/v_out_ref). Every head is handled as its two rotate-half RoPE halves
    # (lo = dims [0, D/2), hi = [D/2, D)), so RoPE needs no in-register shuffle: q.k = q_lo.k_lo + q_hi.k_hi.
    from jax.experimental.pallas import triton as plgpu

    head = pl.program_id(1)
    start, slot = start_ref[()], slot_ref[()]
    lo, hi = pl.ds(0, half), pl.ds(half, half)
    angles = position_ref[()].astype(jnp.float32) * inv_freq_ref[...]               # [D/2]
    cos, sin = jnp.cos(angles)[None, :], jnp.sin(angles)[None, :]

    def rope(x_lo, x_hi, dtype):  # as shared.model.layers.apply_rope: f32 math, rounded once to the model dtype
        x_lo, x_hi = x_lo.astype(jnp.float32), x_hi.astype(jnp.float32)
        return (x_lo * cos - x_hi * sin).astype(dtype), (x_hi * cos + x_lo * sin).astype(dtype)

    query_rows = pl.ds(head * group, rows)
    row_mask = (jnp.arange(rows) < group)[:, None]
    q_lo, q_hi = rope(plgpu.load(qkv_ref.at[query_rows, lo], mask=row_mask, other=0.0),
                      plgpu.load(qkv_ref.at[query_rows, hi], mask=row_mask, other=0.0), qkv_ref.dtype)
    k_row, v_row = pl.ds(heads + head, 1), pl.ds(heads + kv_heads + head, 1)
    k_lo, k_hi = rope(qkv_ref[k_row, lo], qkv_ref[k_row, hi], k_out_ref.dtype)       # [1, D/2] each
    v_new = qkv_ref[v_row, :].astype(v_out_ref.dtype)                                # [1, D]
    here = pl.ds(slot, 1)
    k_out_ref[here, lo] = k_lo
    k_out_ref[here, hi] = k_hi
    v_out_ref[here, :] = v_new
    offsets = jnp.arange(block_slots)

    def visit(block, carry):  # the slots written before this step: [start, slot)
        slots = pl.ds(pl.multiple_of(block * block_slots, block_slots), block_slots)
        scores = (plgpu.dot(q_lo, k_ref[slots, lo], trans_b=True)
                  + plgpu.dot(q_hi, k_ref[slots, hi], trans_b=True)) * scale             # f32 [rows, block]
        index = block * block_slots + offsets
        return _softmax_block(carry, scores, ((index >= start) & (index < slot))[None, :], v_ref[slots, :])

    init = (jnp.zeros((rows, 2 * half), jnp.float32), jnp.full((rows,), -1e30, jnp.float32),
            jnp.zeros((rows,), jnp.float32))
    first, last = start // block_slots, pl.cdiv(slot, block_slots)
    acc, m, l = jax.lax.fori_loop(first, jnp.maximum(first, last), visit, init)
    # this step's own slot, from registers (its cache write above is not read back)
    own = (jnp.sum(q_lo.astype(jnp.float32) * k_lo.astype(jnp.float32), axis=1)
           + jnp.sum(q_hi.astype(jnp.float32) * k_hi.astype(jnp.float32), axis=1)) * scale
    own = jnp.where(slot >= start, own, -1e30)
    m_new = jnp.maximum(m, own)
    correction, p_own = jnp.exp(m - m_new), jnp.where(slot >= start, jnp.exp(own - m_new), 0.0)
    l = l * correction + p_own
    acc = acc * correction[:, None] + p_own[:, None] * v_new.astype(jnp.float32)
    out = (acc / jnp.maximum(l, 1e-30)[:, None]).astype(o_ref.dtype)
    plgpu.store(o_ref.at[query_rows, :], out, mask=row_mask)


@functools.partial(jax.jit, static_argnames=("heads", "interpret", "num_warps", "num_stages", "block_slots"))
def fused_decode_attention(qkv, k, v, kv_start, slot, positions, inv_freq, *, heads: int, interpret: bool = False,
                           num_warps: int = 4, num_stages: int = 2, block_slots: int = BLOCK_SLOTS):
    """One decode step of a layer: RoPE on this token's q and k, its k/v written into cache slot `slot`, and
    softmax(q k^T / sqrt(D)) v over the slots [kv_start, slot] of each row.
    qkv [B, heads + 2K, D] (q, k, v projections, biases added, before RoPE); k/v caches [B,S,K,D] (updated in
    place); kv_start, slot, positions int32 [B]; inv_freq [D/2] or [B, D/2] float32
    (shared.model.layers.rope_inv_freq).
    Returns (out [B, heads, D], k, v)."""
    b, _, d = qkv.shape
    s, kv = k.shape[1], k.shape[2]
    if not fused_supported(s, d, block_slots):
        raise ValueError(f"fused_decode_attention: cache length {s} must be a multiple of {block_slots} and head "
                         f"dim {d} twice a power of two >= 16")
    group = heads // kv
    rows, compiler_params, row, cache = _grid_setup(group, s, d, num_warps, interpret, num_stages)
    kernel = functools.partial(_fused_kernel, heads=heads, kv_heads=kv, group=group, rows=rows, half=d // 2,
                               block_slots=block_slots, scale=1.0 / math.sqrt(d))
    return pl.pallas_call(
        kernel,
        grid=(b, kv),
        in_specs=[row, row, row, pl.BlockSpec((None, d // 2), lambda i, j: (i, 0)),
                  pl.BlockSpec((None, qkv.shape[1], d), lambda i, j: (i, 0, 0)), cache, cache],
        out_specs=[pl.BlockSpec((None, heads, d), lambda i, j: (i, 0, 0)), cache, cache],
        out_shape=[jax.ShapeDtypeStruct((b, heads, d), qkv.dtype), jax.ShapeDtypeStruct(k.shape, k.dtype),
                   jax.ShapeDtypeStruct(v.shape, v.dtype)],
        input_output_aliases={5: 1, 6: 2},
        compiler_params=compiler_params,
        interpret=interpret,
        name="fused_decode_attention",
    )(kv_start.astype(jnp.int32), slot.astype(jnp.int32), positions.astype(jnp.int32),
      jnp.broadcast_to(inv_freq.astype(jnp.float32), (b, d // 2)), qkv, k, v)


def sharded_fused_decode_attention(qkv, k, v, kv_start, slot, positions, inv_freq, *, heads: int,
                                   interpret: bool = False):
    """fused_decode_attention under the active `shared.sharding.use_mesh`, one call per batch shard."""
    rows_inv_freq = jnp.broadcast_to(inv_freq, (qkv.shape[0], inv_freq.shape[0]))  # row-split like the rest
    return sh.map_row_shards(functools.partial(fused_decode_attention, heads=heads, interpret=interpret),
                             qkv, k, v, kv_start, slot, positions, rows_inv_freq)

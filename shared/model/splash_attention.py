"""Splash attention: jax's maintained Pallas TPU flash-attention kernel (`jax.experimental.pallas.ops.tpu.
splash_attention`) for the training / prefill forward without a KV cache (`model.attention="splash"`).

It computes exactly what `layers.xla_attention(q, k, v, layers._mask(ctx, cfg, T, T))` does:
- masks: causal (CausalMask), sliding window (LocalMask with window (W-1, 0), or (W-1, W-1) when not causal, as
  `_mask`'s `q - k < W`), bidirectional (FullMask); packed documents through the kernel's segment ids, the
  same `seg_q == seg_k` test as `_mask`, so padding (segment 0) attends among padding as on the XLA path. In
  this path every query sees at least itself, so no softmax row is empty (the XLA path's zeroing of such rows
  never applies).
- GQA: the kernel's MHA form takes K < H key/value heads itself (query head h reads KV head h // (H/K), the
  grouping of xla_attention's reshape) and sums dK/dV over each group in its backward kernel: no repeated K/V.
- q is scaled by 1/sqrt(head_dim) before the kernel (it takes no scale); scores and softmax are float32 in the
  kernel, P @ V is fed in the input dtype with float32 accumulation.

Kernel limits and how they are met: q/kv blocks must be multiples of 128 (the TPU lane width) and divide the
sequence, so a sequence is padded at its end to a multiple of 128 (padded keys get segment id -1, seen by no
real query; causal masks already hide them) and the block is the largest of 512/256/128 that divides it. Any
head_dim is accepted (the kernel's blocks span the whole head dim; 8..256 were compiled for TPU v5e).

The kernel works per example with heads first ([H,T,D]): it is vmapped over the batch, and under an active
`shared.sharding.use_mesh` runs in a shard_map, batch split as `act_batch` and heads as `act_heads` /
`act_kv_heads` when both head counts split the same way (else heads stay whole on each shard). On CPU the same
kernel runs through the Pallas interpreter (tests); on GPU it is refused (use cudnn). Checked: interpret-mode
forward and gradients against the XLA path, and compiles for TPU v5e / v5p topologies (shared.aot); never run
on TPU hardware.
"""
from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp

from shared import sharding as sh

LANES = 128               # q/kv blocks are multiples of the TPU lane width
BLOCK_CHOICES = (512, 256, 128)
PAD_SEGMENT = -1          # segment id of the positions padded on here: equal to no real (>= 0) segment id


def padded_length(seq_len: int) -> int:
    return -(-seq_len // LANES) * LANES


def block_size(padded: int) -> int:
    return next(b for b in BLOCK_CHOICES if padded % b == 0)


@functools.lru_cache(maxsize=64)
def _kernel(heads: int, seq_len: int, causal: bool, window: int, block: int, interpret: bool):
    """The kernel for one shard's [heads, seq_len, D] problem. Its block-sparsity tables are built on the host
    from the static mask; cached so a model's layers and retraces share them."""
    from jax.experimental.pallas.ops.tpu import splash_attention as splash

    shape = (seq_len, seq_len)
    if window:
        mask = splash.LocalMask(shape, window_size=(window - 1, 0 if causal else window - 1), offset=0)
    elif causal:
        mask = splash.CausalMask(shape)
    else:
        mask = splash.FullMask(shape)
    sizes = splash.BlockSizes(block_q=block, block_kv=block, block_kv_compute=block, block_q_dkv=block,
                              block_kv_dkv=block, block_kv_dkv_compute=block, block_q_dq=block, block_kv_dq=block)
    with jax.ensure_compile_time_eval():  # its tables are constants, even when first built inside a trace
        return splash.make_splash_mha(splash.MultiHeadMask([mask] * heads), block_sizes=sizes, head_shards=1,
                                      q_seq_shards=1, interpret=interpret)


def _platform() -> str:
    """Where the attention runs: the active mesh's devices (TPU topology devices in an AOT compile on a CPU
    host), else jax's default backend."""
    mesh = sh.current_mesh()
    return mesh.devices.flat[0].platform if mesh is not None else jax.default_backend()


def _attend(q, k, v, segment_ids, *, causal: bool, window: int, interpret: bool):
    """q [B,H,T,D], k/v [B,K,T,D], segment_ids [B,T] or None (one shard) -> [B,H,T,D]."""
    kernel = _kernel(q.shape[1], q.shape[2], causal, window, block_size(q.shape[2]), interpret)
    if segment_ids is None:
        return jax.vmap(kernel)(q, k, v)
    from jax.experimental.pallas.ops.tpu.splash_attention import SegmentIds

    return jax.vmap(lambda q, k, v, s: kernel(q, k, v, segment_ids=SegmentIds(s, s)))(q, k, v, segment_ids)


def _sharded(fn, q, k, v, segment_ids):
    """fn under shard_map over the active mesh: rows as act_batch, heads as act_heads / act_kv_heads."""
    mesh = sh.current_mesh()
    if mesh is None or mesh.size == 1:
        return fn(q, k, v, segment_ids)
    rules = sh.current_rules()
    q_spec = tuple(sh.spec_for((sh.ACT_BATCH, sh.ACT_HEADS), q.shape[:2], mesh=mesh, rules=rules)) + (None,) * 2
    kv_spec = tuple(sh.spec_for((sh.ACT_BATCH, sh.ACT_KV_HEADS), k.shape[:2], mesh=mesh, rules=rules)) + (None,) * 2
    rows, heads, kv_heads = q_spec[0], q_spec[1], kv_spec[1]
    if heads != kv_heads:  # e.g. 2 KV heads on tensor=4: the GQA grouping holds per shard only if both split alike
        heads = kv_heads = None
    q_part, kv_part = jax.P(rows, heads, None, None), jax.P(rows, kv_heads, None, None)
    if segment_ids is None:
        return jax.shard_map(lambda q, k, v: fn(q, k, v, None), mesh=mesh, in_specs=(q_part, kv_part, kv_part),
                             out_specs=q_part, check_vma=False)(q, k, v)
    return jax.shard_map(fn, mesh=mesh, in_specs=(q_part, kv_part, kv_part, jax.P(rows, None)),
                         out_specs=q_part, check_vma=False)(q, k, v, segment_ids)


def splash_attention(q, k, v, segment_ids=None, *, causal: bool = True, sliding_window: int = 0):
    """q [B,T,H,D], k/v [B,T,K,D] (H = K * G), segment_ids [B,T] or None -> [B,T,H,D]; equal to
    xla_attention(q, k, v, _mask(ctx, cfg, T, T)) for a forward without a KV cache."""
    platform = _platform()
    if platform not in ("tpu", "cpu"):
        raise ValueError(f"model.attention=splash is a TPU kernel (Pallas Mosaic); on {platform} use "
                         f"model.attention=cudnn or xla")
    b, t, _, d = q.shape
    if k.shape[1] != t:
        raise ValueError(f"model.attention=splash: self-attention only (queries {t}, keys {k.shape[1]}); the "
                         "KV-cache path uses xla")
    padded = padded_length(t)
    if padded != t:
        pad = ((0, 0), (0, padded - t), (0, 0), (0, 0))
        q, k, v = jnp.pad(q, pad), jnp.pad(k, pad), jnp.pad(v, pad)
        if segment_ids is None and not causal:  # without a causal mask real queries would see the padded keys
            segment_ids = jnp.zeros((b, t), jnp.int32)
        if segment_ids is not None:
            segment_ids = jnp.pad(segment_ids.astype(jnp.int32), ((0, 0), (0, padded - t)),
                                  constant_values=PAD_SEGMENT)
    if segment_ids is not None:
        segment_ids = segment_ids.astype(jnp.int32)
    q = (q.astype(jnp.float32) * (1.0 / math.sqrt(d))).astype(q.dtype)
    q, k, v = (x.transpose(0, 2, 1, 3) for x in (q, k, v))  # the kernel's heads-first layout
    fn = functools.partial(_attend, causal=bool(causal), window=int(sliding_window or 0),
                           interpret=platform != "tpu")
    out = _sharded(fn, q, k, v, segment_ids)
    return out.transpose(0, 2, 1, 3)[:, :t]

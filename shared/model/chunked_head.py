"""The LM head's per-token statistics without a [tokens, vocab] logits array, forward or backward.

Everything that reads the vocabulary head in training (lm_xent / sft_xent, the RL log-prob passes and policy
loss, masked-diffusion losses) needs only four numbers per token of the logits row l = h W^T:

    target   l[y]                     (the log-prob is target - log_z, cross entropy log_z - target)
    log_z    logsumexp(l)             (z-loss reads it too)
    entropy  log_z - sum_j p_j l_j    (p = softmax(l))
    max      max_j l_j                (accuracy: target >= max; carries no gradient)

`head_stats` computes them chunk by chunk over the sequence axis (and optionally over vocabulary tiles, with
an online logsumexp), under a custom VJP whose backward recomputes each chunk's logits from (h, W) and the
saved log_z and mean logit, so neither pass holds more than one chunk of logits:

    d l_j = p_j * (g_log_z + g_entropy * (mean_l - l_j)) + g_target * [j == y]

The chunk is along the sequence axis, not the flattened tokens, because the batch axis is sharded over the
mesh (data, fsdp): slicing it would gather the whole batch on every device. `chunk_tokens` is therefore the
tokens per device per chunk: T is cut into pieces of max(1, chunk_tokens // rows_per_device) positions.
With the vocabulary sharded over `tensor` (the default rules) each device already holds only its slice of a
chunk's logits and XLA turns the vocabulary reductions into all-reduces; vocabulary tiles (`chunk_vocab`)
bound the memory further on one device, where the [chunk, V] slab would otherwise grow with V.
(MaxText's vocabulary tiling and Liger's fused linear cross-entropy do the same; both are PyTorch/MaxText
code paths we cannot call from an NNX model, hence this module.)

Each chunk's logits are rounded to the compute dtype like the dense head's, and every reduction over them runs
in float32: the same numbers as the dense path in either dtype.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from shared import sharding as sh

DEFAULT_CHUNK_TOKENS = 8192


class HeadStats(NamedTuple):
    """float32 per-token statistics of one logits row each, shaped like the targets."""
    target: jax.Array
    log_z: jax.Array
    entropy: jax.Array
    max: jax.Array

    @property
    def logp(self) -> jax.Array:
        return self.target - self.log_z

    @property
    def nll(self) -> jax.Array:
        return self.log_z - self.target


def _rows_per_device(rows: int) -> int:
    """Rows of a batch-sharded [rows, ...] array on one device under the active mesh and rules."""
    mesh = sh.current_mesh()
    if mesh is None or mesh.size == 1:
        return rows
    spec = sh.spec_for((sh.ACT_BATCH,), (rows,), mesh=mesh, rules=sh.current_rules())
    axes = spec[0] if len(spec) else None
    axes = () if axes is None else (axes,) if isinstance(axes, str) else tuple(axes)
    return rows // math.prod(mesh.shape[a] for a in axes)


def _chunk_start(length: int, chunk: int, i):
    """Start of chunk i; the last chunk is moved back to end at `length` (it then overlaps the one before it:
    rows below i * chunk were already covered and are masked where that matters)."""
    return jnp.minimum(i * chunk, length - chunk)


@dataclasses.dataclass(frozen=True)
class _Plan:
    vocab_axis: int       # 0: weight [V, D] (tied embedding table); 1: weight [D, V] (untied kernel)
    seq_chunk: int        # positions per chunk
    seq_chunks: int
    vocab_chunk: int      # columns per vocabulary tile (== V: one tile)
    vocab_chunks: int

    def vocab_size(self, weight) -> int:
        return weight.shape[self.vocab_axis]


def _tile_logits(plan: _Plan, h, weight, v0):
    """float32 logits [B, Tc, Vc] of hidden chunk h [B, Tc, D] against vocabulary columns v0 .. v0+Vc-1."""
    if plan.vocab_chunks == 1:
        w = weight
    else:
        w = jax.lax.dynamic_slice_in_dim(weight, v0, plan.vocab_chunk, axis=plan.vocab_axis)
    spec = "btd,vd->btv" if plan.vocab_axis == 0 else "btd,dv->btv"
    # in the compute dtype, as the dense head: the reductions below read it converting to float32 on the fly,
    # so a bfloat16 chunk costs half the memory traffic of a float32 one (the head's main cost on a GPU)
    logits = jnp.einsum(spec, h, w).astype(jnp.float32)
    return sh.constrain(logits, (sh.ACT_BATCH, sh.ACT_LENGTH, sh.ACT_VOCAB)), w


def _column_mask(plan: _Plan, v_index, v0):
    """bool [Vc]: the tile's columns not already covered by an earlier tile (the last tile may overlap)."""
    cols = v0 + jnp.arange(plan.vocab_chunk)
    return cols >= v_index * plan.vocab_chunk, cols


def _chunk_forward(plan: _Plan, h, weight, y):
    """Statistics of one sequence chunk: (target, log_z, mean_logit, max) each [B, Tc]."""
    vocab = plan.vocab_size(weight)
    if plan.vocab_chunks == 1:
        logits, _ = _tile_logits(plan, h, weight, 0)
        top = jnp.max(logits, axis=-1)
        e = jnp.exp(logits - top[..., None])
        s = jnp.sum(e, axis=-1)
        u = jnp.sum(e * logits, axis=-1)
        cols = jax.lax.broadcasted_iota(jnp.int32, logits.shape, 2)
        target = jnp.sum(jnp.where(cols == y[..., None], logits, 0.0), axis=-1)
        return target, top + jnp.log(s), u / s, top

    def tile(v_index, carry):
        top, s, u, target = carry
        v0 = _chunk_start(vocab, plan.vocab_chunk, v_index)
        logits, _ = _tile_logits(plan, h, weight, v0)
        fresh, cols = _column_mask(plan, v_index, v0)
        logits = jnp.where(fresh, logits, -jnp.inf)
        new_top = jnp.maximum(top, jnp.max(logits, axis=-1))
        e = jnp.exp(logits - new_top[..., None])                      # 0 on masked columns
        scale = jnp.exp(top - new_top)
        s = s * scale + jnp.sum(e, axis=-1)
        u = u * scale + jnp.sum(jnp.where(fresh, e * logits, 0.0), axis=-1)
        target = target + jnp.sum(jnp.where((cols == y[..., None]) & fresh, logits, 0.0), axis=-1)
        return new_top, s, u, target

    shape = y.shape
    init = (jnp.full(shape, -jnp.inf, jnp.float32), jnp.zeros(shape, jnp.float32), jnp.zeros(shape, jnp.float32),
            jnp.zeros(shape, jnp.float32))
    top, s, u, target = jax.lax.fori_loop(0, plan.vocab_chunks, tile, init)
    return target, top + jnp.log(s), u / s, top


def _seq_slice(x, start, size):
    return jax.lax.dynamic_slice_in_dim(x, start, size, axis=1)


def _fresh_rows(plan: _Plan, start, i):
    """bool [Tc]: the positions of chunk i that chunk i-1 did not cover (all but the overlap of the last one)."""
    return (start + jnp.arange(plan.seq_chunk)) >= i * plan.seq_chunk


def _add_rows(dh, start, part):
    """dh[:, start:start+Tc] += part (overlapped positions get the zeros their masked cotangents gave)."""
    size = part.shape[1]
    return jax.lax.dynamic_update_slice_in_dim(dh, _seq_slice(dh, start, size) + part.astype(dh.dtype), start,
                                               axis=1)


def _forward(plan: _Plan, hidden, weight, targets):
    """(target, log_z, mean_logit, max), each float32 [B, T]."""
    b, t = targets.shape
    outs = tuple(jnp.zeros((b, t), jnp.float32) for _ in range(4))

    def chunk(i, outs):
        start = _chunk_start(t, plan.seq_chunk, i)
        stats = _chunk_forward(plan, _seq_slice(hidden, start, plan.seq_chunk), weight,
                               _seq_slice(targets, start, plan.seq_chunk))
        return tuple(jax.lax.dynamic_update_slice_in_dim(o, x, start, axis=1) for o, x in zip(outs, stats))

    if plan.seq_chunks == 1:
        return _chunk_forward(plan, hidden, weight, targets)
    return jax.lax.fori_loop(0, plan.seq_chunks, chunk, outs)


def _chunk_backward(plan: _Plan, h, weight, y, log_z, mean_l, g_target, g_log_z, g_entropy):
    """(dh [B, Tc, D] float32, dW float32 like weight) of one sequence chunk."""
    vocab = plan.vocab_size(weight)
    dtype = h.dtype
    back_h = "btv,vd->btd" if plan.vocab_axis == 0 else "btv,dv->btd"
    back_w = "btv,btd->vd" if plan.vocab_axis == 0 else "btd,btv->dv"

    def dlogits(logits, cols, fresh):
        p = jnp.exp(logits - log_z[..., None])
        d = p * (g_log_z + g_entropy * mean_l)[..., None] - p * logits * g_entropy[..., None]
        d = d + jnp.where(cols == y[..., None], g_target[..., None], 0.0)
        if fresh is not None:
            d = jnp.where(fresh, d, 0.0)
        return d.astype(dtype)

    def grads(d, w):
        dh = jnp.einsum(back_h, d, w, preferred_element_type=jnp.float32)
        if plan.vocab_axis == 0:
            dw = jnp.einsum(back_w, d, h, preferred_element_type=jnp.float32)
        else:
            dw = jnp.einsum(back_w, h, d, preferred_element_type=jnp.float32)
        return dh, dw

    if plan.vocab_chunks == 1:
        logits, w = _tile_logits(plan, h, weight, 0)
        cols = jax.lax.broadcasted_iota(jnp.int32, logits.shape, 2)
        return grads(dlogits(logits, cols, None), w)

    def tile(v_index, carry):
        dh, dw = carry
        v0 = _chunk_start(vocab, plan.vocab_chunk, v_index)
        logits, w = _tile_logits(plan, h, weight, v0)
        fresh, cols = _column_mask(plan, v_index, v0)
        dh_tile, dw_tile = grads(dlogits(logits, cols, fresh), w)
        old = jax.lax.dynamic_slice_in_dim(dw, v0, plan.vocab_chunk, axis=plan.vocab_axis)
        dw = jax.lax.dynamic_update_slice_in_dim(dw, old + dw_tile, v0, axis=plan.vocab_axis)
        return dh + dh_tile, dw

    init = (jnp.zeros(h.shape, jnp.float32), jnp.zeros(weight.shape, jnp.float32))
    return jax.lax.fori_loop(0, plan.vocab_chunks, tile, init)


def _backward(plan: _Plan, residuals, cotangents):
    hidden, weight, targets, log_z, mean_l = residuals
    g_target, g_log_z, g_entropy, _ = (jnp.asarray(g, jnp.float32) for g in cotangents)
    b, t = targets.shape

    if plan.seq_chunks == 1:
        dh, dw = _chunk_backward(plan, hidden, weight, targets, log_z, mean_l, g_target, g_log_z, g_entropy)
    else:
        def chunk(i, carry):
            dh, dw = carry
            start = _chunk_start(t, plan.seq_chunk, i)
            fresh = _fresh_rows(plan, start, i)
            pick = functools.partial(_seq_slice, start=start, size=plan.seq_chunk)
            gs = [jnp.where(fresh[None, :], pick(g), 0.0) for g in (g_target, g_log_z, g_entropy)]
            dh_chunk, dw_chunk = _chunk_backward(plan, pick(hidden), weight, pick(targets), pick(log_z),
                                                 pick(mean_l), *gs)
            return _add_rows(dh, start, dh_chunk), dw + dw_chunk

        init = (jnp.zeros(hidden.shape, hidden.dtype), jnp.zeros(weight.shape, jnp.float32))
        dh, dw = jax.lax.fori_loop(0, plan.seq_chunks, chunk, init)
    return dh.astype(hidden.dtype), dw.astype(weight.dtype), None


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _head_stats(plan: _Plan, hidden, weight, targets):
    target, log_z, mean_l, top = _forward(plan, hidden, weight, targets)
    return target, log_z, log_z - mean_l, top


def _head_stats_fwd(plan: _Plan, hidden, weight, targets):
    target, log_z, mean_l, top = _forward(plan, hidden, weight, targets)
    return (target, log_z, log_z - mean_l, top), (hidden, weight, targets, log_z, mean_l)


_head_stats.defvjp(_head_stats_fwd, _backward)


def head_stats(hidden, weight, targets, *, vocab_axis: int = 0, chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
               chunk_vocab: int = 0) -> HeadStats:
    """Per-token HeadStats of logits = hidden @ W^T at `targets`, never materialising [tokens, V].

    hidden [..., T, D] (compute dtype), weight [V, D] (vocab_axis=0) or [D, V] (vocab_axis=1) in the same
    dtype, targets int [..., T]. chunk_tokens: tokens per device per chunk (0 = one chunk: the whole batch);
    chunk_vocab: vocabulary columns per tile (0 = the whole vocabulary). Differentiable in hidden and weight
    (custom VJP, same chunking); `max` carries no gradient.
    """
    if hidden.shape[:-1] != targets.shape:
        raise ValueError(f"head_stats: hidden {hidden.shape} and targets {targets.shape} disagree (hidden is "
                         "targets' shape + the model dimension)")
    if weight.ndim != 2 or weight.shape[1 - vocab_axis] != hidden.shape[-1]:
        raise ValueError(f"head_stats: weight {weight.shape} with vocab_axis={vocab_axis} does not match the "
                         f"model dimension {hidden.shape[-1]}")
    plan, h3, weight, y2 = _prepare(hidden, weight, targets, vocab_axis, chunk_tokens, chunk_vocab)
    out = _head_stats(plan, h3, weight, y2)
    return HeadStats(*(x.reshape(targets.shape) for x in out))


def _prepare(hidden, weight, targets, vocab_axis, chunk_tokens, chunk_vocab):
    """(plan, hidden [B, T, D], weight in hidden's dtype, targets int32 [B, T]) with the leading axes merged."""
    t = targets.shape[-1]
    h3 = hidden.reshape(-1, t, hidden.shape[-1])
    y2 = targets.reshape(-1, t).astype(jnp.int32)
    weight = weight.astype(hidden.dtype)
    vocab = weight.shape[vocab_axis]
    rows = _rows_per_device(h3.shape[0])
    seq_chunk = t if chunk_tokens <= 0 else max(1, min(t, chunk_tokens // max(rows, 1)))
    vocab_chunk = vocab if chunk_vocab <= 0 else min(chunk_vocab, vocab)
    plan = _Plan(vocab_axis, seq_chunk, -(-t // seq_chunk), vocab_chunk, -(-vocab // vocab_chunk))
    return plan, h3, weight, y2


# ------------------------------------------------------------------------- fused cross-entropy sums
#
# For the sum-form LM loss (lm_xent / sft_xent: loss_sum = sum_t w_t (nll_t + z * log_z_t^2)) the gradient of the
# logits is known in the forward: d loss_sum / d l_j = w ((1 + 2 z log_z) p_j - [j == y]), times the scalar
# cotangent of loss_sum. So the forward computes each chunk's logits once and the two gradient matmuls right
# away (Liger's fused linear cross-entropy does the same), keeping dh and dW as residuals: no logits recompute
# in the backward, which the general per-token path (`head_stats`) needs because its cotangents are arbitrary.

XENT_SUMS = ("loss_sum", "xent_sum", "z_loss_sum", "correct_sum")


def _xent_chunk(plan: _Plan, h, weight, y, w, z_loss: float, with_grads: bool):
    """Weighted sums of one chunk (single vocabulary tile), and (dh float32, dW float32) of its loss_sum."""
    logits, wt = _tile_logits(plan, h, weight, 0)
    top = jnp.max(logits, axis=-1)
    e = jnp.exp(logits - top[..., None])
    s = jnp.sum(e, axis=-1)
    log_z = top + jnp.log(s)
    cols = jax.lax.broadcasted_iota(jnp.int32, logits.shape, 2)
    hit = cols == y[..., None]
    target = jnp.sum(jnp.where(hit, logits, 0.0), axis=-1)
    xent = jnp.sum(w * (log_z - target))
    z_term = z_loss * jnp.sum(w * jnp.square(log_z))
    sums = (xent + z_term, xent, z_term, jnp.sum(w * (target >= top)))
    if not with_grads:
        return sums, None
    scale = (w * (1.0 + 2.0 * z_loss * log_z) / s)[..., None]
    d = (e * scale - jnp.where(hit, w[..., None], 0.0)).astype(h.dtype)
    back_h = "btv,vd->btd" if plan.vocab_axis == 0 else "btv,dv->btd"
    dh = jnp.einsum(back_h, d, wt, preferred_element_type=jnp.float32)
    if plan.vocab_axis == 0:
        dw = jnp.einsum("btv,btd->vd", d, h, preferred_element_type=jnp.float32)
    else:
        dw = jnp.einsum("btd,btv->dv", h, d, preferred_element_type=jnp.float32)
    return sums, (dh, dw)


def _xent_sums(plan: _Plan, z_loss: float, hidden, weight, targets, weights, with_grads: bool):
    t = targets.shape[1]
    weights = weights.astype(jnp.float32)
    zero = tuple(jnp.zeros((), jnp.float32) for _ in XENT_SUMS)
    grads0 = (jnp.zeros(hidden.shape, hidden.dtype), jnp.zeros(weight.shape, jnp.float32))

    def chunk(i, carry):
        sums, grads = carry
        start = _chunk_start(t, plan.seq_chunk, i)
        w = jnp.where(_fresh_rows(plan, start, i)[None, :], _seq_slice(weights, start, plan.seq_chunk), 0.0)
        part, part_grads = _xent_chunk(plan, _seq_slice(hidden, start, plan.seq_chunk), weight,
                                       _seq_slice(targets, start, plan.seq_chunk), w, z_loss, with_grads)
        sums = tuple(a + b for a, b in zip(sums, part))
        if with_grads:
            dh, dw = grads
            grads = (_add_rows(dh, start, part_grads[0]), dw + part_grads[1])
        return sums, grads

    if plan.seq_chunks == 1:
        sums, grads = _xent_chunk(plan, hidden, weight, targets, weights, z_loss, with_grads)
        if with_grads:
            grads = (grads[0].astype(hidden.dtype), grads[1])
    else:
        sums, grads = jax.lax.fori_loop(0, plan.seq_chunks, chunk, (zero, grads0 if with_grads else None))
    return sums, grads


@functools.partial(jax.custom_vjp, nondiff_argnums=(0, 1))
def _fused_xent(plan: _Plan, z_loss: float, hidden, weight, targets, weights):
    return _xent_sums(plan, z_loss, hidden, weight, targets, weights, with_grads=False)[0]


def _fused_xent_fwd(plan: _Plan, z_loss: float, hidden, weight, targets, weights):
    sums, (dh, dw) = _xent_sums(plan, z_loss, hidden, weight, targets, weights, with_grads=True)
    return sums, (dh, dw.astype(weight.dtype), targets, weights)


def _fused_xent_bwd(plan: _Plan, z_loss: float, residuals, cotangents):
    dh, dw, targets, weights = residuals
    g = jnp.asarray(cotangents[0], jnp.float32)   # only loss_sum is differentiable (the others are metrics)
    return ((g * dh.astype(jnp.float32)).astype(dh.dtype), (g * dw.astype(jnp.float32)).astype(dw.dtype),
            None, jnp.zeros_like(weights))


_fused_xent.defvjp(_fused_xent_fwd, _fused_xent_bwd)


def fused_xent_sums(hidden, weight, targets, weights, *, z_loss: float = 0.0, vocab_axis: int = 0,
                    chunk_tokens: int = DEFAULT_CHUNK_TOKENS) -> dict[str, jax.Array]:
    """{"loss_sum", "xent_sum", "z_loss_sum", "correct_sum"} over weighted tokens, chunk by chunk, with the
    gradient of loss_sum computed in the forward (see above). Only loss_sum is differentiable (in hidden and
    weight); the other sums are metrics. The whole vocabulary per chunk (the gradient needs the final log_z)."""
    plan, h3, weight, y2 = _prepare(hidden, weight, targets, vocab_axis, chunk_tokens, 0)
    sums = _fused_xent(plan, float(z_loss), h3, weight, y2, weights.reshape(y2.shape))
    return dict(zip(XENT_SUMS, sums))


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class ChunkedLogits:
    """The LM head's logits, not yet computed: final hidden states and the head's weight.

    What a Decoder returns as "logits" when called with `logits="chunked"`. Losses take per-token statistics
    from it with `stats(targets)` (chunked, see `head_stats`); `dense()` builds the full float32 array (tests,
    small vocabularies). `shape` is the logits' shape.
    """
    hidden: jax.Array
    weight: jax.Array
    vocab_axis: int = dataclasses.field(metadata=dict(static=True), default=0)
    chunk_tokens: int = dataclasses.field(metadata=dict(static=True), default=DEFAULT_CHUNK_TOKENS)
    chunk_vocab: int = dataclasses.field(metadata=dict(static=True), default=0)

    @property
    def shape(self) -> tuple[int, ...]:
        return (*self.hidden.shape[:-1], self.weight.shape[self.vocab_axis])

    @property
    def ndim(self) -> int:
        return self.hidden.ndim

    def stats(self, targets) -> HeadStats:
        return head_stats(self.hidden, self.weight, targets, vocab_axis=self.vocab_axis,
                          chunk_tokens=self.chunk_tokens, chunk_vocab=self.chunk_vocab)

    def xent_sums(self, targets, weights, z_loss: float = 0.0) -> dict[str, jax.Array]:
        """Weighted cross-entropy sums (`fused_xent_sums`: gradient of loss_sum made in the forward) when each
        chunk spans the whole vocabulary; with vocabulary tiles, the same sums from `stats` (recomputing
        backward)."""
        if self.chunk_vocab <= 0 or self.chunk_vocab >= self.shape[-1]:
            return fused_xent_sums(self.hidden, self.weight, targets, weights, z_loss=z_loss,
                                   vocab_axis=self.vocab_axis, chunk_tokens=self.chunk_tokens)
        stats = self.stats(targets)
        weights = weights.astype(jnp.float32)
        xent = jnp.sum(weights * stats.nll)
        z_term = z_loss * jnp.sum(weights * jnp.square(stats.log_z))
        return {"loss_sum": xent + z_term, "xent_sum": xent, "z_loss_sum": z_term,
                "correct_sum": jnp.sum(weights * (stats.target >= stats.max))}

    def dense(self) -> jax.Array:
        spec = "...d,vd->...v" if self.vocab_axis == 0 else "...d,dv->...v"
        return jnp.einsum(spec, self.hidden, self.weight.astype(self.hidden.dtype),
                          preferred_element_type=jnp.float32)

    def select(self, index) -> "ChunkedLogits":
        """The same head over hidden[index] (e.g. a slice of positions)."""
        return dataclasses.replace(self, hidden=self.hidden[index])


def dense_stats(logits, targets) -> HeadStats:
    """HeadStats from a materialised logits array [..., V] (the reference path; small vocabularies)."""
    logits = logits.astype(jnp.float32)
    top = jnp.max(logits, axis=-1)
    log_z = jax.nn.logsumexp(logits, axis=-1)
    p = jnp.exp(logits - log_z[..., None])
    cols = jax.lax.broadcasted_iota(jnp.int32, logits.shape, logits.ndim - 1)
    target = jnp.sum(jnp.where(cols == targets[..., None], logits, 0.0), axis=-1)
    entropy = log_z - jnp.sum(p * logits, axis=-1)
    return HeadStats(target, log_z, entropy, jax.lax.stop_gradient(top))


def token_stats(logits, targets) -> HeadStats:
    """HeadStats of either a ChunkedLogits (chunked) or a logits array (dense)."""
    if isinstance(logits, ChunkedLogits):
        return logits.stats(targets)
    if logits.shape[:-1] != targets.shape:
        raise ValueError(f"logits shape {logits.shape} does not match targets shape {targets.shape} (+ vocab axis)")
    return dense_stats(logits, targets)

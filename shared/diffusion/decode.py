"""LLaDA-style decoding for masked diffusion models, and a batched greedy decoder for the ARM baseline.

`llada_decode` follows LLaDA's generate.py with low-confidence remasking at temperature 0: the response
positions start as [MASK]; the response is cut into semi-autoregressive blocks; each block gets
steps / num_blocks steps; at each step the model predicts every masked position, and the most confident
predictions (softmax probability of the argmax) inside the current block are committed, as many as the even
split of the block's masked count over its steps gives (LLaDA's get_num_transfer_tokens). Positions that are
not [MASK] are never changed, so a fully revealed input comes back unchanged. [MASK] itself is never predicted.
"""
from __future__ import annotations

import functools
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np


def transfer_counts(masked_in_block, steps: int):
    """int[B, steps]: how many tokens each step commits (LLaDA: floor share, the remainder to the first steps)."""
    base = masked_in_block[:, None] // steps
    rest = masked_in_block[:, None] % steps
    return base + (jnp.arange(steps)[None, :] < rest).astype(base.dtype)


def llada_decode(logits_fn: Callable, x, *, gen_start: int, gen_length: int, steps: int, block_length: int,
                 mask_id: int):
    """x int[B, T] with [MASK] at the positions to fill in [gen_start, gen_start + gen_length) -> filled x.

    logits_fn(x) -> logits [B, T, V]. steps must be a multiple of the number of blocks."""
    block_length = min(block_length, gen_length)
    if gen_length % block_length:
        raise ValueError(f"decode: gen_length {gen_length} is not a multiple of block_length {block_length}")
    num_blocks = gen_length // block_length
    steps = steps or gen_length
    if steps % num_blocks:
        raise ValueError(f"decode: steps {steps} is not a multiple of the {num_blocks} blocks")
    per_block = steps // num_blocks
    positions = jnp.arange(x.shape[1])
    for block in range(num_blocks):
        start, end = gen_start + block * block_length, gen_start + (block + 1) * block_length
        in_block = (positions >= start) & (positions < end)
        counts = transfer_counts(jnp.sum((x == mask_id) & in_block[None], axis=1), per_block)

        def step(i, x):
            masked = x == mask_id
            logits = logits_fn(x).astype(jnp.float32)
            logits = logits.at[..., mask_id].set(-jnp.inf)
            pred = jnp.argmax(logits, axis=-1)
            confidence = jnp.max(jax.nn.softmax(logits, axis=-1), axis=-1)
            # masked positions beyond this block wait (LLaDA sets their confidence to -inf)
            candidate = masked & (positions[None] >= gen_start) & (positions[None] < end)
            confidence = jnp.where(candidate, confidence, -jnp.inf)
            order = jnp.argsort(-confidence, axis=-1)
            rank = jnp.argsort(order, axis=-1)
            commit = candidate & (rank < counts[:, i][:, None])
            return jnp.where(commit, pred, x)

        x = jax.lax.fori_loop(0, per_block, step, x)
    return x


def ar_greedy_decode(logits_fn: Callable, x, *, gen_start: int, gen_length: int):
    """Greedy left-to-right decoding with a causal model: fills x[:, gen_start:gen_start+gen_length] one token
    per step from the logits at the previous position (a full forward per step: small models, short answers)."""

    def step(i, x):
        logits = logits_fn(x)
        pos = gen_start + i
        token = jnp.argmax(jax.lax.dynamic_index_in_dim(logits, pos - 1, axis=1, keepdims=False), axis=-1)
        return jax.lax.dynamic_update_index_in_dim(x, token.astype(x.dtype), pos, axis=1)

    return jax.lax.fori_loop(0, gen_length, step, x)


@functools.partial(jax.jit, static_argnames=("graphdef", "gen_start", "gen_length", "steps", "block_length",
                                             "mask_id", "attention", "causal"))
def decode_batch(graphdef, params, x, segment_ids=None, positions=None, *, gen_start: int, gen_length: int,
                 steps: int = 0, block_length: int = 32, mask_id: int = 0, attention: str = "xla",
                 causal: bool = False):
    """Fills the response region of x [B, T] with the model: LLaDA decoding (causal=False) or AR greedy."""
    from flax import nnx

    model = nnx.merge(graphdef, params)

    def logits_fn(tokens):
        return model(tokens, positions, segment_ids, attention=attention)["logits"]

    if causal:
        return ar_greedy_decode(logits_fn, x, gen_start=gen_start, gen_length=gen_length)
    return llada_decode(logits_fn, x, gen_start=gen_start, gen_length=gen_length, steps=steps,
                        block_length=block_length, mask_id=mask_id)


def prompt_layout(prompts: list[list[int]], gen_length: int, *, pad_id: int, fill_id: int):
    """Left-padded prompts followed by gen_length fill_id slots ([MASK] for LLaDA decoding):
    (x, segment_ids, positions) int32[B, T] numpy, with padding out of attention (segment 0) and positions
    counted from each prompt's first token."""
    width = max(len(p) for p in prompts)
    b, t = len(prompts), width + gen_length
    x = np.full((b, t), pad_id, np.int32)
    x[:, width:] = fill_id
    valid = np.zeros((b, t), bool)
    for r, ids in enumerate(prompts):
        x[r, width - len(ids):width] = ids
        valid[r, width - len(ids):] = True
    positions = np.maximum(np.cumsum(valid, axis=1) - 1, 0).astype(np.int32)
    return x, valid.astype(np.int32), positions

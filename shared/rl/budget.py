"""Memory budgets of the RL learner: tokens per micro-batch and rows per sampler call, from the device's memory.

The rollout batch (prompts x group) is a science choice; how many rows go through the device at once is a
memory choice, made here. Estimates are deliberately rough and conservative (activation bytes per token from
the model's shape and remat policy, KV-cache bytes per row); config keys override them:
rl.micro_batch_tokens (tokens per device per micro-batch of the update and the log-prob passes) and
rl.rollout_max_rows (rows per sampler call).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

# No memory statistics (CPU): fixed budgets, small enough for a laptop.
CPU_MICRO_BATCH_TOKENS = 32768
CPU_ROLLOUT_MAX_ROWS = 4096
# Share of the estimated free memory a budget may plan to use (the estimates leave out XLA's workspace).
USABLE_FRACTION = 0.6
# A forward-only pass (behaviour / reference log-probs) keeps no activations for a backward: it takes
# micro-batches this many times larger than the update's.
FORWARD_BUDGET_FACTOR = 4


def device_memory() -> tuple[int, int] | None:
    """(bytes limit, bytes in use) of the tightest local device, or None where the backend reports none."""
    stats = [d.memory_stats() for d in jax.local_devices()]
    if not stats or any(not s or "bytes_limit" not in s for s in stats):
        return None
    return min((int(s["bytes_limit"]), int(s.get("bytes_in_use", 0))) for s in stats)


def _layer_peak_bytes(m) -> int:
    """Bytes per token live inside one layer's forward (or its backward): q/k/v, attention output, the MLP's
    gate/up/activation, residual stream and float32 norm temporaries."""
    act = jnp.dtype(m.dtype).itemsize
    q, kv = m.n_heads * m.head_dim, m.n_kv_heads * m.head_dim
    return act * (6 * m.d_model + 2 * q + 4 * kv + 4 * m.d_ff) + 4 * 2 * m.d_model


def train_bytes_per_token(m) -> int:
    """Activation bytes per token of a forward + backward under model.remat."""
    act = jnp.dtype(m.dtype).itemsize
    peak = _layer_peak_bytes(m)
    saved = {"full": act * m.d_model,
             "dots": act * (3 * m.d_model + m.n_heads * m.head_dim + 2 * m.n_kv_heads * m.head_dim + 2 * m.d_ff),
             "dots_all": act * (3 * m.d_model + m.n_heads * m.head_dim + 2 * m.n_kv_heads * m.head_dim + 2 * m.d_ff),
             "mlp": peak - act * 4 * m.d_ff,   # everything but the MLP's hidden activations
             }.get(m.remat, peak)
    return m.n_layers * saved + 2 * peak


def head_chunk_bytes(m) -> int:
    """The vocabulary head's chunk per device: compute-dtype logits and their gradient, float32 temporaries."""
    from shared.model.chunked_head import DEFAULT_CHUNK_TOKENS

    tokens = int(m.get("head_chunk_tokens", DEFAULT_CHUNK_TOKENS)) or 65536
    vocab = int(m.get("head_chunk_vocab", 0)) or m.vocab_size
    return tokens * vocab * 8


def decode_bytes_per_row(m, slots: int) -> int:
    """Sampler bytes per row: the KV cache of `slots` positions, float32 logits and sampling temporaries (a
    top-p sort) over the vocabulary, and the prompt pass's activations."""
    act = jnp.dtype(m.dtype).itemsize
    cache = slots * m.n_layers * 2 * m.n_kv_heads * m.head_dim * act
    return cache + m.vocab_size * 4 * 6 + slots * _layer_peak_bytes(m)


def _budget(config, key: str, cpu_default: int, from_free_bytes) -> int:
    """rl.<key> when set (> 0); else from_free_bytes(free bytes of the tightest local device); cpu_default where
    the backend reports no memory statistics."""
    set_by_config = int(config.rl.get(key, 0) or 0)
    if set_by_config > 0:
        return set_by_config
    memory = device_memory()
    if memory is None:
        return cpu_default
    limit, in_use = memory
    return from_free_bytes(limit - in_use)


def micro_batch_tokens(config, param_bytes_per_device: int, extra_bytes_per_device: int = 0) -> int:
    """Tokens per device per micro-batch of the RL update: rl.micro_batch_tokens, or (0) what fits in the
    device's free memory after the training state (already allocated), its gradients, an optimizer-update
    workspace, `extra_bytes_per_device` (rollout and reference copies not yet allocated) and the head chunk."""
    def from_free(free: int) -> int:
        free -= 2 * param_bytes_per_device + extra_bytes_per_device + head_chunk_bytes(config.model)
        tokens = int(USABLE_FRACTION * free) // train_bytes_per_token(config.model)
        return max(256, tokens // 256 * 256)

    return _budget(config, "micro_batch_tokens", CPU_MICRO_BATCH_TOKENS, from_free)


def rollout_max_rows(config, slots: int, batch_multiple: int) -> int:
    """Rows per sampler call for a cache of `slots` positions: rl.rollout_max_rows, or (0) what fits in the free
    memory now (a multiple of batch_multiple: the sampler splits rows over the mesh's batch axes)."""
    def from_free(free: int) -> int:
        return max(1, int(USABLE_FRACTION * free) // decode_bytes_per_row(config.model, slots)) * batch_multiple

    return _budget(config, "rollout_max_rows", CPU_ROLLOUT_MAX_ROWS, from_free)


def rows_per_micro_batch(tokens_per_device: int, seq_len: int, batch_multiple: int) -> int:
    """Rows of length seq_len per micro-batch: tokens_per_device // seq_len per device (at least 1), times the
    devices the rows are split over."""
    return max(1, tokens_per_device // max(seq_len, 1)) * batch_multiple

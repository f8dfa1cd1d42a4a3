"""A small KV-cache sampler for one prompt (quick looks at a model). The batched, bucketed RL sampler lives
in shared/rl."""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from flax import nnx

from shared.model.transformer import init_cache


@functools.partial(jax.jit, static_argnames=("graphdef", "max_len", "attention"))
def _prefill(graphdef, params, tokens, *, max_len, attention):
    model = nnx.merge(graphdef, params)
    cache = init_cache(model.cfg, tokens.shape[0], max_len)
    out = model(tokens, cache=cache, cache_index=jnp.int32(0), attention=attention)
    return out["logits"][:, -1], out["cache"]


@functools.partial(jax.jit, static_argnames=("graphdef", "attention"))
def _decode(graphdef, params, token, cache, index, *, attention):
    model = nnx.merge(graphdef, params)
    out = model(token[:, None], cache=cache, cache_index=index, attention=attention)
    return out["logits"][:, -1], out["cache"]


def generate(graphdef, params, prompt_ids: list[int], max_new_tokens: int, *, temperature: float = 0.0,
             seed: int = 0, eos_id: int | None = None, attention: str = "xla") -> list[int]:
    """Greedy (temperature 0) or sampled continuation of `prompt_ids`; returns the new token ids."""
    max_len = len(prompt_ids) + max_new_tokens
    tokens = jnp.asarray([prompt_ids], jnp.int32)
    logits, cache = _prefill(graphdef, params, tokens, max_len=max_len, attention=attention)
    rng = jax.random.key(seed)
    out: list[int] = []
    for i in range(max_new_tokens):
        if temperature > 0:
            rng, sub = jax.random.split(rng)
            token = jax.random.categorical(sub, logits.astype(jnp.float32) / temperature)
        else:
            token = jnp.argmax(logits, axis=-1)
        token_id = int(token[0])
        out.append(token_id)
        if eos_id is not None and token_id == eos_id:
            break
        logits, cache = _decode(graphdef, params, token.astype(jnp.int32), cache, jnp.int32(len(prompt_ids) + i),
                                attention=attention)
    return out

"""A plain MLP on a parameter pytree: `[{"w", "b"}, ...]`, ReLU between layers, fp32."""
from __future__ import annotations

from typing import Sequence

import jax
import jax.numpy as jnp


def mlp_init(rng: jax.Array, sizes: Sequence[int]) -> list[dict]:
    """Layers sizes[0] -> sizes[1] -> ... -> sizes[-1]; PyTorch nn.Linear's default init (U(+-1/sqrt(fan_in)))."""
    if len(sizes) < 2:
        raise ValueError(f"mlp_init: sizes={list(sizes)} needs an input and an output size")
    layers = []
    for fan_in, fan_out, key in zip(sizes[:-1], sizes[1:], jax.random.split(rng, len(sizes) - 1)):
        bound = 1.0 / float(fan_in) ** 0.5
        kw, kb = jax.random.split(key)
        layers.append({"w": jax.random.uniform(kw, (fan_in, fan_out), jnp.float32, -bound, bound),
                       "b": jax.random.uniform(kb, (fan_out,), jnp.float32, -bound, bound)})
    return layers


def mlp_apply(params: list[dict], x: jax.Array) -> jax.Array:
    h = x.astype(jnp.float32)
    for i, layer in enumerate(params):
        h = h @ layer["w"] + layer["b"]
        if i < len(params) - 1:
            h = jax.nn.relu(h)
    return h


def mlp_sizes(d_in: int, hidden: int | Sequence[int], d_out: int) -> list[int]:
    """hidden 0 / None / [] -> a single linear layer (CLUBForCategorical with hidden_size=None)."""
    if not hidden:
        return [d_in, d_out]
    hidden = [int(hidden)] if isinstance(hidden, int) else [int(h) for h in hidden]
    return [d_in, *hidden, d_out]

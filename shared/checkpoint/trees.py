"""Pytree helpers for checkpoints: typed PRNG keys <-> raw key data, and checkpoint-vs-target comparison.

Orbax stores plain arrays; typed key arrays (`jax.random.key`) are stored as their `jax.random.key_data`
(uint32) and re-wrapped on restore with the key implementation the abstract target asks for.
"""
from __future__ import annotations

from typing import Any

import jax


def is_key_leaf(x: Any) -> bool:
    dtype = getattr(x, "dtype", None)
    return dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)


def keys_to_data(tree: Any) -> Any:
    """Typed key arrays -> their uint32 key data; every other leaf unchanged."""
    return jax.tree.map(lambda x: jax.random.key_data(x) if is_key_leaf(x) else x, tree)


def abstract_keys_to_data(abstract_tree: Any) -> Any:
    """Abstract typed-key leaves -> abstract key data, on the same sharding.

    Key data has one extra trailing dimension; a NamedSharding's spec leaves it unsharded and a
    single-device sharding is unchanged, so the key's sharding applies to its data as-is.
    """

    def convert(leaf):
        if not is_key_leaf(leaf):
            return leaf
        data = jax.eval_shape(jax.random.key_data, jax.ShapeDtypeStruct(leaf.shape, leaf.dtype))
        return jax.ShapeDtypeStruct(data.shape, data.dtype, sharding=leaf.sharding)

    return jax.tree.map(convert, abstract_tree)


def data_to_keys(tree: Any, abstract_tree: Any) -> Any:
    """Re-wrap the key data at the leaves where `abstract_tree` has typed keys."""

    def convert(value, abstract_leaf):
        if not is_key_leaf(abstract_leaf):
            return value
        return jax.random.wrap_key_data(value, impl=_key_impl(abstract_leaf))

    return jax.tree.map(convert, tree, abstract_tree)


def _key_impl(abstract_key: Any):
    # `jax.random.key_impl` wants a key array; trace one from the abstract leaf to read its impl.
    found = []
    jax.eval_shape(lambda k: found.append(jax.random.key_impl(k)),
                   jax.ShapeDtypeStruct(abstract_key.shape, abstract_key.dtype))
    return found[0]


def path_name(path: tuple) -> str:
    """'params.layer.w' style name of a key path (dict keys, attribute names, sequence indices)."""
    parts = []
    for entry in path:
        for attr in ("key", "name", "idx"):  # DictKey / FlattenedIndexKey, GetAttrKey, SequenceKey
            if hasattr(entry, attr):
                parts.append(str(getattr(entry, attr)))
                break
        else:
            parts.append(str(entry))
    return ".".join(parts)


def leaf_shapes(tree: Any) -> dict[str, tuple]:
    """{path name: shape} for every leaf (array, ShapeDtypeStruct or orbax array metadata)."""
    return {path_name(path): tuple(getattr(leaf, "shape", ()) or ())
            for path, leaf in jax.tree_util.tree_leaves_with_path(tree)}


def describe_differences(saved: dict[str, tuple], expected: dict[str, tuple], limit: int = 8) -> str:
    """One-paragraph list of the keys that differ between a checkpoint and the target; '' if none."""
    missing = sorted(set(expected) - set(saved))
    unexpected = sorted(set(saved) - set(expected))
    reshaped = sorted(k for k in set(saved) & set(expected) if saved[k] != expected[k])

    def listing(names, fmt=str):
        shown = ", ".join(fmt(n) for n in names[:limit])
        return shown + (f", ... ({len(names) - limit} more)" if len(names) > limit else "")

    parts = []
    if missing:
        parts.append(f"missing from the checkpoint: {listing(missing)}")
    if unexpected:
        parts.append(f"in the checkpoint but not expected: {listing(unexpected)}")
    if reshaped:
        parts.append("shape differs (checkpoint vs expected): "
                     + listing(reshaped, lambda k: f"{k} {saved[k]} vs {expected[k]}"))
    return "; ".join(parts)


def check_has_shardings(abstract_tree: Any, what: str) -> None:
    for path, leaf in jax.tree_util.tree_leaves_with_path(abstract_tree):
        if getattr(leaf, "sharding", None) is None:
            raise ValueError(
                f"{what} leaf {path_name(path) or '<root>'} has no .sharding; build it as "
                "jax.ShapeDtypeStruct(shape, dtype, sharding=NamedSharding(mesh, spec)) so the "
                "checkpoint is restored onto the current mesh")

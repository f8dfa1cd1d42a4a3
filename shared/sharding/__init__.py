"""Logical axis names, rules from logical names to mesh axes, meshes from presets, born-sharded init.

Models mention only logical names. `rules` map each logical name to a mesh axis (or a tuple of them, or
None = replicated). A mesh axis that does not divide the array dimension is dropped for that array
(replicated there), so e.g. 2 KV heads on tensor=4 replicate instead of failing.
"""
from __future__ import annotations

import contextlib
import math
from typing import Any, Sequence

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from shared.config.mesh import MESH_AXES, MeshPlan  # noqa: F401  (MESH_AXES re-exported)

# Parameter axes.
VOCAB, EMBED, MLP, HEADS, KV_HEADS, HEAD_DIM, LAYERS, NORM = (
    "vocab", "embed", "mlp", "heads", "kv_heads", "head_dim", "layers", "norm")
# Activation axes.
ACT_BATCH, ACT_LENGTH, ACT_EMBED, ACT_HEADS, ACT_KV_HEADS, ACT_MLP, ACT_VOCAB, ACT_HEAD_DIM = (
    "act_batch", "act_length", "act_embed", "act_heads", "act_kv_heads", "act_mlp", "act_vocab", "act_head_dim")
CACHE_LENGTH = "cache_length"

DEFAULT_RULES: tuple[tuple[str, Any], ...] = (
    (VOCAB, "tensor"),
    (EMBED, "fsdp"),
    (MLP, "tensor"),
    (HEADS, "tensor"),
    (KV_HEADS, "tensor"),
    (HEAD_DIM, None),
    (LAYERS, None),
    (NORM, None),
    (ACT_BATCH, ("data", "fsdp")),
    (ACT_LENGTH, None),
    (ACT_EMBED, None),
    (ACT_HEADS, "tensor"),
    (ACT_KV_HEADS, "tensor"),
    (ACT_MLP, "tensor"),
    (ACT_VOCAB, "tensor"),
    (ACT_HEAD_DIM, None),
    (CACHE_LENGTH, None),
)


def merge_rules(overrides: Sequence[Sequence[Any]] = ()) -> tuple[tuple[str, Any], ...]:
    table = dict(DEFAULT_RULES)
    for name, axis in overrides:
        table[name] = tuple(axis) if isinstance(axis, list) else axis
    return tuple(table.items())


# ---------------------------------------------------------------- mesh shapes


def resolve_mesh_shape(mesh_cfg, num_devices: int, platform: str | None = None) -> dict[str, int]:
    """Sizes of (data, fsdp, tensor) for `num_devices` (shared.config.mesh.MeshPlan.sizes)."""
    return MeshPlan.from_config(mesh_cfg).sizes(num_devices)


def make_mesh(mesh_cfg, devices: Sequence[jax.Device] | None = None) -> Mesh:
    """A Mesh with axes (data, fsdp, tensor) from config.mesh or a MeshPlan; multi-slice/multi-host DCN sizes
    come from the preset."""
    plan = mesh_cfg if isinstance(mesh_cfg, MeshPlan) else MeshPlan.from_config(mesh_cfg)
    devices = list(devices if devices is not None else jax.devices())
    return Mesh(plan.device_grid(devices, multi_process=jax.process_count() > 1), MESH_AXES)


# ---------------------------------------------------------------- logical -> physical


def spec_for(names: Sequence[str | None], shape: Sequence[int] | None = None, *, mesh: Mesh | None = None,
             rules=None) -> P:
    """PartitionSpec for logical `names`; with `shape` and `mesh`, axes that do not divide are dropped."""
    table = dict(rules or DEFAULT_RULES)
    used: set[str] = set()
    out = []
    for i, name in enumerate(names):
        axes = table.get(name) if name is not None else None
        axes = (axes,) if isinstance(axes, str) else tuple(axes or ())
        kept = []
        for axis in axes:
            if axis in used or (mesh is not None and axis not in mesh.shape):
                continue
            if mesh is not None and shape is not None:
                size = mesh.shape[axis] * math.prod(mesh.shape[a] for a in kept)
                if shape[i] % size:
                    continue
            kept.append(axis)
        used.update(kept)
        out.append(None if not kept else kept[0] if len(kept) == 1 else tuple(kept))
    while out and out[-1] is None:  # canonical form: jit returns P(None, 'fsdp') for P(None, 'fsdp', None), and
        out.pop()                    # unequal specs of one sharding would make the train step compile twice
    return P(*out)


class _Context:
    mesh: Mesh | None = None
    rules: tuple = DEFAULT_RULES


_ctx = _Context()


@contextlib.contextmanager
def use_mesh(mesh: Mesh | None, rules=None):
    """Makes `mesh` and `rules` the ones `constrain` and `logical_sharding` use (trace time)."""
    old = (_ctx.mesh, _ctx.rules)
    _ctx.mesh, _ctx.rules = mesh, tuple(rules or DEFAULT_RULES)
    try:
        yield mesh
    finally:
        _ctx.mesh, _ctx.rules = old


def current_mesh() -> Mesh | None:
    return _ctx.mesh


def current_rules() -> tuple:
    return _ctx.rules


def place_whole(x, sharding: NamedSharding) -> jax.Array:
    """A whole host array that every process holds -> a global array with `sharding`; each process fills only
    its own devices (unlike make_array_from_process_local_data, which takes each process's own rows)."""
    x = np.asarray(x)
    return jax.make_array_from_callback(x.shape, sharding, lambda index: x[index])


def fetch_whole(x) -> np.ndarray:
    """A global array, possibly spread over several processes -> the whole numpy array on every process."""
    if isinstance(x, jax.Array) and not x.is_fully_addressable:
        from jax.experimental import multihost_utils
        x = multihost_utils.process_allgather(x, tiled=True)
    return np.asarray(x)


def fetch_whole_tree(tree):
    """fetch_whole of every leaf of a pytree; in one process the leaves' device-to-host copies all start before
    the first wait (one round trip instead of one per leaf)."""
    if all(x.is_fully_addressable for x in jax.tree.leaves(tree) if isinstance(x, jax.Array)):
        return jax.tree.map(np.asarray, jax.device_get(tree))
    return jax.tree.map(fetch_whole, tree)


def map_row_shards(fn, *arrays, whole: Sequence[int] = ()):
    """fn(*arrays) with every array's leading (batch) axis split as the active rules split `act_batch`, and
    the other axes whole: runs per shard under shard_map. Arrays at the positions in `whole` (e.g. weights) go
    to every shard entire. For custom kernels (Pallas), which have no partitioning rule of their own; fn's
    outputs must be row-wise too. Without an active multi-device mesh it is a plain call."""
    mesh = _ctx.mesh
    if mesh is None or mesh.size == 1:
        return fn(*arrays)
    rows = spec_for((ACT_BATCH,), (arrays[0].shape[0],), mesh=mesh, rules=_ctx.rules)
    spec = P(rows[0] if len(rows) else None)
    out_shapes = jax.eval_shape(fn, *arrays)
    out_specs = jax.tree.map(lambda _: spec, out_shapes)
    in_specs = tuple(P() if i in whole else spec for i in range(len(arrays)))
    return jax.shard_map(fn, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False)(*arrays)


def logical_sharding(names: Sequence[str | None], shape: Sequence[int], mesh: Mesh | None = None,
                     rules=None) -> NamedSharding:
    mesh = mesh or _ctx.mesh
    return NamedSharding(mesh, spec_for(names, shape, mesh=mesh, rules=rules or _ctx.rules))


def constrain(x: jax.Array, names: Sequence[str | None]) -> jax.Array:
    """Sharding constraint on an activation by logical names; a no-op outside `use_mesh` or on 1 device."""
    mesh = _ctx.mesh
    if mesh is None or mesh.size == 1:
        return x
    return jax.lax.with_sharding_constraint(x, logical_sharding(names, x.shape, mesh))


def batch_sharding(mesh: Mesh, ndim: int = 2) -> NamedSharding:
    """Batch-first arrays: rows split over (data, fsdp), the rest replicated."""
    return NamedSharding(mesh, P(("data", "fsdp"), *([None] * (ndim - 1))))


# ---------------------------------------------------------------- parameters


def param_axes(variable) -> tuple:
    """Logical axes of an nnx Variable: its `axes` metadata, with 'layers' prepended for scanned stacks."""
    value = variable.get_value() if hasattr(variable, "get_value") else variable.value
    axes = tuple(variable.get_metadata().get("axes") or (None,) * value.ndim)
    extra = value.ndim - len(axes)
    if extra < 0:
        raise ValueError(f"parameter with axes {axes} has only {value.ndim} dimensions")
    return (LAYERS,) * extra + axes


def state_shardings(state, mesh: Mesh, rules=None):
    """NamedShardings for an nnx.State (abstract or concrete) from its parameters' logical axes."""
    from flax import nnx

    def one(v):
        value = v.get_value() if hasattr(v, "get_value") else v.value
        return v.replace(NamedSharding(mesh, spec_for(param_axes(v), value.shape, mesh=mesh, rules=rules)))

    return jax.tree.map(one, state, is_leaf=lambda x: isinstance(x, nnx.Variable))


def init_sharded(build, mesh: Mesh, rules=None, check=None):
    """Builds an nnx Module with every parameter born sharded: eval_shape -> specs -> jit(out_shardings).

    Returns (graphdef, state) where state is an nnx.State of sharded arrays. Nothing is materialised on one
    device first, so models larger than one device's memory can be created. check(abstract params): called with
    the parameters as a pure dict of ShapeDtypeStructs carrying their shardings before anything is allocated
    (shared.train.memory's preflight raises there when the state cannot fit).
    """
    from flax import nnx

    abstract = nnx.eval_shape(build)
    graphdef, abstract_state = nnx.split(abstract)
    shardings = state_shardings(abstract_state, mesh, rules)
    if check is not None:
        check(jax.tree.map(lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s),
                           abstract_state.to_pure_dict(), shardings.to_pure_dict()))

    def create():
        return nnx.split(build())[1]

    with use_mesh(mesh, rules):
        state = jax.jit(create, out_shardings=shardings)()
    return graphdef, state

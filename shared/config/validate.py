"""Checks a config before anything compiles: registry names, mesh sizes, model dims, batch arithmetic.

Each failure raises ConfigError with one line that names the config key. Tasks and projects add their
own checks with `register_validator(fn)`; `fn(config, mesh_shape)` raises ConfigError (or ValueError).
"""
from __future__ import annotations

from typing import Any, Callable

import ml_collections

from shared import registry
from shared.config.loader import ConfigError

# Config key -> the registry its value (or, for a list, each element) must name.
REGISTRY_KEYS: dict[str, registry.Registry] = {
    "task": registry.TASKS,
    "model.block": registry.BLOCKS,
    "model.norm": registry.NORMS,
    "model.heads": registry.HEADS,
    "train.loss": registry.LOSSES,
    "optim.name": registry.OPTIMIZERS,
    "optim.schedule": registry.SCHEDULES,
    "data.source": registry.DATASETS,
    "data.tokenizer": registry.TOKENIZERS,
}

Validator = Callable[[ml_collections.ConfigDict, dict[str, int]], None]
_VALIDATORS: list[Validator] = []


def register_validator(fn: Validator) -> Validator:
    """Adds a check run by `validate` after the built-in ones; usable as a decorator. Idempotent."""
    if fn not in _VALIDATORS:
        _VALIDATORS.append(fn)
    return fn


def validate(config: ml_collections.ConfigDict, num_devices: int, process_count: int = 1,
             platform: str | None = None, plan=None) -> dict[str, int]:
    """Raises ConfigError on the first problem; returns the resolved mesh shape {axis: size}.

    `platform` ("cpu" | "gpu" | "tpu"), when given, must match the preset's platform. `plan`: the launcher's
    shared.config.mesh.MeshPlan of config.mesh (built here when not given).
    """
    check_registry_names(config)
    mesh_shape = plan.check(num_devices, platform) if plan is not None else check_mesh(config, num_devices, platform)
    check_model_dims(config, mesh_shape)
    check_batch(config, mesh_shape, process_count)
    check_memory_knobs(config)
    for fn in list(_VALIDATORS):
        try:
            fn(config, mesh_shape)
        except ConfigError:
            raise
        except ValueError as e:  # a project check may raise plain ValueError; keep it one line
            raise ConfigError(_one_line(e)) from None
    return mesh_shape


def _lookup(config: ml_collections.ConfigDict, key: str) -> tuple[bool, Any]:
    node: Any = config
    for part in key.split("."):
        if not isinstance(node, ml_collections.ConfigDict) or part not in node:
            return False, None
        node = node[part]
    return True, node


def _one_line(error: Exception) -> str:
    return " ".join(str(error).split())


def check_registry_names(config: ml_collections.ConfigDict,
                         table: dict[str, registry.Registry] | None = None) -> None:
    for key, reg in (REGISTRY_KEYS if table is None else table).items():
        present, value = _lookup(config, key)
        if not present:
            continue
        for name in value if isinstance(value, (list, tuple)) else [value]:
            if name not in reg:
                raise ConfigError(f"{key}: {reg.unknown_message(name)}")


def check_mesh(config: ml_collections.ConfigDict, num_devices: int, platform: str | None = None) -> dict[str, int]:
    """Resolves config.mesh on `num_devices` devices; errors name mesh.preset or the mesh sizes."""
    from shared.config.mesh import MeshPlan
    from shared.registry import UnknownNameError

    try:
        plan = MeshPlan.from_config(config.mesh)
    except UnknownNameError as e:
        raise ConfigError(f"mesh.preset: {e}") from None
    return plan.check(num_devices, platform)


def check_memory_knobs(config: ml_collections.ConfigDict) -> None:
    """The LM-head chunking and the RL memory budgets: non-negative counts, known rollout meshes."""
    for group, keys in (("model", ("head_chunk_tokens", "head_chunk_vocab")),
                        ("rl", ("micro_batch_tokens", "rollout_max_rows"))):
        for key in keys:
            present, value = _lookup(config, f"{group}.{key}")
            if present and int(value) < 0:
                raise ConfigError(f"{group}.{key}={value} must be >= 0 (0 = automatic)")
    present, value = _lookup(config, "train.kill_signal")
    if present and str(value).upper() not in ("KILL", "TERM", "INT"):
        raise ConfigError(f"train.kill_signal={value!r}: expected KILL, TERM or INT")
    present, value = _lookup(config, "rl.reward_errors")
    if present and value not in ("raise", "zero"):
        raise ConfigError(f"rl.reward_errors={value!r}: expected 'raise' or 'zero'")
    present, value = _lookup(config, "rl.behaviour_pass")
    if present and value not in ("auto", "always"):
        raise ConfigError(f"rl.behaviour_pass={value!r}: expected 'auto' or 'always'")
    present, value = _lookup(config, "rl.rollout_mesh")
    if present and value not in ("auto", "", "data", "tensor"):
        raise ConfigError(f"rl.rollout_mesh={value!r}: expected 'auto', '' (the training mesh), 'data' or 'tensor'")


def check_model_dims(config: ml_collections.ConfigDict, mesh_shape: dict[str, int]) -> None:
    """Sharded model dimensions must divide by their mesh axis (tensor for heads/mlp/vocab, fsdp for embed)."""
    if "model" not in config:
        return
    model = config.model
    tensor, fsdp = mesh_shape.get("tensor", 1), mesh_shape.get("fsdp", 1)

    def need(key: str, axis: str, size: int) -> None:
        present, value = _lookup(model, key)
        if present and value is not None and size > 1 and value % size:
            raise ConfigError(f"model.{key}={value} is not divisible by mesh {axis}={size}")

    for key in ("n_heads", "n_kv_heads", "head_dim"):
        present, value = _lookup(model, key)
        if present and value is not None and value <= 0:
            raise ConfigError(f"model.{key}={value} must be positive")
    present_heads, n_heads = _lookup(model, "n_heads")
    present_kv, n_kv = _lookup(model, "n_kv_heads")
    if present_heads and present_kv and n_heads % n_kv:
        raise ConfigError(f"model.n_heads={n_heads} is not a multiple of model.n_kv_heads={n_kv} "
                          f"(each KV head serves n_heads/n_kv_heads query heads)")
    present, head_dim = _lookup(model, "head_dim")
    if present and head_dim % 2:
        raise ConfigError(f"model.head_dim={head_dim} must be even (RoPE rotates pairs of dimensions)")
    need("n_heads", "tensor", tensor)
    # Fewer KV heads than tensor shards is fine when each KV head is replicated on tensor/n_kv_heads shards.
    if present_kv and tensor > 1 and n_kv % tensor and tensor % n_kv:
        raise ConfigError(f"model.n_kv_heads={n_kv} and mesh tensor={tensor}: one must divide the other "
                          f"(KV heads are split over tensor, or replicated when there are fewer)")
    need("d_ff", "tensor", tensor)
    need("vocab_size", "tensor", tensor)
    need("d_model", "fsdp", fsdp)


def check_batch(config: ml_collections.ConfigDict, mesh_shape: dict[str, int], process_count: int = 1) -> None:
    """Each micro-batch splits evenly over the batch axes (data x fsdp) and over the processes feeding it."""
    present, batch_size = _lookup(config, "train.batch_size")
    if not present:
        return
    micro_batches = config.train.get("micro_batches", 1) or 1
    if batch_size <= 0 or micro_batches <= 0:
        raise ConfigError(f"train.batch_size={batch_size} and train.micro_batches={micro_batches} must be positive")
    if batch_size % micro_batches:
        raise ConfigError(f"train.batch_size={batch_size} is not divisible by train.micro_batches={micro_batches}")
    micro = batch_size // micro_batches
    shards = mesh_shape.get("data", 1) * mesh_shape.get("fsdp", 1)
    where = f"train.batch_size={batch_size} / train.micro_batches={micro_batches} = {micro} sequences per micro-batch"
    if micro % shards:
        raise ConfigError(f"{where}, not divisible by the batch-sharded mesh axes data*fsdp="
                          f"{mesh_shape.get('data', 1)}*{mesh_shape.get('fsdp', 1)}={shards}")
    if micro % process_count:
        raise ConfigError(f"{where}, not divisible by the {process_count} processes that load it")

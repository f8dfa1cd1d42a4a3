"""Checks a config before anything compiles: registry names, mesh sizes, model dims, batch arithmetic.

Each failure raises ConfigError with one line that names the config key. Tasks and projects add their
own checks with `register_validator(fn)`; `fn(config, mesh_shape)` raises ConfigError (or ValueError).
"""
from __future__ import annotations

import importlib.util
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
    "train.hooks": registry.HOOKS,
    "rl.task": registry.DATASETS,
    "rl.advantage": registry.ADVANTAGES,
    "rl.policy_loss": registry.POLICY_LOSSES,
    "rl.critic": registry.CRITICS,
    "rl.reward_combine": registry.REWARD_COMBINERS,
}
# Keys of config groups only some tasks' configs have (checked where present).
OPTIONAL_REGISTRY_KEYS: dict[str, registry.Registry] = {
    "rm.loss_hooks": registry.LOSS_HOOKS,
    "diffusion.t_sampler": registry.T_SAMPLERS,
    "diffusion.mask_sampler": registry.MASK_SAMPLERS,
}

# Numeric keys and their bounds: (key, lowest allowed, whether the lowest is allowed itself). Checked where present.
NUMERIC_BOUNDS: tuple[tuple[str, float, bool], ...] = (
    ("train.steps", 0, True), ("train.log_every", 1, True), ("train.eval_every", 1, True),
    ("train.checkpoint_every", 1, True), ("train.eval_batches", 0, True), ("train.sample_tokens", 0, True),
    ("train.z_loss", 0, True), ("train.diverge_loss", 0, True),
    ("optim.lr", 0, True), ("optim.warmup_steps", 0, True), ("optim.decay_steps", 0, True),
    ("optim.min_lr_ratio", 0, True), ("optim.eps", 0, True), ("optim.weight_decay", 0, True),
    ("optim.grad_clip", 0, True), ("optim.b1", 0, True), ("optim.b2", 0, True),
    ("data.seq_len", 1, True), ("data.val_fraction", 0, True), ("data.max_docs", 0, True),
    ("data.n_train", 0, True), ("model.n_layers", 1, True), ("model.d_model", 1, True), ("model.d_ff", 1, True),
    ("model.vocab_size", 1, True), ("model.max_seq_len", 1, True), ("model.norm_eps", 0, True),
    ("rl.group_size", 1, True), ("rl.prompts_per_step", 1, True), ("rl.num_iterations", 1, True),
    ("rl.mini_batches", 1, True), ("rl.max_new_tokens", 1, True), ("rl.n_train", 1, True), ("rl.n_eval", 0, True),
    ("rl.eval_every", 1, True), ("rl.eval_samples", 0, True), ("rl.warmup_sft_steps", 0, True),
    ("rl.sft_lr", 0, True), ("rl.sft_batch_size", 1, True), ("rl.temperature", 0, True), ("rl.top_k", 0, True),
    ("rl.top_p", 0, False), ("rl.eps_low", 0, True), ("rl.eps_high", 0, True), ("rl.dual_clip", 0, True),
    ("rl.adv_eps", 0, True), ("rl.kl_coef", 0, True), ("rl.entropy_coef", 0, True), ("rl.value_coef", 0, True),
    ("rl.value_clip", 0, True), ("rl.gamma", 0, True), ("rl.lam", 0, True), ("rl.overlong_len", 0, True),
    ("rl.overlong_cache", 0, True), ("rl.dynamic_sampling_max_tries", 0, True), ("rl.loss_agg_max_len", 0, True),
    ("rl.reward_calibration_prompts", 0, True), ("rl.reward_calibration_samples", 0, True),
)
# model.attention values (shared.model.layers.Attention; "auto" = the preset's or the platform's choice)
ATTENTIONS = ("auto", "xla", "cudnn", "splash", "tokamax")
# model.tokamax_implementation values (tokamax.dot_product_attention's `implementation`; "" = the library's choice)
TOKAMAX_IMPLEMENTATIONS = ("", "mosaic", "triton", "cudnn", "xla", "xla_chunked")
# model.remat values (shared.model.transformer.REMAT_POLICIES; tests/test_model.py keeps the two lists equal)
REMAT_MODES = ("none", "full", "dots", "dots_all", "mlp")
MU_DTYPES = ("", "bfloat16")   # optim.mu_dtype (shared.train.optim.adamw): "" = the params' dtype
# Keys that name a mode: (key, allowed values, what the one-line error says is expected). Checked where present.
NAMED_MODES: tuple[tuple[str, tuple, str], ...] = (
    ("rl.reward_errors", ("raise", "zero"), "'raise' or 'zero'"),
    ("rl.behaviour_pass", ("auto", "always"), "'auto' or 'always'"),
    ("model.attention", ATTENTIONS, "one of " + ", ".join(ATTENTIONS)),
    ("model.tokamax_implementation", TOKAMAX_IMPLEMENTATIONS,
     "'' (the library's choice) or one of " + ", ".join(TOKAMAX_IMPLEMENTATIONS[1:])),
    ("optim.mu_dtype", MU_DTYPES, "'' (the params' dtype) or 'bfloat16'"),
    ("model.remat", REMAT_MODES, "one of " + ", ".join(REMAT_MODES)),
    ("rl.sample_draw", ("gumbel", "inverse_cdf"), "'gumbel' or 'inverse_cdf'"),
    ("rl.rollout_mesh", ("auto", "", "data", "tensor"), "'auto', '' (the training mesh), 'data' or 'tensor'"),
)
# Tasks with nothing to do at train.steps=0 (RL tasks evaluate their warm start then: a table's "SFT only" arm).
TASKS_THAT_TRAIN = ("pretrain", "sft", "rm", "mdm")
# Keys with an upper bound too: (key, highest allowed).
UPPER_BOUNDS: tuple[tuple[str, float], ...] = (
    ("optim.b1", 1), ("optim.b2", 1), ("optim.min_lr_ratio", 1), ("data.val_fraction", 1), ("rl.top_p", 1),
    ("rl.gamma", 1), ("rl.lam", 1),
)

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
    check_finite(config)
    check_registry_names(config)
    check_registry_names(config, OPTIONAL_REGISTRY_KEYS)
    check_reward_names(config)
    check_numbers(config)
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


def _leaves(node: Any, prefix: str = ""):
    if isinstance(node, (ml_collections.ConfigDict, dict)):
        for key in node.keys():
            yield from _leaves(node[key], f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(node, (list, tuple)):
        for i, item in enumerate(node):
            yield from _leaves(item, f"{prefix}[{i}]")
    else:
        yield prefix, node


def check_finite(config: ml_collections.ConfigDict) -> None:
    """No NaN or infinity anywhere in the config (a learning rate of nan trained to NaN metrics and exit 0)."""
    import math

    for key, value in _leaves(config):
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{key}={value}: must be a finite number")


def check_numbers(config: ml_collections.ConfigDict) -> None:
    """Counts, rates and coefficients within their bounds (NUMERIC_BOUNDS, UPPER_BOUNDS), where present."""
    for key, low, inclusive in NUMERIC_BOUNDS:
        present, value = _lookup(config, key)
        if not present or value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if value < low or (value == low and not inclusive):
            raise ConfigError(f"{key}={value} must be {'>=' if inclusive else '>'} {low}")
    present, steps = _lookup(config, "train.steps")
    if present and steps == 0 and config.get("task") in TASKS_THAT_TRAIN:
        raise ConfigError(f"train.steps=0: the {config.task} task trains at least one step (0 steps is for RL tasks "
                          "that only evaluate their warm start)")
    for key, high in UPPER_BOUNDS:
        present, value = _lookup(config, key)
        if present and isinstance(value, (int, float)) and not isinstance(value, bool) and value > high:
            raise ConfigError(f"{key}={value} must be <= {high}")


def check_reward_names(config: ml_collections.ConfigDict) -> None:
    """rl.rewards: a list of (REWARDS name, weight[, kwargs]); "task" is the task's own checker."""
    present, specs = _lookup(config, "rl.rewards")
    if not present:
        return
    for i, spec in enumerate(specs):
        spec = [spec] if isinstance(spec, str) else list(spec)
        if not spec or not isinstance(spec[0], str):
            raise ConfigError(f"rl.rewards[{i}]={spec!r}: expected (name, weight[, kwargs])")
        if spec[0] != "task" and spec[0] not in registry.REWARDS:
            raise ConfigError(f"rl.rewards[{i}]: {registry.REWARDS.unknown_message(spec[0])}")
        if len(spec) > 1 and (isinstance(spec[1], bool) or not isinstance(spec[1], (int, float))):
            raise ConfigError(f"rl.rewards[{i}]: weight {spec[1]!r} is not a number")


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
    """The LM-head chunking and the RL memory budgets: non-negative counts, known rollout meshes; the named modes
    (remat, moment dtype, sample draw, error policies)."""
    for group, keys in (("model", ("head_chunk_tokens", "head_chunk_vocab")),
                        ("rl", ("micro_batch_tokens", "rollout_max_rows"))):
        for key in keys:
            present, value = _lookup(config, f"{group}.{key}")
            if present and int(value) < 0:
                raise ConfigError(f"{group}.{key}={value} must be >= 0 (0 = automatic)")
    present, value = _lookup(config, "train.kill_signal")
    if present and str(value).upper() not in ("KILL", "TERM", "INT"):
        raise ConfigError(f"train.kill_signal={value!r}: expected KILL, TERM or INT")
    for key, allowed, expected in NAMED_MODES:
        present, value = _lookup(config, key)
        if present and value not in allowed:
            raise ConfigError(f"{key}={value!r}: expected {expected}")
    present, value = _lookup(config, "model.attention")
    if present and value == "tokamax" and importlib.util.find_spec("tokamax") is None:
        raise ConfigError("model.attention='tokamax' needs the tokamax package: pip install -e '.[kernels]'")


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

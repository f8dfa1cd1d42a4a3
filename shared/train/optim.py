"""Optimizers and learning-rate schedules built from `config.optim`.

    tx, schedule = make_optimizer(config.optim, total_steps=config.train.steps, params=params)

The chain is: global-norm clipping (optim.grad_clip > 0) -> optimizer (OPTIMIZERS registry, its learning
rate from the SCHEDULES registry, decoupled weight decay under a mask) -> per-group learning-rate
multipliers (optim.param_groups).

Parameter paths: every leaf of `params` is named by its '/'-joined key path, e.g. "layers/0/attn/q/kernel".
Works for nested dicts (`nnx.State.to_pure_dict()`), `nnx.State` (the trailing `.value` of each Variable is
dropped) and abstract trees (`jax.eval_shape` output); masks and multipliers are recomputed from whatever
tree optax is given, so the optimizer does not depend on the exact container type.

Weight-decay masks (optim.weight_decay_mask):
  "matrices": decay a leaf iff ndim >= 2, its path contains no "embed" (embedding tables), no path
              component contains "norm", and its name is not "scale" or "bias". The name rules matter
              because scanned layers stack per-layer norm gains and biases into [layers, d] arrays, which
              ndim alone would count as matrices.
  "all":      decay every leaf.      "none": decay nothing.

Parameter groups (optim.param_groups = {regex: lr_multiplier}): each regex is searched (`re.search`) in the
leaf's path; unmatched leaves get 1.0. A leaf matched by two regexes is an error rather than "first match
wins", because ConfigDict iterates (and saves to config.json) its keys sorted, so insertion order is lost.
The multiplier scales the optimizer's final update (weight decay included), so with Adam a group with
multiplier m moves exactly m times as far as it would at multiplier 1.
"""
from __future__ import annotations

import math
import numbers
import re
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import optax

from shared.config.validate import MU_DTYPES
from shared.registry import OPTIMIZERS, SCHEDULES

WEIGHT_DECAY_MASKS = ("matrices", "all", "none")


# ----------------------------------------------------------------------------------------------- paths

def _key_to_str(entry: Any) -> str:
    for attribute in ("key", "name", "idx"):  # DictKey / FlattenedIndexKey, GetAttrKey, SequenceKey
        if hasattr(entry, attribute):
            return str(getattr(entry, attribute))
    return str(entry)


def path_to_str(key_path: Sequence[Any]) -> str:
    """'/'-joined name of a leaf from `jax.tree_util.tree_flatten_with_path`; drops nnx Variables' `.value`."""
    parts = [entry for entry in key_path
             if not (isinstance(entry, jax.tree_util.GetAttrKey) and entry.name == "value")]
    return "/".join(_key_to_str(entry) for entry in parts)


def leaf_paths(tree: Any) -> list[str]:
    """Paths of every leaf of `tree`, in flattening order."""
    return [path_to_str(path) for path, _ in jax.tree_util.tree_flatten_with_path(tree)[0]]


def _map_with_names(fn: Callable[[str, Any], Any], tree: Any) -> Any:
    return jax.tree_util.tree_map_with_path(lambda path, leaf: fn(path_to_str(path), leaf), tree)


# --------------------------------------------------------------------------------------- weight decay

def decays_as_matrix(path: str, leaf: Any) -> bool:
    """The "matrices" rule (see module docstring)."""
    parts = path.lower().split("/")
    return (len(getattr(leaf, "shape", ())) >= 2
            and "embed" not in path.lower()
            and not any("norm" in part for part in parts)
            and parts[-1] not in ("scale", "bias"))


def weight_decay_mask_fn(rule: str) -> Callable[[Any], Any]:
    """optim.weight_decay_mask -> a function from a params-shaped tree to a tree of bools (optax `mask`)."""
    if rule not in WEIGHT_DECAY_MASKS:
        raise ValueError(f"optim.weight_decay_mask={rule!r} is not one of {', '.join(WEIGHT_DECAY_MASKS)}")
    if rule == "matrices":
        return lambda tree: _map_with_names(decays_as_matrix, tree)
    decay = rule == "all"
    return lambda tree: _map_with_names(lambda _, __: decay, tree)


# ------------------------------------------------------------------------------------ parameter groups

def _group_items(param_groups: Any) -> list[tuple[str, float]]:
    """optim.param_groups as (regex, multiplier) pairs; accepts a mapping or a sequence of pairs."""
    if param_groups is None:
        return []
    if hasattr(param_groups, "items"):  # dict or ConfigDict
        items = list(param_groups.items())
    else:
        items = [tuple(pair) for pair in param_groups]
    checked = []
    for regex, multiplier in items:
        try:
            re.compile(regex)
        except re.error as error:
            raise ValueError(f"optim.param_groups: {regex!r} is not a valid regex ({error})") from None
        if not isinstance(multiplier, numbers.Real) or isinstance(multiplier, bool) or multiplier < 0:
            raise ValueError(f"optim.param_groups[{regex!r}]={multiplier!r}: the lr multiplier must be a number >= 0")
        checked.append((regex, float(multiplier)))
    return checked


def group_multiplier(path: str, groups: list[tuple[str, float]]) -> float:
    """The lr multiplier of the leaf at `path`: its group's, or 1.0; two matching groups is an error."""
    matches = [(regex, multiplier) for regex, multiplier in groups if re.search(regex, path)]
    if len(matches) > 1:
        raise ValueError(f"optim.param_groups: parameter {path!r} matches several regexes "
                         f"{[regex for regex, _ in matches]}; make them disjoint")
    return matches[0][1] if matches else 1.0


def check_param_groups(param_groups: Any, params: Any) -> list[tuple[str, float]]:
    """Validates the groups against the real parameter names: every regex matches something, none overlap."""
    groups = _group_items(param_groups)
    paths = leaf_paths(params)
    for regex, _ in groups:
        if not any(re.search(regex, path) for path in paths):
            raise ValueError(f"optim.param_groups: regex {regex!r} matches no parameter; "
                             f"parameters look like {paths[:5]}")
    for path in paths:
        group_multiplier(path, groups)  # raises on overlap
    return groups


def scale_by_param_group(groups: list[tuple[str, float]]) -> optax.GradientTransformation:
    """Multiplies each leaf's update by its group's lr multiplier (stateless; paths are static)."""

    def init_fn(params):
        del params
        return optax.EmptyState()

    def update_fn(updates, state, params=None):
        del params
        scaled = _map_with_names(
            lambda path, update: update if (m := group_multiplier(path, groups)) == 1.0
            else update * jnp.asarray(m, update.dtype), updates)
        return scaled, state

    return optax.GradientTransformation(init_fn, update_fn)


# ------------------------------------------------------------------------------------------ schedules

def _decay_end(optim_cfg, total_steps: int) -> int:
    """The step where the lr reaches lr * min_lr_ratio: optim.decay_steps, or total_steps when that is 0."""
    end = int(optim_cfg.decay_steps) or int(total_steps)
    if end <= 0:
        raise ValueError(f"optim.decay_steps={optim_cfg.decay_steps} and total_steps={total_steps}: "
                         "a decaying schedule needs a positive horizon")
    warmup = int(optim_cfg.warmup_steps)
    if warmup > end:
        raise ValueError(f"optim.warmup_steps={warmup} exceeds the decay horizon {end} "
                         "(optim.decay_steps, or train.steps when 0): the lr would never reach its peak; for a "
                         f"short run pass e.g. --config.optim.warmup_steps={max(0, end // 10)}")
    return end


def _check_common(optim_cfg) -> None:
    if int(optim_cfg.warmup_steps) < 0:
        raise ValueError(f"optim.warmup_steps={optim_cfg.warmup_steps} must be >= 0")
    if not 0.0 <= float(optim_cfg.min_lr_ratio) <= 1.0:
        raise ValueError(f"optim.min_lr_ratio={optim_cfg.min_lr_ratio} must be in [0, 1]")


def _warmup_then(optim_cfg, after_warmup: Callable[[jax.Array], jax.Array]) -> optax.Schedule:
    """Linear warmup from 0 at step 0 to optim.lr at step warmup_steps, then `after_warmup(step)`."""
    peak, warmup = float(optim_cfg.lr), int(optim_cfg.warmup_steps)

    def schedule(step):
        step = jnp.asarray(step, jnp.float32)
        warming = peak * step / max(warmup, 1)
        return jnp.where(step < warmup, warming, after_warmup(step))

    return schedule


def _decay_between(optim_cfg, start: int, end: int, shape: Callable[[jax.Array], jax.Array]) -> Callable:
    """lr * shape(progress) blended to the floor: peak at `start`, floor (lr * min_lr_ratio) from `end` on."""
    peak = float(optim_cfg.lr)
    floor = peak * float(optim_cfg.min_lr_ratio)

    def after_warmup(step):
        progress = jnp.clip((step - start) / max(end - start, 1), 0.0, 1.0)
        return floor + (peak - floor) * shape(progress)

    return after_warmup


@SCHEDULES.register("constant")
def constant_schedule(optim_cfg, total_steps: int) -> optax.Schedule:
    """Warmup, then optim.lr forever (min_lr_ratio and decay_steps are not used)."""
    del total_steps
    _check_common(optim_cfg)
    peak = float(optim_cfg.lr)
    return _warmup_then(optim_cfg, lambda step: jnp.full_like(step, peak))


@SCHEDULES.register("cosine")
def cosine_schedule(optim_cfg, total_steps: int) -> optax.Schedule:
    """Warmup, then half a cosine from optim.lr down to lr * min_lr_ratio at the decay horizon."""
    _check_common(optim_cfg)
    end = _decay_end(optim_cfg, total_steps)
    shape = lambda progress: 0.5 * (1.0 + jnp.cos(jnp.pi * progress))
    return _warmup_then(optim_cfg, _decay_between(optim_cfg, int(optim_cfg.warmup_steps), end, shape))


@SCHEDULES.register("linear")
def linear_schedule(optim_cfg, total_steps: int) -> optax.Schedule:
    """Warmup, then a straight line from optim.lr down to lr * min_lr_ratio at the decay horizon."""
    _check_common(optim_cfg)
    end = _decay_end(optim_cfg, total_steps)
    return _warmup_then(optim_cfg, _decay_between(optim_cfg, int(optim_cfg.warmup_steps), end,
                                                  lambda progress: 1.0 - progress))


@SCHEDULES.register("wsd")
def wsd_schedule(optim_cfg, total_steps: int) -> optax.Schedule:
    """Warmup-stable-decay: warmup, optim.lr held, then a straight line to lr * min_lr_ratio over the last
    round(wsd_decay_fraction * horizon) steps of the horizon (as MaxText's wsd schedule)."""
    _check_common(optim_cfg)
    end = _decay_end(optim_cfg, total_steps)
    fraction = float(optim_cfg.wsd_decay_fraction)
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"optim.wsd_decay_fraction={fraction} must be in [0, 1]")
    decay_start = end - int(round(fraction * end))
    if decay_start < int(optim_cfg.warmup_steps):
        raise ValueError(f"optim.wsd_decay_fraction={fraction}: the decay would start at step {decay_start}, "
                         f"before optim.warmup_steps={optim_cfg.warmup_steps} ends")
    return _warmup_then(optim_cfg, _decay_between(optim_cfg, decay_start, end, lambda progress: 1.0 - progress))


def lr_at(schedule: optax.Schedule | float, step: int) -> float:
    """The learning rate at `step` as a Python float (for logging)."""
    return float(schedule(step)) if callable(schedule) else float(schedule)


# ----------------------------------------------------------------------------------------- optimizers
# Signature: fn(optim_cfg, learning_rate, weight_decay_mask) -> optax.GradientTransformation.
# `weight_decay_mask` is what optax's `mask=` takes: a tree of bools shaped like params, a function from
# params to such a tree, or None (decay every leaf). Weight decay is decoupled (AdamW): the update gains
# -lr * weight_decay * param, outside the moment estimates, so it follows the lr schedule as in PyTorch/optax.

@OPTIMIZERS.register("adamw")
def adamw(optim_cfg, learning_rate, weight_decay_mask) -> optax.GradientTransformation:
    """optim.mu_dtype="bfloat16" keeps Adam's first moment in bfloat16 (2 bytes less per parameter held and moved
    each step; the second moment stays in the params' dtype, where its small values need the range)."""
    mu_dtype = str(optim_cfg.get("mu_dtype", "") or "") or None
    if mu_dtype not in (None, *MU_DTYPES):
        raise ValueError(f"optim.mu_dtype={mu_dtype!r}: expected '' (the params' dtype) or 'bfloat16'")
    return optax.adamw(learning_rate, b1=float(optim_cfg.b1), b2=float(optim_cfg.b2), eps=float(optim_cfg.eps),
                       weight_decay=float(optim_cfg.weight_decay), mask=weight_decay_mask,
                       mu_dtype=jnp.bfloat16 if mu_dtype == "bfloat16" else None)


@OPTIMIZERS.register("lion")
def lion(optim_cfg, learning_rate, weight_decay_mask) -> optax.GradientTransformation:
    """Lion (Chen et al. 2023): sign of the b1-interpolated momentum; b2 is the momentum's own decay."""
    return optax.lion(learning_rate, b1=float(optim_cfg.b1), b2=float(optim_cfg.b2),
                      weight_decay=float(optim_cfg.weight_decay), mask=weight_decay_mask)


@OPTIMIZERS.register("sgd")
def sgd(optim_cfg, learning_rate, weight_decay_mask) -> optax.GradientTransformation:
    """SGD with heavy-ball momentum b1 (no Nesterov); decay added after the momentum so it stays decoupled."""
    return optax.chain(
        optax.trace(decay=float(optim_cfg.b1), nesterov=False),
        optax.add_decayed_weights(float(optim_cfg.weight_decay), mask=weight_decay_mask),
        optax.scale_by_learning_rate(learning_rate),
    )


def make_optimizer(optim_cfg, total_steps: int, params: Any
                   ) -> tuple[optax.GradientTransformation, optax.Schedule]:
    """Clipping -> OPTIMIZERS[optim.name] with SCHEDULES[optim.schedule] -> param-group multipliers.

    `params` (arrays or abstract arrays; pure dict or nnx.State) is used to check optim.param_groups
    against the real parameter names. Returns the transformation and the base lr schedule (for logging;
    a group's lr is this times its multiplier).
    """
    make_schedule = SCHEDULES.get(optim_cfg.schedule)
    make_base_optimizer = OPTIMIZERS.get(optim_cfg.name)
    schedule = make_schedule(optim_cfg, total_steps)
    decay_mask = weight_decay_mask_fn(optim_cfg.weight_decay_mask)
    groups = check_param_groups(optim_cfg.get("param_groups", None), params)

    grad_clip = float(optim_cfg.grad_clip)
    if grad_clip < 0 or math.isnan(grad_clip):
        raise ValueError(f"optim.grad_clip={optim_cfg.grad_clip} must be >= 0 (0 = off)")
    parts = []
    if grad_clip > 0:
        parts.append(optax.clip_by_global_norm(grad_clip))
    parts.append(make_base_optimizer(optim_cfg, schedule, decay_mask))
    if any(multiplier != 1.0 for _, multiplier in groups):
        parts.append(scale_by_param_group(groups))
    return optax.chain(*parts), schedule


def check_schedule(config, mesh_shape=None) -> None:
    """Validator: the learning-rate schedule builds for train.steps (warmup within the decay horizon, ...), so a
    bad combination is one line at launch instead of a traceback once the Trainer builds its optimizer. Runs for
    configs that train (train.steps > 0) with a built-in schedule."""
    from shared.config import ConfigError

    if "optim" not in config or "train" not in config:
        return
    name, steps = config.optim.get("schedule", ""), int(config.train.get("steps", 0) or 0)
    if steps <= 0 or name not in ("constant", "cosine", "linear", "wsd"):
        return
    try:
        SCHEDULES.get(name)(config.optim, steps)
    except ValueError as e:
        raise ConfigError(" ".join(str(e).split())) from None


def _register_validator() -> None:
    from shared.config import register_validator

    register_validator(check_schedule)


_register_validator()

"""Named registries: every swappable piece (block, norm, head, loss, task, ...) is looked up by name.

Projects add entries with `@BLOCKS.register("myproject/name")`; configs refer to them by that string.
An unknown name fails with the known names and the closest match, before anything compiles.

Lookups are lazy: the first lookup in any registry (get, `in`, names, iteration) imports every module of
BUILTIN_MODULES, and entry families (`register_family`, e.g. the reward "task/<name>" for every task checker)
are listed at lookup time. So what a name resolves to never depends on the order in which shared/ and the
projects were imported. This module imports nothing of the repo: it is the bottom layer.
"""
from __future__ import annotations

import dataclasses
import difflib
import importlib
import os
from typing import Any, Callable, Iterable, Iterator

# The modules whose import registers the built-in entries, loaded on the first lookup (they sit above this
# layer, so they are named, not imported, here).
BUILTIN_MODULES = (
    "shared.model",          # blocks, norms, heads
    "shared.data",           # datasets, tokenizers, the example sets rl/* and their checkers
    "shared.train",          # losses, optimizers, schedules, the pretrain task
    "shared.train.sft",      # the sft task
    "shared.rewards",        # rewards, and the family task/<name> of every example set's checker
    "shared.rl",             # advantages, policy losses, critics, the rl task
    "shared.rm",             # the rm task and its loss-hook registry
    "shared.diffusion",      # masked diffusion: the mdm task, t-samplers and mask-samplers
    "shared.judges",         # model-backed rewards: model/scalar_rm, model/pairwise_judge
    "shared.sweep.task",     # the sweep task: a pipeline (a table's stages and points) as one launch
)
_builtins_state = {"loaded": False, "loading": False}


def load_builtins() -> None:
    """Imports BUILTIN_MODULES once (re-entrant: a lookup made while they import sees what exists so far)."""
    if _builtins_state["loaded"] or _builtins_state["loading"]:
        return
    _builtins_state["loading"] = True
    try:
        for module in BUILTIN_MODULES:
            importlib.import_module(module)
        _builtins_state["loaded"] = True
    finally:
        _builtins_state["loading"] = False


@dataclasses.dataclass(frozen=True)
class _Family:
    prefix: str
    members: Callable[[], Iterable[str]]
    build: Callable[[str], Any]


class UnknownNameError(KeyError):
    """Raised for a name no registry entry has; the message lists what exists."""

    def __str__(self) -> str:  # KeyError quotes its message; we want it plain
        return str(self.args[0]) if self.args else ""


class Registry:
    def __init__(self, kind: str, *, builtins: bool = True):
        """builtins=False: lookups do not load BUILTIN_MODULES (a registry read before jax may start, e.g. the mesh
        presets, whose environment must be in place first)."""
        self.kind = kind
        self._entries: dict[str, Any] = {}
        self._families: list[_Family] = []
        self._builtins = builtins

    def _load(self) -> None:
        if self._builtins:
            load_builtins()

    def register(self, name: str, obj: Any = None, *, override: bool = False) -> Callable:
        """Use as `@REG.register("name")` or call `REG.register("name", obj)`."""

        def add(value):
            if name in self._entries and not override and self._entries[name] is not value:
                raise ValueError(f"{self.kind} registry: {name!r} is already registered "
                                 f"(by {_describe(self._entries[name])}); pass override=True to replace it")
            self._entries[name] = value
            return value

        return add(obj) if obj is not None else add

    def register_family(self, prefix: str, members: Callable[[], Iterable[str]], build: Callable[[str], Any]) -> None:
        """Entries `prefix + m` for every m that `members()` lists at lookup time, each built by `build(m)` when
        looked up (e.g. REWARDS "task/<name>" for every task checker, whoever registers it, and when)."""
        self._families.append(_Family(prefix, members, build))

    def _family_entry(self, name: str):
        for family in self._families:
            if str(name).startswith(family.prefix):
                member = str(name)[len(family.prefix):]
                if member in set(family.members()):
                    return family, member
        return None

    def get(self, name: str) -> Any:
        self._load()
        if name in self._entries:
            return self._entries[name]
        found = self._family_entry(name)
        if found is None:
            raise UnknownNameError(self.unknown_message(name))
        family, member = found
        return family.build(member)

    def unknown_message(self, name: str) -> str:
        known = self.names()
        close = difflib.get_close_matches(str(name), known, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        prefix = str(name).split("/")[0] if "/" in str(name) else ""
        if prefix and not close and os.path.isdir(os.path.join(_REPO_ROOT, "projects", prefix)):
            # a project's names register when the project is imported, which config.project triggers
            hint += f" Names of projects/{prefix} load with --config.project={prefix}."
        return f"unknown {self.kind} {name!r}.{hint} Known {self.kind} names: {', '.join(known) or '(none)'}"

    def __contains__(self, name: str) -> bool:
        self._load()
        return name in self._entries or self._family_entry(name) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def names(self) -> list[str]:
        self._load()
        derived = {f.prefix + m for f in self._families for m in f.members()}
        return sorted(set(self._entries) | derived)


def _describe(obj: Any) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', repr(obj))}"


_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The registries every part of the repo shares. Keys are the names `--list` prints.
BLOCKS = Registry("block")          # transformer block structure: prenorm, postnorm, ...
NORMS = Registry("norm")            # rmsnorm, layernorm, ...
HEADS = Registry("head")            # lm, scalar, ...
LOSSES = Registry("loss")           # lm_xent, sft_xent, ...
OPTIMIZERS = Registry("optimizer")  # adamw, lion, sgd
SCHEDULES = Registry("schedule")    # cosine, linear, constant, wsd
TASKS = Registry("task")            # what `shared.launch` runs: pretrain, ...
DATASETS = Registry("dataset")      # named text sources: stdlib, files, jsonl, ...
TOKENIZERS = Registry("tokenizer")  # byte, sentencepiece, hf
ADVANTAGES = Registry("advantage")  # grpo, rloo, ... (shared/rl): plain functions or Estimators (shared/rl/roles.py)
CRITICS = Registry("critic")        # RL critic roles for estimators that need values: scalar_head (shared/rl/roles.py)
POLICY_LOSSES = Registry("policy_loss")  # ppo-clip, gspo, gmpo, etr, ... (shared/rl): functions or PolicyLoss entries
REWARDS = Registry("reward")
REWARD_COMBINERS = Registry("reward_combine")  # how reward terms become one reward: sum, zscore, ref_frozen, trifactor
HOOKS = Registry("hook")            # trainer hooks (on_step, on_eval, on_save) projects switch on by name
LOSS_HOOKS = Registry("loss_hook")  # reward-model penalty terms with their own parameters (shared/rm; rm.loss_hooks)
T_SAMPLERS = Registry("t_sampler")  # masked diffusion: mask-rate samplers (shared/diffusion)
MASK_SAMPLERS = Registry("mask_sampler")  # masked diffusion: mask-pattern samplers (shared/diffusion)

ALL_REGISTRIES: dict[str, Registry] = {
    r.kind: r for r in (BLOCKS, NORMS, HEADS, LOSSES, OPTIMIZERS, SCHEDULES, TASKS, DATASETS,
                        TOKENIZERS, ADVANTAGES, CRITICS, POLICY_LOSSES, REWARDS, REWARD_COMBINERS, HOOKS, LOSS_HOOKS,
                        T_SAMPLERS, MASK_SAMPLERS)
}

# The config key that names each registry's entries (what `--list` shows beside each registry).
CONFIG_KEYS: dict[str, str] = {
    "block": "model.block", "norm": "model.norm", "head": "model.heads", "loss": "train.loss",
    "optimizer": "optim.name", "schedule": "optim.schedule", "task": "task", "dataset": "data.source / rl.task",
    "tokenizer": "data.tokenizer", "advantage": "rl.advantage", "critic": "rl.critic",
    "policy_loss": "rl.policy_loss", "reward": "rl.rewards", "reward_combine": "rl.reward_combine",
    "hook": "train.hooks", "loss_hook": "rm.loss_hooks", "t_sampler": "diffusion.t_sampler",
    "mask_sampler": "diffusion.mask_sampler",
}

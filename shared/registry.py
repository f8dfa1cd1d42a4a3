"""Named registries: every swappable piece (block, norm, head, loss, task, ...) is looked up by name.

Projects add entries with `@BLOCKS.register("myproject/name")`; configs refer to them by that string.
An unknown name fails with the known names and the closest match, before anything compiles.
"""
from __future__ import annotations

import difflib
from typing import Any, Callable, Iterator


class UnknownNameError(KeyError):
    """Raised for a name no registry entry has; the message lists what exists."""

    def __str__(self) -> str:  # KeyError quotes its message; we want it plain
        return str(self.args[0]) if self.args else ""


class Registry:
    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, Any] = {}

    def register(self, name: str, obj: Any = None, *, override: bool = False) -> Callable:
        """Use as `@REG.register("name")` or call `REG.register("name", obj)`."""

        def add(value):
            if name in self._entries and not override and self._entries[name] is not value:
                raise ValueError(f"{self.kind} registry: {name!r} is already registered "
                                 f"(by {_describe(self._entries[name])}); pass override=True to replace it")
            self._entries[name] = value
            return value

        return add(obj) if obj is not None else add

    def get(self, name: str) -> Any:
        if name not in self._entries:
            raise UnknownNameError(self.unknown_message(name))
        return self._entries[name]

    def unknown_message(self, name: str) -> str:
        known = sorted(self._entries)
        close = difflib.get_close_matches(str(name), known, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        return f"unknown {self.kind} {name!r}.{hint} Known {self.kind} names: {', '.join(known) or '(none)'}"

    def __contains__(self, name: str) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._entries))

    def names(self) -> list[str]:
        return sorted(self._entries)


def _describe(obj: Any) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', repr(obj))}"


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
POLICY_LOSSES = Registry("policy_loss")
REWARDS = Registry("reward")
HOOKS = Registry("hook")            # trainer hooks (on_step, on_eval, on_save) projects switch on by name
LOSS_HOOKS = Registry("loss_hook")  # reward-model penalty terms with their own parameters (shared/rm; rm.loss_hooks)
T_SAMPLERS = Registry("t_sampler")  # masked diffusion: mask-rate samplers (shared/diffusion)
MASK_SAMPLERS = Registry("mask_sampler")  # masked diffusion: mask-pattern samplers (shared/diffusion)

ALL_REGISTRIES: dict[str, Registry] = {
    r.kind: r for r in (BLOCKS, NORMS, HEADS, LOSSES, OPTIMIZERS, SCHEDULES, TASKS, DATASETS,
                        TOKENIZERS, ADVANTAGES, CRITICS, POLICY_LOSSES, REWARDS, HOOKS, LOSS_HOOKS, T_SAMPLERS,
                        MASK_SAMPLERS)
}

# The config key that names each registry's entries (what `--list` shows beside each registry).
CONFIG_KEYS: dict[str, str] = {
    "block": "model.block", "norm": "model.norm", "head": "model.heads", "loss": "train.loss",
    "optimizer": "optim.name", "schedule": "optim.schedule", "task": "task", "dataset": "data.source / rl.task",
    "tokenizer": "data.tokenizer", "advantage": "rl.advantage", "critic": "rl.critic",
    "policy_loss": "rl.policy_loss", "reward": "rl.rewards", "hook": "train.hooks", "loss_hook": "rm.loss_hooks",
    "t_sampler": "diffusion.t_sampler", "mask_sampler": "diffusion.mask_sampler",
}

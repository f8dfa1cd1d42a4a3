"""Example sets: named sets of examples with a checker, the data of SFT, RL, reward models and diffusion SFT.

An example is a dict
    {"prompt": str, "completion": str, "answer": str, "task": str, **extra columns}
  prompt      plain text, no chat template: "Q: <problem>\\nA:"
  completion  a gold solution (what SFT warm-starts on), starting with a space: " 85"; "" when none exists
  answer      the gold final answer as a string (what checkers compare against)
The extra columns travel to reward functions as keyword arguments (Tunix contract).

Each set is registered in `shared.registry.DATASETS` as "rl/<name>" (`register_task`):
    fn(split: str, n: int, seed: int, **options) -> list[dict]      split in "train" | "test" | "ood"
and has a checker `TASK_CHECKERS[name](example, completion) -> bool`. `load_task` and `checker` take the name
with or without its "rl/" prefix. The built-in sets live in shared/data/tasks/ (procedural, public, tinygsm_sym);
shared/rewards/task.py turns a checker into the reward "task/<name>".
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from shared.registry import DATASETS

SPLITS = ("train", "test", "ood")
Example = dict[str, Any]
Checker = Callable[[Example, str], bool]

TASK_CHECKERS: dict[str, Checker] = {}


def register_task(name: str, checker: Checker):
    """Registers fn as DATASETS "rl/<name>" and its checker as TASK_CHECKERS[name]."""

    def add(fn):
        DATASETS.register(f"rl/{name}", fn)
        TASK_CHECKERS[name] = checker
        return fn

    return add


def short_name(name: str) -> str:
    return name[3:] if name.startswith("rl/") else name


def load_task(name: str, split: str, n: int, seed: int = 0, **options) -> list[Example]:
    """Examples of task `name` ("arithmetic" or "rl/arithmetic")."""
    return DATASETS.get(f"rl/{short_name(name)}")(split, n, seed, **options)


def checker(name: str) -> Checker:
    key = short_name(name)
    if key not in TASK_CHECKERS:
        raise KeyError(f"no checker for task {name!r}; tasks with checkers: {', '.join(sorted(TASK_CHECKERS))}")
    return TASK_CHECKERS[key]


def check_split(name: str, split: str, allowed: Sequence[str] = SPLITS) -> None:
    """Raises ValueError unless `split` is one of `allowed` (the loaders' first check)."""
    if split not in allowed:
        raise ValueError(f"rl/{name}: split must be one of {', '.join(allowed)}; got {split!r}")

"""Task rewards: the checker of an example set (shared/data/examples.py) as a reward function.

  task_reward(name)            the checker TASK_CHECKERS[name] as `(prompts, completions, **columns) -> [1.0 | 0.0]`;
  task/<name>                  a registry family: every example set with a checker, whoever registered it and
                               when (listed at lookup time), is the reward task_reward(name)
  task/tinygsm_sym_process     TinyGSM-Sym's outcome-and-process checker (shared/data/tasks/tinygsm_sym.py),
                               registered on import

The example sets are imported when a reward is built or called, so importing this module does not load
shared.data (nor jax).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from shared.registry import REWARDS


def task_reward(name: str) -> Callable[..., list[float]]:
    """The checker of task `name` as a reward `(prompts, completions, **columns) -> list[float]` (1.0 / 0.0).

    Every column must hold one value per completion; the checker sees {"prompt": ..., **columns}."""
    from shared.data.examples import checker, short_name

    check = checker(name)

    def reward(prompts: Sequence[str], completions: Sequence[str], **columns) -> list[float]:
        count = len(completions)
        if len(prompts) != count:
            raise ValueError(f"task reward {name!r}: {len(prompts)} prompts for {count} completions")
        if "answer" not in columns:
            raise ValueError(f"task reward {name!r}: no 'answer' column (columns: {', '.join(sorted(columns))})")
        for key, values in columns.items():
            if len(values) != count:
                raise ValueError(f"task reward {name!r}: column {key!r} has {len(values)} values for "
                                 f"{count} completions")
        return [float(check({"prompt": prompts[i], **{k: v[i] for k, v in columns.items()}}, completions[i]))
                for i in range(count)]

    reward.__name__ = reward.__qualname__ = f"task_reward_{short_name(name)}"
    return reward


def tinygsm_sym_process_reward(prompts, completions, **columns: Any) -> list[float]:
    """1.0 when the answer is right and derived by valid steps (TinyGSM-Sym's check_process); the reward
    contract."""
    from shared.data.tasks.tinygsm_sym import check_process

    return [float(check_process({"prompt": prompts[i], **{k: v[i] for k, v in columns.items()}}, completions[i]))
            for i in range(len(completions))]


def _checked_tasks() -> list[str]:
    from shared.data.examples import TASK_CHECKERS

    return list(TASK_CHECKERS)


if "task/tinygsm_sym_process" not in REWARDS:
    REWARDS.register("task/tinygsm_sym_process", tinygsm_sym_process_reward)
REWARDS.register_family("task/", _checked_tasks, task_reward)

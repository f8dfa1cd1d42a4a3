"""Rewards: the Tunix-compatible contract `reward_fn(prompts, completions, **columns) -> list[float]`, the
REWARDS registry, the RewardManager (weights, error/NaN policy, per-function metrics, the combination of the
terms) and the built-ins.

Importing this package registers: math/boxed, math/gsm8k, math/last_number, format/tags,
format/boxed_present, format/no_repeat, length/penalty, task/tinygsm_sym_process and the family task/<name> (every
example set's checker as a reward, `task_reward` in task.py), and the reward combiners REWARD_COMBINERS sum, zscore,
ref_frozen, trifactor (combine.py) and gated (compose.py). The model-backed rewards (model/scalar_rm,
model/pairwise_judge) live a layer up, in shared.judges: they build models, which the RL loop below them does.
pointwise_if.py: Skill-RM's capped pointwise instruction-following reward as a pure function (capped_if_reward).
"""
from shared.rewards.core import (  # noqa: F401
    RewardError, RewardFactory, RewardFn, RewardManager, RewardResult, RewardSpec, build_reward_fn,
    parse_reward_specs, register_reward, register_reward_factory,
)
from shared.rewards import combine, compose, format, math, task  # noqa: F401,A004  (registrations)
from shared.rewards.task import task_reward  # noqa: F401
from shared.rewards.math import answers_equivalent, last_boxed, math_verify_available  # noqa: F401

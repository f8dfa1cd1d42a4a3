"""Rewards: the Tunix-compatible contract `reward_fn(prompts, completions, **columns) -> list[float]`, the
REWARDS registry, the RewardManager (weights, error/NaN policy, per-function metrics) and the built-ins.

Importing this package registers: math/boxed, math/gsm8k, math/last_number, format/tags,
format/boxed_present, format/no_repeat, length/penalty, model/scalar_rm, model/pairwise_judge,
task/tinygsm_sym_process. `task_reward(name)` (task.py) turns an example set's checker into a reward;
shared/builtin.py registers one as "task/<name>" per example set.
"""
from shared.rewards.core import (  # noqa: F401
    RewardError, RewardFactory, RewardFn, RewardManager, RewardResult, RewardSpec, build_reward_fn,
    parse_reward_specs, register_reward, register_reward_factory,
)
from shared.rewards import format, math, model, task  # noqa: F401,A004  (registrations)
from shared.rewards.task import task_reward  # noqa: F401
from shared.rewards.math import answers_equivalent, last_boxed, math_verify_available  # noqa: F401
from shared.rewards.model import (  # noqa: F401
    JudgeError, OpenAIJudge, PairwiseJudge, PairwiseJudgeReward, ScalarRMJudge, ScalarRewardModel, compare_batch,
    parse_verdict,
)

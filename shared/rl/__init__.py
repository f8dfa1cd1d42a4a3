"""RL post-training: sampler, advantages and policy losses, roles, the learner and the `rl` task (its prompt sets
are the example sets of shared/data/examples.py; the task rewards are in shared/rewards/task.py)."""
from shared.rl import algorithms  # noqa: F401  (ADVANTAGES, POLICY_LOSSES)
from shared.rl import pairwise  # noqa: F401  (ADVANTAGES brpo, brpo-norm, round-robin, fixed-reference)
from shared.rl import roles  # noqa: F401  (CRITICS "scalar_head")
from shared.rl import etr  # noqa: F401  (POLICY_LOSSES "etr", "eps-matched")
from shared.rl import stepwise  # noqa: F401  (ADVANTAGES "stepwise-grpo")
from shared.rl import task  # noqa: F401  (TASKS "rl")

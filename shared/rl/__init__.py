"""RL post-training: sampler, advantages and policy losses, verifiable tasks, the learner and the `rl` task."""
from shared.rl import algorithms, tasks  # noqa: F401  (ADVANTAGES, POLICY_LOSSES, DATASETS "rl/*")
from shared.rl import roles  # noqa: F401  (CRITICS "scalar_head")
from shared.rl import task  # noqa: F401  (TASKS "rl")

"""Importing this module registers every built-in (blocks, heads, losses, optimizers, tasks, datasets, ...)."""
import shared.model  # noqa: F401  blocks, norms, heads
import shared.data  # noqa: F401  datasets (text sources, example sets rl/*), tokenizers
import shared.train  # noqa: F401  losses, optimizers, schedules, the pretrain task
import shared.train.sft  # noqa: F401  the sft task
import shared.rewards  # noqa: F401  rewards
import shared.rl  # noqa: F401  advantages, policy losses, the rl task
import shared.rm  # noqa: F401  the rm task (Bradley-Terry reward models) and its loss-hook registry
import shared.diffusion  # noqa: F401  masked diffusion: the mdm task, t-samplers and mask-samplers
from shared.registry import REWARDS
from shared.data.examples import TASK_CHECKERS
from shared.rewards.task import task_reward

for _name in TASK_CHECKERS:  # each verifiable task's checker is also a reward: "task/<name>"
    if f"task/{_name}" not in REWARDS:
        REWARDS.register(f"task/{_name}", task_reward(_name))

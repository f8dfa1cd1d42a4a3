"""Importing this module registers every built-in (blocks, heads, losses, optimizers, tasks, datasets, ...)."""
import shared.model  # noqa: F401  blocks, norms, heads
import shared.data  # noqa: F401  datasets, tokenizers
import shared.train  # noqa: F401  losses, optimizers, schedules, the pretrain task

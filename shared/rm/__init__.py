"""Reward-model training: Bradley-Terry on preference pairs (TASKS "rm"), loss hooks with their own
optimizers (shared.rm.hooks), pairwise metrics and best-of-N evaluation. Reused by every RLHF project; a
trained run loads as the reward "model/scalar_rm" (shared.rewards)."""
from shared.rm.bon import best_of_n, best_of_n_with_reward  # noqa: F401
from shared.rm.config import rm_config  # noqa: F401
from shared.rm.data import (  # noqa: F401
    PairBatchIterator, encode_pairs, encode_scored, eval_batches_of, load_pairs, pair_record, read_pairs,
    split_hh_dialogue,
)
from shared.rm.hooks import LOSS_HOOKS, LossHook  # noqa: F401
from shared.rm.losses import accuracy_by_group, bradley_terry_loss, pairwise_metrics  # noqa: F401
from shared.rm.model import pair_forward, pooled_outputs, rm_loss_fn  # noqa: F401
from shared.rm.task import (  # noqa: F401
    RM_TASKS, build_rm_data, evaluate_splits, rm_params_initializer, score_rows, score_texts, train_rm,
)
from shared.rm.trainer import RMTrainer  # noqa: F401

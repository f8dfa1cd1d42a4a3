"""A scored rollout batch: what the RL step has after the rewards (shared.rl.learner, shared.rl.warmup)."""
from __future__ import annotations

import dataclasses

import numpy as np

from shared.rl import pairwise as pw


@dataclasses.dataclass
class ScoredBatch:
    rollout: object
    rewards: np.ndarray          # [N] task reward (+ shaping)
    metrics: dict
    examples: list[dict]         # one per prompt
    outcomes: pw.PairOutcomes | None = None   # a pairwise estimator's judged pairs (None: pointwise rewards)

"""Best-of-N evaluation: pick, for every prompt, the candidate a reward scores highest, and report oracle
values of the picks (an RLHF proxy: what a policy optimised against this reward would drift towards). The
selection rule is shared.eval.bon.best_of_n (ties: the first candidate); this module adds scoring by a reward."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from shared.eval.bon import best_of_n  # noqa: F401  (the one Best-of-N, shared with PRM evaluation)


def best_of_n_with_reward(reward_fn: Callable, prompts: Sequence[str], candidates: Sequence[Sequence[str]],
                          values: dict[str, np.ndarray]) -> dict[str, float]:
    """best_of_n with scores from any reward function `reward_fn(prompts, completions) -> list[float]` (a REWARDS
    entry, e.g. the "model/scalar_rm" of a trained RM), called once on the flattened candidates."""
    n = len(candidates[0])
    if any(len(c) != n for c in candidates):
        raise ValueError("best_of_n_with_reward: every prompt needs the same number of candidates")
    flat_prompts = [p for p in prompts for _ in range(n)]
    flat = [c for cands in candidates for c in cands]
    scores = np.asarray(reward_fn(flat_prompts, flat), np.float64).reshape(len(prompts), n)
    return best_of_n(scores, values)

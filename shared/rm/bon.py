"""Best-of-N evaluation: pick, for every prompt, the candidate a reward scores highest, and report oracle
values of the picks (an RLHF proxy: what a policy optimised against this reward would drift towards)."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np


def best_of_n(scores: np.ndarray, values: dict[str, np.ndarray]) -> dict[str, float]:
    """scores [P, N]; values {name: [P, N]} (oracle quality, length, ...). Returns, for every name,
    "<name>" = mean value of the argmax-score candidates, "<name>_random" = mean over all candidates (a random
    pick) and "<name>_best" = mean of the per-prompt maximum (an oracle pick). Ties go to the first candidate."""
    scores = np.asarray(scores)
    if scores.ndim != 2:
        raise ValueError(f"best_of_n: scores must be [prompts, candidates], got shape {scores.shape}")
    pick = scores.argmax(axis=1)
    out = {}
    for name, value in values.items():
        value = np.asarray(value, np.float64)
        if value.shape != scores.shape:
            raise ValueError(f"best_of_n: values[{name!r}] has shape {value.shape}, scores {scores.shape}")
        out[name] = float(value[np.arange(len(pick)), pick].mean())
        out[f"{name}_random"] = float(value.mean())
        out[f"{name}_best"] = float(value.max(axis=1).mean())
    return out


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

"""Judge-benchmark metrics of Skill-RM (spec ../shared/papers/skill_rm.md 1.5), as pure functions of scores or
labels, so any judge (a reward model's scores, an agent's labels) is scored the same way.

  best_of_n_accuracy(scores, correct, ties=)   RewardBench 2's non-Ties subsets: 1 when the correct candidate
                                               scores highest. ties="strict" (default): a tie for the top is 0;
                                               "split": 1/k when k candidates tie for the top, one of them correct
  rewardbench2_ties_score(...)                 RewardBench 2's official Ties subset score (0.30 tied accuracy + 0.30
                                               reference accuracy + 0.20 correctness preferred + 0.20 correctness
                                               preferred (hard) + 0.01 margin score; allenai/reward-bench
                                               process_single_model)
  rewardbench2_score(subset_scores)            the leaderboard average: the plain mean over the subsets given
  swapped_vote(first, second, gold)            JudgeBench: each pair judged in both orders (prefs in the original
                                               orientation), vote +1 correct / -1 wrong / 0 tie, correct iff sum > 0
  kendall_tau(x, y)                            Kendall's tau-b (ties in either ranking handled; IF-RewardBench's
                                               "overall" protocol ranks a judge's scores against the gold ranking)
  pairwise_accuracy(prefs, gold, tie_credit=)  RM-Bench win / total (a tie earns tie_credit, default 0)
"""
from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

TIE_MODES = ("strict", "split")


def best_of_n_accuracy(scores: Sequence[Sequence[float]], correct: Sequence[int] | int = 0,
                       ties: str = "strict") -> float:
    """Mean over prompts of the credit for picking the correct candidate (index `correct`, per prompt or one for
    all) by the highest score."""
    if ties not in TIE_MODES:
        raise ValueError(f"best_of_n_accuracy: ties={ties!r}, expected one of {TIE_MODES}")
    credits = []
    for i, row in enumerate(scores):
        row = np.asarray(row, np.float64)
        target = correct if isinstance(correct, (int, np.integer)) else correct[i]
        winners = np.flatnonzero(row == row.max())
        if target not in winners:
            credits.append(0.0)
        elif len(winners) == 1:
            credits.append(1.0)
        else:
            credits.append(1.0 / len(winners) if ties == "split" else 0.0)
    if not credits:
        raise ValueError("best_of_n_accuracy: no prompts")
    return float(np.mean(credits))


def _prompt_stats(scores: Sequence[float], num_correct: int) -> tuple[bool, float | None, float]:
    """(every correct beats the best wrong, spread of the correct ones or None for one, worst correct - best
    wrong): the first num_correct scores are the correct candidates'."""
    correct, wrong = list(scores[:num_correct]), list(scores[num_correct:])
    if not correct or not wrong:
        raise ValueError(f"Ties prompt needs correct and wrong candidates, got {num_correct} of {len(scores)}")
    spread = max(correct) - min(correct) if len(correct) > 1 else None
    gap = min(correct) - max(wrong)
    return gap > 0, spread, gap


def rewardbench2_ties_score(ref: Mapping[int, tuple[Sequence[float], int]],
                            tied: Mapping[int, tuple[Sequence[float], int]]) -> float:
    """The Ties subset score. ref / tied: prompt id -> (scores, num_correct), the correct candidates first; "ref"
    prompts have one correct answer, "tied" ones several. The margin terms use the prompt ids in both."""
    ref_stats = {k: _prompt_stats(s, n) for k, (s, n) in ref.items()}
    tied_stats = {k: _prompt_stats(s, n) for k, (s, n) in tied.items()}
    ref_accuracy = float(np.mean([s[0] for s in ref_stats.values()])) if ref_stats else 0.0
    tied_accuracy = float(np.mean([s[0] for s in tied_stats.values()])) if tied_stats else 0.0
    both = sorted(set(ref_stats) & set(tied_stats))
    preferred = preferred_hard = margin = 0.0
    if both:
        spread = np.array([np.nan if tied_stats[k][1] is None else tied_stats[k][1] for k in both], np.float64)
        gap_tied = np.array([tied_stats[k][2] for k in both], np.float64)
        gap_hard = np.minimum(np.array([ref_stats[k][2] for k in both], np.float64), gap_tied)
        preferred = float(np.mean(gap_tied > spread))        # a NaN spread (one correct answer) compares False
        preferred_hard = float(np.mean(gap_hard > spread))
        with np.errstate(divide="ignore", invalid="ignore"):
            margin = float(np.mean(np.nan_to_num(np.tanh(gap_hard / spread - 1), nan=0.0)))
    return 0.30 * tied_accuracy + 0.30 * ref_accuracy + 0.20 * preferred + 0.20 * preferred_hard + 0.01 * margin


def rewardbench2_score(subset_scores: Mapping[str, float]) -> float:
    """The leaderboard average: the unweighted mean of the subset scores (Factuality, Precise IF, Math, Safety,
    Focus, Ties)."""
    if not subset_scores:
        raise ValueError("rewardbench2_score: no subsets")
    return float(np.mean(list(subset_scores.values())))


def swapped_vote(first: Sequence[int], second: Sequence[int], gold: Sequence[int]) -> np.ndarray:
    """JudgeBench's order-swapped vote: first / second are a judge's prefs (+1 / -1 / 0, in the pair's original
    orientation) from the two display orders, gold the true pref (+1 / -1). Returns bool [N]: sum of the votes
    (+1 agrees with gold, -1 disagrees, 0 tie) > 0."""
    first, second, gold = (np.asarray(x, np.int64) for x in (first, second, gold))
    if not (first.shape == second.shape == gold.shape):
        raise ValueError(f"swapped_vote: shapes differ {first.shape}, {second.shape}, {gold.shape}")
    if np.any(np.abs(gold) != 1):
        raise ValueError("swapped_vote: gold prefs must be +1 or -1")
    votes = np.sign(first) * gold + np.sign(second) * gold
    return votes > 0


def pairwise_accuracy(prefs: Sequence[int], gold: Sequence[int], tie_credit: float = 0.0) -> float:
    """Win / total: a pref equal to gold earns 1, a tie (0) tie_credit, a wrong one 0."""
    prefs, gold = np.asarray(prefs), np.asarray(gold)
    if prefs.shape != gold.shape or prefs.size == 0:
        raise ValueError(f"pairwise_accuracy: shapes {prefs.shape} and {gold.shape}")
    return float(np.mean(np.where(prefs == 0, tie_credit, (np.sign(prefs) == gold).astype(np.float64))))


def kendall_tau(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall's tau-b of two rankings of the same items: (concordant - discordant) / sqrt((n0 - tx)(n0 - ty)),
    pairs tied in one ranking count in neither; NaN when either ranking is constant."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"kendall_tau: shapes {x.shape} and {y.shape}")
    i, j = np.triu_indices(len(x), k=1)
    dx, dy = np.sign(x[i] - x[j]), np.sign(y[i] - y[j])
    numerator = float(np.sum(dx * dy))
    denominator = math.sqrt(float(np.sum(dx != 0)) * float(np.sum(dy != 0)))
    return numerator / denominator if denominator > 0 else float("nan")

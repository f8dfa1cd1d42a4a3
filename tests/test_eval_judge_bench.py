"""Judge-benchmark metrics (shared/eval/judge_bench.py) against hand-computed values and scipy."""
import math

import numpy as np
import pytest

from shared.eval.judge_bench import (best_of_n_accuracy, kendall_tau, pairwise_accuracy, rewardbench2_score,
                                     rewardbench2_ties_score, swapped_vote)


def test_best_of_n_tie_modes():
    scores = [[3, 1, 2, 0], [2, 2, 1, 0], [1, 5, 0, 0]]
    assert best_of_n_accuracy(scores) == pytest.approx(1 / 3)               # the tie for the top earns nothing
    assert best_of_n_accuracy(scores, ties="split") == pytest.approx(0.5)   # 1 + 1/2 + 0
    assert best_of_n_accuracy(scores, correct=[0, 1, 1]) == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="ties='maybe'"):
        best_of_n_accuracy(scores, ties="maybe")


def test_rewardbench2_ties_by_hand():
    ref = {1: ([5, 1, 2], 1), 2: ([1, 3], 1)}               # gaps 3 (accurate), -2 (not): ref accuracy 0.5
    tied = {1: ([6, 5, 2, 1], 2), 2: ([4, 4, 3], 2)}        # spreads 1, 0; gaps 3, 1: tied accuracy 1
    # preferred: 3 > 1, 1 > 0 -> 1; hard: min(3, 3) > 1, min(-2, 1) > 0 -> 0.5
    # margin: tanh(3 / 1 - 1) and tanh(-2 / 0 - 1) = tanh(-inf) = -1
    margin = (math.tanh(2.0) - 1.0) / 2
    expected = 0.30 * 1 + 0.30 * 0.5 + 0.20 * 1 + 0.20 * 0.5 + 0.01 * margin
    assert rewardbench2_ties_score(ref, tied) == pytest.approx(expected, abs=1e-12)
    # a 0/0 margin (tied correct answers, tied gap) counts 0, as NaN -> 0 upstream
    assert rewardbench2_ties_score({3: ([1, 1], 1)}, {3: ([1, 1, 1], 2)}) == pytest.approx(0.0)
    with pytest.raises(ValueError, match="needs correct and wrong"):
        rewardbench2_ties_score({1: ([1, 2], 2)}, {})
    assert rewardbench2_score({"Math": 0.8, "Safety": 0.6, "Ties": 0.7}) == pytest.approx(0.7)


def test_swapped_vote_and_pairwise_accuracy():
    first, second, gold = [1, 1, 0, -1, 1], [1, 0, 0, 1, -1], [1, 1, 1, 1, -1]
    # votes: 2, 1, 0, 0, (-1 + 1) = 0 -> correct only where the sum is positive
    assert swapped_vote(first, second, gold).tolist() == [True, True, False, False, False]
    with pytest.raises(ValueError, match="gold prefs"):
        swapped_vote([1], [1], [0])
    assert pairwise_accuracy([1, -1, 0, 1], [1, 1, 1, -1]) == pytest.approx(0.25)
    assert pairwise_accuracy([1, -1, 0, 1], [1, 1, 1, -1], tie_credit=0.5) == pytest.approx(0.375)


def test_kendall_tau_by_hand_and_against_scipy():
    assert kendall_tau([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(4 / 6)   # 5 concordant, 1 discordant
    assert kendall_tau([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert math.isnan(kendall_tau([1, 1, 1], [1, 2, 3]))
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 4, 40), rng.integers(0, 5, 40)                     # many ties in both
    assert kendall_tau(x, y) == pytest.approx(stats.kendalltau(x, y).statistic, abs=1e-12)

"""shared/eval/passk.py: the unbiased pass@k estimator against hand values and brute-force enumeration."""
import itertools
from math import comb

import numpy as np
import pytest

from shared.eval import avg_at_n, greedy_accuracy, judge, pass_at_k, pass_at_k_per_prompt, pass_at_k_single, \
    sample_metrics


def brute_force_pass_at_k(row: np.ndarray, k: int) -> float:
    """Fraction of all k-subsets of the n samples that contain at least one correct sample."""
    subsets = list(itertools.combinations(range(len(row)), k))
    return sum(bool(row[list(s)].any()) for s in subsets) / len(subsets)


def test_hand_values():
    assert pass_at_k_single(5, 2, 1) == pytest.approx(0.4)
    assert pass_at_k_single(5, 2, 2) == pytest.approx(1 - 3 / 10)      # 1 - C(3,2)/C(5,2)
    assert pass_at_k_single(5, 2, 4) == 1.0                            # n - c < k: some pick is correct
    assert pass_at_k_single(10, 0, 3) == 0.0
    assert pass_at_k_single(10, 10, 1) == 1.0
    assert pass_at_k_single(200, 13, 10) == pytest.approx(1 - comb(187, 10) / comb(200, 10), rel=1e-12)
    correct = np.array([[1, 0, 0, 0], [1, 1, 0, 0], [0, 0, 0, 0]], bool)
    # pass@1 per prompt = c/n: (0.25 + 0.5 + 0) / 3; pass@2: (1 - C(3,2)/C(4,2)) = 0.5, (1 - 1/6), 0.
    out = pass_at_k(correct, ks=(1, 2))
    assert out == {"pass@1": pytest.approx(0.25), "pass@2": pytest.approx((0.5 + 5 / 6) / 3)}
    assert avg_at_n(correct) == pytest.approx(3 / 12)
    assert sample_metrics(correct, ks=(1, 4)) == {"pass@1": pytest.approx(0.25), "pass@4": pytest.approx(2 / 3),
                                                   "avg@4": pytest.approx(0.25)}


def test_matches_brute_force_enumeration():
    rng = np.random.default_rng(0)
    for n in (1, 3, 6, 8):
        correct = rng.random((12, n)) < rng.random((12, 1))  # varied per-prompt accuracy
        for k in range(1, n + 1):
            expected = np.mean([brute_force_pass_at_k(row, k) for row in correct])
            assert pass_at_k(correct, ks=[k])[f"pass@{k}"] == pytest.approx(expected, abs=1e-12)
        assert pass_at_k(correct)["pass@1"] == pytest.approx(avg_at_n(correct))


def test_per_prompt_counts_allow_different_n():
    values = pass_at_k_per_prompt([4, 6], [1, 0], k=2)
    np.testing.assert_allclose(values, [0.5, 0.0])


def test_errors():
    with pytest.raises(ValueError, match="pass@5 needs at least 5 samples per prompt, got n=4"):
        pass_at_k(np.zeros((2, 4), bool), ks=[5])
    with pytest.raises(ValueError, match=r"\[num_prompts, n\]"):
        pass_at_k(np.zeros(4, bool))
    with pytest.raises(ValueError, match="correct=3, samples=2"):
        pass_at_k_single(2, 3, 1)


def test_judge_and_greedy_accuracy():
    def check(example, text):
        return text.strip() == example["answer"]

    examples = [{"answer": "1"}, {"answer": "2"}]
    correct = judge(check, examples, [[" 1", "x"], ["2", " 2 "]])
    np.testing.assert_array_equal(correct, [[True, False], [True, True]])
    assert greedy_accuracy(check, examples, ["1", "3"]) == 0.5
    with pytest.raises(ValueError, match="same number of completions"):
        judge(check, examples, [["1"], ["2", "2"]])
    with pytest.raises(ValueError, match="2 examples but 1 completions"):
        greedy_accuracy(check, examples, ["1"])

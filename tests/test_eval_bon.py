"""shared/eval/bon.py: Best-of-N over the first k candidates under each tie rule, Pass@k over the first k, Best-of-N
by oracle values (the rule shared.rm and dir_debias use), step macro-F1 (against sklearn's when installed) and
first-error accuracy, all on hand-computed arrays."""
import numpy as np
import pytest

from shared.eval.bon import (best_of_n, bon_at_k, class_f1, first_error_accuracy, first_errors, pass_at_first_k,
                             step_macro_f1)

SCORES = np.array([[0.5, 0.9, 0.9 + 1e-12, 0.1],     # candidates 1 and 2 tie (within rel_tol 1e-9)
                   [0.2, 0.2, 0.2, 0.2]])             # all four tie
CORRECT = np.array([[1, 0, 1, 0],
                    [0, 0, 0, 1]], bool)


def test_bon_tie_rules():
    assert bon_at_k(SCORES, CORRECT, ks=(4,), ties="any") == {"bon@4": 1.0}          # row 0: 2 tied, 1 right
    assert bon_at_k(SCORES, CORRECT, ks=(4,), ties="expected") == {"bon@4": pytest.approx((0.5 + 0.25) / 2)}
    assert bon_at_k(SCORES, CORRECT, ks=(4,), ties="first") == {"bon@4": 0.0}        # index 1, index 0
    # k = 1: the first candidate; k = 2: row 0 picks index 1 (wrong), row 1 ties two wrong ones
    assert bon_at_k(SCORES, CORRECT, ks=(1, 2, 3), ties="any") == {"bon@1": 0.5, "bon@2": 0.0, "bon@3": 0.5}
    with pytest.raises(ValueError, match="ties must be one of"):
        bon_at_k(SCORES, CORRECT, ties="random")
    with pytest.raises(ValueError, match="bon@5 needs"):
        bon_at_k(SCORES, CORRECT, ks=(5,))


def test_pass_at_first_k():
    assert pass_at_first_k(CORRECT, ks=(1, 2, 3, 4)) == {"pass@1": 0.5, "pass@2": 0.5, "pass@3": 0.5, "pass@4": 1.0}


def test_best_of_n_values():
    quality = np.array([[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]])
    out = best_of_n(SCORES, {"q": quality})                        # first tied: index 1, index 0
    assert out == {"q": pytest.approx(3.5), "q_random": pytest.approx(4.5), "q_best": pytest.approx(6.0)}
    assert best_of_n(SCORES, {"q": quality}, ties="expected")["q"] == pytest.approx((2.5 + 6.5) / 2)
    assert best_of_n(SCORES, {"q": quality}, ties="any")["q"] == pytest.approx((3 + 8) / 2)


PRED = np.array([[1, 1, -1, 1], [1, -1, -1, -1], [1, 1, 1, 1]])
LABEL = np.array([[1, -1, -1, 1], [1, 1, -1, 1], [1, 1, 1, 1]])
MASK = np.array([[1, 1, 1, 1], [1, 1, 1, 0], [1, 1, 0, 0]], bool)


def test_step_macro_f1_hand_computed():
    # +1: tp 5 (row0: 0,3; row1: 0; row2: 0,1), fp 1, fn 1 -> 10/12; -1: tp 2, fp 1, fn 1 -> 4/6
    assert class_f1(PRED, LABEL, MASK, 1) == pytest.approx(10 / 12)
    assert class_f1(PRED, LABEL, MASK, -1) == pytest.approx(4 / 6)
    assert step_macro_f1(PRED, LABEL, MASK) == pytest.approx((10 / 12 + 4 / 6) / 2)
    sklearn = pytest.importorskip("sklearn.metrics")
    assert step_macro_f1(PRED, LABEL, MASK) == pytest.approx(
        sklearn.f1_score(LABEL[MASK], PRED[MASK], average="macro", labels=[1, -1], zero_division=0))


def test_first_error_accuracy_hand_computed():
    np.testing.assert_array_equal(first_errors(PRED, MASK), [2, 1, -1])
    np.testing.assert_array_equal(first_errors(LABEL, MASK), [1, 2, -1])     # row 1's -1 at 3 is masked
    assert first_error_accuracy(PRED, LABEL, MASK) == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="must be \\+1 or -1"):
        step_macro_f1(np.zeros((1, 2)), np.ones((1, 2)), np.ones((1, 2), bool))

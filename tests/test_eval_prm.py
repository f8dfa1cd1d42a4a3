"""shared/eval/prm.py: the five step aggregations on hand-computed step arrays (binary rows equal the released BoN
script's functions; real-valued rows follow the module's variants), masks that are not a prefix, the reliability
gate and the High/Low contradiction audit."""
import numpy as np
import pytest

from shared.eval.prm import (AGGREGATIONS, StepScores, aggregate, contradiction_reliability, contradictions, gate,
                             reliabilities, reliability_from_counts)

# rows: [1, 1, -1, 1], [-1, -1], [1], [] and a gated row [0.5, 1, -1]
ROWS = [[1, 1, -1, 1], [-1, -1], [1], [], [0.5, 1, -1]]
EXPECTED = {
    # sum max(s,0) / T
    "correctness_rate": [3 / 4, 0.0, 1.0, 0.0, 1.5 / 3],
    # (sum t s_t + W) / 2W: (1+2-3+4+10)/20, (-1-2+3)/6, (1+1)/2, -, (0.5+2-3+6)/12
    "position_weighted": [14 / 20, 0.0, 1.0, 0.0, 5.5 / 12],
    # streak totals 3, -2, 1, -, 1 (0.5, then 0.5+1=1.5, then -1); normalised over [-T, T(T+1)/2]
    "streak": [(3 + 4) / 14, 0.0, 1.0, 0.0, (1 + 3) / 9],
    # prod max(s, 0.1) ^ (1/T)
    "geometric_mean": [0.1 ** 0.25, 0.1, 1.0, 0.0, (0.5 * 0.1) ** (1 / 3)],
    # first s < 0 at 0-based i: i / T
    "first_error": [2 / 4, 0.0, 1.0, 0.0, 2 / 3],
}


@pytest.mark.parametrize("name", sorted(AGGREGATIONS))
def test_aggregations_hand_computed(name):
    np.testing.assert_allclose(aggregate(StepScores.from_lists(ROWS), name), EXPECTED[name], rtol=1e-12)


def _released(name, scores):
    """The released compute_bon_metrics.py strategies on a binary list, re-derived from their definitions."""
    t = len(scores)
    if name == "correctness_rate":
        return sum(s == 1 for s in scores) / t
    if name == "position_weighted":
        w = t * (t + 1) / 2
        return (sum(s * (i + 1) for i, s in enumerate(scores)) + w) / (2 * w)
    if name == "streak":
        total = run = 0
        for s in scores:
            run = run + 1 if s == 1 else 0
            total += run if s == 1 else -1
        return (total + t) / (t * (t + 1) / 2 + t)
    if name == "geometric_mean":
        return float(np.prod([1.0 if s == 1 else 0.1 for s in scores]) ** (1 / t))
    return next((i / t for i, s in enumerate(scores) if s == -1), 1.0)


def test_binary_rows_equal_the_released_strategies():
    rng = np.random.default_rng(0)
    rows = [list(rng.choice([-1, 1], size=rng.integers(1, 9))) for _ in range(40)]
    x = StepScores.from_lists(rows)
    for name in AGGREGATIONS:
        np.testing.assert_allclose(aggregate(x, name), [_released(name, r) for r in rows], rtol=1e-12)


def test_masked_steps_are_skipped_wherever_they_are():
    # [1, (masked 0.3), -1, 1] aggregates as [1, -1, 1]
    holey = StepScores(np.array([[1.0, 0.3, -1.0, 1.0]]), np.array([[True, False, True, True]]))
    dense = StepScores.from_lists([[1, -1, 1]])
    for name in AGGREGATIONS:
        np.testing.assert_allclose(aggregate(holey, name), aggregate(dense, name), rtol=1e-12)
    np.testing.assert_allclose(aggregate(holey, "first_error"), [1 / 3])


def test_bad_inputs_fail_with_one_line():
    with pytest.raises(ValueError, match="in \\[-1, 1\\]"):
        StepScores.from_lists([[1.5]])
    with pytest.raises(ValueError, match="unknown step aggregation 'mean'"):
        aggregate(StepScores.from_lists([[1]]), "mean")


def test_gate_attenuates_only_correct_premise_dependent_steps():
    x = StepScores(np.array([[1.0, 1.0, -1.0, 1.0], [1.0, 1.0, 0.0, 0.0]]),
                   np.array([[True, True, True, True], [True, True, False, False]]))
    dependent = np.array([[1, 0, 1, 1], [0, 1, 1, 0]], bool)
    gated = gate(x, dependent, np.array([0.3, 0.0]))
    np.testing.assert_allclose(gated.scores, [[0.3, 1.0, -1.0, 0.3], [1.0, 0.0, 0.0, 0.0]])
    np.testing.assert_array_equal(gated.mask, x.mask)
    # with p = 1 the gate is the identity
    np.testing.assert_array_equal(gate(x, dependent, np.ones(2)).scores, x.scores)
    with pytest.raises(ValueError, match="reliability must be"):
        gate(x, dependent, np.array([1.2, 0.5]))


def test_contradiction_audit_counts_high_and_low_and_ignores_omissions():
    claims = [("a", 3), ("b", 5), ("b", 5), ("c", 7), ("d", 1)]     # b repeated: counted once; d: not in facts
    facts = {"a": 3, "b": 4, "c": 8}
    severity = {"a": "high", "b": "high", "c": "low", "d": "high"}.__getitem__
    assert contradictions(claims, facts, severity) == (1, 1)
    assert contradiction_reliability(claims, facts, severity) == pytest.approx(1 - 0.5 - 0.2)
    assert reliability_from_counts(3, 0) == 0.0 and reliability_from_counts(0, 0) == 1.0
    assert reliability_from_counts(1, 2) == pytest.approx(0.1)
    np.testing.assert_allclose(reliabilities([claims, [], [("c", 8)]], facts,
                                             lambda c, f: contradiction_reliability(c, f, severity)), [0.3, 1.0, 1.0])
    # a pluggable reliability: fraction of claims the facts confirm
    confirmed = lambda c, f: sum(f.get(k) == v for k, v in c) / max(len(c), 1)   # noqa: E731
    np.testing.assert_allclose(reliabilities([claims[:2], [("a", 3)]], facts, confirmed), [0.5, 1.0])

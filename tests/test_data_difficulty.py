"""shared/data/difficulty.py: pass rates, the capacity split at tau (boundaries included), the open / closed RL
filter and the summary, on hand-made boolean matrices."""
import math

import numpy as np
import pytest

from shared.data.difficulty import assign_by_capacity, keep_for_rl, pass_rates, split_summary

T, F = True, False
# n = 8 samples; rates 0, 1/8, 3/8, 1/2, 1
CORRECT = np.array([
    [F, F, F, F, F, F, F, F],
    [T, F, F, F, F, F, F, F],
    [T, T, F, F, T, F, F, F],
    [F, T, F, T, F, T, F, T],
    [T, T, T, T, T, T, T, T],
])


def test_pass_rates():
    np.testing.assert_array_equal(pass_rates(CORRECT), [0.0, 0.125, 0.375, 0.5, 1.0])
    np.testing.assert_array_equal(pass_rates(CORRECT.astype(int)), pass_rates(CORRECT))    # 0/1 rewards work
    with pytest.raises(ValueError, match=r"correct must be \[Q, n\]"):
        pass_rates(CORRECT[0])
    with pytest.raises(ValueError, match="bool or 0/1"):
        pass_rates(np.array([[0.5, 1.0]]))


def test_assign_by_capacity_boundaries():
    np.testing.assert_array_equal(assign_by_capacity(CORRECT, 0.0), [T, F, F, F, F])      # fails all eight
    np.testing.assert_array_equal(assign_by_capacity(CORRECT, 0.125), [T, T, F, F, F])    # rate == tau counts
    np.testing.assert_array_equal(assign_by_capacity(CORRECT, 0.124), [T, F, F, F, F])
    np.testing.assert_array_equal(assign_by_capacity(CORRECT, 3 / 8), [T, T, T, F, F])
    np.testing.assert_array_equal(assign_by_capacity(CORRECT, 1.0), [T] * 5)
    # n = 10: 3/10 lands exactly on the float 0.3
    np.testing.assert_array_equal(assign_by_capacity(np.array([[T] * 3 + [F] * 7]), 0.3), [T])
    with pytest.raises(ValueError, match="tau must be in"):
        assign_by_capacity(CORRECT, -0.1)


def test_keep_for_rl():
    np.testing.assert_array_equal(keep_for_rl(CORRECT, 0.0, 1.0), [F, T, T, T, F])          # drop all-0 and all-1
    np.testing.assert_array_equal(keep_for_rl(CORRECT, 0.0, 0.6), [F, T, T, T, F])
    np.testing.assert_array_equal(keep_for_rl(CORRECT, 0.0, 0.5), [F, T, T, F, F])          # 0.5 is excluded
    np.testing.assert_array_equal(keep_for_rl(CORRECT, 0.0, 0.5, inclusive=True), [T, T, T, T, F])
    np.testing.assert_array_equal(keep_for_rl(CORRECT, 0.0, 1.0, inclusive=True), [T] * 5)
    np.testing.assert_array_equal(keep_for_rl(CORRECT, 0.5, 0.5), [F] * 5)                  # empty open interval
    with pytest.raises(ValueError, match="low must be <= high"):
        keep_for_rl(CORRECT, 0.6, 0.2)
    with pytest.raises(ValueError, match="high must be in"):
        keep_for_rl(CORRECT, 0.0, 1.5)


def test_split_summary():
    s = split_summary(CORRECT, 0.125)
    assert s == {"n_queries": 5, "n_samples": 8, "tau": 0.125, "n_assigned": 2, "n_rest": 3, "frac_assigned": 0.4,
                 "mean_rate": pytest.approx(2.0 / 5), "mean_rate_assigned": pytest.approx(0.0625),
                 "mean_rate_rest": pytest.approx((0.375 + 0.5 + 1.0) / 3)}
    everything = split_summary(CORRECT, 1.0)
    assert everything["n_rest"] == 0 and math.isnan(everything["mean_rate_rest"])
    none = split_summary(np.ones((3, 4), bool), 0.0)                                        # all rows solved
    assert none["n_assigned"] == 0 and math.isnan(none["mean_rate_assigned"]) and none["mean_rate_rest"] == 1.0

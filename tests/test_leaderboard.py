"""Leaderboard statistics (shared/stats/leaderboard.py) against hand-computed values."""
import numpy as np
import pytest
from scipy import stats

from shared.stats.leaderboard import (
    detection_f1, item_spearman, kendall_rows, ranking_agreement, slice_means, usage_profile,
)

VALUES = [1.0, 2.0, 3.0, 4.0, 10.0, 20.0]
SLICES = ["a", "a", "b", "b", "b", "c"]


def test_slice_means_by_hand():
    out = slice_means(VALUES, SLICES, n_boot=500, seed=3)
    assert list(out) == ["all", "a", "b", "c"]
    assert out["all"][0] == pytest.approx(40 / 6) and out["all"][3] == 6
    assert out["a"][0] == 1.5 and out["a"][3] == 2
    assert out["b"][0] == pytest.approx(17 / 3) and out["b"][3] == 3
    assert out["c"] == (20.0, 20.0, 20.0, 1)  # one item: a degenerate interval
    for mean, lo, hi, _ in out.values():
        assert lo <= mean <= hi
    # the documented procedure: percentile bootstrap of the mean, one generator per slice seeded by `seed`
    b = np.array([3.0, 4.0, 10.0])
    draws = b[np.random.default_rng(3).integers(0, 3, (500, 3))].mean(1)
    assert out["b"][1:3] == pytest.approx(tuple(np.quantile(draws, [0.025, 0.975])), abs=1e-12)
    assert 1.0 <= out["a"][1] < out["a"][2] <= 2.0


def test_slice_means_deterministic_by_seed():
    rng = np.random.default_rng(0)
    values, slices = rng.normal(size=200), rng.integers(0, 3, 200)
    assert slice_means(values, slices, seed=1) == slice_means(values, slices, seed=1)
    assert slice_means(values, slices, seed=1)["all"] != slice_means(values, slices, seed=2)["all"]
    narrow, wide = slice_means(values, slices, level=0.5)["all"], slice_means(values, slices, level=0.99)["all"]
    assert wide[1] < narrow[1] < narrow[2] < wide[2]
    # a slice's interval does not depend on the other slices
    only = slice_means(values[slices == 0], ["0"] * int(np.sum(slices == 0)), seed=1)["0"]
    assert only == slice_means(values, slices, seed=1)["0"]


def test_slice_means_errors():
    with pytest.raises(ValueError, match="6 values but 5 slice labels"):
        slice_means(VALUES, SLICES[:5])
    with pytest.raises(ValueError, match="empty"):
        slice_means([], [])
    with pytest.raises(ValueError, match="reserved"):
        slice_means([1.0, 2.0], ["all", "x"])
    with pytest.raises(ValueError, match="non-finite"):
        slice_means([1.0, float("nan")], ["x", "x"])
    with pytest.raises(ValueError, match="level"):
        slice_means(VALUES, SLICES, level=1.5)


def _constant(means, n=5):
    return {name: [m] * n for name, m in means.items()}


def test_ranking_one_discordant_pair():
    # 4 systems; the two metrics agree except for the order of s3 and s4: 5 concordant, 1 discordant of 6 pairs
    a = _constant({"s1": 0.1, "s2": 0.2, "s3": 0.3, "s4": 0.4})
    b = _constant({"s1": 1.0, "s2": 2.0, "s3": 4.0, "s4": 3.0, "extra": 9.0})  # only common systems count
    out = ranking_agreement(a, b, n_boot=200)
    assert out["tau"] == pytest.approx(4 / 6)
    assert out["spearman"] == pytest.approx(1 - 6 * 2 / (4 * 15))  # d^2 = 0 + 0 + 1 + 1
    assert (out["n_systems"], out["n_items"]) == (4, 5)
    assert out["tau_lo"] == pytest.approx(4 / 6) and out["tau_hi"] == pytest.approx(4 / 6)  # no item noise


def test_ranking_identical_metrics_degenerate_interval():
    rng = np.random.default_rng(0)
    a = {f"s{i}": rng.normal(i * 0.1, 1.0, 300) for i in range(6)}
    out = ranking_agreement(a, a, n_boot=300)
    assert out["tau"] == pytest.approx(1.0) and out["spearman"] == pytest.approx(1.0)
    assert (out["tau_lo"], out["tau_hi"]) == (pytest.approx(1.0), pytest.approx(1.0))


def test_ranking_bootstrap_contains_tau_and_is_deterministic():
    rng = np.random.default_rng(1)
    a = {f"s{i}": rng.normal(i * 0.05, 1.0, 400) for i in range(8)}
    b = {k: v + rng.normal(0.0, 1.0, 400) for k, v in a.items()}
    out = ranking_agreement(a, b, n_boot=400, seed=7)
    assert out["tau_lo"] <= out["tau"] <= out["tau_hi"] and out["tau_lo"] < out["tau_hi"]
    assert out == ranking_agreement(a, b, n_boot=400, seed=7)
    assert out["tau"] == pytest.approx(stats.kendalltau([np.mean(a[k]) for k in sorted(a)],
                                                        [np.mean(b[k]) for k in sorted(a)]).statistic)


def test_kendall_rows_equals_scipy():
    rng = np.random.default_rng(2)
    x, y = rng.integers(0, 3, (50, 5)).astype(float), rng.integers(0, 3, (50, 5)).astype(float)
    x[0] = 1.0  # a constant row: undefined
    ref = [stats.kendalltau(u, v).statistic for u, v in zip(x, y)]
    np.testing.assert_allclose(kendall_rows(x, y), ref, equal_nan=True)
    assert np.isnan(kendall_rows(x, y)[0])


def test_ranking_errors():
    with pytest.raises(ValueError, match="needs >= 2"):
        ranking_agreement({"s1": [1.0], "s2": [2.0]}, {"s1": [1.0], "s3": [2.0]})
    with pytest.raises(ValueError, match="different numbers of items"):
        ranking_agreement({"s1": [1.0, 2.0], "s2": [2.0]}, {"s1": [1.0], "s2": [2.0]})
    with pytest.raises(ValueError, match="same items"):
        ranking_agreement({"s1": [1.0, 2.0], "s2": [2.0, 3.0]}, {"s1": [1.0], "s2": [2.0]})
    with pytest.raises(ValueError, match="empty"):
        ranking_agreement({"s1": [], "s2": []}, {"s1": [], "s2": []})


def test_item_spearman():
    assert item_spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    assert item_spearman([1, 2, 3], [30, 20, 10]) == pytest.approx(-1.0)
    assert np.isnan(item_spearman([1, 1, 1], [1, 2, 3]))
    with pytest.raises(ValueError, match="3 vs 2 items"):
        item_spearman([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="at least 2"):
        item_spearman([1], [1])


def test_usage_profile_by_hand():
    out = usage_profile({"happy": [2, 3, 0, 1], "shy": [0, 0, 1]})
    assert out["happy"] == {"mean": 1.5, "median": 1.5, "share_zero": 0.25, "share_multi": 0.5, "max": 3, "n": 4}
    assert out["shy"] == {"mean": pytest.approx(1 / 3), "median": 0.0, "share_zero": pytest.approx(2 / 3),
                          "share_multi": 0.0, "max": 1, "n": 3}
    with pytest.raises(ValueError, match="no systems"):
        usage_profile({})
    with pytest.raises(ValueError, match="non-negative integers"):
        usage_profile({"x": [1, -1]})
    with pytest.raises(ValueError, match="empty"):
        usage_profile({"x": []})


def test_detection_f1_by_hand():
    # tp = 2 (items 0, 4), fp = 1 (item 1), fn = 1 (item 2)
    p, r, f = detection_f1([True, True, False, False, True], [True, False, True, False, True])
    assert (p, r, f) == (pytest.approx(2 / 3), pytest.approx(2 / 3), pytest.approx(2 / 3))
    assert detection_f1([1, 0, 0], [1, 1, 1]) == (1.0, pytest.approx(1 / 3), pytest.approx(0.5))
    assert detection_f1([False, False], [True, False]) == (0.0, 0.0, 0.0)  # nothing flagged: 0/0 precision -> 0
    assert detection_f1([False, False], [False, False]) == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="3 predictions vs 2 truths"):
        detection_f1([True, False, True], [True, False])
    with pytest.raises(ValueError, match="empty"):
        detection_f1([], [])
    with pytest.raises(ValueError, match="booleans"):
        detection_f1([2, 0], [1, 0])

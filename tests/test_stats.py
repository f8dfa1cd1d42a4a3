"""shared.stats against hand computations and scipy's own tests (ddof=1 everywhere)."""
import math

import numpy as np
import pytest
from scipy import stats as sps

from shared.stats import Difference, at_level, difference, verdict


A = [0.61, 0.58, 0.66, 0.63, 0.60]
B = [0.55, 0.57, 0.59, 0.60, 0.52]


def test_paired_t_interval_by_hand():
    d = np.subtract(A, B)
    se = d.std(ddof=1) / math.sqrt(5)
    half = sps.t.ppf(0.975, 4) * se
    got = difference(A, B, paired=True)
    assert got.mean == pytest.approx(d.mean()) and got.df == 4
    assert (got.low, got.high) == pytest.approx((d.mean() - half, d.mean() + half))
    # the interval is the one scipy's paired test inverts: p < 0.05 iff 0 is outside it
    p = sps.ttest_rel(A, B).pvalue
    assert (p < 0.05) == (got.low > 0 or got.high < 0)


def test_welch_interval_matches_scipy():
    a, b = [1.0, 2.0, 4.0, 3.5], [0.1, 0.4, 0.2, 0.9, 0.3, 0.25]
    got = difference(a, b, paired=False, confidence=0.9)
    ci = sps.ttest_ind(a, b, equal_var=False).confidence_interval(0.9)
    assert (got.low, got.high) == pytest.approx((ci.low, ci.high))
    assert got.method == "welch t" and 3 < got.df < 4


def test_bootstrap_covers_the_paired_mean_and_is_deterministic():
    got = difference(A, B, paired=True, method="bootstrap", seed=3)
    assert got.low <= got.mean <= got.high
    assert got == difference(A, B, paired=True, method="bootstrap", seed=3)
    d = np.subtract(A, B)  # a percentile bootstrap of a mean lies inside the sample's range
    assert d.min() <= got.low and got.high <= d.max()


def test_verdict_rule():
    up = Difference(0.05, 0.01, 0.09, 5, "paired t", 0.95)
    across = Difference(0.05, -0.01, 0.11, 5, "paired t", 0.95)
    assert verdict(up, "greater") == "reproduced"
    assert verdict(up, "less") == "not reproduced"
    assert verdict(across, "greater") == "not reproduced"
    assert verdict(up, "greater", inconclusive_if="arm B at chance") == "inconclusive"
    assert at_level([0.49, 0.51, 0.50], 0.5, 0.02) and not at_level([0.6, 0.62], 0.5, 0.05)
    with pytest.raises(ValueError, match="direction"):
        verdict(up, "up")


def test_bad_inputs_name_the_problem():
    with pytest.raises(ValueError, match="at least 2"):
        difference([1.0], [2.0], paired=False)
    with pytest.raises(ValueError, match="one value per seed"):
        difference([1.0, 2.0], [1.0, 2.0, 3.0], paired=True)
    with pytest.raises(ValueError, match="non-finite"):
        difference([1.0, float("nan")], [1.0, 2.0], paired=False)

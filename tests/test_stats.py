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


def test_ledger_pairs_arms_by_seed_and_applies_the_rule(tmp_path):
    """Two arms over three seeds, the baseline reporting under another column: the table's difference and CI are
    the paired t interval by hand, and a floor arm is inconclusive."""
    from shared.stats.ledger import ledger, main, read_rows

    path = tmp_path / "results.csv"
    path.write_text("name,status,arm,seed,acc,greedy,acc_before\n"
                    "a_s0,finished,a,0,0.60,,0.50\na_s1,finished,a,1,0.64,,0.52\na_s2,finished,a,2,0.59,,0.50\n"
                    "b_s0,finished,b,0,,0.50,\nb_s1,finished,b,1,,0.55,\nb_s2,finished,b,2,,0.51,\n"
                    "z_s0,finished,z,0,0.01,,\nz_s1,finished,z,1,0.0,,\nz_s2,failed,z,2,,,\n")
    rows = read_rows(str(path))
    assert len(rows) == 8  # the failed row is left out
    text = ledger(rows, ["acc", "greedy"], "b", "greater", before="acc_before", chance=0.0, tolerance=0.02)
    d = difference([0.60, 0.64, 0.59], [0.50, 0.55, 0.51], paired=True)
    assert f"| a | 3 | {np.mean([0.60, 0.64, 0.59]):.4g} ± {np.std([0.60, 0.64, 0.59], ddof=1):.2g} | {d} | reproduced |" in text
    start = difference([0.60, 0.64, 0.59], [0.50, 0.52, 0.50], paired=True)
    assert f"| {start} | reproduced |" in text
    assert "| z | 2 |" in text and "inconclusive (mean within 0.02 of 0.0)" in text
    assert main([str(path), "--value", "acc", "--baseline", "nope", "--direction", "greater"]) == 2
    joined = ledger(rows, ["acc", "greedy"], "b/finished", "greater", arm_key="arm,status")
    assert f"| a/finished | 3 |" in joined and str(d) in joined


def test_ledger_unpaired_is_welch_and_says_so(tmp_path):
    """--unpaired (arms that do not share a warm start per seed): the table's interval is Welch's t over all rows
    of each arm (ddof=1), hand-checked against scipy's ttest_ind(equal_var=False), and the header says so."""
    from shared.stats.ledger import ledger, main, read_rows

    a, b = [0.60, 0.64, 0.59, 0.70], [0.50, 0.55, 0.51]
    path = tmp_path / "results.csv"
    path.write_text("name,status,arm,seed,acc\n"
                    + "".join(f"a_s{i},finished,a,{i},{v}\n" for i, v in enumerate(a))
                    + "".join(f"b_s{i},finished,b,{i},{v}\n" for i, v in enumerate(b)))
    text = ledger(read_rows(str(path)), ["acc"], "b", "greater", unpaired=True)
    ci = sps.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    mean = np.mean(a) - np.mean(b)
    d = difference(a, b, paired=False)
    assert d.method == "welch t" and (d.low, d.high) == pytest.approx((ci.low, ci.high))
    assert d.mean == pytest.approx(mean)
    assert f"| a | 4 | {np.mean(a):.4g} ± {np.std(a, ddof=1):.2g} | {d} | reproduced |" in text
    assert "Welch, unpaired" in text and "paired by seed" not in text and "welch t, n=3" in text
    # the paired default differs (only seeds 0-2 are shared) and says so
    paired = ledger(read_rows(str(path)), ["acc"], "b", "greater")
    assert "paired by seed" in paired and str(difference(a[:3], b, paired=True)) in paired
    out = tmp_path / "differences.md"
    assert main([str(path), "--value", "acc", "--baseline", "b", "--direction", "greater", "--unpaired",
                 "--out", str(out)]) == 0
    assert "--unpaired" in out.read_text().splitlines()[0] and str(d) in out.read_text()

"""E1 (projects/openrs/simulation.py) on small configurations: the mechanisms the table is about."""
import numpy as np
import pytest

from projects.openrs.simulation import TYPES, comparator, draw, simulate


@pytest.fixture(scope="module")
def small():
    return simulate(0, n_pairs=20000, error_rates=[0.0, 0.2], calibration_ratios=(0.5, 2.0))


def test_comparator_error_and_bias_model():
    rng = np.random.default_rng(0)
    n = 200_000
    t = rng.integers(-2, 3, n)
    u_bias, u_err, wrong = rng.random(n), rng.random(n), rng.integers(0, 4, n)
    clean = comparator(t, u_bias, u_err, wrong, 0.3, 0.15, biased=False)
    assert np.mean(clean != t) == pytest.approx(0.3, abs=0.005)            # error rate e
    assert set(np.unique(clean[clean != t] - t[clean != t])) <= {-4, -3, -2, -1, 1, 2, 3, 4}  # never the truth
    biased = comparator(t, u_bias, u_err, wrong, 0.0, 0.15)
    small_t = np.abs(t) <= 1
    assert np.mean(biased[small_t] == 1) == pytest.approx(0.15 + 0.85 * np.mean(t[small_t] == 1), abs=0.005)
    np.testing.assert_array_equal(biased[~small_t], t[~small_t])           # |t| = 2 is never biased


def test_draws_fatal_rate_and_gold():
    d = draw(np.random.default_rng(1), 50_000, 0.2)
    assert d["flawed"].mean() == pytest.approx(0.2, abs=0.01)
    assert TYPES[0] == "fatal" and np.all(np.abs(d["t"][d["flawed"], 0]) == 2) and np.all(d["t"][~d["flawed"], 0] == 0)


def test_error_free_comparator_only_position_bias_errs(small):
    e0 = "e0"
    # the bidirectional rule removes every position-bias-induced error when the comparator makes no other error,
    # at the cost of ties; the decided pairs are then all correct
    assert small["d"][f"{e0}/bias_errors"] == 0.0 and small["d"][f"{e0}/bias_error_removal"] == 1.0
    assert small["c"][f"{e0}/bias_errors"] > 0.05
    assert small["d"][f"{e0}/decided_accuracy"] == 1.0 and small["d"][f"{e0}/tie_rate"] > small["c"][f"{e0}/tie_rate"]
    # the veto recovers every fatal-flaw pair (a flaw is +-2: never biased); the weighted mean does not
    assert small["c"][f"{e0}/fatal_accuracy"] == 1.0 and small["b"][f"{e0}/fatal_accuracy"] < 0.9
    # pointwise without noise equals gold up to its missing veto (a fatal flaw outweighed by everything else)
    assert small["e_cal2"][f"{e0}/accuracy"] > 0.995


def test_noise_claims_on_a_small_run(small):
    e = "e0.2"
    assert small["c"][f"{e}/fatal_accuracy"] > small["b"][f"{e}/fatal_accuracy"] + 0.1
    assert small["d"][f"{e}/bias_error_removal"] > 0.4 and small["d"][f"{e}/tie_rate"] > 0.3
    # calibration noise above the comparison noise: criterion-wise pairwise beats pointwise
    assert small["c"][f"{e}/accuracy"] > small["e_cal2"][f"{e}/accuracy"] + 0.05
    assert small["e_cal0.5"][f"{e}/accuracy"] > small["e_cal2"][f"{e}/accuracy"]


def test_arms_share_draws_and_seeds_differ():
    a = simulate(3, n_pairs=3000, error_rates=[0.1])
    b = simulate(3, n_pairs=3000, error_rates=[0.1])
    c = simulate(4, n_pairs=3000, error_rates=[0.1])
    assert a == b and a["c"]["e0.1/accuracy"] != c["c"]["e0.1/accuracy"]

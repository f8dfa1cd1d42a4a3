"""shared/metrics/norms.py: per-layer, per-modality median norms, norm ratios, the depth Spearman (against scipy)
and the subspace fraction, on hand-computed values."""
import numpy as np
import pytest

from shared.metrics.norms import depth_spearman, layer_norm_profile, norm_ratio, subspace_fraction

MODALITIES = {"text": 0, "image": 1, "latent": 2}


def hidden_with_norms(norms):
    """[L+1, B, T, 2] states whose norm at each position is the given [L+1, B, T] value (a 3-4-5 direction)."""
    norms = np.asarray(norms, dtype=np.float64)
    return np.stack([0.6 * norms, 0.8 * norms], axis=-1)


def test_layer_norm_profile_medians_per_modality():
    # layer l scales every norm by (l + 1); B = 1, T = 5
    base = np.array([[1.0, 3.0, 2.0, 10.0, 7.0]])
    hidden = hidden_with_norms(np.stack([base * (l + 1) for l in range(3)]))
    modality = np.array([[0, 0, 0, 1, 1]])
    prof = layer_norm_profile(hidden, modality, None, MODALITIES)
    np.testing.assert_allclose(prof["text"], [2.0, 4.0, 6.0])           # median of 1, 3, 2
    np.testing.assert_allclose(prof["image"], [8.5, 17.0, 25.5])        # median of 10, 7 (even count: mean)
    assert prof["latent"].shape == (3,) and np.isnan(prof["latent"]).all()
    # an invalid position drops out: text is then {1, 2} -> 1.5
    valid = np.array([[True, False, True, True, True]])
    np.testing.assert_allclose(layer_norm_profile(hidden, modality, valid, MODALITIES)["text"], [1.5, 3.0, 4.5])


def test_layer_norm_profile_bad_shapes():
    hidden = np.zeros((3, 2, 4, 8))
    with pytest.raises(ValueError, match=r"layer_hidden must be \[L\+1, B, T, D\]"):
        layer_norm_profile(hidden[0], np.zeros((2, 4), int), None, MODALITIES)
    with pytest.raises(ValueError, match=r"modality must be \[B, T\] = \(2, 4\)"):
        layer_norm_profile(hidden, np.zeros((4, 2), int), None, MODALITIES)
    with pytest.raises(ValueError, match="valid must be"):
        layer_norm_profile(hidden, np.zeros((2, 4), int), np.ones((2, 3), bool), MODALITIES)
    with pytest.raises(ValueError, match="bool mask"):
        layer_norm_profile(hidden, np.zeros((2, 4), int), np.ones((2, 4), int), MODALITIES)


def test_norm_ratio():
    states = np.array([[3.0, 4.0], [0.0, 10.0], [6.0, 8.0]])            # norms 5, 10, 10 -> median 10
    reference = np.array([[1.0, 0.0], [0.0, 2.0], [0.0, 4.0], [3.0, 0.0]])  # norms 1, 2, 4, 3 -> median 2.5
    assert norm_ratio(states, reference) == pytest.approx(4.0)
    with pytest.raises(ValueError, match="same D"):
        norm_ratio(states, np.ones((2, 3)))
    with pytest.raises(ValueError, match="median norm 0"):
        norm_ratio(states, np.zeros((2, 2)))
    with pytest.raises(ValueError, match=r"states must be a non-empty \[N, D\]"):
        norm_ratio(np.zeros((0, 2)), reference)


def test_depth_spearman_hand_cases():
    assert depth_spearman([1.0, 2.0, 5.0, 9.0]) == pytest.approx(1.0)
    assert depth_spearman([9.0, 5.0, 2.0, 1.0]) == pytest.approx(-1.0)
    # ranks of [1, 3, 2, 4] are themselves: d = (0, 1, -1, 0), rho = 1 - 6*2 / (4*15) = 0.8
    assert depth_spearman([1.0, 3.0, 2.0, 4.0]) == pytest.approx(0.8)
    # a tie: [1, 2, 2, 3] ranks (1, 2.5, 2.5, 4); Pearson with (1, 2, 3, 4) = 4.5 / sqrt(4.5 * 5)
    assert depth_spearman([1.0, 2.0, 2.0, 3.0]) == pytest.approx(4.5 / np.sqrt(4.5 * 5))
    assert np.isnan(depth_spearman([2.0, 2.0, 2.0]))
    with pytest.raises(ValueError, match="NaN"):
        depth_spearman([1.0, np.nan, 2.0])
    with pytest.raises(ValueError, match="at least 2 layers"):
        depth_spearman([1.0])


def test_depth_spearman_matches_scipy():
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(0)
    for _ in range(20):
        profile = rng.integers(0, 5, size=9).astype(float)               # few values: many ties
        if np.all(profile == profile[0]):
            continue
        expected = stats.spearmanr(np.arange(9), profile).statistic
        assert depth_spearman(profile) == pytest.approx(expected, abs=1e-12)


def test_subspace_fraction():
    basis = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])             # span of e1, e2 in R^3
    mu = np.array([1.0, 1.0, 1.0])
    u = np.array([[2.0, 1.0, 1.0],    # offset e1: inside -> 1
                  [1.0, 1.0, 3.0],    # offset 2 e3: outside -> 0
                  [2.0, 1.0, 2.0],    # offset e1 + e3 -> 1/2
                  [1.0, 1.0, 1.0]])   # u == mu -> 0 by convention
    np.testing.assert_allclose(subspace_fraction(u, mu, basis), [1.0, 0.0, 0.5, 0.0])
    # a rotated orthonormal basis of the same plane gives the same fractions
    c, s = np.cos(0.3), np.sin(0.3)
    rotated = basis @ np.array([[c, -s], [s, c]])
    np.testing.assert_allclose(subspace_fraction(u, mu, rotated), [1.0, 0.0, 0.5, 0.0], atol=1e-12)
    with pytest.raises(ValueError, match="not orthonormal"):
        subspace_fraction(u, mu, 2 * basis)
    with pytest.raises(ValueError, match=r"mu must be \[D\]"):
        subspace_fraction(u, mu[:2], basis)
    with pytest.raises(ValueError, match=r"basis must be \[D, k\] with D = 3"):
        subspace_fraction(u, mu, basis.T)

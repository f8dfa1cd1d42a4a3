"""shared/latent/pca.py: the basis against numpy's SVD of the centred data, k on data of known variances, the
round trip at k = D, and that a reconstruction lies wholly in the subspace (rho = 1)."""
import numpy as np
import pytest

from shared.latent import PCAFit, pca_fit, project, reconstruct
from shared.metrics.norms import subspace_fraction


def correlated(n=400, d=6, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)) @ rng.normal(size=(d, d)) + rng.normal(size=d)


def test_basis_matches_svd_up_to_sign():
    X = correlated()
    fit = pca_fit(X, explained=1.0)
    assert isinstance(fit, PCAFit) and fit.k == 6 and fit.basis.shape == (6, 6)
    centred = X - X.mean(axis=0)
    _, singular, vt = np.linalg.svd(centred, full_matrices=False)
    np.testing.assert_allclose(fit.mu, X.mean(axis=0))
    np.testing.assert_allclose(fit.variances, singular ** 2 / (len(X) - 1), rtol=1e-10)
    signs = np.sign(np.sum(fit.basis * vt.T, axis=0))                    # +-1 per column
    np.testing.assert_allclose(fit.basis, vt.T * signs, atol=1e-8)
    np.testing.assert_allclose(fit.basis.T @ fit.basis, np.eye(6), atol=1e-12)
    assert np.all(np.diff(fit.variances) <= 0) and fit.explained_ratio[-1] == pytest.approx(1.0)
    assert np.all(np.diff(fit.explained_ratio) >= 0)


def test_k_from_known_variances():
    # independent axes with std 3, 2, 1, 0.1 (exactly: each column standardised): variances 9, 4, 1, 0.01,
    # cumulative shares 9/14.01 = 0.642, 13/14.01 = 0.928, 14/14.01 = 0.9993, 1
    rng = np.random.default_rng(1)
    Z = rng.normal(size=(5000, 4))
    Z = np.linalg.qr(Z - Z.mean(axis=0))[0] * np.sqrt(len(Z) - 1)      # orthogonal columns, unit sample variance
    X = Z * np.array([3.0, 2.0, 1.0, 0.1]) + 5.0
    fit = pca_fit(X, explained=0.95)
    np.testing.assert_allclose(fit.variances, [9.0, 4.0, 1.0, 0.01], rtol=1e-9)
    np.testing.assert_allclose(fit.explained_ratio, np.cumsum([9.0, 4.0, 1.0, 0.01]) / 14.01, rtol=1e-9)
    assert fit.k == 3 and fit.basis.shape == (4, 3)
    np.testing.assert_allclose(np.abs(fit.basis), np.eye(4)[:, :3], atol=1e-9)   # the axes themselves
    assert pca_fit(X, explained=0.9).k == 2
    assert pca_fit(X, explained=0.6).k == 1
    assert pca_fit(X, explained=13 / 14.01).k == 2                      # the boundary is inclusive
    assert pca_fit(X, explained=1.0).k == 4


def test_round_trip_at_full_rank_and_rho_of_a_reconstruction():
    X = correlated(seed=2)
    full = pca_fit(X, explained=1.0)
    np.testing.assert_allclose(reconstruct(full, project(full, X)), X, atol=1e-10)
    part = pca_fit(X, explained=0.8)
    assert part.k < 6
    v = correlated(n=10, seed=3)
    coeffs = project(part, v)
    assert coeffs.shape == (10, part.k)
    v_hat = reconstruct(part, coeffs)
    np.testing.assert_allclose(subspace_fraction(v_hat, part.mu, part.basis), 1.0, atol=1e-12)
    np.testing.assert_allclose(project(part, v_hat), coeffs, atol=1e-10)            # projection is idempotent
    assert reconstruct(part, project(part, v[None])).shape == (1, 10, 6)               # leading axes pass through


def test_bad_inputs():
    with pytest.raises(ValueError, match=r"X must be \[N, D\] with N >= 2"):
        pca_fit(np.ones((1, 3)))
    with pytest.raises(ValueError, match="explained must be in"):
        pca_fit(correlated(), explained=0.0)
    with pytest.raises(ValueError, match="zero variance"):
        pca_fit(np.ones((5, 3)))
    fit = pca_fit(correlated(), explained=0.8)
    with pytest.raises(ValueError, match=r"v must be \[..., D\] with D = 6"):
        project(fit, np.ones((2, 5)))
    with pytest.raises(ValueError, match=rf"coeffs must be \[..., k\] with k = {fit.k}"):
        reconstruct(fit, np.ones((2, fit.k + 1)))

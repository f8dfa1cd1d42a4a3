"""PCA of frozen visual input embeddings for the PCA-aligned latent head (../shared/papers/gap.md §1.3).

    fit = pca_fit(X, explained=0.95)       # X [N, D]; fit.mu [D], fit.basis [D, k], fit.k
    c = project(fit, v)                    # [..., D] -> [..., k]   c = P_k^T (v - mu)
    v_hat = reconstruct(fit, c)            # [..., k] -> [..., D]   v_hat = P_k c + mu

The fit is numpy float64 (eigh of the ddof=1 covariance): it runs once, offline, and its output is frozen; cast
mu / basis to the model dtype when building the head.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)  # eq=False: arrays have no single truth value for ==
class PCAFit:
    """mu [D]; basis [D, k] orthonormal columns, by decreasing variance; k; variances [D] (eigenvalues of the
    covariance, descending); explained_ratio [D] (cumulative share of the total variance)."""
    mu: np.ndarray
    basis: np.ndarray
    k: int
    variances: np.ndarray
    explained_ratio: np.ndarray

    @property
    def dim(self) -> int:
        return int(self.mu.shape[0])


def pca_fit(X, explained: float = 0.95) -> PCAFit:
    """Principal subspace of X [N, D]: k = the smallest count whose cumulative explained variance >= `explained`."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] < 2:
        raise ValueError(f"X must be [N, D] with N >= 2 (the covariance uses ddof=1), got shape {X.shape}")
    if not 0.0 < explained <= 1.0:
        raise ValueError(f"explained must be in (0, 1], got {explained}")
    if not np.isfinite(X).all():
        raise ValueError(f"X {X.shape} has non-finite values")
    mu = X.mean(axis=0)
    centred = X - mu
    cov = centred.T @ centred / (X.shape[0] - 1)
    eigenvalues, eigenvectors = np.linalg.eigh(cov)           # ascending
    variances = np.clip(eigenvalues[::-1], 0.0, None)          # rounding can leave tiny negatives on null directions
    vectors = eigenvectors[:, ::-1]
    total = variances.sum()
    if total <= 0.0:
        raise ValueError(f"X {X.shape} has zero variance: no principal subspace")
    # eigenvector signs are arbitrary; fix them (largest-magnitude entry positive) so refits give the same basis
    pivot = vectors[np.argmax(np.abs(vectors), axis=0), np.arange(vectors.shape[1])]
    vectors = vectors * np.where(pivot < 0, -1.0, 1.0)
    ratio = np.cumsum(variances) / total
    # the 1e-12 slack lets explained=1.0 stop at the rank instead of missing 1.0 by a rounding error
    k = int(np.argmax(ratio >= explained - 1e-12)) + 1
    return PCAFit(mu=mu, basis=np.ascontiguousarray(vectors[:, :k]), k=k, variances=variances,
                  explained_ratio=ratio)


def project(fit: PCAFit, v) -> np.ndarray:
    """Coefficients c = P_k^T (v - mu): v [..., D] -> [..., k]."""
    v = np.asarray(v, dtype=np.float64)
    if v.ndim < 1 or v.shape[-1] != fit.dim:
        raise ValueError(f"v must be [..., D] with D = {fit.dim} (the fit's), got shape {v.shape}")
    return (v - fit.mu) @ fit.basis


def reconstruct(fit: PCAFit, coeffs) -> np.ndarray:
    """v = P_k c + mu: coeffs [..., k] -> [..., D]."""
    coeffs = np.asarray(coeffs, dtype=np.float64)
    if coeffs.ndim < 1 or coeffs.shape[-1] != fit.k:
        raise ValueError(f"coeffs must be [..., k] with k = {fit.k} (the fit's), got shape {coeffs.shape}")
    return coeffs @ fit.basis.T + fit.mu

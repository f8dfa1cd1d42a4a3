"""Latent visual reasoning (../shared/papers/gap.md §1.3, §5): continuous latents fed back as input embeddings.

  pca.py   pca_fit (eigh of the covariance, k by explained variance), project, reconstruct: the frozen
           affine subspace (mu, P_k) of real visual input embeddings that the PCA latent head writes into
"""
from shared.latent.pca import PCAFit, pca_fit, project, reconstruct  # noqa: F401

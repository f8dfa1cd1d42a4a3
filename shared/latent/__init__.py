"""Latent visual reasoning (../shared/papers/gap.md §1.3, §5): continuous latents fed back as input embeddings.

  pca.py     pca_fit (eigh of the covariance, k by explained variance), project, reconstruct: the frozen
             affine subspace (mu, P_k) of real visual input embeddings that the PCA latent head writes into
  heads.py   head(h_pre, h_post) -> u, the vector fed back: raw_post | raw_pre | ema | linear | pca (make_head)
  rollout.py latent_rollout (K-step free-running with the KV cache, grad flag), two_pass_forward (Monet/GAP pass 1 +
             teacher-forced pass 2, or given zs), latent_mse / latent_cos, intervene (zeros|noise|mean|swap|oracle)
"""
from shared.latent.pca import PCAFit, pca_fit, project, reconstruct  # noqa: F401
from shared.latent.heads import (  # noqa: F401
    HEAD_NAMES, EMAHead, Frozen, LinearHead, PCAHead, RawPostHead, RawPreHead, ema_update, make_head)
from shared.latent.rollout import (  # noqa: F401
    INTERVENTIONS, intervene, latent_cos, latent_mse, latent_rollout, two_pass_forward)

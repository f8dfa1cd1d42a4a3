"""Mutual-information estimators (pure JAX functions on parameter pytrees, so they jit, vmap and live in any
training state).

    club        CLUB upper bounds (Cheng et al., ICML 2020): categorical q(a|z) (as DIR uses) and Gaussian
                q(y|x), exact O(N*K) / O(N*N) and sampled forms, and the variational learning losses.
    bounds      lower bounds on scores T(x_i, y_j): InfoNCE, MINE (Donsker-Varadhan), NWJ.
    probe       fit-and-evaluate helpers for evaluation: a held-out classifier probe, and a critic trained on
                one half of the samples whose bound is read on the other half.
    mlp         the small MLP (init / apply) every estimator network uses.
"""
from shared.mi.bounds import infonce_lower_bound, mine_lower_bound, nwj_lower_bound  # noqa: F401
from shared.mi.club import (  # noqa: F401
    categorical_club, categorical_club_pairwise, categorical_nll, gaussian_club, gaussian_club_sampled,
    gaussian_log_likelihood, gaussian_nll,
)
from shared.mi.mlp import mlp_apply, mlp_init  # noqa: F401
from shared.mi.probe import estimate_lower_bound, fit_club, probe_accuracy  # noqa: F401

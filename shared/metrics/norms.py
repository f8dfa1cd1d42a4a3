"""Norm profiles of a decoder's residual stream, per layer and per position type (the norm-regime measurement of
../shared/papers/gap.md §1.2, §4.6, §4.8).

    prof = layer_norm_profile(hidden, modality, valid, {"text": 0, "image": 1, "latent": 2})  # name -> [L+1]
    depth_spearman(prof["text"])                  # >= 0.9: median ||h_l|| grows with depth
    norm_ratio(post_norm_img, e_vis)              # r_vis = median ||N_f(h_L)||_img / median ||e_vis||
    subspace_fraction(u, mu, basis)               # rho(u) = ||P_k^T (u-mu)||^2 / ||u-mu||^2, per row

Everything is numpy in float64 (jax arrays are accepted and copied to host): these are offline measurements, and
bf16 squares of norms around 1e3 would lose the digits the ratios need.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np


def _norms(x: np.ndarray) -> np.ndarray:
    """L2 norm over the last axis, in float64."""
    return np.sqrt(np.sum(np.square(np.asarray(x, dtype=np.float64)), axis=-1))


def layer_norm_profile(layer_hidden, modality, valid, modalities: Mapping[str, int]) -> dict[str, np.ndarray]:
    """Median L2 norm per layer of the positions of each modality: {name: [L+1]}, NaN where it has no position.

    layer_hidden [L+1, B, T, D] (the embeddings, then each layer's output); modality [B, T] int ids, matched
    against the values of `modalities` (name -> id); valid [B, T] bool or None (every position counts).
    """
    hidden = np.asarray(layer_hidden)
    modality = np.asarray(modality)
    if hidden.ndim != 4:
        raise ValueError(f"layer_hidden must be [L+1, B, T, D], got shape {hidden.shape}")
    if modality.shape != hidden.shape[1:3]:
        raise ValueError(f"modality must be [B, T] = {hidden.shape[1:3]} (from layer_hidden {hidden.shape}), "
                         f"got shape {modality.shape}")
    if valid is None:
        valid = np.ones(modality.shape, dtype=bool)
    valid = np.asarray(valid)
    if valid.shape != modality.shape:
        raise ValueError(f"valid must be [B, T] = {modality.shape} like modality, got shape {valid.shape}")
    if valid.dtype != bool:
        raise ValueError(f"valid must be a bool mask, got dtype {valid.dtype}")
    if not modalities:
        raise ValueError("modalities must name at least one modality (name -> id)")

    norms = _norms(hidden)  # [L+1, B, T]
    profile = {}
    for name, ident in modalities.items():
        mask = (modality == ident) & valid
        if mask.any():
            profile[name] = np.median(norms[:, mask], axis=1)
        else:  # absent in this batch: NaN rather than an error, so one batch can profile text-only runs too
            profile[name] = np.full(hidden.shape[0], np.nan)
    return profile


def norm_ratio(states, reference) -> float:
    """median ||states_i|| / median ||reference_j||, e.g. r_vis = ||N_f(h_L)||_img / ||e_vis||.

    states [N, D], reference [M, D]; the two must share D.
    """
    states, reference = np.asarray(states), np.asarray(reference)
    for name, x in (("states", states), ("reference", reference)):
        if x.ndim != 2 or x.shape[0] == 0:
            raise ValueError(f"{name} must be a non-empty [N, D] array, got shape {x.shape}")
    if states.shape[1] != reference.shape[1]:
        raise ValueError(f"states {states.shape} and reference {reference.shape} must have the same D")
    denominator = float(np.median(_norms(reference)))
    if denominator == 0.0:
        raise ValueError(f"reference {reference.shape} has median norm 0: the ratio is undefined")
    return float(np.median(_norms(states))) / denominator


def _average_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n; tied values share the mean of the ranks they span (as scipy.stats.rankdata 'average')."""
    order = np.argsort(x, kind="stable")
    sorted_x = x[order]
    starts_group = np.r_[True, sorted_x[1:] != sorted_x[:-1]]
    group = np.cumsum(starts_group) - 1                       # group id of each sorted element
    bounds = np.flatnonzero(np.r_[starts_group, True])        # first sorted index of each group, then n
    mean_rank = (bounds[:-1] + bounds[1:] - 1) / 2.0 + 1.0    # mean of the 1-based ranks bounds[g]+1 .. bounds[g+1]
    ranks = np.empty(len(x), dtype=np.float64)
    ranks[order] = mean_rank[group]
    return ranks


def depth_spearman(profile) -> float:
    """Spearman rank correlation of a per-layer profile [L+1] with the layer index 0..L (ties: average rank).

    1.0 when the median norm strictly grows with depth; NaN when the profile is constant (no ordering to rank).
    """
    profile = np.asarray(profile, dtype=np.float64)
    if profile.ndim != 1 or profile.shape[0] < 2:
        raise ValueError(f"profile must be [L+1] with at least 2 layers, got shape {profile.shape}")
    if np.isnan(profile).any():
        raise ValueError(f"profile has NaN layers (a modality with no positions?): {profile}")
    ranks = _average_ranks(profile)
    centred = ranks - ranks.mean()
    layer = np.arange(len(profile), dtype=np.float64)  # the index has no ties: its ranks are itself + 1
    layer -= layer.mean()
    spread = np.sqrt(np.sum(centred ** 2) * np.sum(layer ** 2))
    return float(np.sum(centred * layer) / spread) if spread > 0 else float("nan")


def subspace_fraction(u, mu, basis, atol: float = 1e-4) -> np.ndarray:
    """rho(u) = ||P_k^T (u-mu)||^2 / ||u-mu||^2 per row: the share of u's offset from mu inside span(P_k).

    u [N, D], mu [D], basis [D, k] with orthonormal columns (checked to `atol`, loose enough for a float32
    copy). Rows with u == mu have no offset to split and get 0.
    """
    u, mu, basis = (np.asarray(a, dtype=np.float64) for a in (u, mu, basis))
    if u.ndim != 2:
        raise ValueError(f"u must be [N, D], got shape {u.shape}")
    if mu.shape != u.shape[1:]:
        raise ValueError(f"mu must be [D] = ({u.shape[1]},) like u {u.shape}, got shape {mu.shape}")
    if basis.ndim != 2 or basis.shape[0] != u.shape[1]:
        raise ValueError(f"basis must be [D, k] with D = {u.shape[1]} (from u {u.shape}), got shape {basis.shape}")
    gram_error = np.max(np.abs(basis.T @ basis - np.eye(basis.shape[1]))) if basis.shape[1] else 0.0
    if gram_error > atol:
        raise ValueError(f"basis {basis.shape} columns are not orthonormal (max |P^T P - I| = {gram_error:.3g})")
    offset = u - mu
    total = np.sum(offset ** 2, axis=-1)
    inside = np.sum((offset @ basis) ** 2, axis=-1)
    # the guarded division keeps rows with u == mu out of the 0/0 warning; they are set to 0 below
    rho = np.divide(inside, total, out=np.zeros_like(total), where=total > 0)
    return rho

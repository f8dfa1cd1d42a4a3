"""Latent heads (../shared/papers/gap.md §1.1-1.3): the vector fed back as the next input embedding.

One interface for all of them:  u = head(h_pre [..., D], h_post [..., D]) -> [..., D]
    h_pre  = h_L, the residual stream the final norm reads (Decoder(hidden="prefinal")["prefinal"])
    h_post = N_f(h_L), the final norm's output (Decoder(...)["hidden"]; HF's last_hidden_state)

    raw_post  u = h_post                                   (Monet as released: output-as-input)
    raw_pre   u = h_pre
    ema       u = h_post * m / (||h_post|| + 1e-6)         (m: EMA of input-embedding norms, fixed; ema_update)
    linear    u = W RMSNorm(h_pre) + b,  W [D,D]           (small normal init, see LinearHead)
    pca       u = P_k (W RMSNorm_head(h_pre) + b) + mu     (W [k,D], b [k] zero init; P_k, mu frozen from a PCAFit)

Frozen arrays (ema's m, pca's P_k and mu) are `Frozen` variables, not nnx.Param: an optimizer built with
wrt=nnx.Param never sees them, and nnx.state(head, nnx.Param) leaves them out.
"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from flax import nnx

from shared.model.layers import RMSNorm, param

HEAD_NAMES = ("raw_post", "raw_pre", "ema", "linear", "pca")


class Frozen(nnx.Variable):
    """A constant carried in the module's state (checkpointed, jit-traced) but never trained."""


def _check_pair(h_pre, h_post):
    if h_pre.shape != h_post.shape:
        raise ValueError(f"latent head: h_pre {tuple(h_pre.shape)} and h_post {tuple(h_post.shape)} must match")


class RawPostHead(nnx.Module):
    """u = h_post = N_f(h_L) at the previous position (Monet's last_hidden_state[pos - 1])."""

    def __call__(self, h_pre, h_post):
        _check_pair(h_pre, h_post)
        return h_post


class RawPreHead(nnx.Module):
    """u = h_pre = h_L (before the final norm: the large-norm regime of spec §1.2)."""

    def __call__(self, h_pre, h_post):
        _check_pair(h_pre, h_post)
        return h_pre


def ema_update(m, norms_mean, beta: float = 0.99):
    """m <- beta m + (1 - beta) mean_i ||e_vis,i||  (spec §1.2; norms_mean: this batch's mean input-embedding norm)."""
    return beta * m + (1.0 - beta) * norms_mean


class EMAHead(nnx.Module):
    """u = h_post * m / (||h_post|| + 1e-6): the raw output rescaled to the input-embedding norm regime m (a fixed
    scalar at inference; update it between calls with `ema_update` and `head.m[...] = new`)."""

    def __init__(self, m: float):
        self.m = Frozen(jnp.asarray(m, jnp.float32))

    def __call__(self, h_pre, h_post):
        _check_pair(h_pre, h_post)
        x = h_post.astype(jnp.float32)
        u = x * self.m[...] / (jnp.linalg.norm(x, axis=-1, keepdims=True) + 1e-6)
        return u.astype(h_post.dtype)


class LinearHead(nnx.Module):
    """u = W RMSNorm(h_pre) + b, W [D,D] (applied as h @ W^T), b [D] zeros.

    Init choice: W ~ N(0, std^2) with a small std (default 0.02, the usual embedding init), not the spec's
    W = 0 of the pca head. A zero W feeds the constant u = 0 at init (the 'zeros' placeholder) for every slot, so the
    recurrence starts with no information flowing through it; a small random W starts the plain linear baseline
    as a (scaled) random projection of the state instead. init="zeros" gives the W = 0 variant."""

    def __init__(self, d_model: int, *, rngs: nnx.Rngs, std: float = 0.02, init: str = "normal"):
        self.norm = RMSNorm(d_model, rngs=rngs)
        self.w = param(rngs, (d_model, d_model), (None, None), std=std, init=init)
        self.b = param(rngs, (d_model,), (None,), init="zeros")

    def __call__(self, h_pre, h_post):
        _check_pair(h_pre, h_post)
        x = self.norm(h_pre.astype(jnp.float32))
        return (x @ self.w[...].T + self.b[...]).astype(h_pre.dtype)


class PCAHead(nnx.Module):
    """Spec §1.3: c = W RMSNorm_head(h_pre) + b (W [k,D], b [k], both zero-init), u = P_k c + mu.

    u lies in the affine principal subspace {mu + P_k c} of real visual input embeddings, so its norm is in the
    e_vis regime by construction; at init u == mu exactly. P_k [D,k] and mu [D] are Frozen (not trained)."""

    def __init__(self, fit, *, rngs: nnx.Rngs):
        basis, mu = np.asarray(fit.basis), np.asarray(fit.mu)
        d, k = basis.shape
        self.k = int(k)
        self.norm = RMSNorm(d, rngs=rngs)
        self.w = param(rngs, (k, d), (None, None), init="zeros")
        self.b = param(rngs, (k,), (None,), init="zeros")
        self.basis = Frozen(jnp.asarray(basis, jnp.float32))
        self.mu = Frozen(jnp.asarray(mu, jnp.float32))

    def coeffs(self, h_pre):
        """c [..., k] (the option ||c_t - P_k^T (v* - mu)||^2 supervises these directly)."""
        x = self.norm(h_pre.astype(jnp.float32))
        return x @ self.w[...].T + self.b[...]

    def __call__(self, h_pre, h_post):
        _check_pair(h_pre, h_post)
        u = self.coeffs(h_pre) @ self.basis[...].T + self.mu[...]
        return u.astype(h_pre.dtype)


def make_head(name: str, d_model: int, *, fit=None, ema_norm=None, rngs: nnx.Rngs | None = None,
              std: float = 0.02):
    """A latent head by name (HEAD_NAMES). fit: a PCAFit (pca); ema_norm: the scalar m (ema); rngs: linear, pca."""
    if name == "raw_post":
        return RawPostHead()
    if name == "raw_pre":
        return RawPreHead()
    if name == "ema":
        if ema_norm is None:
            raise ValueError("make_head('ema'): needs ema_norm (the EMA of input-embedding norms, m)")
        return EMAHead(ema_norm)
    if name in ("linear", "pca") and rngs is None:
        raise ValueError(f"make_head({name!r}): needs rngs")
    if name == "linear":
        return LinearHead(d_model, rngs=rngs, std=std)
    if name == "pca":
        if fit is None:
            raise ValueError("make_head('pca'): needs fit (a PCAFit of the visual input embeddings, pca_fit(X))")
        if fit.basis.shape[0] != d_model:
            raise ValueError(f"make_head('pca'): the fit has D = {fit.basis.shape[0]}, the model d_model = {d_model}")
        return PCAHead(fit, rngs=rngs)
    raise ValueError(f"make_head: unknown latent head {name!r}; expected one of {', '.join(HEAD_NAMES)}")

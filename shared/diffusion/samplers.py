"""Samplers of the masked-diffusion loss: which mask ratio t each sample gets, and which tokens get masked.

t-samplers (`T_SAMPLERS`, factories `fn(options: dict) -> sampler`), called `sampler(rng, n) -> (t, weight)`:
  t float32[n] in (0, 1]; weight float32[n] the importance weight 1/p(t) that keeps the estimator unbiased for
  the uniform-t ELBO (1 for samplers whose marginal is uniform).
    uniform      t ~ U(0, 1)
    clipped      t ~ U[low, high], weight 1 (Block Diffusion's clipped schedule: biased on purpose)
    stratified   k equal strata of [0, 1), an equal share of the n samples in each (StraTS)
    density      t ~ a piecewise-linear density on a grid (exact inverse CDF), weight 1/p(t) (P-POTS uses it)

mask-samplers (`MASK_SAMPLERS`, factories `fn(options: dict) -> sampler`), called
`sampler(rng, x0 int[B,T], eligible float[B,T], p float[B]) -> MaskDraw`: K masks per sample, the per-token
masking probability q of each (the loss weights a masked token by 1/q, which keeps it unbiased) and the token
weights that normalise the per-sample sum (eligible / |eligible| unless the sampler says otherwise).
    independent  K = options["samples"] (default 1) independent masks, q = p on eligible tokens
    multi        independent with samples = 2 by default (the MultiSample-2 control of MIRROR)
    mirror       MIRROR antithetic pair from one uniform per token: M1 = {U < q}, M2 = {U > 1 - q}
    isad         q = min(1, p + delta) on the `rare_ids` tokens (answer delimiters), p elsewhere; pairing option
    syrm         also masks `syntax_ids` tokens of the prompt; per-sample loss = alpha * response part +
                 (1 - alpha) * syntax part, each normalised by its own token count (biased on purpose)
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from shared.registry import MASK_SAMPLERS, T_SAMPLERS  # noqa: F401  (re-exported)

TSampler = Callable[[jax.Array, int], tuple[jax.Array, jax.Array]]


def _opts(options: Any) -> dict:
    if options is None:
        return {}
    return dict(options.to_dict() if hasattr(options, "to_dict") else options)


def _known(options: dict, allowed: tuple[str, ...], where: str) -> dict:
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ValueError(f"{where}: unknown option(s) {unknown}; known: {list(allowed)}")
    return options


def make_t_sampler(name: str, options: Any = None) -> TSampler:
    return T_SAMPLERS.get(name)(_opts(options))


def make_mask_sampler(name: str, options: Any = None):
    return MASK_SAMPLERS.get(name)(_opts(options))


# ------------------------------------------------------------------------------------------ t-samplers


@T_SAMPLERS.register("uniform")
def uniform_t(options: dict) -> TSampler:
    _known(options, (), "diffusion.t_options (uniform)")

    def sample(rng, n):
        # (0, 1]: t = 0 would mask nothing and p_mask keeps the 1/t weight finite anyway
        t = 1.0 - jax.random.uniform(rng, (n,), jnp.float32)
        return t, jnp.ones((n,), jnp.float32)

    return sample


@T_SAMPLERS.register("clipped")
def clipped_t(options: dict) -> TSampler:
    _known(options, ("low", "high"), "diffusion.t_options (clipped)")
    low, high = float(options.get("low", 0.2)), float(options.get("high", 0.8))
    if not 0.0 <= low < high <= 1.0:
        raise ValueError(f"diffusion.t_options (clipped): need 0 <= low < high <= 1, got low={low}, high={high}")

    def sample(rng, n):
        t = jax.random.uniform(rng, (n,), jnp.float32, low, high)
        return t, jnp.ones((n,), jnp.float32)

    return sample


@T_SAMPLERS.register("stratified")
def stratified_t(options: dict) -> TSampler:
    _known(options, ("strata",), "diffusion.t_options (stratified)")
    k = int(options.get("strata", 8))
    if k < 1:
        raise ValueError(f"diffusion.t_options.strata must be >= 1, got {k}")

    def sample(rng, n):
        # sample i sits in stratum floor(i k / n): an equal share per stratum (one each when n == k)
        stratum = (np.arange(n) * k) // n
        u = jax.random.uniform(rng, (n,), jnp.float32)
        t = (jnp.asarray(stratum, jnp.float32) + u) / k
        return jnp.clip(t, 1e-6, 1.0), jnp.ones((n,), jnp.float32)

    return sample


class GridDensity:
    """A density on [grid[0], grid[-1]] that is linear between grid points (normalised by the trapezoid rule),
    sampled by exact inverse CDF (quadratic inside a cell), with weight min(1/p(t), max_weight)."""

    def __init__(self, grid, density, max_weight: float = 1e6):
        grid = np.asarray(grid, np.float64)
        density = np.asarray(density, np.float64)
        if grid.ndim != 1 or grid.shape != density.shape or len(grid) < 2 or np.any(np.diff(grid) <= 0):
            raise ValueError(f"GridDensity: need increasing grid and density of one shape, got {grid.shape}, "
                             f"{density.shape}")
        if np.any(density < 0) or not np.all(np.isfinite(density)):
            raise ValueError("GridDensity: density must be finite and >= 0")
        mass = np.sum((density[1:] + density[:-1]) / 2 * np.diff(grid))
        if mass <= 0:
            raise ValueError("GridDensity: density integrates to 0")
        self.grid = grid
        self.density = density / mass
        self.cdf = np.concatenate([[0.0], np.cumsum((self.density[1:] + self.density[:-1]) / 2 * np.diff(grid))])
        self.cdf[-1] = 1.0
        self.max_weight = float(max_weight)

    def pdf(self, t):
        return jnp.interp(t, jnp.asarray(self.grid, jnp.float32), jnp.asarray(self.density, jnp.float32))

    def sample(self, rng, n):
        grid = jnp.asarray(self.grid, jnp.float32)
        dens = jnp.asarray(self.density, jnp.float32)
        cdf = jnp.asarray(self.cdf, jnp.float32)
        u = jax.random.uniform(rng, (n,), jnp.float32)
        cell = jnp.clip(jnp.searchsorted(cdf, u, side="right") - 1, 0, len(self.grid) - 2)
        width = grid[cell + 1] - grid[cell]
        a = dens[cell]
        slope = (dens[cell + 1] - a) / width
        rest = jnp.maximum(u - cdf[cell], 0.0)
        # mass a x + slope x^2 / 2 = rest, solved in the cancellation-free form (also right for slope = 0)
        x = 2.0 * rest / (a + jnp.sqrt(jnp.maximum(a * a + 2.0 * slope * rest, 0.0)) + 1e-30)
        t = grid[cell] + jnp.clip(x, 0.0, width)
        weight = jnp.minimum(1.0 / jnp.maximum(self.pdf(t), 1e-30), self.max_weight)
        return t, weight

    def __call__(self, rng, n):
        return self.sample(rng, n)


@T_SAMPLERS.register("density")
def density_t(options: dict) -> TSampler:
    _known(options, ("grid", "density", "max_weight"), "diffusion.t_options (density)")
    if "grid" not in options or "density" not in options:
        raise ValueError("diffusion.t_options (density): needs 'grid' and 'density' lists")
    return GridDensity(options["grid"], options["density"], float(options.get("max_weight", 1e6)))


# ------------------------------------------------------------------------------------------ mask-samplers


@dataclasses.dataclass
class MaskDraw:
    masks: jax.Array         # bool[K, B, T]: which tokens are replaced by [MASK] in each of the K draws
    probs: jax.Array         # float32[K, B, T]: each token's masking probability q (1 where not maskable)
    token_weight: jax.Array  # float32[B, T]: per-sample loss = sum(token_weight * mask * nll / q)


jax.tree_util.register_dataclass(MaskDraw, data_fields=["masks", "probs", "token_weight"], meta_fields=[])


def default_token_weight(eligible):
    eligible = eligible.astype(jnp.float32)
    return eligible / jnp.maximum(eligible.sum(-1, keepdims=True), 1.0)


def _draw(rng, q, pairing: str, samples: int):
    """masks [K,B,T] with per-token probability q [B,T]; pairing "independent" (K = samples) or "mirror" (K = 2)."""
    if pairing == "mirror":
        u = jax.random.uniform(rng, q.shape, jnp.float32)
        return jnp.stack([u < q, u > 1.0 - q])  # u > 1 - q has probability q too: same marginal
    if pairing == "independent":
        u = jax.random.uniform(rng, (samples,) + q.shape, jnp.float32)
        return u < q[None]
    raise ValueError(f"mask sampler pairing must be 'independent' or 'mirror', got {pairing!r}")


def _pairing(options: dict, where: str) -> tuple[str, int]:
    pairing = str(options.get("pairing", "independent"))
    samples = int(options.get("samples", 1))
    if pairing not in ("independent", "mirror"):
        raise ValueError(f"{where}.pairing must be 'independent' or 'mirror', got {pairing!r}")
    if samples < 1:
        raise ValueError(f"{where}.samples must be >= 1, got {samples}")
    return pairing, (2 if pairing == "mirror" else samples)


def _finish(masks, q, eligible, token_weight):
    k = masks.shape[0]
    masks = masks & (eligible[None] > 0)
    probs = jnp.broadcast_to(jnp.where(eligible > 0, q, 1.0), (k,) + q.shape)
    return MaskDraw(masks, probs, token_weight)


def _plain_sampler(pairing: str, samples: int):
    def sample(rng, x0, eligible, p):
        q = jnp.broadcast_to(p[:, None], eligible.shape).astype(jnp.float32)
        return _finish(_draw(rng, q, pairing, samples), q, eligible, default_token_weight(eligible))

    sample.samples = samples
    return sample


@MASK_SAMPLERS.register("independent")
def independent_masks(options: dict):
    _known(options, ("samples",), "diffusion.mask_options (independent)")
    return _plain_sampler("independent", int(options.get("samples", 1)))


@MASK_SAMPLERS.register("multi")
def multi_masks(options: dict):
    _known(options, ("samples",), "diffusion.mask_options (multi)")
    return _plain_sampler("independent", int(options.get("samples", 2)))


@MASK_SAMPLERS.register("mirror")
def mirror_masks(options: dict):
    _known(options, (), "diffusion.mask_options (mirror)")
    return _plain_sampler("mirror", 2)


@MASK_SAMPLERS.register("isad")
def isad_masks(options: dict):
    where = "diffusion.mask_options (isad)"
    _known(options, ("rare_ids", "delta", "pairing", "samples"), where)
    rare = jnp.asarray(list(options.get("rare_ids", [])), jnp.int32)
    delta = float(options.get("delta", 0.2))
    if rare.size == 0 or not 0.0 < delta < 1.0:
        raise ValueError(f"{where}: needs non-empty rare_ids and 0 < delta < 1 (got {list(rare)}, {delta})")
    pairing, samples = _pairing(options, where)

    def sample(rng, x0, eligible, p):
        is_rare = jnp.isin(x0, rare)
        q = jnp.where(is_rare, jnp.minimum(1.0, p[:, None] + delta), p[:, None]).astype(jnp.float32)
        return _finish(_draw(rng, q, pairing, samples), q, eligible, default_token_weight(eligible))

    sample.samples = samples
    return sample


@MASK_SAMPLERS.register("syrm")
def syrm_masks(options: dict):
    where = "diffusion.mask_options (syrm)"
    _known(options, ("syntax_ids", "alpha", "pairing", "samples"), where)
    syntax = jnp.asarray(list(options.get("syntax_ids", [])), jnp.int32)
    alpha = float(options.get("alpha", 0.8))
    if syntax.size == 0 or not 0.0 < alpha <= 1.0:
        raise ValueError(f"{where}: needs non-empty syntax_ids and 0 < alpha <= 1 (got {list(syntax)}, {alpha})")
    pairing, samples = _pairing(options, where)

    def sample(rng, x0, eligible, p):
        response = eligible > 0
        # syntax tokens outside the response (the prompt's structure) become maskable too
        coord = jnp.isin(x0, syntax) & ~response & (x0 >= 0)
        maskable = (response | coord).astype(jnp.float32)
        q = jnp.broadcast_to(p[:, None], eligible.shape).astype(jnp.float32)
        n_resp = jnp.maximum(response.sum(-1, keepdims=True), 1)
        n_coord = coord.sum(-1, keepdims=True)
        has_coord = n_coord > 0
        w_resp = jnp.where(has_coord, alpha, 1.0) / n_resp
        w_coord = jnp.where(has_coord, (1.0 - alpha) / jnp.maximum(n_coord, 1), 0.0)
        token_weight = jnp.where(response, w_resp, jnp.where(coord, w_coord, 0.0)).astype(jnp.float32)
        return _finish(_draw(rng, q, pairing, samples), q, maskable, token_weight)

    sample.samples = samples
    return sample

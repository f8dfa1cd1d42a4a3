"""Measuring the per-sample loss variance of an MDM and its parts (spec sections 2 and 6).

  l_ijk: a x0's (i), b mask ratios t_ij from the method's t-sampler (j), c mask draws from its mask-sampler (k);
         l = w(t) * mean over the draw's K masks of the per-sample MDM loss (exactly the training objective).
  decompose(l)   A (masking pattern), B (masking rate), C (data) with the finite-sample corrections of §6:
      A = mean_ij s2_ij;  B = mean_i[var_j(g_ij) - mean_j(s2_ij)/c];  C = var_i(gbar_i) - mean_i[var_j(g_ij)]/b
      (g_ij = mean_k l_ijk, s2_ij = var_k(l_ijk, ddof=1), gbar_i = mean_j g_ij); total = var of all l_ijk.
  pair_correlation   rho(t) = corr(l1, l2 | x0, t) of the two masks of a pair (MIRROR, MultiSample-2).
  gradient_noise     tr Cov of the per-sample gradient: n E||g1 - g2||^2 / 2 over independent batches of n.
  batch stream       n Var(batch-mean loss) over batches of n fresh x0's, as trained (StraTS acts here), and
                     the same with the bin-wise EMA control variate (BinEMAControlVariate).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from shared.diffusion import masked_losses, p_mask


def decompose(losses) -> dict[str, float]:
    """A, B, C, their sum and the total variance of l [a, b, c] (module doc)."""
    l = np.asarray(losses, np.float64)
    if l.ndim != 3 or min(l.shape) < 2:
        raise ValueError(f"decompose: need losses [a, b, c] with every size >= 2, got {l.shape}")
    a, b, c = l.shape
    g = l.mean(2)
    s2 = l.var(2, ddof=1)
    var_g = g.var(1, ddof=1)
    A = s2.mean()
    B = float(np.mean(var_g - s2.mean(1) / c))
    C = float(g.mean(1).var(ddof=1) - var_g.mean() / b)
    total = float(l.reshape(-1).var(ddof=1))
    return {"A": float(A), "B": B, "C": C, "sum": float(A) + B + C, "total": total, "mean": float(l.mean())}


def per_sample_stats(logits_fn, x0, eligible, rng, t_sampler, mask_sampler, mask_id: int, eps: float):
    """(t [B], loss [B] = w * mean_K l_k, h [B]) for one batch as the training loss draws it; h = masked fraction
    minus its expectation (zero mean given t: the EMA control variate's control)."""
    t_rng, m_rng = jax.random.split(rng)
    t, w = t_sampler(t_rng, x0.shape[0])
    draw = mask_sampler(m_rng, x0, eligible, p_mask(t, eps))
    per_mask = masked_losses(logits_fn, x0, draw, mask_id)
    maskable = draw.token_weight > 0
    count = jnp.maximum(maskable.sum(-1), 1)
    fraction = (draw.masks & maskable[None]).sum(-1) / count
    expected = jnp.where(maskable[None], draw.probs, 0.0).sum(-1) / count
    return t, w * per_mask.mean(0), (fraction - expected).mean(0)


def sample_losses(loss_of_draw, x0, eligible, *, b: int, c: int, t_sampler, mask_sampler, eps: float,
                  seed: int = 0, chunk: int = 1024) -> np.ndarray:
    """l [a, b, c] of the module doc. loss_of_draw(x0 [N,T], draw) -> per-mask losses [K, N]."""
    a = x0.shape[0]
    rng = jax.random.key(seed)
    rng, t_rng = jax.random.split(rng)
    t, w = t_sampler(t_rng, a * b)
    # a stratified sampler assigns strata by position: shuffle so each x0 sees the whole range of t
    order = np.random.default_rng(seed).permutation(a * b)
    t, w = jnp.asarray(t)[order], jnp.asarray(w)[order]
    x0_rep, elig_rep = jnp.repeat(x0, b, axis=0), jnp.repeat(eligible, b, axis=0)
    out = np.zeros((a * b, c))
    for k in range(c):
        for s in range(0, a * b, chunk):
            sub = jax.random.fold_in(jax.random.fold_in(rng, k), s)
            rows = slice(s, s + chunk)
            draw = mask_sampler(sub, x0_rep[rows], elig_rep[rows], p_mask(t[rows], eps))
            out[rows, k] = np.asarray(w[rows] * loss_of_draw(x0_rep[rows], draw).mean(0))
    return out.reshape(a, b, c)


def pair_correlation(loss_of_draw, x0, eligible, *, ts, c: int, mask_sampler, eps: float, seed: int = 0
                     ) -> list[float]:
    """rho(t) for each t in ts: the correlation over c draws of the pair's two losses, averaged over the x0's."""
    rng = jax.random.key(seed)
    out = []
    for t in ts:
        pairs = []
        for k in range(c):
            rng, sub = jax.random.split(rng)
            p = jnp.full((x0.shape[0],), p_mask(float(t), eps), jnp.float32)
            draw = mask_sampler(sub, x0, eligible, p)
            if draw.masks.shape[0] != 2:
                raise ValueError("pair_correlation: the mask sampler must draw pairs (K = 2)")
            pairs.append(np.asarray(loss_of_draw(x0, draw)))
        l1, l2 = np.stack([p[0] for p in pairs]), np.stack([p[1] for p in pairs])  # [c, a]
        d1, d2 = l1 - l1.mean(0), l2 - l2.mean(0)
        denom = np.sqrt((d1 ** 2).sum(0) * (d2 ** 2).sum(0))
        valid = denom > 1e-12
        out.append(float(np.mean((d1 * d2).sum(0)[valid] / denom[valid])) if valid.any() else float("nan"))
    return out


class BinEMAControlVariate:
    """Bin-wise EMA control variate (spec section 3.6, open question Q7 settled as below).

    Per t-bin j, EMAs (rate eta) of the batch-bin means of L, H, L*H and H^2 give c_j = Cov(L, H) / Var(H);
    the adjusted loss is L - c_j * (H - E[H | t]) with H the sample's masked fraction, whose expectation given
    t is known exactly (E[H | t] = mean q), so the adjusted loss stays unbiased. H does not depend on the
    parameters, so the adjustment lowers the variance of the loss *value* but leaves every gradient unchanged
    (the same holds for the transcribed "subtract a detached bin baseline" form): it is measured here, not
    trained with. `h` passed in is already H - E[H | t]."""

    def __init__(self, bins: int = 8, rate: float = 0.05, eps: float = 1e-8):
        self.bins, self.rate, self.eps = int(bins), float(rate), float(eps)
        self.stats = np.zeros((self.bins, 4))  # E[L], E[H], E[LH], E[HH]
        self.seen = np.zeros(self.bins, bool)

    def coefficients(self) -> np.ndarray:
        mu_l, mu_h, m_lh, m_hh = self.stats.T
        return np.where(self.seen, (m_lh - mu_l * mu_h) / (m_hh - mu_h ** 2 + self.eps), 0.0)

    def __call__(self, t, loss, h) -> np.ndarray:
        """Adjusts a batch with the current coefficients, then updates the EMAs with it."""
        t, loss, h = (np.asarray(x, np.float64) for x in (t, loss, h))
        j = np.clip((t * self.bins).astype(int), 0, self.bins - 1)
        adjusted = loss - self.coefficients()[j] * h
        for b in np.unique(j):
            sel = j == b
            new = np.array([loss[sel].mean(), h[sel].mean(), (loss[sel] * h[sel]).mean(), (h[sel] ** 2).mean()])
            self.stats[b] = new if not self.seen[b] else (1 - self.rate) * self.stats[b] + self.rate * new
            self.seen[b] = True
        return adjusted


def gradient_noise(grad_fn, params, pool_batch, *, n: int, reps: int, seed: int = 0) -> float:
    """tr Cov of the per-sample gradient ~ n E||g1 - g2||^2 / 2, g1 and g2 gradients of two disjoint random
    batches of n rows of pool_batch (fresh x0's, t's and masks) with grad_fn(params, batch, rng)."""
    rows = next(iter(pool_batch.values())).shape[0]
    if 2 * n > rows:
        raise ValueError(f"gradient_noise: need 2n = {2 * n} rows, the pool has {rows}")
    rng_np = np.random.default_rng(seed)
    rng = jax.random.key(seed)
    total = 0.0
    for r in range(reps):
        pick = rng_np.permutation(rows)[: 2 * n]
        grads = []
        for half in (pick[:n], pick[n:]):
            rng, sub = jax.random.split(rng)
            grads.append(grad_fn(params, {k: v[half] for k, v in pool_batch.items()}, sub))
        diff = jax.tree.map(lambda x, y: jnp.sum(jnp.square(x.astype(jnp.float32) - y.astype(jnp.float32))), *grads)
        total += float(sum(jax.tree.leaves(diff)))
    return n * total / reps / 2.0

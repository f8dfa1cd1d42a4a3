"""P-POTS: the Pareto-optimal t-sampler (spec section 3.1).

Before fine-tuning, at the initial model theta0:
  grid t_j = j/b (j = 1..b-1); for a training examples x0_i and each t_j, c masks at p_j = (1-eps) t_j + eps;
  l_ijk = min(loss_max, per-sample MDM loss); m_ij = mean_k l_ijk, s2_ij = var_k(l_ijk, ddof=1);
  g_j = mean_i m_ij, v_j = mean_i s2_ij, w_j = sqrt(v_j + g_j^2)            (estimate_profile)
then fit the 7-parameter EPR density p(t) ∝ sqrt(a t^r + b (1-t)^q + (A exp(kappa t^m))^2) to w by minimising
KL(w_pdf || p_pdf) on the grid (scipy L-BFGS-B, n_starts restarts, seed 0; fit_epr), or use w itself
(fit = "grid": the released code's "lightweight fallback", kept as an ablation). Training draws t by inverse
CDF of the density and multiplies each sample's loss by 1/p(t) (shared.diffusion.GridDensity).

Support (open question Q3): the paper's grid sampler covers [1/b, 1 - 1/b] only, which leaves the estimator
unbiased for the truncated integral. support = "full" (default here) evaluates the EPR density on [0, 1]
(and extends the grid density flat to 0 and 1), so the IS estimator is unbiased for the whole uniform-t ELBO;
support = "grid" reproduces the paper's truncation.
"""
from __future__ import annotations

import json
import os
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from shared import sharding as sh
from shared.diffusion import GridDensity, T_SAMPLERS, make_mask_sampler, masked_losses, model_logits_fn, p_mask
from shared.diffusion.loss import mdm_inputs

EPR_Z0 = np.array([-0.3, 0.4, -1.0, 0.3, 0.2, -0.2, 0.2])
DEFAULTS = dict(n_x0=10, grid=70, n_masks=10, loss_max=10.0, fit="epr", n_starts=20, mix_uniform=0.0,
                support="full", max_weight=1e6, fine_grid=401)


def softplus(z):
    return np.logaddexp(0.0, z)


def epr_params(z) -> dict:
    """The code's parameterisation: a, b, A > 0; r, q >= 1; kappa > 0; m >= 1."""
    z = np.asarray(z, np.float64)
    return {"a": softplus(z[0]) + 1e-9, "r": 1 + softplus(z[1]), "b": softplus(z[2]) + 1e-9,
            "q": 1 + softplus(z[3]), "A": softplus(z[4]) + 1e-9, "kappa": softplus(z[5]), "m": 1 + softplus(z[6])}


def epr_unnormalised(t, params: dict):
    t = np.asarray(t, np.float64)
    v = params["a"] * t ** params["r"] + params["b"] * (1 - t) ** params["q"]
    g = params["A"] * np.exp(params["kappa"] * t ** params["m"])
    return np.sqrt(v + g * g)


def _pdf_on(grid, values):
    values = np.maximum(np.asarray(values, np.float64), 0.0)
    return values / max(np.trapezoid(values, grid), 1e-300)


def kl_on_grid(grid, target, model) -> float:
    p, q = np.clip(_pdf_on(grid, target), 1e-12, None), np.clip(_pdf_on(grid, model), 1e-12, None)
    return float(np.trapezoid(p * np.log(p / q), grid))


def fit_epr(grid, target, n_starts: int = 20, seed: int = 0) -> tuple[dict, float]:
    """(EPR params, KL) minimising KL(target_pdf || EPR_pdf) on the grid, best of n_starts L-BFGS-B runs."""
    from scipy.optimize import minimize

    rng = np.random.default_rng(seed)
    grid, target = np.asarray(grid, np.float64), np.asarray(target, np.float64)

    def objective(z):
        with np.errstate(over="ignore", invalid="ignore"):
            value = kl_on_grid(grid, target, epr_unnormalised(grid, epr_params(z)))
        return value if np.isfinite(value) else 1e6

    best_z, best = EPR_Z0, objective(EPR_Z0)
    for _ in range(int(n_starts)):
        z0 = EPR_Z0 + rng.normal(0.0, 0.6, size=7)
        result = minimize(objective, z0, method="L-BFGS-B")
        if result.fun < best:
            best_z, best = result.x, float(result.fun)
    return epr_params(best_z), best


def estimate_profile(loss_of_draw, x0, eligible, *, grid: int, n_masks: int, loss_max: float, eps: float,
                     seed: int = 0) -> dict[str, np.ndarray]:
    """{t, g, v, w, m [a, b-1], s2 [a, b-1], second [b-1]} of the estimation pass above.

    loss_of_draw(x0, draw) -> per-mask losses [K, B] at the initial model (jitted by the caller)."""
    sampler = make_mask_sampler("independent", {"samples": int(n_masks)})
    ts = np.arange(1, grid) / grid
    rng = jax.random.key(seed)
    means, variances = [], []
    for t in ts:
        rng, sub = jax.random.split(rng)
        p = jnp.full((x0.shape[0],), p_mask(float(t), eps), jnp.float32)
        draw = sampler(sub, x0, eligible, p)
        losses = np.minimum(np.asarray(loss_of_draw(x0, draw), np.float64), loss_max)  # [c, a]
        means.append(losses.mean(0))
        variances.append(losses.var(0, ddof=1))
    m, s2 = np.stack(means, 1), np.stack(variances, 1)  # [a, b-1]
    g, v = m.mean(0), s2.mean(0)
    return {"t": ts, "g": g, "v": v, "w": np.sqrt(v + g * g), "m": m, "s2": s2, "second": (s2 + m * m).mean(0)}


def _flat_extend(ts, values):
    """Values on [0, 1]: the grid's end values held constant on [0, t_1] and [t_{b-1}, 1]."""
    return np.concatenate([[0.0], ts, [1.0]]), np.concatenate([[values[0]], values, [values[-1]]])


def density_from_profile(profile: dict, options: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    """(grid, density, info) of the sampler: EPR fit or the grid estimate, full or grid support, uniform mix.
    Full support holds the density flat outside [t_1, t_{b-1}] rather than extrapolating the EPR curve, whose
    (1-t)^q term can put a spike on [0, t_1] where nothing was measured."""
    ts, w = profile["t"], profile["w"]
    info: dict[str, Any] = {}
    if options["support"] not in ("full", "grid"):
        raise ValueError(f"mdm_variance.ppots.support={options['support']!r}: expected 'full' or 'grid'")
    if options["fit"] == "epr":
        params, kl = fit_epr(ts, w, n_starts=int(options["n_starts"]))
        info.update(epr={k: float(v) for k, v in params.items()}, epr_kl=kl)
        grid = np.linspace(ts[0], ts[-1], int(options["fine_grid"]))
        density = epr_unnormalised(grid, params)
    elif options["fit"] == "grid":
        grid, density = ts, w
    else:
        raise ValueError(f"mdm_variance.ppots.fit={options['fit']!r}: expected 'epr' or 'grid'")
    if options["support"] == "full":
        grid, density = _flat_extend(grid, density)
    density = _pdf_on(grid, density)
    lam = float(options["mix_uniform"])
    if lam:
        density = _pdf_on(grid, (1 - lam) * density + lam)
    return grid, density, info


def predicted_variance(profile: dict, grid, density) -> dict[str, float]:
    """Per-sample loss variance predicted from the estimation pass (spec section 2.1) for t ~ U(0, 1) and for
    t ~ p with weight 1/p: int E[l^2|t]/p dt - (int g dt)^2, with E[l^2|t] = g^2 + v ("marginal", the paper's)
    or the measured second moment ("exact", which also holds Var_x0 g(x0, t)). The grid values are held flat
    outside [t_1, t_{b-1}]; the optimum (int sqrt(g^2 + v))^2 - (int g)^2 is the marginal version's floor."""
    fine = np.linspace(0.0, 1.0, 4001)  # grid values linear in between, like the sampler's density

    def on_fine(values):
        return np.interp(fine, *_flat_extend(profile["t"], values))

    g = on_fine(profile["g"])
    p = np.maximum(np.interp(fine, grid, density), 1e-12)
    mean = np.trapezoid(g, fine)
    out = {}
    for name, values in (("marginal", profile["g"] ** 2 + profile["v"]), ("exact", profile["second"])):
        second = on_fine(values)
        out[f"predicted_uniform_{name}"] = float(np.trapezoid(second, fine) - mean ** 2)
        out[f"predicted_ppots_{name}"] = float(np.trapezoid(second / p, fine) - mean ** 2)
    w = np.sqrt(on_fine(profile["g"] ** 2 + profile["v"]))
    out["predicted_optimal_marginal"] = float(np.trapezoid(w, fine) ** 2 - mean ** 2)
    return out


class PPOTSSampler:
    """T_SAMPLERS "mdm_variance/ppots": prepared once at theta0 (or loaded from <workdir>/ppots.json), then
    a shared.diffusion.GridDensity sampler."""

    def __init__(self, options: dict):
        unknown = sorted(set(options) - set(DEFAULTS) - {"eps"})
        if unknown:
            raise ValueError(f"diffusion.t_options (mdm_variance/ppots): unknown option(s) {unknown}; "
                             f"known: {sorted(DEFAULTS)}")
        self.options = {**DEFAULTS, **options}
        self.density: GridDensity | None = None
        self.record: dict = {}

    def prepare(self, trainer, batches, helper: dict) -> dict:
        """Estimates and fits at the trainer's current parameters on the x0's of `batches` (numpy rows);
        helper: mask_id, eos_id, options (config.diffusion), optional path of the record (ppots.json)."""
        path = helper.get("path") or os.path.join(trainer.workdir, "ppots.json")
        if os.path.exists(path):
            with open(path) as f:
                self.record = json.load(f)
        else:
            if not batches:
                raise ValueError("mdm_variance/ppots: the estimation pass needs example rows (train.eval_batches > 0 "
                                 "in the mdm task)")
            opts = helper["options"]
            rows = {k: np.concatenate([b[k] for b in batches])[: int(self.options["n_x0"])] for k in batches[0]}
            x0, eligible, segment_ids, positions = mdm_inputs({k: jnp.asarray(v) for k, v in rows.items()},
                                                              "sft" if opts.stage == "sft" else "pretrain",
                                                              opts.answer_padding, helper["eos_id"])

            @jax.jit
            def loss_of_draw(params, x0, draw):
                logits_fn = model_logits_fn(trainer.graphdef, params, trainer.attention, segment_ids, positions)
                return masked_losses(logits_fn, x0, draw, helper["mask_id"])

            with sh.use_mesh(trainer.mesh, trainer.rules):
                profile = estimate_profile(lambda x, d: loss_of_draw(trainer.params, x, d), x0, eligible,
                                           grid=int(self.options["grid"]), n_masks=int(self.options["n_masks"]),
                                           loss_max=float(self.options["loss_max"]), eps=float(opts.eps))
            grid, density, info = density_from_profile(profile, self.options)
            self.record = {"grid": grid.tolist(), "density": density.tolist(), **info,
                           "profile": {k: np.asarray(v).tolist() for k, v in profile.items() if k not in ("m", "s2")},
                           **predicted_variance(profile, grid, density)}
            if jax.process_index() == 0:
                with open(path + ".tmp", "w") as f:
                    json.dump(self.record, f)
                os.replace(path + ".tmp", path)
        self.density = GridDensity(self.record["grid"], self.record["density"], float(self.options["max_weight"]))
        return self.record

    def prepare_abstract(self) -> None:
        """A stand-in density on the grid `prepare` would fit (uniform values, same number of points), so the
        training step can be compiled ahead of time without the estimation pass at theta0 (shared.aot)."""
        b = int(self.options["grid"])
        points = int(self.options["fine_grid"]) if self.options["fit"] == "epr" else b - 1
        points += 2 if self.options["support"] == "full" else 0
        grid = np.linspace(0.0, 1.0, points)
        self.density = GridDensity(grid, np.ones_like(grid), float(self.options["max_weight"]))

    def __call__(self, rng, n):
        if self.density is None:
            raise RuntimeError("mdm_variance/ppots: the sampler must be prepared at theta0 before training "
                               "(the mdm task calls prepare(); elsewhere call it yourself)")
        return self.density(rng, n)


T_SAMPLERS.register("mdm_variance/ppots", PPOTSSampler)

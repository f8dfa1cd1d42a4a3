"""The compared training methods (spec sections 3 and 7.2) as (t-sampler, mask-sampler) pairs plus extras.

A method is a name in METHODS; `config.mdm_variance.method` picks it and `build_samplers` turns it into the
shared.diffusion samplers (options from config.mdm_variance). "custom" uses config.diffusion as written.
"""
from __future__ import annotations

import ml_collections

from shared.diffusion import make_mask_sampler, make_t_sampler
from projects.mdm_variance.data import delimiter_ids, syntax_ids

# name -> t-sampler, mask-sampler, batch multiplier (compute-matched control), model kind, control variate
METHODS = {
    "standard": dict(t="uniform", mask="independent"),
    "standard_2x": dict(t="uniform", mask="independent", batch_multiplier=2),   # MIRROR's compute control
    "multisample2": dict(t="uniform", mask="multi"),                           # MIRROR's independent control
    "clipped": dict(t="clipped", mask="independent"),
    "ppots": dict(t="mdm_variance/ppots", mask="independent"),
    "mirror": dict(t="uniform", mask="mirror"),
    "ppots_mirror": dict(t="mdm_variance/ppots", mask="mirror"),
    "stratts": dict(t="stratified", mask="independent"),
    "isad": dict(t="uniform", mask="isad"),
    "syrm": dict(t="uniform", mask="syrm"),
    "ema": dict(t="uniform", mask="independent", control_variate=True),        # measured, not trained (Q7)
    "arm": dict(kind="arm"),
    "custom": dict(),
}


def project_config() -> ml_collections.ConfigDict:
    """config.mdm_variance with its defaults (the experiments start from this)."""
    c = ml_collections.ConfigDict()
    c.method = "standard"         # METHODS name
    c.seeds = 5                   # fine-tuning replicas per point: seeds seed, seed+1, ... (one process)
    c.eval_examples = 500         # held-out problems decoded greedily per seed
    c.compile_cache = "auto"      # jax persistent compilation cache: auto = <workdir>/../_jax_cache, "" = off
    c.theta0 = ml_collections.ConfigDict(dict(
        steps=2000, batch_size=128, lr=1e-3, warmup_steps=100, n_examples=20000, data_seed=4321, seed=0,
        dir="", run="", checkpoint_every=0))
    # stage A; dir "" = <workdir>/../_theta0/<hash> (shared by a sweep's points); run: a finished
    # "mdm_variance/theta0" stage's workdir (a sweep's "{stage:NAME}"), used instead of training theta0 here;
    # checkpoint_every 0 = at the end only
    c.ppots = ml_collections.ConfigDict(dict(
        n_x0=12, grid=70, n_masks=12, loss_max=10.0, fit="epr", n_starts=20, mix_uniform=0.0, support="full"))
    c.clipped_low, c.clipped_high = 0.2, 0.8   # Q8 placeholder range
    c.strata = 8                  # StraTS k
    c.isad_delta = 0.2            # Q6 placeholder
    c.syrm_alpha = 0.8            # Q6 placeholder
    c.variance = ml_collections.ConfigDict(dict(
        a=64, b=32, c=16,         # x0's, t's per x0, mask draws per (x0, t)
        rho_ts=[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9], rho_c=16,
        batch=32, batch_reps=64,  # batch-mean variance (StraTS, EMA) over batch_reps batches of `batch`
        grad_reps=20,             # gradient-noise repetitions (batches of `batch`)
        ema_bins=8, ema_rate=0.05, chunk=1024))
    return c


def method_spec(name: str) -> dict:
    if name not in METHODS:
        raise ValueError(f"mdm_variance.method={name!r}: unknown; known: {', '.join(sorted(METHODS))}")
    return METHODS[name]


def build_samplers(config, tokenizer):
    """(t_sampler, mask_sampler) of config.mdm_variance.method."""
    opts = config.mdm_variance
    spec = method_spec(opts.method)
    if opts.method == "custom" or spec.get("kind") == "arm":
        d = config.diffusion
        return make_t_sampler(d.t_sampler, d.t_options), make_mask_sampler(d.mask_sampler, d.mask_options)
    t_options = {"uniform": {}, "clipped": {"low": opts.clipped_low, "high": opts.clipped_high},
                 "stratified": {"strata": opts.strata},
                 "mdm_variance/ppots": opts.ppots.to_dict()}[spec["t"]]
    mask_options = {"independent": {}, "multi": {"samples": 2}, "mirror": {},
                    "isad": {"rare_ids": delimiter_ids(tokenizer), "delta": opts.isad_delta},
                    "syrm": {"syntax_ids": syntax_ids(tokenizer), "alpha": opts.syrm_alpha}}[spec["mask"]]
    return make_t_sampler(spec["t"], t_options), make_mask_sampler(spec["mask"], mask_options)

"""Per-sample loss variance and its decomposition A (masking pattern) + B (masking rate) + C (data) at
theta0, for the ARM and each MDM training method (spec section 6; claims V1 and V2).

    python -m shared.sweep --config=experiments/mdm_variance/variance.py --workdir=runs/mdm_variance/variance \
        --parallel=6 --config.mesh.preset=gpu_1
    python -m shared.launch --config=experiments/mdm_variance/variance.py:smoke --workdir=/tmp/mdmv_var   # CI

One point per method on T1 (ChainArith), the same held-out x0 pool: a=64 x0's x b=32 t's x c=16 mask draws.
Columns: A, B, C, total, sum (= A+B+C; the check |total - sum| <= 10 % of total), batch_var (n Var of the
batch-mean loss, where StraTS acts), batch_var_ema (with the bin-wise EMA control variate), grad_noise
(tr Cov of the per-sample gradient), rho/mean_below_half (MIRROR's pair correlation for t < 0.5).
Paper: qualitative only (A + B dominate an MDM's variance; an ARM has only C; P-POTS, MIRROR and both lower it).
"""
from experiments.mdm_variance._common import small_config

METHODS = ("arm", "standard", "clipped", "stratts", "ema", "isad", "ppots", "mirror", "multisample2",
           "ppots_mirror")


def get_config(arg=None):
    if arg not in (None, "smoke"):
        raise ValueError(f"experiments/mdm_variance/variance.py: unknown variant {arg!r} (known: smoke)")
    c = small_config("t1", smoke=arg == "smoke")
    c.task = "mdm_variance/variance"
    return c


def get_sweep(arg=None):
    methods = ("arm", "standard", "ppots_mirror") if arg == "smoke" else METHODS
    return dict(name="variance",
                points=[dict(name=m, overrides={"mdm_variance.method": m}, arg=arg) for m in methods],
                columns=["A", "B", "C", "total", "sum", "decomposition_error", "batch_var", "batch_var_ema",
                         "grad_noise", "rho/mean_below_half", "ppots/predicted_ppots_exact",
                         "ppots/predicted_uniform_exact"],
                plot=dict(kind="bars", metric="total"))

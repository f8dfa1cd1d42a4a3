"""Per-sample loss variance and its decomposition A (masking pattern) + B (masking rate) + C (data) at
theta0, for the ARM and each MDM training method (spec section 6; claims V1 and V2); its "spec" sweep is the
re-run of every claim (V1, V2 and V3) at the spec's section-7 design.

    python -m shared.sweep --config=experiments/mdm_variance/variance.py --workdir=runs/mdm_variance/variance \
        --parallel=6 --config.mesh.preset=gpu_1
    python -m shared.launch --config=experiments/mdm_variance/variance.py:smoke --workdir=/tmp/mdmv_var   # CI

One point per method on T1 (ChainArith), the same held-out x0 pool: a=64 x0's x b=32 t's x c=16 mask draws.
Columns: A, B, C, total, sum (= A+B+C; the check |total - sum| <= 10 % of total), batch_var (n Var of the
batch-mean loss, where StraTS acts), batch_var_ema (with the bin-wise EMA control variate), grad_noise
(tr Cov of the per-sample gradient), rho/mean_below_half (MIRROR's pair correlation for t < 0.5).
Paper: qualitative only (A + B dominate an MDM's variance; an ARM has only C; P-POTS, MIRROR and both lower it).

The "spec" sweep (the re-run of issue 20; campaign entry mdm_variance_spec), one command:

    python -m shared.sweep --config=experiments/mdm_variance/variance.py:spec --workdir=runs/mdm_variance_spec \
        --parallel=16

  stages  theta0 per (task, kind), shared by every point of that task and kind (mdm_variance.theta0.run =
          "{stage:theta0_<task>_<kind>}"; task "mdm_variance/theta0", its greedy accuracy in the stage's summary
          as acc/theta0). The legacy MDM theta0 (1,500 steps x 128 rows, 20k examples) sat at chance on T1 (0.018
          against 0.01 for a guess; ARM 0.616): here the MDM theta0 is 20,000 steps x 256 rows over 400k distinct
          problems (27x the rows, 17x fewer repeats), cosine from lr 1e-3 after 500 warm-up steps, checkpointed every
          2,500 steps so a stage cut by a lease resumes. The ARM theta0 stays at the legacy recipe (2,000 x 128):
          it is the spread reference and already off chance (0.616), and a longer one would put it at the ceiling.
  V3      acc_<task>_<method>: SFT from that theta0, 10 seeds in one process (seeds 0-9: step rng and data order,
          theta0 fixed, as in the paper), 1,500 steps (the spec's length; legacy 600) x 64 on 5,000 examples,
          500 held-out problems decoded greedily per seed. Methods: standard, the two compute-matched controls
          (standard_2x, multisample2), mirror, ppots, ppots_mirror and the ARM, on T1 and T2. acc/seeds in the
          manifest gives the paired-by-seed differences and the spread (10 seeds per arm).
  V1, V2  var_<task>_<method>_s<k>: the decomposition at the same theta0, repeated with measurement seeds k
          (fresh t's, masks, pairs and gradient batches over the same x0 pool): 5 on T1, 3 on T2, so A, B, C,
          total, rho(t) and grad_noise come with a spread. Methods: arm, standard, ppots, mirror, multisample2,
          ppots_mirror. rho(t) now starts at t = 0.02 (the legacy grid started at 0.1, where MIRROR's A anomaly
          could not be resolved) and grad_noise uses 40 repetitions (20 gave a heavy-tailed estimate).
  group   by arm (acc_t1_standard, var_t1_standard, ...): points of an arm differ only in the measurement seed.

GPU cost (estimated from committed measurements; nothing of this sweep has run):
  step time  results/accuracy/manifest.json, point t1_arm: 94.7 s for ARM theta0 (1,500 x 128) + 5 SFT seeds
             (600 x 64) + 6 greedy evaluations + 5 held-out NLLs on a shared H200, i.e. <= 21 ms per step with its
             evaluations and compile; the MDM's step is the same network (+ the masking), batch 256 x 63 tokens
             is 16k tokens/step, launch-bound at this size: take 20-25 ms/step.
  theta0     MDM 20,000 steps x ~22 ms = ~7.5 min each (T1, T2); ARM 2,000 steps: ~1 min each. ~17 GPU-min.
  V3         per seed 1,500 steps x ~15 ms + decoding 500 problems + ELBO ~ 25-30 s (x2 batch or two passes for
             standard_2x / multisample2 / mirror); 10 seeds ~ 5 min a point; 14 points ~ 70 GPU-min.
  V1, V2     results/variance/manifest.json: 7-40 s a method at theta0 (ppots 24.5 s, mirror 37.4 s,
             multisample2 39.5 s) + python/jax start-up: ~45 s a point with the longer rho grid and 40 gradient
             repetitions; 48 points ~ 36 GPU-min.
  total      ~125 GPU-min; on 4 H100s with --parallel=16 (tiny models: 4 points per GPU) ~ 10 min of theta0
             stages, then ~27 min of points: ~40 min wall. The theta0 stages come first: check acc/theta0 of
             theta0_t1_mdm in the manifest (it has to be off 0.01) before reading any T1 row.
:spec_smoke is the same sweep at the smoke sizes (tests/test_experiments.py validates its points;
projects/mdm_variance/tests/test_smoke.py runs a theta0 stage and a point that reads it).
"""
from experiments.mdm_variance._common import TASKS, small_config

METHODS = ("arm", "standard", "clipped", "stratts", "ema", "isad", "ppots", "mirror", "multisample2",
           "ppots_mirror")
COLUMNS = ["A", "B", "C", "total", "sum", "decomposition_error", "batch_var", "batch_var_ema",
           "grad_noise", "rho/mean_below_half", "ppots/predicted_ppots_exact", "ppots/predicted_uniform_exact"]

# -- the "spec" sweep (module doc) ---------------------------------------------------------------------------------
SWEEP_VARIANTS = ("spec", "spec_smoke")  # get_sweep variants beside "" and "smoke" (tests/test_experiments.py)
KINDS = ("spec", "spec_acc", "theta0")   # get_config("<kind>[_t2][_smoke]")
VARIANTS = tuple(f"{k}{t}" for k in KINDS for t in ("", "_t2"))  # validated by tests/test_experiments.py
SPEC_THETA0 = dict(steps=20000, batch_size=256, lr=1e-3, warmup_steps=500, n_examples=400000, checkpoint_every=2500)
ARM_THETA0 = dict(steps=2000, batch_size=128, warmup_steps=100, n_examples=20000)  # the legacy recipe
SFT_STEPS = 1500
ACC_SEEDS = 10
ACC_METHODS = ("standard", "standard_2x", "multisample2", "mirror", "ppots", "ppots_mirror", "arm")
VAR_METHODS = ("arm", "standard", "ppots", "mirror", "multisample2", "ppots_mirror")
VAR_SEEDS = {"t1": 5, "t2": 3}
RHO_TS = [0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
SPEC_COLUMNS = ["acc/mean", "acc/std", "acc/min", "acc/max", "acc/theta0", "elbo/mean", "nll/mean", *COLUMNS,
                "rho/t0.02", "rho/t0.05", "wall_time_s"]


def get_config(arg=None):
    if arg in (None, "smoke"):
        c = small_config("t1", smoke=arg == "smoke")
        c.task = "mdm_variance/variance"
        return c
    return spec_config(arg)


def spec_config(arg: str):
    """get_config("<kind>[_t2][_smoke]"): kind spec (a variance point), spec_acc (a V3 point), theta0 (a stage)."""
    name, smoke = (arg[:-len("_smoke")], True) if arg.endswith("_smoke") else (arg, False)
    name, task = (name[:-len("_t2")], "t2") if name.endswith("_t2") else (name, "t1")
    if name not in KINDS:
        raise ValueError(f"experiments/mdm_variance/variance.py: unknown variant {arg!r} (known: smoke and "
                         f"<{'|'.join(KINDS)}>[_t2][_smoke])")
    c = small_config(task, smoke=smoke)
    c.task = {"spec": "mdm_variance/variance", "spec_acc": "mdm_variance/finetune", "theta0": "mdm_variance/theta0"}[name]
    if not smoke:
        c.mdm_variance.theta0.update(SPEC_THETA0)
        c.train.steps = SFT_STEPS
        c.mdm_variance.seeds = ACC_SEEDS
        c.mdm_variance.variance.rho_ts = list(RHO_TS)
        c.mdm_variance.variance.grad_reps = 40
    else:
        c.mdm_variance.theta0.checkpoint_every = 1
    return c


def get_sweep(arg=None):
    if arg in ("spec", "spec_smoke"):
        return spec_sweep(smoke=arg == "spec_smoke")
    methods = ("arm", "standard", "ppots_mirror") if arg == "smoke" else METHODS
    return dict(name="variance",
                points=[dict(name=m, overrides={"mdm_variance.method": m}, arg=arg) for m in methods],
                columns=COLUMNS, plot=dict(kind="bars", metric="total"))


def spec_sweep(smoke: bool):
    suffix = "_smoke" if smoke else ""
    tasks = ("t1",) if smoke else tuple(TASKS)
    stages, points = [], []
    for task in tasks:
        t = "" if task == "t1" else "_t2"
        for kind in ("mdm", "arm"):
            overrides = {"mdm_variance.method": "arm" if kind == "arm" else "standard"}
            if kind == "arm" and not smoke:
                overrides.update({f"mdm_variance.theta0.{k}": v for k, v in ARM_THETA0.items()})
            stages.append(dict(name=f"theta0_{task}_{kind}", arg=f"theta0{t}{suffix}", overrides=overrides))

        def run(method):
            return {"mdm_variance.theta0.run": f"{{stage:theta0_{task}_{'arm' if method == 'arm' else 'mdm'}}}"}

        for method in (("standard", "mirror", "arm") if smoke else ACC_METHODS):
            points.append(dict(name=f"acc_{task}_{method}", arg=f"spec_acc{t}{suffix}", arm=f"acc_{task}_{method}",
                               overrides={"mdm_variance.method": method, **run(method)}))
        for method in (("standard", "mirror", "arm") if smoke else VAR_METHODS):
            for seed in range(2 if smoke else VAR_SEEDS[task]):
                points.append(dict(name=f"var_{task}_{method}_s{seed}", arg=f"spec{t}{suffix}",
                                   arm=f"var_{task}_{method}",
                                   overrides={"mdm_variance.method": method, "seed": seed, **run(method)}))
    return dict(name="mdm_variance_spec", stages=stages, points=points, columns=SPEC_COLUMNS, group=["arm"],
                plot=dict(kind="bars", metric="total"))

"""All small-scale tables of the DIR spec (section 4, ../shared/papers/dir_debias.md) in one sweep, so the GPU plan
is three rounds of 6 parallel points: D1 (SynPref, length bias) with every section-4.3 condition and the gamma sweep
(0.1 / 1 / 10), D1-NL (non-monotone bias: BT, Pearson, DIR) and D2 (HH-RLHF harmless + injected closers: BT,
Pearson, DIR). Every point trains 3 seeds in one process and reports mean, "/std" and "per_seed/" values;
best-of-16 runs on D1 and D1-NL points.

    python -m shared.sweep --config=experiments/dir_debias/small_scale.py --workdir=runs/dir_debias/small_scale \
        --parallel=6 --config.mesh.preset=gpu_1

Variants: d1 (default), nl, hh and their CI versions smoke (= d1 smoke), nl_smoke, hh_smoke. The per-setting
files (synpref_length.py, synpref_nonmonotone.py, hh_harmless.py) hold the configs and their own sweeps.
Committed results: projects/dir_debias/results/small_scale_spec/ (the ":spec" table; the legacy default table was removed).

":spec" is the re-run at the spec's design (section 4.3; issue 20, campaign entry dir_debias_spec), one command:

    python -m shared.sweep --config=experiments/dir_debias/small_scale.py:spec --workdir=runs/dir_debias_spec \
        --parallel=12

  why       the legacy table's BT learned only the shortcut in 500 steps (D1 balanced 0.52 against the oracle's
            0.75), so every "DIR debiases at small cost" row sat at chance, and DIR at gamma >= 1 with no warm-up
            collapsed the RM to chance (train BT loss ln 2).
  stages    warm_<setting>_s<k>: per setting and seed, plain BT (task "rm", no penalty) for the first WARM steps
            (D1, D1-NL: 1,000 of the spec's 3,000; D2: 300 of 1,000). Every arm of that seed continues from it
            (train.init_from = "run:{stage:...}"), so arms share their initialisation and the BT phase, the ledger
            pairs them by seed, and the penalty starts on an RM that already reads quality (the penalty warm-up).
  arms      for the remaining steps (D1/D1-NL 2,000, D2 700), seed k: bt (gamma 0), pearson (lambda 1), poe, DIR
            gamma 0.1 / 0.2 / 0.3 / 0.5 / 1 (D1; D1-NL and D2: 0.2 and 0.5), each DIR arm with dir.warmup_steps = 100
            (q_psi refits 5 x 100 times on the warm RM's z before the penalty applies); oracle (D1: BT on rho 0.5
            data) from scratch for the whole 3,000 steps, with the same seed's initial parameters as the stage.
  seeds     5 on D1 (claims 2, 3, 5, 6), 3 on D1-NL and D2: D1 9 arms x 5 + D1-NL 4 x 3 + D2 4 x 3 = 69 points,
            11 stages. One seed per point (dir.seeds = [], i.e. config.seed); its summary keeps the per-seed keys.
  cost      legacy manifest (results/small_scale/manifest.json, in git history at e455c89; 4 H200 shared by 6
            points): 500 steps took 7.4-25 s of trainer time (15-50 ms a step at 128 x 64 tokens, 4.3M parameters) and a 3-seed point 67-119 s with its
            evaluation (probes, MI estimators, best-of-16 on 2,000 prompts). A D1 point here: 2,000 steps x ~30 ms
            = 60 s + evaluation ~15 s + start-up ~20 s ~ 1.6 min; stages 1,000 steps ~ 1 min; D2 (256 tokens x 64
            pairs) ~ the same. 69 points + 11 stages ~ 125 GPU-min at one point per GPU; these 4M models leave an
            H100 mostly idle, so --parallel=12 on 4 H100s (3 a GPU) ~ 15 min of wall time, ~60 GPU-min held.
            Measured 2026-11-28: one H200 (16 CPUs), 12 at once, 78 of the 80 stages and points in ~28 min of wall
            time (3 back-to-back 9-minute calls): ~30 GPU-min on one H200.
":spec_smoke" builds the same sweep at the smoke sizes (tests/test_experiments.py checks its points).
"""
from experiments.dir_debias import hh_harmless, synpref_length, synpref_nonmonotone
from experiments.dir_debias._common import COLUMNS, CONDITIONS, sweep_points

FILE = "experiments/dir_debias/small_scale.py"
SETTINGS = {"d1": synpref_length, "nl": synpref_nonmonotone, "hh": hh_harmless}
VARIANTS = ("nl", "hh", "nl_smoke", "hh_smoke", "spec_d1", "spec_nl", "spec_hh", "warm_d1", "warm_nl", "warm_hh")
SWEEP_VARIANTS = ("spec", "spec_smoke")  # get_sweep variants beside "" and "smoke" (tests/test_experiments.py)
SPEC_TOTAL = {"d1": 3000, "nl": 3000, "hh": 1000}
SPEC_WARM = {"d1": 1000, "nl": 1000, "hh": 300}
SPEC_SEEDS = {"d1": (0, 1, 2, 3, 4), "nl": (0, 1, 2), "hh": (0, 1, 2)}
SPEC_GAMMAS = {"d1": (0.1, 0.2, 0.3, 0.5, 1.0), "nl": (0.2, 0.5), "hh": (0.2, 0.5)}
SPEC_BASELINES = {"d1": ("bt", "pearson", "poe"), "nl": ("bt", "pearson"), "hh": ("bt", "pearson")}
DIR_WARMUP = 100
SPEC_COLUMNS = [c for c in COLUMNS if c not in ("eval/bias_gap/std", "eval/anti/accuracy/std")]


def spec_config(arg: str):
    """get_config("spec_<setting>[_smoke]") (an arm) or ("warm_<setting>[_smoke]") (its seed's BT stage)."""
    kind, _, rest = arg.partition("_")
    setting, _, smoke = rest.partition("_")
    if kind not in ("spec", "warm") or setting not in SETTINGS or smoke not in ("", "smoke"):
        raise ValueError(f"{FILE}: unknown variant {arg!r} (known: <spec|warm>_<d1|nl|hh>[_smoke])")
    c = SETTINGS[setting].get_config("smoke" if smoke else None)
    if kind == "warm":
        c.task = "rm"   # plain BT (shared.rm), the RM at the workdir's root: a stage the arms start from
        c.rm.loss_hooks = []
        if not smoke:
            c.train.steps = c.train.checkpoint_every = SPEC_WARM[setting]
    elif not smoke:
        c.train.steps = c.train.checkpoint_every = SPEC_TOTAL[setting] - SPEC_WARM[setting]
        c.train.eval_every = 500
        c.dir.warmup_steps = DIR_WARMUP
    if kind == "spec":
        c.dir.seeds = []  # config.seed: one seed per point, each point starting from its seed's stage
    return c


def spec_sweep(smoke: bool):
    suffix = "_smoke" if smoke else ""
    stages, points = [], []
    for setting in SETTINGS:
        seeds = SPEC_SEEDS[setting][:1] if smoke else SPEC_SEEDS[setting]
        arms = {name: dict(CONDITIONS[name]) for name in SPEC_BASELINES[setting]}
        for gamma in SPEC_GAMMAS[setting][:1] if smoke else SPEC_GAMMAS[setting]:
            arms[f"dir_g{gamma:g}"] = {"rm.loss_hooks": ["dir_debias/club"], "dir.gamma": gamma}
        for seed in seeds:
            stage = f"warm_{setting}_s{seed}"
            stages.append(dict(name=stage, arg=f"warm_{setting}{suffix}", overrides={"seed": seed}))
            for name, overrides in arms.items():
                points.append(dict(name=f"{setting}_{name}_s{seed}", arm=f"{setting}_{name}", arg=f"spec_{setting}{suffix}",
                                   overrides={**overrides, "seed": seed,
                                              "train.init_from": f"run:{{stage:{stage}}}"}))
            if setting == "d1":  # BT on unbiased data, from scratch for the whole schedule (no stage)
                points.append(dict(name=f"d1_oracle_s{seed}", arm="d1_oracle", arg=f"spec_d1{suffix}",
                                   overrides={**CONDITIONS["oracle"], "seed": seed,
                                              "train.steps": 3 if smoke else SPEC_TOTAL["d1"],
                                              "train.checkpoint_every": 3 if smoke else SPEC_TOTAL["d1"],
                                              "dir.warmup_steps": 0}))
    return dict(name="small_scale_spec", stages=stages, points=points, columns=SPEC_COLUMNS, group=["arm"],
                plot=dict(kind="bars", metric="eval/balanced/accuracy"))


def get_config(arg=None):
    if arg and arg.startswith(("spec_", "warm_")):
        return spec_config(arg)
    name = arg or "d1"
    setting, _, smoke = name.partition("_")
    if name == "smoke":
        setting, smoke = "d1", "smoke"
    if setting not in SETTINGS or smoke not in ("", "smoke"):
        raise ValueError(f"{FILE}: unknown variant {arg!r} (known: d1, nl, hh, smoke, nl_smoke, hh_smoke)")
    return SETTINGS[setting].get_config("smoke" if smoke else None)


def get_sweep(arg=None):
    if arg in ("spec", "spec_smoke"):
        return spec_sweep(smoke=arg == "spec_smoke")
    smoke = arg is not None and arg.endswith("smoke")
    points = []
    for setting, module in SETTINGS.items():
        variant = (("smoke" if setting == "d1" else f"{setting}_smoke") if smoke else
                   (None if setting == "d1" else setting))
        for point in sweep_points(module.POINTS, variant):
            point["name"] = f"{setting}_{point['name']}"
            points.append(point)
    return dict(name="small_scale", points=points, columns=COLUMNS,
                plot=dict(kind="bars", metric="eval/anti/accuracy"))

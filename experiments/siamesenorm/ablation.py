"""SiameseNorm ablation (spec §1.6 and §5.3 P2; paper Table 3 at toy scale).

Paper (1.3B, LR 1e-3, PPL), normalized input / depth scaling / topology: original HybridNorm without depth
scaling diverges; original + depth scaling 10.65; ResiDual 11.68 (spikes); Siamese without either 10.88;
input norm only 10.68; depth scaling only 10.51; both 10.43.

Here: the lr_stability recipe at LR 2.4e-2 (its highest, where instability shows if it shows at all) with
the hybrid form, as in the paper: SiameseNorm-hybrid full, without input norm, without depth scaling;
HybridNorm single stream ("original") without and with depth scaling; ResiDual. Seed 1 throughout: the rows
that lr_stability also runs at this LR (seed 0: siamese_hybrid, hybridnorm, residual, and prenorm for
reference) then give a second seed instead of a duplicate. The row with neither input norm nor depth
scaling is left out to keep the table within one sweep wave (six points).

    python -m shared.sweep --config=experiments/siamesenorm/ablation.py --workdir=runs/siamesenorm/ablation \
        --parallel=6 --config.mesh.preset=gpu_1

":spec" is the ablation at the spec's design (sections 1.6, 5.3 P2; issue 20, campaign entry
siamesenorm_ablation_spec):

    python -m shared.sweep --config=experiments/siamesenorm/ablation.py:spec --workdir=runs/siamesenorm_ablation_spec \
        --parallel=8

  S (21.2M), the lr_stability:spec recipe, LR 4e-3 (spec P2; two grid steps above the a-priori optimum, so the
  instability of HybridNorm without depth scaling can show), seeds 0-2: the rows above plus the "neither" row
  (no input norm, no depth scaling) that the legacy table left out: 7 rows x 3 seeds = 21 points, arms = rows.
  Cost ~3 GPU-min a point (experiments/siamesenorm/_small.py) -> ~65 GPU-min; on 4 H100s with --parallel=8 ~ 17
  min of wall time. Not measured.
"""
from experiments.siamesenorm._small import COLUMNS, SPEC_COLUMNS, SPEC_SEEDS, small_config, spec_config

LR = 2.4e-2
ROWS = {  # name: (block, block_options overrides)
    "siamese_hybrid": ("siamesenorm/siamese_hybrid", {}),
    "siamese_hybrid_no_input_norm": ("siamesenorm/siamese_hybrid", {"input_norm": False}),
    "siamese_hybrid_no_depth_scaling": ("siamesenorm/siamese_hybrid", {"depth_scaling": "none"}),
    "hybridnorm": ("siamesenorm/hybridnorm", {}),
    "hybridnorm_depth_scaling": ("siamesenorm/hybridnorm", {"depth_scaling": "block"}),
    "residual": ("siamesenorm/residual", {}),
}


SWEEP_VARIANTS = ("spec", "spec_smoke")  # get_sweep variants beside "" and "smoke" (tests/test_experiments.py)
VARIANTS = ("spec",)
SPEC_LR = 4e-3
SPEC_ROWS = {**ROWS, "siamese_hybrid_neither": ("siamesenorm/siamese_hybrid",
                                                {"input_norm": False, "depth_scaling": "none"})}
FILE = "experiments/siamesenorm/ablation.py"


def get_config(arg=None):
    if arg in ("spec", "spec_smoke"):
        c = spec_config(FILE, smoke=arg == "spec_smoke")
        c.optim.lr = SPEC_LR
        return c
    c = small_config(arg, FILE)
    c.optim.lr = LR
    c.seed = 1
    return c


def row_overrides(block, options) -> dict:
    overrides = {"model.block": block, "model.block_options.input_norm": True,
                 "model.block_options.depth_scaling": "auto"}
    overrides.update({f"model.block_options.{k}": v for k, v in options.items()})
    return overrides


def spec_sweep(smoke: bool):
    arg = "spec_smoke" if smoke else "spec"
    rows = list(SPEC_ROWS.items())[:2] if smoke else SPEC_ROWS.items()
    points = [dict(name=f"{name}_s{seed}", arm=name, arg=arg, overrides={**row_overrides(block, options), "seed": seed})
              for name, (block, options) in rows for seed in (SPEC_SEEDS[:2] if smoke else SPEC_SEEDS)]
    return dict(name="ablation_spec", points=points, columns=SPEC_COLUMNS, group=["arm"],
                plot=dict(kind="curves", metric="train/loss", x="step", label="name",
                          title=f"ablation at LR {SPEC_LR:g} on S (21M): train loss"))


def get_sweep(arg=None):
    if arg in ("spec", "spec_smoke"):
        return spec_sweep(smoke=arg == "spec_smoke")
    points = []
    for name, (block, options) in ROWS.items():
        overrides = {"model.block": block, "model.block_options.input_norm": True,
                     "model.block_options.depth_scaling": "auto"}
        overrides.update({f"model.block_options.{k}": v for k, v in options.items()})
        points.append(dict(name=name, overrides=overrides, arg=arg))
    if arg == "smoke":
        points = points[:2]
    return dict(name="ablation", points=points, columns=COLUMNS,
                plot=dict(kind="curves", metric="train/loss", x="step", label="name",
                          title=f"ablation at LR {LR:g}: train loss"))

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
"""
from experiments.siamesenorm._small import COLUMNS, small_config

LR = 2.4e-2
ROWS = {  # name: (block, block_options overrides)
    "siamese_hybrid": ("siamesenorm/siamese_hybrid", {}),
    "siamese_hybrid_no_input_norm": ("siamesenorm/siamese_hybrid", {"input_norm": False}),
    "siamese_hybrid_no_depth_scaling": ("siamesenorm/siamese_hybrid", {"depth_scaling": "none"}),
    "hybridnorm": ("siamesenorm/hybridnorm", {}),
    "hybridnorm_depth_scaling": ("siamesenorm/hybridnorm", {"depth_scaling": "block"}),
    "residual": ("siamesenorm/residual", {}),
}


def get_config(arg=None):
    c = small_config(arg, "experiments/siamesenorm/ablation.py")
    c.optim.lr = LR
    c.seed = 1
    return c


def get_sweep(arg=None):
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

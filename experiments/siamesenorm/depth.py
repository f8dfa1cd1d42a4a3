"""SiameseNorm depth study (spec §5.3 P2; paper §4.2 at toy scale) with the seed noise floor.

Claim tested (README ledger R3): at fixed parameter count the gain of SiameseNorm over Pre-Norm grows with
depth. Paper (~390M parameters, 12B tokens, LR 1e-3, PPL Pre -> Siamese): (L, d) = (10, 1280) 17.47 -> 16.15,
(17, 1024) 17.23 -> 15.69, (33, 768) 17.29 -> 15.64, (80, 512) 18.02 -> 15.98 (gain 1.32 -> 2.04).

Here: the lr_stability recipe at LR 6e-3 (chosen before any run: the second of lr_stability's four LRs, a
usual good AdamW LR for byte-level models of a few million parameters; see README) for (L, d) = (4, 384),
(8, 256), (32, 128), all 6.4-7.1M non-embedding parameters; Pre-Norm and SiameseNorm (vanilla), seed 0,
plus seeds 1 and 2 at L8 (the lr_stability model) so the Pre-vs-Siamese difference can be judged against
seed noise.

    python -m shared.sweep --config=experiments/siamesenorm/depth.py --workdir=runs/siamesenorm/depth \
        --parallel=6 --config.mesh.preset=gpu_1
"""
from experiments.siamesenorm._small import COLUMNS, shape_overrides, small_config

BLOCKS = {"pre": "prenorm", "siamese": "siamesenorm/siamese"}
LR = 6e-3
SHAPES = ("L32", "L4", "L8")  # the slow deep points first, so they share the first wave of six
SEEDS_AT = "L8"
EXTRA_SEEDS = (1, 2)


def get_config(arg=None):
    c = small_config(arg, "experiments/siamesenorm/depth.py")
    c.optim.lr = LR
    return c


def get_sweep(arg=None):
    points = []
    if arg == "smoke":  # tiny shapes: 2 and 4 blocks of the smoke width
        for short, block in BLOCKS.items():
            for layers in (2, 4):
                points.append(dict(name=f"{short}_L{layers}", arg=arg,
                                   overrides={"model.block": block, "model.n_layers": layers, "seed": 0}))
    else:
        runs = [(shape, 0) for shape in SHAPES] + [(SEEDS_AT, seed) for seed in EXTRA_SEEDS]
        for shape, seed in runs:
            for short, block in BLOCKS.items():
                points.append(dict(name=f"{short}_{shape}_seed{seed}", arg=arg,
                                   overrides={"model.block": block, **shape_overrides(shape), "seed": seed}))
    return dict(name="depth", points=points, columns=COLUMNS, group=["model.block", "model.n_layers"],
                plot=dict(kind="curves", metric="train/loss", x="step",
                          title="depth: Pre-Norm vs SiameseNorm (seeds share a colour)"))

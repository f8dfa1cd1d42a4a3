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

":spec" is R3 at the spec's design (sections 5.2, 5.3 P2, 5.5; issue 20, campaign entry siamesenorm_depth_spec):

    python -m shared.sweep --config=experiments/siamesenorm/depth.py:spec --workdir=runs/siamesenorm_depth_spec \
        --parallel=8

  Pre-Norm and SiameseNorm (vanilla) on S (d 384 x 12, 21.2M non-embedding parameters) and D (d 256 x 28, 22.5M),
  the lr_stability:spec recipe (2,000 steps x 64 x 1024 bytes), at LR 2e-3 and 4e-3 (spec P2), seeds 0-2:
  24 points, arms = block x shape x LR. R3 reads (pre - siamese) on D against S at each LR, with intervals
  over the 3 seeds (S's cells repeat lr_stability:spec's on purpose: the table stands alone).
  Cost: S ~3 GPU-min a point, D ~3.5 (179 vs 156 MFLOP/token, narrower matmuls; experiments/siamesenorm/_small.py)
  -> ~80 GPU-min; on 4 H100s with --parallel=8 ~ 22 min of wall time. Not measured.
"""
from experiments.siamesenorm._small import (COLUMNS, SPEC_COLUMNS, SPEC_SEEDS, shape_overrides, small_config,
                                            spec_config, spec_shape_overrides)

BLOCKS = {"pre": "prenorm", "siamese": "siamesenorm/siamese"}
LR = 6e-3
SHAPES = ("L32", "L4", "L8")  # the slow deep points first, so they share the first wave of six
SEEDS_AT = "L8"
EXTRA_SEEDS = (1, 2)


SWEEP_VARIANTS = ("spec", "spec_smoke")  # get_sweep variants beside "" and "smoke" (tests/test_experiments.py)
VARIANTS = ("spec",)
SPEC_LRS = (2e-3, 4e-3)
FILE = "experiments/siamesenorm/depth.py"


def get_config(arg=None):
    if arg in ("spec", "spec_smoke"):
        return spec_config(FILE, smoke=arg == "spec_smoke")
    c = small_config(arg, FILE)
    c.optim.lr = LR
    return c


def spec_sweep(smoke: bool):
    arg = "spec_smoke" if smoke else "spec"
    points = []
    for shape in ("S", "D"):
        shape_keys = ({"model.n_layers": 2 if shape == "S" else 4} if smoke else spec_shape_overrides(shape))
        for short, block in BLOCKS.items():
            for lr in SPEC_LRS[:1] if smoke else SPEC_LRS:
                for seed in SPEC_SEEDS[:2] if smoke else SPEC_SEEDS:
                    points.append(dict(name=f"{short}_{shape}_lr{lr:g}_s{seed}", arm=f"{short}_{shape}_lr{lr:g}",
                                       arg=arg, overrides={"model.block": block, **shape_keys, "optim.lr": lr,
                                                           "seed": seed}))
    return dict(name="depth_spec", points=points, columns=SPEC_COLUMNS, group=["arm"],
                plot=dict(kind="curves", metric="train/loss", x="step", label="name",
                          title="depth at ~21M: Pre-Norm vs SiameseNorm, S (12 blocks) and D (28 blocks)"))


def get_sweep(arg=None):
    if arg in ("spec", "spec_smoke"):
        return spec_sweep(smoke=arg == "spec_smoke")
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

"""The GAP table (../shared/papers/gap.md 4.5, 4.8): stage A per seed as sweep stages, then every stage-B variant
per seed as points warm-started from that seed's stage A (train.init_from=run:{stage:stageA_s<seed>}).

    python -m shared.sweep --config=experiments/gap/table.py --workdir=runs/gap/table          # full: 9 x 3 seeds
    python -m shared.sweep --config=experiments/gap/table.py:p0 --workdir=runs/gap/p0          # spec 4.9's P0
    python -m shared.sweep --config=experiments/gap/table.py:smoke --workdir=/tmp/gap_smoke    # CI, CPU

Variants: full (default; T0, T1, S0, B0, G, G-F, G-C, G-K, G-lin x seeds 0, 1, 2; B0+EMA is B0's eval/*_ema
columns), p0 (stage A + T0, B0, G x seeds 0, 1: the calibration of spec 4.9), smoke (1 seed, the tiny model on
procedural glyphs, T0, B0, G). GPU estimate (spec 4.9, not measured): stage A ~3 min, a stage-B run 2-4 min on one
H100; full ~1.5-2 GPU-hours, p0 ~25 min. Columns: the evaluation (P, R, Agg, OOD, opened), the EMA row, the norm
report (spec 4.6), the probes (spec 4.7), the capacity split, the PCA rank, and the seed's stage A (its P, R and
norm report after training and at init, copied from its summary.json into every point: claim N is about stage A).
"""
from experiments.gap.train import get_config as train_config

SEEDS = (0, 1, 2)
FULL = ("T0", "T1", "S0", "B0", "G", "G-F", "G-C", "G-K", "G-lin")
SETS = {None: (FULL, SEEDS), "p0": (("T0", "B0", "G"), SEEDS[:2]), "smoke": (("T0", "B0", "G"), SEEDS[:1])}
# Stage A's steps (spec 4.4: ~4k, calibrated by P0 until P >= 95 and R in [30, 70]). P0 (results/p0, one H200) at
# 4,000 steps: P 88 / 80, R 29 / 28, training loss still falling; the full table trains stage A twice as long.
STAGE_A_STEPS = {None: 8000}
# Train batches are built in worker processes (projects/gap/prefetch.py); the table runs several trainings at once
# on one host, so each gets a share of its cores: stages (up to 3 at once) 4 workers, points (6 at once) 2.
PREFETCH = {None: (4, 2)}
COLUMNS = (
    "eval/P", "eval/R", "eval/Agg", "eval/OOD", "eval/opened",
    "eval/P_ema", "eval/R_ema", "eval/Agg_ema", "eval/OOD_ema",
    "norms/r_vis_post", "norms/r_text_post", "norms/r_vis_pre", "norms/r_text_pre",
    "norms/spearman_text", "norms/spearman_image", "norms/r_fed", "norms/rho", "norms/ema_m",
    "probe/R_generated", "probe/R_zeros", "probe/R_noise", "probe/R_mean", "probe/R_swap", "probe/R_oracle",
    "probe/swap_donor_agree", "capacity/frac_latent", "pca/k",
    # stage A of the point's seed (claim N after A; stages are not rows of the table)
    "stageA/eval/P", "stageA/eval/R", "stageA/norms/r_vis_post", "stageA/norms/r_text_post",
    "stageA/norms/r_vis_pre", "stageA/norms/spearman_text", "stageA/norms/spearman_image",
    "stageA/init/r_vis_post", "stageA/init/r_text_post", "wall_time_s")


def get_config(arg=None):
    """The sweep's own arg (None, p0, smoke) gives stage A; a point's arg is a train.py variant."""
    return train_config({None: "a", "p0": "a", "smoke": "smoke_a"}.get(arg, arg))


def get_sweep(arg=None):
    if arg not in SETS:
        raise ValueError(f"experiments/gap/table.py: unknown variant {arg!r} (known: full (no arg), p0, smoke)")
    variants, seeds = SETS[arg]
    prefix = "smoke_" if arg == "smoke" else ""
    stage_extra = {"train.steps": STAGE_A_STEPS[arg]} if arg in STAGE_A_STEPS else {}
    point_extra = {}
    if arg in PREFETCH:
        stage_extra["gap.prefetch_workers"], point_extra["gap.prefetch_workers"] = PREFETCH[arg]
    stages = [dict(name=f"stageA_s{seed}", arg=f"{prefix}a", overrides={"seed": seed, **stage_extra})
              for seed in seeds]
    points = [dict(name=f"{v}_s{seed}", arm=v, arg=f"{prefix}{v}",
                   overrides={"seed": seed, "train.init_from": f"run:{{stage:stageA_s{seed}}}", **point_extra})
              for seed in seeds for v in variants]
    return dict(name="gap" if arg is None else f"gap_{arg}", stages=stages, points=points, columns=list(COLUMNS),
                group=["arm"], plot=dict(kind="bars", metric="eval/Agg"))

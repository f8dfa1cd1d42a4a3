"""SiameseNorm learning-rate stability table (spec §5.3 P0/P1; paper Table 1 at toy scale).

Claims tested (README ledger R1, R2): at equal recipe SiameseNorm ends with lower validation loss than
Pre-Norm, and it stays stable at learning rates where Post-Norm (and HybridNorm, DeepNorm) diverge.
Paper (1.3B, 100B tokens, PPL): Pre-Norm 11.21 / 10.84 / 10.89 at LR 4e-4 / 1e-3 / 2e-3, SiameseNorm
10.57 / 10.43 / 10.48; Post-Norm, HybridNorm diverge at 1e-3 and 2e-3, DeepNorm at 2e-3.

Here: byte-level LM on the English classics, d=256, 8 blocks (6.5M parameters), seq 256, batch 32,
800 steps (6.6M tokens), one H100 shared by three points. Pre-Norm, Post-Norm and SiameseNorm (vanilla,
§1.2) at four learning rates; SiameseNorm-hybrid (§1.4), HybridNorm, DeepNorm, Mix-LN, Peri-LN and ResiDual
at the second and the highest. Seeds for the noise floor are in depth.py (L8 = this model).

    python -m shared.sweep --config=experiments/siamesenorm/lr_stability.py --workdir=runs/siamesenorm/lr_stability \
        --parallel=6 --config.mesh.preset=gpu_1
    python -m shared.launch --config=experiments/siamesenorm/lr_stability.py --workdir=runs/sn_one \
        --config.model.block=siamesenorm/siamese --config.optim.lr=0.006      # one point

Columns: eval/loss (nats/byte, the last evaluation: step 800, or the last one before a stop), diverged
(NaN/Inf or a train loss above train.diverge_loss=9 stopped the run), stop_reason, train/grad_norm.

":spec" is the re-run at the spec's small-scale design (section 5.2-5.4; issue 20, campaign entry siamesenorm_spec):

    python -m shared.sweep --config=experiments/siamesenorm/lr_stability.py:spec --workdir=runs/siamesenorm_spec \
        --parallel=8

  model     S: d 384 x 12 blocks, 6 heads, SwiGLU 1024 (21.2M non-embedding parameters), context 1024
  training  2,000 steps x 64 x 1024 bytes (131M tokens), 200 warm-up steps, cosine to 10 %; eval every 100 steps
            over 20 fixed batches; train loss logged every 10 steps
  grid      R1/R2: pre, post, siamese (vanilla), hybridnorm at LR 5e-4, 1e-3, 2e-3, 4e-3, 8e-3 (factor 2; the
            legacy 6.5M table had Pre-Norm still improving at its lowest LR, 3e-3, and a 21M model trained 20x
            longer wants a lower LR: 1e-3-2e-3 is the a-priori optimum, with a grid point on each side of it and
            Post-Norm's divergence expected at 4e-3-8e-3, spec 5.3). P1's siamese_hybrid and deepnorm at 2e-3 and
            8e-3. Seeds 0, 1, 2 at every point (72 points); arms = block x LR, so the ledger reads mean +- std and
            Welch intervals over 3 seeds per cell.
  columns   eval/loss (last eval), eval/loss_last3 (the spec's final loss), diverged (the trainer's stop: NaN/Inf
            or train loss > 9), eval/collapsed (final eval > best + 1 nat or >= 0.9 x the 3.21 nats/byte unigram
            loss: the runs the legacy tables read as not diverged), eval/unstable (either: the spec's "diverged"),
            train/spikes (excursions > 0.5 nat above the running minimum that recover), train/max_rise,
            train/grad_norm (R2's "within 3x of Pre-Norm's")
  cost      ~3 GPU-min a point (experiments/siamesenorm/_small.py: bench/RESULTS.md's 25M-shape 1.05M tok/s at
            21% MFU on one H100 scaled by FLOPs per token to S, 131M tokens in 100-140 s, + compile, evaluations
            and start-up): 72 points ~ 215 GPU-min; on 4 H100s with --parallel=8 (2 points per GPU, ~1.6 GB of
            activations each) ~ 55-60 min of wall time. Not measured: no GPU run of the S shape yet.
":spec_smoke" is the same sweep at the smoke sizes (CI: tests/test_experiments.py builds its points).
"""
from experiments.siamesenorm._small import COLUMNS, SPEC_COLUMNS, SPEC_SEEDS, small_config, spec_config

CORE = {"pre": "prenorm", "post": "postnorm", "siamese": "siamesenorm/siamese"}
BASELINES = {"siamese_hybrid": "siamesenorm/siamese_hybrid", "hybridnorm": "siamesenorm/hybridnorm",
             "deepnorm": "siamesenorm/deepnorm", "mixln": "siamesenorm/mixln", "periln": "siamesenorm/periln",
             "residual": "siamesenorm/residual"}
LRS = (3e-3, 6e-3, 1.2e-2, 2.4e-2)
BASELINE_LRS = (6e-3, 2.4e-2)


SWEEP_VARIANTS = ("spec", "spec_min", "spec_smoke")  # get_sweep variants beside "" and "smoke" (tests/test_experiments.py)
VARIANTS = ("spec",)
SPEC_CORE = {"pre": "prenorm", "post": "postnorm", "siamese": "siamesenorm/siamese",
             "hybridnorm": "siamesenorm/hybridnorm"}
SPEC_EXTRA = {"siamese_hybrid": "siamesenorm/siamese_hybrid", "deepnorm": "siamesenorm/deepnorm"}
SPEC_LRS = (5e-4, 1e-3, 2e-3, 4e-3, 8e-3)
SPEC_EXTRA_LRS = (2e-3, 8e-3)
FILE = "experiments/siamesenorm/lr_stability.py"


# spec_min: the spec's own run matrix (5.3 P0 + P1's HybridNorm) with 3 seeds: {pre, post, siamese, hybridnorm} x
# {2e-3, 8e-3} = 24 points, a third of :spec; enough for R1 at both LRs and R2 (the highest LR against the other)
SPEC_MIN_LRS = (2e-3, 8e-3)


def get_config(arg=None):
    if arg == "spec_min":
        return spec_config(FILE, smoke=False)
    if arg in ("spec", "spec_smoke"):
        return spec_config(FILE, smoke=arg == "spec_smoke")
    return small_config(arg, FILE)


def point(short, block, lr, arg):
    return dict(name=f"{short}_lr{lr:g}", overrides={"model.block": block, "optim.lr": lr}, arg=arg)


def spec_sweep(smoke: bool, minimal: bool = False):
    arg = "spec_smoke" if smoke else "spec"
    if smoke:
        cells = [(short, SPEC_CORE[short], 2e-3) for short in ("pre", "siamese")]
    elif minimal:
        cells = [(short, block, lr) for short, block in SPEC_CORE.items() for lr in SPEC_MIN_LRS]
    else:
        cells = ([(short, block, lr) for short, block in SPEC_CORE.items() for lr in SPEC_LRS]
                 + [(short, block, lr) for short, block in SPEC_EXTRA.items() for lr in SPEC_EXTRA_LRS])
    points = [dict(name=f"{short}_lr{lr:g}_s{seed}", arm=f"{short}_lr{lr:g}", arg=arg,
                   overrides={"model.block": block, "optim.lr": lr, "seed": seed})
              for short, block, lr in cells for seed in (SPEC_SEEDS[:2] if smoke else SPEC_SEEDS)]
    return dict(name="lr_stability_spec_min" if minimal else "lr_stability_spec", points=points,
                columns=SPEC_COLUMNS, group=["arm"],
                plot=dict(kind="curves", metric="train/loss", x="step", label="name",
                          title="S (21M): train loss per block, learning rate and seed"))


def get_sweep(arg=None):
    if arg == "spec_min":
        return spec_sweep(smoke=False, minimal=True)
    if arg in ("spec", "spec_smoke"):
        return spec_sweep(smoke=arg == "spec_smoke")
    if arg == "smoke":
        points = [point(short, block, 3e-3, arg) for short, block in CORE.items()]
    else:
        points = [point(short, block, lr, arg) for short, block in CORE.items() for lr in LRS]
        points += [point(short, block, lr, arg) for short, block in BASELINES.items() for lr in BASELINE_LRS]
    return dict(name="lr_stability", points=points, columns=COLUMNS,
                plot=dict(kind="curves", metric="train/loss", x="step", label="name",
                          title="train loss per block and learning rate"))

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
"""
from experiments.siamesenorm._small import COLUMNS, small_config

CORE = {"pre": "prenorm", "post": "postnorm", "siamese": "siamesenorm/siamese"}
BASELINES = {"siamese_hybrid": "siamesenorm/siamese_hybrid", "hybridnorm": "siamesenorm/hybridnorm",
             "deepnorm": "siamesenorm/deepnorm", "mixln": "siamesenorm/mixln", "periln": "siamesenorm/periln",
             "residual": "siamesenorm/residual"}
LRS = (3e-3, 6e-3, 1.2e-2, 2.4e-2)
BASELINE_LRS = (6e-3, 2.4e-2)


def get_config(arg=None):
    return small_config(arg, "experiments/siamesenorm/lr_stability.py")


def point(short, block, lr, arg):
    return dict(name=f"{short}_lr{lr:g}", overrides={"model.block": block, "optim.lr": lr}, arg=arg)


def get_sweep(arg=None):
    if arg == "smoke":
        points = [point(short, block, 3e-3, arg) for short, block in CORE.items()]
    else:
        points = [point(short, block, lr, arg) for short, block in CORE.items() for lr in LRS]
        points += [point(short, block, lr, arg) for short, block in BASELINES.items() for lr in BASELINE_LRS]
    return dict(name="lr_stability", points=points, columns=COLUMNS,
                plot=dict(kind="curves", metric="train/loss", x="step", label="name",
                          title="train loss per block and learning rate"))

"""Fine-tuning accuracy and its seed spread per method (spec section 7, claim V3; paper Table 1 in miniature).

    python -m shared.sweep --config=experiments/mdm_variance/accuracy.py --workdir=runs/mdm_variance/accuracy \
        --parallel=6 --config.mesh.preset=gpu_1
    python -m shared.launch --config=experiments/mdm_variance/accuracy.py:smoke --workdir=/tmp/mdmv_acc   # CI

One point = one (task, method): theta0 is pre-trained once per (task, MDM/ARM) and shared by the points
(<workdir>/../_theta0, file-locked), then mdm_variance.seeds = 5 SFT replicas run in the point's process
(seed_0..4, one compile through the persistent compilation cache), each evaluated by greedy decoding of 500
held-out problems. Columns: acc/mean, acc/std, acc/min, acc/max over the seeds, held-out ELBO (MDM).
Paper (LLaDA-8B, GSM8K, 3 seeds): Standard 52.51 (range 3.0), P-POTS+MIRROR 60.53 (range 3.4), MIRROR 53.70,
P-POTS 58.58, Clipped 56.18; HiTab: Standard 58.68 (range 9.7), P-POTS+MIRROR 67.10 (range 2.6).
Variants: t1 (default, ChainArith), t2 (TableQA), smoke, t2_smoke.
"""
from experiments.mdm_variance._common import small_config

VARIANTS = ("t1", "t2", "smoke", "t2_smoke")
T1_METHODS = ("standard", "standard_2x", "multisample2", "clipped", "stratts", "isad", "ppots", "mirror",
              "ppots_mirror", "arm")
T2_METHODS = ("standard", "ppots", "mirror", "ppots_mirror", "syrm", "arm")


def get_config(arg=None):
    variant = arg or "t1"
    if variant not in VARIANTS:
        raise ValueError(f"experiments/mdm_variance/accuracy.py: unknown variant {arg!r} (known: {VARIANTS})")
    task = "t2" if variant.startswith("t2") else "t1"
    return small_config(task, smoke=variant.endswith("smoke"))


def get_sweep(arg=None):
    """Every method on T1 and the main ones (+ SyRM, which needs a table) on T2; :smoke sweeps the smoke sizes."""
    smoke = arg in ("smoke", "t2_smoke")
    t1, t2 = ("smoke", "t2_smoke") if smoke else ("t1", "t2")
    methods_t1, methods_t2 = (("standard", "ppots_mirror", "arm"), ("syrm",)) if smoke else (T1_METHODS, T2_METHODS)
    points = [dict(name=f"t1_{m}", overrides={"mdm_variance.method": m}, arg=t1) for m in methods_t1]
    points += [dict(name=f"t2_{m}", overrides={"mdm_variance.method": m}, arg=t2) for m in methods_t2]
    return dict(name="accuracy", points=points,
                columns=["acc/mean", "acc/std", "acc/min", "acc/max", "acc/theta0", "elbo/mean", "nll/mean",
                         "train/loss", "wall_time_s"],
                plot=dict(kind="bars", metric="acc/mean"))

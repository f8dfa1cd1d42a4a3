"""OpenRS E1 (../shared/papers/openrs.md section 4): aggregation and debiasing mechanics in simulation, CPU only.

    python -m shared.sweep --config=experiments/openrs/e1_simulation.py --workdir=runs/openrs/e1_simulation
    python -m shared.launch --config=experiments/openrs/e1_simulation.py --workdir=runs/openrs/e1_one   # arm d, seed 0

100,000 synthetic pairs per point with latent per-criterion truths (1 fatal, 2 core, 3 important, 2 highlight
criteria; a fatal flaw in 20% of pairs), a criterion comparator with error rate e in {0, 0.1, 0.2, 0.3, 0.4} (every
e in one point, on the same draws) and position bias 0.15. Arms: a holistic judgment, b criterion-wise weighted
mean, c + fatal veto, d + bidirectional rule, e pointwise scalarisation with calibration noise 0.5x / 2x the
comparison noise (projects/openrs/simulation.py has the model). All arms of a seed share the draws, so the ledger
pairs them by seed. 18 points of about 2 s each on one CPU core (numpy; no GPU).
Results as shared.sweep wrote them: projects/openrs/results/e1_simulation/.
"""
from shared.config.base import base_config

import ml_collections

SEEDS = (0, 1, 2)
ERROR_RATES = (0.0, 0.1, 0.2, 0.3, 0.4)
ARMS = {"a_holistic": ("a", 0.5), "b_weighted_mean": ("b", 0.5), "c_veto": ("c", 0.5),
        "d_bidirectional": ("d", 0.5), "e_pointwise_cal0.5": ("e", 0.5), "e_pointwise_cal2": ("e", 2.0)}
METRICS = ("accuracy", "tie_rate", "decided_accuracy", "fatal_accuracy", "bias_error_removal")


def get_config(arg=None):
    if arg not in (None, "smoke"):
        raise ValueError(f"experiments/openrs/e1_simulation.py: unknown variant {arg!r} (known: smoke)")
    c = base_config()
    c.project = "openrs"
    c.task = "openrs/e1_simulation"
    c.mesh.preset = "cpu_1"
    c.openrs = ml_collections.ConfigDict({
        "arm": "d", "n_pairs": 100_000, "error_rates": list(ERROR_RATES), "position_bias": 0.15, "fatal_rate": 0.2,
        "calibration_ratio": 0.5})
    if arg == "smoke":
        c.openrs.n_pairs = 2000
    return c


def get_sweep(arg=None):
    smoke = arg == "smoke"
    seeds = SEEDS[:2] if smoke else SEEDS
    points = [dict(name=f"{name}_s{seed}", arm=name, arg=arg,
                   overrides={"seed": seed, "openrs.arm": kind, "openrs.calibration_ratio": ratio})
              for name, (kind, ratio) in ARMS.items() for seed in seeds]
    columns = [f"e{e:g}/{m}" for e in ERROR_RATES for m in METRICS] + ["wall_time_s"]
    return dict(name="e1_simulation", points=points, columns=columns, group=["arm"],
                plot=dict(kind="bars", metric="e0.2/accuracy"))

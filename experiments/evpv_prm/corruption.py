"""EVPV-PRM, GSM8K analog, the constraint-corruption study (../shared/papers/evpv_prm.md §4.5 item 3, §4.6 (iii)): the
extracted facts DROPped or FLIPped at ratios {0.1, 0.2, 0.4, 0.6, 0.8, 1.0} (shared/data/corrupt.py), with the J-sim
judge at p_perc 0.2, p_ext 0; 3 seeds, one point per seed, CPU only.

    python -m shared.sweep --config=experiments/evpv_prm/corruption.py --workdir=runs/evpv_prm/corruption --parallel=2

Each point evaluates the uncorrupted facts and every (kind, ratio) on the same candidates and perception; its columns
"<kind><ratio>/<metric>" and "<kind>/spearman/<metric>" (Spearman's rho between the ratio and the metric over the six
ratios; projects/evpv_prm/jsim.py). Criterion (iii): rho <= -0.9 under FLIP; under DROP the omission rule makes the
gate inert, so the gated scores should fall back to the ungated ones, not below. About 1-2 min per point on one
loaded CPU core.
Results as shared.sweep wrote them: projects/evpv_prm/results/corruption/.
"""
from projects.evpv_prm.config import CORRUPTION_RATIOS, CORRUPTIONS, jsim_config

SEEDS = (0, 1, 2)
METRICS = ("step/evpv/macro_f1", "step/evpv/premise_recall", "bon/evpv/gated/correctness_rate@8",
           "bon/evpv/gated/geometric_mean@8", "bon/plain/gated/correctness_rate@8", "bon/plain/gated/geometric_mean@8")
BASELINES = ("step/plain/macro_f1", "bon/plain/ungated/correctness_rate@8", "bon/plain/ungated/geometric_mean@8")


def get_config(arg=None):
    if arg not in (None, "smoke"):
        raise ValueError(f"experiments/evpv_prm/corruption.py: unknown variant {arg!r} (known: smoke)")
    c = jsim_config(smoke=arg == "smoke")
    c.evpv.p_perc, c.evpv.p_ext = 0.2, 0.0
    c.evpv.corruptions = list(CORRUPTIONS)
    if arg == "smoke":
        c.evpv.corruption_ratios = [0.5, 1.0]
    return c


def get_sweep(arg=None):
    smoke = arg == "smoke"
    seeds, ratios = (SEEDS[:2], (0.5, 1.0)) if smoke else (SEEDS, CORRUPTION_RATIOS)
    points = [dict(name=f"s{seed}", arm="corruption", arg=arg, overrides={"seed": seed}) for seed in seeds]
    columns = ([f"{kind}/spearman/{m}" for kind in CORRUPTIONS for m in METRICS] + list(METRICS) + list(BASELINES)
               + [f"{kind}{r:g}/{m}" for kind in CORRUPTIONS for r in ratios for m in METRICS + BASELINES]
               + ["wall_time_s"])
    return dict(name="corruption", points=points, columns=columns, group=["arm"],
                plot=dict(kind="bars", metric="flip/spearman/step/evpv/macro_f1"))

"""EVPV-PRM, GSM8K analog with the J-sim judge (../shared/papers/evpv_prm.md §4.5 items 1-2): the grid
p_perc in {0, 0.1, 0.2, 0.3} x p_ext in {0, 0.05} x 3 seeds, 24 points, CPU only (no model is trained).

    python -m shared.sweep --config=experiments/evpv_prm/grid.py --workdir=runs/evpv_prm/grid --parallel=2
    python -m shared.launch --config=experiments/evpv_prm/grid.py --workdir=runs/evpv_prm/one   # p_perc 0.2, p_ext 0.05

Every point reads the 1,319 GSM8K test problems (../shared/data/gsm8k/test.jsonl; those whose annotated steps replay
to the answer are kept), makes 8 candidates per problem (premise misread 0.35, arithmetic slip 0.2), and scores them
with the plain J-sim judge (reads the perceived question) and the EVPV-conditioned one (reads the extracted facts),
each ungated and gated by the checklist reliability: step macro-F1, premise-error recall, first-error accuracy,
BoN@k and Pass@k with the five aggregations (projects/evpv_prm/jsim.py lists every key). Points of a seed share the
candidates and the noise draws, so the ledger pairs by seed. Criteria: spec §4.6 (i), (ii) and the p_perc = 0 sanity
row. About 8 s per point on one loaded CPU core; the table ~2-4 min.
Results as shared.sweep wrote them: projects/evpv_prm/results/grid/.
"""
from projects.evpv_prm.config import jsim_config

SEEDS = (0, 1, 2)
P_PERC = (0.0, 0.1, 0.2, 0.3)
P_EXT = (0.0, 0.05)
AGGS = ("correctness_rate", "position_weighted", "streak", "geometric_mean", "first_error")


def get_config(arg=None):
    if arg not in (None, "smoke"):
        raise ValueError(f"experiments/evpv_prm/grid.py: unknown variant {arg!r} (known: smoke)")
    return jsim_config(smoke=arg == "smoke")


def columns() -> list[str]:
    step = [f"step/{j}/{m}" for j in ("plain", "evpv")
            for m in ("macro_f1", "premise_recall", "first_error_acc", "macro_f1_first_error")]
    bon = [f"bon/{j}/{g}/{a}@8" for j in ("plain", "evpv") for g in ("ungated", "gated") for a in AGGS]
    random_ties = [f"bonrt/{j}/{g}/{a}@8" for j in ("plain", "evpv") for g in ("ungated", "gated") for a in AGGS]
    return (step + bon + random_ties + ["pass@1", "pass@8", "rel/clean_mean", "rel/misread_mean", "data/problems",
                                        "data/candidate_accuracy", "wall_time_s"])


def get_sweep(arg=None):
    smoke = arg == "smoke"
    seeds, p_perc, p_ext = (SEEDS[:2], (0.0, 0.2), (0.05,)) if smoke else (SEEDS, P_PERC, P_EXT)
    points = [dict(name=f"pp{pp:g}_pe{pe:g}_s{seed}", arg=arg,
                   overrides={"seed": seed, "evpv.p_perc": pp, "evpv.p_ext": pe})
              for pp in p_perc for pe in p_ext for seed in seeds]
    return dict(name="grid", points=points, columns=columns(), group=["evpv.p_perc", "evpv.p_ext"],
                plot=dict(kind="bars", metric="step/evpv/macro_f1"))

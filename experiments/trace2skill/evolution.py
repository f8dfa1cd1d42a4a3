"""Trace2Skill small-scale reproduction (../shared/papers/trace2skill.md section 4) on TinySheet, teacher-agent
track: the agents are the programmatic demonstration policy of spec 4.2 (projects/trace2skill/agent.py), not yet
the tiny LMs SFT-trained on it (those need a GPU; see projects/trace2skill/README.md). CPU only, about a minute a
seed.

    python -m shared.sweep --config=experiments/trace2skill/evolution.py --workdir=runs/trace2skill/evolution \
        --parallel=2
    python -m shared.launch --config=experiments/trace2skill/evolution.py --workdir=runs/trace2skill/one     # seed 0

One point per evolution seed; each point holds every arm (none, S0, Trace2Skill combined / error-only /
success-only / single-call analyst / tau = 1, Seq-B=1, Seq-B=4, retrieval bank), both seed skills (deepening,
creation), trajectories from both agents (S, L), each skill evaluated by both agents in-distribution and OOD.
5 seeds (the spec asks 3; seeds are cheap here and the paired interval at 2 degrees of freedom is wide).
Variants: smoke (tiny splits, 2 seeds); lean (50 evolution tasks instead of 200: fewer lessons, so the support
filter and the analysts' noise matter more; our harder setup, not the spec's).
Results as shared.sweep wrote them: projects/trace2skill/results/evolution/.
"""
import ml_collections

from shared.config.base import base_config

SEEDS = (0, 1, 2, 3, 4)
VARIANTS = (None, "smoke", "lean")


def get_config(arg=None):
    if arg not in VARIANTS:
        raise ValueError(f"experiments/trace2skill/evolution.py: unknown variant {arg!r} (known: smoke, lean)")
    c = base_config()
    c.project = "trace2skill"
    c.task = "trace2skill/evolution"
    c.mesh.preset = "cpu_1"
    c.trace2skill = ml_collections.ConfigDict({
        "n_evolve": 200, "n_test": 1000, "n_ood": 1000,   # spec 4.1: evolution split 200, held-out 1,000 + 1,000
        "budget_tokens": 512,                             # the skill slot (words here; spec 4.2)
        "tau": 2, "fan_in": 5, "max_levels": 5,           # spec 4.4 / the released CLI defaults
        "p_local": 0.3, "p_over": 0.2,                    # analyst phrasing (spec 4.3)
        "p_wrong": 0.35, "max_calls": 20,                 # single-call guess error; agentic sandbox calls
    })
    if arg == "smoke":
        c.trace2skill.update({"n_evolve": 40, "n_test": 60, "n_ood": 60})
    if arg == "lean":   # fewer trajectories: the support filter has less to go on (a harder setup, our choice)
        c.trace2skill.n_evolve = 50
    return c


def get_sweep(arg=None):
    from projects.trace2skill.task import ARMS, MODES, SOURCES

    seeds = SEEDS[:2] if arg == "smoke" else SEEDS
    name = "evolution" if arg is None else f"evolution_{arg}"
    points = [dict(name=f"s{seed}", arm="evolution", arg=arg, overrides={"seed": seed}) for seed in seeds]
    columns = []   # every claim reads agent == source; summary.json holds every agent x split
    for mode in MODES:
        for source in SOURCES:
            key = f"{mode}/{source}"
            columns += [f"{key}/{arm}/{source}/{split}" for split in ("test", "ood") for arm in ARMS]
            columns += [f"{key}/{arm}/{source}/{split}/below_oracle" for split in ("test", "ood") for arm in ARMS
                        if arm not in ("t2s", "oracle")]
            columns += [f"{key}/{arm}/diag/{d}" for arm in ("t2s", "seq_b1", "seq_b4")
                        for d in ("precision", "recall", "local_share", "over_share", "contradictions", "words")]
            columns += [f"{key}/lessons/{a}/{m}" for a in ("agentic", "single", "success")
                        for m in ("count", "precision")]
        columns.append(f"{mode}/transfer_S_to_L/excess")
    columns.append("wall_time_s")
    return dict(name=name, points=points, columns=columns, group=["arm"],
                plot=dict(kind="bars", metric="deepening/S/t2s/S/test"))

"""EVPV-PRM, GSM8K analog with J-learn, a trained step judge (../shared/papers/evpv_prm.md §4.4, optional): claim (i),
the EVPV-conditioned judge's step macro-F1 above the plain judge's, with a judge that learns its checks instead of
J-sim's exact ones. p_perc 0.2, p_ext 0.05 (the grid's informative cell), 3 seeds.

Per seed, stages (one per arm; the two arms of a seed read the same problems, candidates and noise draws and differ
only in the E line of the prompt, projects/evpv_prm/judge_data.py):
  judge_plain_s<k>   SFT of a 4-layer d-256 byte-level transformer on 200k step examples of templated problems
                     (perceived question, history, step -> " +" / " -"), 10,000 steps of 128
  judge_evpv_s<k>    the same with the extracted facts in the prompt
Point eval_s<k> (task evpv_prm/jlearn_eval): both judges of the seed score every step of 500 templated evaluation
problems x 8 candidates; verdict = the likelier of "+" and "-"; every J-sim metric (step macro-F1, premise recall,
BoN@k ungated / gated) for the learned judges, and J-sim's on the same candidates under jsim/.

    python -m shared.sweep --config=experiments/evpv_prm/jlearn.py --workdir=runs/evpv_prm/jlearn --parallel=6
    python -m shared.sweep --config=experiments/evpv_prm/jlearn.py:smoke --workdir=runs/evpv_prm/jlearn_smoke

Hardware: one GPU (6 stages of 4.3M parameters, then 3 evaluation points); measured on 2 H200s (3 stages a GPU,
~480 s each). Results as shared.sweep writes them: projects/evpv_prm/results/jlearn/.
Variants of get_config: judge_plain, judge_evpv, eval (each with _smoke); judge_plain_pairs, judge_evpv_pairs (the
"pairs" table's stages); "smoke" is the smoke table as one launch.

Sweep variant "pairs" (projects/evpv_prm/README.md, J-learn): the same stages, steps and evaluation points, but half
of each judge's 200k SFT examples are (premise-misread step, clean twin) pairs (judge_data premise_pair_share 0.5):
the committed table's judges learned the arithmetic and an out-of-range heuristic, not the premise lookup.

    python -m shared.sweep --config=experiments/evpv_prm/jlearn.py:pairs --workdir=runs/evpv_prm/jlearn_pairs \
        --parallel=6

Sweep variant "long": the committed table's data with 3x the SFT steps (30,000 of 128): its judges underfit (train
loss equal to held-out loss), so more steps are the other lever.

    python -m shared.sweep --config=experiments/evpv_prm/jlearn.py:long --workdir=runs/evpv_prm/jlearn_long --parallel=6
"""
from projects.evpv_prm.config import JUDGE_ARMS, judge_sft_config, jlearn_eval_config

SEEDS = (0, 1, 2)
P_PERC, P_EXT = 0.2, 0.05
AGGS = ("correctness_rate", "geometric_mean")
PAIR_SHARE = 0.5      # share of SFT examples that are premise pairs in the "pairs" table
LONG_STEPS = 30_000   # SFT steps of each judge in the "long" table (the committed table: 10,000)
SWEEP_VARIANTS = ("pairs", "long")  # get_sweep variants beside "" and "smoke" (tests/test_experiments.py)


def get_config(arg=None):
    if arg == "smoke":
        import ml_collections

        from shared.config.base import base_config

        c = base_config()
        c.project, c.task, c.mesh.preset = "evpv_prm", "sweep", "cpu_8"
        c.sweep = ml_collections.ConfigDict(dict(table="experiments/evpv_prm/jlearn.py:smoke"))
        return c
    arg = arg or "eval"
    smoke = arg.endswith("_smoke")
    base = arg[:-len("_smoke")] if smoke else arg
    pairs = base.endswith("_pairs")
    base = base[:-len("_pairs")] if pairs else base
    if base.startswith("judge_") and base[len("judge_"):] in JUDGE_ARMS:
        return judge_sft_config(base[len("judge_"):], smoke, premise_pair_share=PAIR_SHARE if pairs else 0.0)
    if base == "eval":
        return jlearn_eval_config(smoke)
    raise ValueError(f"experiments/evpv_prm/jlearn.py: unknown variant {arg!r} (known: judge_plain, judge_evpv, "
                     f"judge_plain_pairs, judge_evpv_pairs, eval, each with _smoke; smoke)")


def columns() -> list[str]:
    step = [f"{prefix}step/{j}/{m}" for prefix in ("", "jsim/") for j in JUDGE_ARMS
            for m in ("macro_f1", "premise_recall", "first_error_acc")]
    bon = [f"bon/{j}/{g}/{a}@8" for j in JUDGE_ARMS for g in ("ungated", "gated") for a in AGGS]
    return (step + [f"jl/{j}/step_accuracy" for j in JUDGE_ARMS] + bon +
            ["pass@1", "pass@8", "data/problems", "data/candidate_accuracy", "wall_time_s"])


def get_sweep(arg=None):
    if arg not in (None, "smoke", *SWEEP_VARIANTS):
        raise ValueError(f"experiments/evpv_prm/jlearn.py: unknown sweep variant {arg!r} (known: smoke, "
                         f"{', '.join(SWEEP_VARIANTS)})")
    smoke = arg == "smoke"
    suffix = "_smoke" if smoke else ""
    judge_suffix = "_pairs" if arg == "pairs" else ""
    seeds = SEEDS[:1] if smoke else SEEDS
    stage_overrides = {"data.task_options.p_perc": P_PERC, "data.task_options.p_ext": P_EXT}
    if arg == "long":
        stage_overrides["train.steps"] = LONG_STEPS
    stages = [dict(name=f"judge_{arm}_s{seed}", arg=f"judge_{arm}{judge_suffix}{suffix}",
                   overrides={"seed": seed, **stage_overrides})
              for seed in seeds for arm in JUDGE_ARMS]
    points = [dict(name=f"eval_s{seed}", arg=f"eval{suffix}", arm="jlearn",
                   overrides={"seed": seed, "evpv.p_perc": P_PERC, "evpv.p_ext": P_EXT,
                              "jlearn.plain_run": f"{{stage:judge_plain_s{seed}}}",
                              "jlearn.evpv_run": f"{{stage:judge_evpv_s{seed}}}"})
              for seed in seeds]
    name = "jlearn" + (f"_{arg}" if arg in SWEEP_VARIANTS else "")
    return dict(name=name, stages=stages, points=points, columns=columns(), group=["arm"],
                plot=dict(kind="bars", metric="step/evpv/macro_f1"))

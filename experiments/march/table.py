"""MARCH's table (../shared/papers/march.md D.3): every arm of a seed starts from that seed's SFT warm start (a sweep
stage, experiments/march/numfacts.py:sft), then 300 RL steps of B = 64 (PPO + GAE on Solver and Checker).

    python -m shared.sweep --config=experiments/march/table.py --workdir=runs/march/table --parallel=8
    python -m shared.sweep --config=experiments/march/table.py:mini --workdir=runs/march/mini --parallel=8
    python -m shared.sweep --config=experiments/march/table.py:smoke --workdir=/tmp/march_table_smoke   # CI

Arms (3 seeds each):
  sft          the warm start itself, evaluated (train.steps = 0)
  march        blind Checker (documents + questions), 3-sample vote, ZTR (-1/0), Solver + Checker trained
  symmetric    the Checker also sees the Solver's response (confirmation-bias ablation)
  solver_only  MARCH's reward, the Checker not trained
  err          -0.1 min(#faults, 13)
  ztr01        +1 if every check passes, else 0
  oracle       the programmatic fact check as the Solver's reward (upper bound, uses labels)
":mini" is the smallest table that tests claims 1-2 of D.4 (MARCH lowers the hallucination rate vs SFT with coverage
kept; the symmetric Checker gets less than half of MARCH's reduction): arms sft, march, symmetric, 3 seeds, on the
4 x 256 model, B = 32, 100 RL steps.

GPU cost (estimated, not measured: no GPU run of this code yet; decode-bound, see README.md "Cost"):
  full  per RL point ~2-3 s/step x 300 = 10-15 min on one H100; SFT stage ~3 min; 18 RL points + 3 SFT-arm
        evaluations + 3 stages ~ 3.5-4.5 GPU-hours (about 1 hour of wall time on 4 H100s with --parallel=8).
  mini  per RL point ~1 s/step x 100 ~ 2-3 min with compilation; SFT stage ~1-2 min; 6 RL points + 3 evaluations
        + 3 stages ~ 20-25 GPU-minutes (~8 min of wall time on 4 H100s with --parallel=8).
"""
from experiments.march.numfacts import get_config as numfacts_config

SEEDS = (0, 1, 2)
ARMS = {
    "sft": {"train.steps": 0},
    "march": {},
    "symmetric": {"march.symmetric_checker": True},
    "solver_only": {"agent.roles.checker.train": False},
    "err": {"march.reward": "err"},
    "ztr01": {"march.reward": "ztr01"},
    "oracle": {"march.reward": "oracle", "agent.roles.checker.train": False},
}
MINI_ARMS = ("sft", "march", "symmetric")
SWEEP_VARIANTS = ("mini", "mini_copy", "mini_recall", "mini_recall_long", "mini_recall_fresh", "mini_recall_spec")
# mini_copy: the mini table on queries without the derived sum / difference (numfacts derived=False): the mini
# table's warm start sat at the floor (99.5% of answers hallucinated), the derived value needing arithmetic a tiny
# model cannot do (projects/march/README.md)
NO_DERIVED = {"rl.task_options.derived": False, "agent.sft_options.derived": False}
# mini_recall: mini_copy with documents that write "buses 532" (the attribute before its value, as the answers and the
# Checker's evidence do) and a 3,000-step warm start. mini_copy's warm starts (1,200 steps) learnt the traces'
# templates and no lookup: their token accuracy stopped at 1 - (share of looked-up digits) = 0.942 (seeds 1, 2; the
# greedy answers: 100% hallucinated, coverage 0); seed 0 began the lookup at ~800 steps (0.967) and its points died of
# out-of-memory. The looked-up digits of "532 buses" precede the name that selects them, which a causal model cannot
# read yet; name-first documents make the copy an induction-style lookup (README.md "The warm start's floor").
RECALL = {"derived": False, "name_first": True}
RECALL_SFT_STEPS = 3000
# mini_recall_long: mini_recall's 3,000-step warm starts reached token accuracy 0.969-0.979 with the loss still falling
# (seed 0: 0.10 -> 0.064 over the last 500 steps) yet answered 90-99% hallucinated, and every MARCH Solver got reward
# -1 (no signal; results/mini_recall). 10,000 steps (~11 passes over the 60k traces) give the lookup time to finish.
RECALL_LONG_SFT_STEPS = 10000
# mini_recall_fresh: mini_recall_long's 10,000-step warm starts answered 63% hallucinated, coverage 0.49 (2 seeds,
# results/mini_recall_long), and the blind Checker, looking values up as poorly, flagged nearly every response (MARCH's
# reward -0.98: no signal). Those warm starts saw each of the 60k traces ~11 times; the same steps over 320k traces
# (2 passes; generating them takes ~2.5 min of one CPU core) test whether the lookup is short of data, not of steps
RECALL_FRESH_N_TRAIN = 320000
# mini_recall_spec: mini_recall_fresh's seed 0 answered 69% hallucinated (mini_recall_long: 63%): 5x the traces did not
# help, so the 4 x 256 model, not the data, limits the lookup. The spec's own model (D.2: 8 layers x 512) in the stage
# and in the RL points, at the full SFT learning rate; the RL points keep the mini table's B = 32, 100 steps and
# memory budgets. 3,000 steps: measured on one H200 (2026-11-29, 6,000 steps, lost with the lease at step 4,790) a
# stage ran at 0.13 s/step alone (750k tok/s, 18% MFU) and its token accuracy on held-out traces was 0.991 at step
# 3,000 vs 0.993 at 4,500; at 3,000 steps the three seeds' stages fit one lease side by side
SPEC_MODEL = {"model.d_model": 512, "model.n_layers": 8, "model.n_heads": 8, "model.n_kv_heads": 8,
              "model.head_dim": 64, "model.d_ff": 2048}
RECALL_SPEC_SFT_STEPS, RECALL_SPEC_SFT_LR = 3000, 1e-3
COLUMNS = ["eval/halluc_rate", "eval/halluc_rate_before", "eval/halluc_rate_sampled", "eval/halluc_rate_sampled_before",
           "eval/coverage", "eval/coverage_before", "eval/coverage_sampled", "eval/numbers_per_response",
           "rl/role/solver/halluc_rate", "rl/role/solver/coverage",
           "rl/role/checker/agreement", "rl/role/checker/confirm_rate", "rl/role/checker/oracle_confirm_rate",
           "rl/role/proposer/questions", "rl/role/solver/reward_mean", "wall_time_s"]
SWEEP_ARGS = (None, "", *SWEEP_VARIANTS, "smoke")


def get_config(arg=None):
    """The RL points' config (numfacts.py's variants: "", "mini", "sft", ..., "smoke")."""
    return numfacts_config(arg)


def get_sweep(arg=None):
    if arg not in SWEEP_ARGS:
        raise ValueError(f"experiments/march/table.py: unknown sweep variant {arg!r} (known: "
                         f"{', '.join(SWEEP_VARIANTS)}, smoke)")
    table_name = "march_" + (arg or "table")
    copy, recall = arg == "mini_copy", arg in SWEEP_VARIANTS[2:]
    long, fresh = arg in ("mini_recall_long", "mini_recall_fresh"), arg == "mini_recall_fresh"
    spec = arg == "mini_recall_spec"
    arg = "mini" if (copy or recall) else arg
    smoke, mini = arg == "smoke", arg == "mini"
    rl_arg = "smoke" if smoke else ("mini" if mini else None)
    sft_arg = "sft_smoke" if smoke else ("sft_mini" if mini else "sft")
    seeds = SEEDS[:1] if smoke else SEEDS
    arms = {name: ARMS[name] for name in (MINI_ARMS if (mini or smoke) else ARMS)}
    stage_extra, point_extra = {}, {}
    if copy:
        stage_extra, point_extra = {"data.task_options.derived": False}, dict(NO_DERIVED)
    if recall:
        stage_extra = {f"data.task_options.{k}": v for k, v in RECALL.items()}
        stage_extra["train.steps"] = RECALL_LONG_SFT_STEPS if long else RECALL_SFT_STEPS
        if fresh:
            stage_extra["data.n_train"] = RECALL_FRESH_N_TRAIN
        point_extra = {f"{group}.{k}": v for group in ("rl.task_options", "agent.sft_options") for k, v in RECALL.items()}
        if spec:
            stage_extra.update(SPEC_MODEL, **{"train.steps": RECALL_SPEC_SFT_STEPS, "optim.lr": RECALL_SPEC_SFT_LR})
            point_extra.update(SPEC_MODEL)
    stages = [dict(name=f"warmstart_s{seed}", overrides={"seed": seed, **stage_extra}, arg=sft_arg) for seed in seeds]
    points = [dict(name=f"{name}_s{seed}", arg=rl_arg, arm=name,
                   overrides={**overrides, **point_extra, "seed": seed,
                              "train.init_from": f"run:{{stage:warmstart_s{seed}}}"})
              for name, overrides in arms.items() for seed in seeds]
    return dict(name=table_name, stages=stages, points=points, columns=COLUMNS, group=["arm"],
                plot=dict(kind="bars", metric="eval/halluc_rate"))

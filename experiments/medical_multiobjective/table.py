"""The multi-objective assistant table (../shared/papers/medical_multiobjective.md D.2): 8 arms x 3 seeds, every arm
of a seed from that seed's SFT stage (experiments/base/assistant.py), so the ledger pairs arms by seed.

    python -m shared.sweep --config=experiments/medical_multiobjective/table.py --workdir=runs/medical_multiobjective/table --parallel=8
    python -m shared.sweep --config=experiments/medical_multiobjective/table.py:min --workdir=runs/medical_multiobjective/table_min --parallel=8 --stages_at_once=1
    python -m shared.launch --config=experiments/medical_multiobjective/table.py:smoke --workdir=runs/mo_smoke   # one point, CPU

Arms (projects/medical_multiobjective/config.py): raw sum (w = 1), per-batch z-norm, RFN only, RFN + Tri-Factor,
RFN + Tri-Factor without weakness / risk / redundancy, normalise-then-sum. Channels: correctness, safety (kappa 2),
format, answer-line, brevity, all of weight 1. RL: GRPO (token-mean PPO-clip, eps 0.2, no KL), B = 32 prompts x
G = 16, 2 mini-batches per rollout batch, 300 steps, AdamW 2e-5 constant, T = 1.0, completions <= 176 tokens; the
RFN / Tri-Factor arms first roll out the warm start on 512 prompts x 8 samples (the spec's calibration set) and
freeze the statistics. Evaluation (medical_multiobjective/eval): 500 held-out problems, greedy, before and after.
":min": raw sum, RFN only and RFN + Tri-Factor (the arms criteria 1 and 2 read), 3 of the 8 arms, so those criteria
can decide on short machine leases (a seed at a time) before the ablations run.

Not run yet. Cost (estimated from other tables, not measured): 3 stages + 24 points. SFT: 1,000 TinyGSM-Sym SFT
steps of 128 x 320 tokens took 0.056-0.107 s a step on shared H200s (experiments/base/results/base_tinygsm_sym), so
2,000 steps at 448 tokens ~3-4 min a stage. RL: the CLIPO table's steps (32 x 8 rollouts of <= 80 tokens) took
0.13-0.52 s (perf/step_s, projects/clipo/results/tinygsm_sym_table); here 2x the rows and 2.2x the tokens, so
~1-2 s a step, 300 steps ~5-10 min, plus calibration (512 x 8) and evaluation ~1-2 min: ~24 x 9 + 10 = ~230
GPU-min, ~30-40 min wall on 8 GPUs (--parallel=8).
"""
import ml_collections

from projects.medical_multiobjective.config import ARMS, add_channels, set_arm

SEEDS = (0, 1, 2)
RL_STEPS = 300
MIN_ARMS = ("raw_sum", "rfn", "rfn_tri")
SWEEP_VARIANTS = ("min",)
COLUMNS = ["mo/accuracy", "mo/hazard_refusal", "mo/over_refusal", "mo/format", "mo/answer_line", "mo/length",
           "mo/accuracy_before", "mo/hazard_refusal_before", "mo/over_refusal_before", "mo/format_before",
           "mo/answer_line_before", "mo/length_before", "mo/worst_gain", "mo/brevity/share_mean",
           "mo/correctness/share_mean", "mo/safety/share_mean", "mo/format/share_mean", "mo/answer_line/share_mean",
           "mo/format/weight_mean", "mo/answer_line/weight_mean", "mo/safety/weight_mean", "mo/share_drift",
           "mo/safety_batch_std", "rl/reward_mean", "wall_time_s"]


def get_config(arg=None):
    """"" / "smoke": an RL point (arm RFN + Tri-Factor unless the sweep sets another; starts from
    train.init_from); "base" / "base_smoke": the seed's SFT stage."""
    if arg not in (None, "", "min", "smoke", "base", "base_smoke"):     # min: the :min table's RL point
        raise ValueError(f"experiments/medical_multiobjective/table.py: unknown variant {arg!r} "
                         "(known: min, smoke, base, base_smoke)")
    from experiments.base import assistant as base

    smoke = arg in ("smoke", "base_smoke")
    c = base.get_config("smoke" if smoke else None)
    if arg in ("base", "base_smoke"):
        return c
    c.task = "rl"
    c.rl.task = "rl/assistant"
    c.rl.task_options = ml_collections.ConfigDict()
    add_channels(c)
    set_arm(c, "rfn_tri")
    c.rl.n_train = 20000
    c.rl.n_eval = 256
    c.rl.eval_every = 50
    c.rl.eval_samples = 0
    c.rl.warmup_sft_steps = 0
    c.rl.prompts_per_step = 32
    c.rl.group_size = 16
    c.rl.mini_batches = 2
    c.rl.max_new_tokens = 176
    c.rl.temperature = 1.0
    c.rl.kl_coef = 0.0
    c.rl.reward_calibration_prompts = 512
    c.rl.reward_calibration_samples = 8
    c.train.steps = RL_STEPS
    c.train.log_every = 1
    c.train.eval_every = RL_STEPS
    c.train.checkpoint_every = 50
    c.optim.lr = 2e-5
    c.optim.schedule = "constant"
    c.optim.warmup_steps = 5
    c.optim.weight_decay = 0.0
    c.optim.b2 = 0.99
    c.optim.grad_clip = 1.0
    if smoke:
        c.rl.n_train, c.rl.n_eval, c.rl.eval_every = 64, 4, 100
        c.rl.prompts_per_step, c.rl.group_size, c.rl.max_new_tokens = 4, 4, 8
        c.rl.reward_calibration_prompts, c.rl.reward_calibration_samples = 4, 2
        c.mo_eval.n = 8
        c.train.steps, c.train.checkpoint_every, c.train.eval_every = 2, 2, 2
        c.optim.warmup_steps = 1
    return c


def get_sweep(arg=None):
    if arg not in (None, "", "smoke", *SWEEP_VARIANTS):
        raise ValueError(f"experiments/medical_multiobjective/table.py: unknown sweep variant {arg!r} (known: "
                         f"{', '.join(SWEEP_VARIANTS)}, smoke)")
    smoke = arg == "smoke"
    arms = {name: ARMS[name] for name in MIN_ARMS} if arg == "min" else ARMS
    suffix = "_smoke" if smoke else ""
    seeds = SEEDS[:1] if smoke else SEEDS
    stages = [dict(name=f"sft_s{seed}", overrides={"seed": seed}, arg="base" + suffix) for seed in seeds]
    points = [dict(name=f"{arm}_s{seed}", arg=arg, arm=arm,
                   overrides={**keys, "seed": seed, "train.init_from": f"run:{{stage:sft_s{seed}}}"})
              for arm, keys in arms.items() for seed in seeds]
    return dict(name="mo_table" + (f"_{arg}" if arg else ""), stages=stages, points=points, group=["arm"],
                columns=COLUMNS,
                plot=dict(kind="curves", metric="reward/medical_multiobjective/safety/mean", x="step"))

"""The ETR table of ../shared/papers/etr.md D.2 on one task, shared by countdown_table.py and cot_table.py.

Every arm of a seed starts from that seed's SFT stage (the task's experiments/base recipe), so the ledger pairs arms
by seed. The epsilon-matched arm replays the effective width (rl/etr/eps_mean) of a pilot ETR-full run of its seed
(stage pilot_s<seed>: ETR-full from the same warm start with seed + 100, so it is not a copy of the ETR-full point),
as the running mean up to each step (projects/etr/config.py).

RL (D.2 / section b): B = 64 prompts x G = 16, 2 mini-batches per rollout batch (ratios move, so clipping acts),
200 RL steps = 400 actor updates, AdamW 2e-5 constant, token-mean, no KL (section b allows 0 or 1e-3; 0 lets the
entropy move, which claim 1 is about), temperature 1.0. 5 seeds.

":min": GRPO and ETR-full only (the arms criteria 1, 2 and 5 read; projects/etr/claims.py), no pilots: 2 of the 7
RL points a seed, so those criteria can decide on short machine leases before the rest of the table runs.
"""
import importlib

import ml_collections

from projects.etr.config import ARMS, add_etr_eval, set_arm

SEEDS = (0, 1, 2, 3, 4)
RL_STEPS = 200          # x 2 mini-batches = the spec's 400 actor updates
PILOT_SEED_OFFSET = 100
MIN_ARMS = ("grpo", "etr_full")
SWEEP_VARIANTS = ("min",)
COLUMNS = ["etr/id_avg@8", "etr/hard_avg@8", "etr/id_pass@16", "etr/hard_pass@16", "etr/id_avg@8_before",
           "etr/hard_avg@8_before", "etr/id_pass@16_before", "etr/hard_pass@16_before", "etr/entropy_first",
           "etr/entropy_last", "etr/entropy_auc", "etr/entropy_ratio", "etr/mixed_groups_first",
           "etr/mixed_groups_mean", "rl/etr/eps_mean", "rl/eps_matched/eps",
           "train/clipfrac_high", "train/clipfrac_low", "rl/zero_variance_frac", "rl/response_length",
           "rl/reward_mean", "wall_time_s"]


def rl_config(base_module: str, task: str, task_options: dict, max_new_tokens: int, eval_tokens: int, arg=None):
    """"" / "min" / "smoke": an RL point (arm ETR-full unless the sweep sets another; starts from train.init_from);
    "base" / "base_smoke": the seed's SFT stage (the base recipe)."""
    known = (None, "", "min", "smoke", "base", "base_smoke")
    if arg not in known:
        raise ValueError(f"unknown variant {arg!r} (known: min, smoke, base, base_smoke)")
    smoke = arg in ("smoke", "base_smoke")
    base = importlib.import_module(base_module)
    c = base.get_config("smoke" if smoke else None)
    if arg in ("base", "base_smoke"):
        return c
    c.task = "rl"
    c.rl.task = task
    c.rl.task_options = ml_collections.ConfigDict(dict(task_options))
    c.rl.n_train = 20000
    c.rl.n_eval = 256                  # the learner's own greedy test / ood tracking every eval_every steps
    c.rl.eval_every = 25
    c.rl.eval_samples = 0              # sampled metrics come from the etr/eval hook
    c.rl.warmup_sft_steps = 0          # the warm start is train.init_from (the sweep's stage)
    c.rl.prompts_per_step = 64
    c.rl.group_size = 16
    c.rl.mini_batches = 2
    c.rl.max_new_tokens = max_new_tokens
    c.rl.temperature = 1.0
    c.rl.kl_coef = 0.0
    set_arm(c, "etr_full")
    add_etr_eval(c, max_new_tokens=eval_tokens)
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
        c.rl.prompts_per_step, c.rl.group_size = 4, 4
        c.rl.max_new_tokens = 8
        c.etr_eval.n, c.etr_eval.avg_samples, c.etr_eval.pass_samples, c.etr_eval.max_new_tokens = 4, 2, 2, 8
        c.train.steps, c.train.checkpoint_every, c.train.eval_every = 2, 2, 2
        c.optim.warmup_steps = 1
    return c


def sweep(name: str, arg=None) -> dict:
    """All arms of D.2 x SEEDS over per-seed SFT stages, plus the per-seed ETR pilot the eps-matched arm replays
    (arg "min": GRPO and ETR-full only, no pilots)."""
    if arg not in (None, "", "smoke", *SWEEP_VARIANTS):
        raise ValueError(f"unknown sweep variant {arg!r} (known: {', '.join(SWEEP_VARIANTS)}, smoke)")
    smoke, minimal = arg == "smoke", arg == "min"
    arms = {name: ARMS[name] for name in MIN_ARMS} if minimal else ARMS
    suffix = "_smoke" if smoke else ""
    seeds = SEEDS[:1] if smoke else SEEDS
    stages, points = [], []
    for seed in seeds:
        start = f"run:{{stage:sft_s{seed}}}"
        stages.append(dict(name=f"sft_s{seed}", overrides={"seed": seed}, arg="base" + suffix))
        if not minimal:
            stages.append(dict(name=f"pilot_s{seed}", arg=arg, overrides={
                **ARMS["etr_full"], "seed": seed + PILOT_SEED_OFFSET, "train.init_from": start}))
        for arm, keys in arms.items():
            overrides = {**keys, "seed": seed, "train.init_from": start}
            if arm == "eps_matched":
                overrides["rl.eps_schedule.source"] = f"{{stage:pilot_s{seed}}}"
            points.append(dict(name=f"{arm}_s{seed}", arg=arg, arm=arm, overrides=overrides))
    return dict(name=name, stages=stages, points=points, group=["arm"], columns=COLUMNS,
                plot=dict(kind="curves", metric="train/entropy", x="step"))

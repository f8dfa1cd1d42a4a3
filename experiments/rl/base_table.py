"""The RL base table: every algorithm of ../shared/papers/rl_base_algorithms.md (section 2) on rl/arithmetic, each
seed's arms starting from one shared SFT checkpoint (experiments/base/arithmetic.py, a sweep stage), plus a
continued-SFT arm that spends the same steps on more supervised training.

    python -m shared.sweep --config=experiments/rl/base_table.py --workdir=runs/rl/base_table --parallel=8
    python -m shared.sweep --config=experiments/rl/base_table.py:lr2e-5 --workdir=runs/rl/base_table_lr2e-5 --parallel=8

Arms share everything but the method: 150 RL steps of 64 prompts x 8 samples, 2 mini-batches per rollout batch
(so ratios and clipping act), lr 1e-4 constant, no KL (beta = 0), temperature 1. The ledger compares each arm
with the continued-SFT arm and with GRPO, paired by seed (shared.stats), in experiments/rl/results/base_table/.
"""
import ml_collections

from experiments.base import arithmetic as base

SEEDS = (0, 1, 2, 3, 4)
RL_STEPS = 150
ARMS = {
    "ppo_gae": {"rl.advantage": "gae", "rl.loss_agg": "token-mean"},
    "grpo": {"rl.advantage": "grpo", "rl.loss_agg": "seq-mean-token-mean"},
    "drgrpo": {"rl.advantage": "drgrpo", "rl.loss_agg": "seq-mean-token-sum-norm"},
    "dapo": {"rl.advantage": "grpo", "rl.loss_agg": "token-mean", "rl.eps_high": 0.28, "rl.dynamic_sampling": True},
    "gspo": {"rl.advantage": "grpo", "rl.policy_loss": "gspo", "rl.eps_low": 3e-4, "rl.eps_high": 4e-4},
    "reinforce++": {"rl.advantage": "reinforce++", "rl.loss_agg": "token-mean"},
    "reinforce++_baseline": {"rl.advantage": "reinforce++-baseline", "rl.loss_agg": "token-mean"},
    "rloo": {"rl.advantage": "rloo", "rl.loss_agg": "token-mean"},
    "gmpo": {"rl.advantage": "grpo", "rl.policy_loss": "gmpo", "rl.eps_low": 0.4, "rl.eps_high": 0.4},
}
VARIANTS = ("base", "continued_sft")
SWEEP_VARIANTS = ("lr2e-5",)  # get_sweep variants checked by tests/test_experiments.py (any lr<value> works)


def get_config(arg=None):
    """"": the RL arm; "lr<value>": the RL arm at that lr (the sweep variant's points); "base": the shared SFT
    stage; "continued_sft": the control arm; "smoke": CI."""
    smoke = arg == "smoke" or (arg or "").endswith("_smoke")
    kind = (arg or "").removesuffix("_smoke").removesuffix("smoke") or "rl"
    lr = 1e-4
    if kind.startswith("lr"):
        kind, lr = "rl", _parse_lr(kind)
    if kind not in ("rl", "base", "continued_sft"):
        raise ValueError(f"experiments/rl/base_table.py: unknown variant {arg!r} (known: base, continued_sft, smoke)")
    sft = base.get_config("smoke" if smoke else None)
    sft.model.heads = ["lm", "scalar"]  # PPO's critic is the policy's scalar head: every arm carries it
    if kind == "base":
        return sft
    if kind == "continued_sft":
        sft.train.steps = 3 if smoke else RL_STEPS
        sft.train.checkpoint_every = sft.train.steps
        sft.train.eval_every = sft.train.steps
        sft.optim.lr = 1e-4
        sft.optim.schedule = "constant"
        sft.optim.warmup_steps = 1
        return sft
    c = sft
    c.task = "rl"
    c.rl.task = "rl/arithmetic"
    c.rl.task_options = ml_collections.ConfigDict({"ops": "+-*"})
    c.rl.n_train = 20000
    c.rl.n_eval = 500
    c.rl.warmup_sft_steps = 0
    c.rl.prompts_per_step = 64
    c.rl.group_size = 8
    c.rl.mini_batches = 2
    c.rl.max_new_tokens = 8
    c.rl.temperature = 1.0
    c.rl.eval_every = 50
    c.rl.eval_samples = 8
    c.train.steps = RL_STEPS
    c.train.log_every = 5
    c.train.checkpoint_every = 50
    c.optim.lr = lr
    c.optim.schedule = "constant"
    c.optim.warmup_steps = 5
    c.optim.b2 = 0.99
    c.optim.grad_clip = 1.0
    if smoke:
        c.rl.n_train, c.rl.n_eval, c.rl.prompts_per_step, c.rl.group_size, c.rl.eval_samples = 64, 8, 4, 4, 2
        c.rl.max_new_tokens, c.rl.eval_every = 6, 2
        c.train.steps, c.train.checkpoint_every, c.train.log_every = 2, 1, 1
    return c


def _parse_lr(arg: str) -> float:
    try:
        lr = float(arg.removeprefix("lr")) if arg.startswith("lr") else 0.0
    except ValueError:
        lr = 0.0
    if lr <= 0:
        raise ValueError(f"experiments/rl/base_table.py: unknown variant {arg!r} (known: base, continued_sft, smoke, "
                         "lr<value> such as lr2e-5)")
    return lr


def get_sweep(arg=None):
    """"": the table at lr 1e-4; "lr<value>" (e.g. "lr2e-5"): every RL and continued-SFT arm at that constant lr
    (same SFT stages); "smoke": CI."""
    smoke = arg == "smoke"
    lr = _parse_lr(arg) if arg not in (None, "", "smoke") else None
    suffix = "_smoke" if smoke else ""
    seeds = SEEDS[:2] if smoke else SEEDS
    arms = dict(list(ARMS.items())[:2]) if smoke else ARMS
    lr_override = {"optim.lr": lr} if lr else {}
    stages = [dict(name=f"sft_s{seed}", overrides={"seed": seed}, arg="base" + suffix) for seed in seeds]
    points = [dict(name=f"{name}_s{seed}", arg=arg, arm=name,
                   overrides={**overrides, "seed": seed,
                              "train.init_from": f"run:{{stage:sft_s{seed}}}"})
              for name, overrides in arms.items() for seed in seeds]
    points += [dict(name=f"continued_sft_s{seed}", arg="continued_sft" + suffix, arm="continued_sft",
                    overrides={**lr_override, "seed": seed, "train.init_from": f"run:{{stage:sft_s{seed}}}"})
               for seed in seeds]
    return dict(
        name="base_table" + (f"_{arg}" if lr else ""), stages=stages, points=points,
        columns=["eval/test_accuracy_before", "eval/test_accuracy", "eval/greedy_accuracy", "eval/ood_accuracy",
                 "eval/greedy_accuracy_ood", "eval/test_pass@8", "rl/reward_mean", "wall_time_s"],
        group=["arm"],
        plot=dict(kind="curves", metric="rl/reward_mean", x="step"),
    )

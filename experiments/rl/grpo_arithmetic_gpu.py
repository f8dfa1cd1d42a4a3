"""GPU table: a small policy trained from scratch on rl/arithmetic (SFT on gold solutions, then RL), with greedy
accuracy on the held-out test split and the harder ood split (3-digit operands) before and after RL.

    python -m shared.sweep --config=experiments/rl/grpo_arithmetic_gpu.py --workdir=runs/grpo_arithmetic_gpu
    python -m shared.launch --config=experiments/rl/grpo_arithmetic_gpu.py --workdir=runs/one_point   # one run

Each sweep point runs the whole pipeline in its own workdir (SFT warm start in <point>/sft, then RL); on a
machine with several GPUs the points run in parallel, one per GPU. Points: GRPO (token-mean PPO-clip),
Dr. GRPO (no std scaling, seq-mean-token-sum-norm) and GRPO with DAPO's clip-higher and dynamic sampling.
The SFT phase is kept short on purpose so the warm-started policy is far from perfect and RL has room.
Its table (a legacy manifest, run before content hashes) was superseded by experiments/rl/results/base_table/ and
removed; it is in git history (commit 8e4bfd6 and earlier).
"""
import ml_collections

from shared.config.base import base_config


def get_config(arg=None):
    c = base_config()
    c.task = "rl"
    c.model.vocab_size = 384
    c.model.d_model = 256
    c.model.n_layers = 6
    c.model.n_heads = 8
    c.model.n_kv_heads = 8
    c.model.head_dim = 32
    c.model.d_ff = 1024
    c.model.remat = "none"
    c.model.dtype = "bfloat16"
    c.model.max_seq_len = 64
    c.data.tokenizer = "byte"
    c.data.seq_len = 24
    c.data.greedy_eval_examples = 0
    c.rl.task = "rl/arithmetic"
    c.rl.task_options = ml_collections.ConfigDict({"ops": "+-*"})
    c.rl.n_train = 20000
    c.rl.n_eval = 500
    c.rl.warmup_sft_steps = 600
    c.rl.sft_lr = 1e-3
    c.rl.sft_batch_size = 128
    c.rl.prompts_per_step = 64
    c.rl.group_size = 8
    c.rl.max_new_tokens = 8
    c.rl.temperature = 1.0
    c.rl.eval_every = 25
    c.rl.eval_samples = 8
    c.train.steps = 150
    c.train.log_every = 5
    c.train.checkpoint_every = 50
    c.optim.lr = 1e-4
    c.optim.schedule = "constant"
    c.optim.warmup_steps = 5
    c.optim.weight_decay = 0.0
    c.optim.b2 = 0.99
    c.mesh.preset = "gpu_1"
    if arg == "smoke":
        c.mesh.preset = "cpu_8"
        c.model.d_model = 64
        c.model.n_layers = 2
        c.model.n_heads = 4
        c.model.n_kv_heads = 4
        c.model.head_dim = 16
        c.model.d_ff = 128
        c.model.dtype = "float32"
        c.rl.n_train = 64
        c.rl.n_eval = 8
        c.rl.warmup_sft_steps = 3
        c.rl.sft_batch_size = 8
        c.rl.prompts_per_step = 4
        c.rl.group_size = 4
        c.rl.max_new_tokens = 6
        c.rl.eval_every = 2
        c.rl.eval_samples = 2
        c.train.steps = 2
        c.train.log_every = 1
        c.train.checkpoint_every = 1
    elif arg is not None:
        raise ValueError(f"experiments/rl/grpo_arithmetic_gpu.py: unknown variant {arg!r} (known: smoke)")
    return c


def get_sweep(arg=None):
    algorithms = [
        ("grpo", {"rl.advantage": "grpo", "rl.loss_agg": "token-mean", "rl.eps_high": 0.2,
                  "rl.dynamic_sampling": False}),
        ("drgrpo", {"rl.advantage": "drgrpo", "rl.loss_agg": "seq-mean-token-sum-norm", "rl.eps_high": 0.2,
                    "rl.dynamic_sampling": False}),
        ("dapo", {"rl.advantage": "grpo", "rl.loss_agg": "token-mean", "rl.eps_high": 0.28,
                  "rl.dynamic_sampling": True}),
    ]
    points = [dict(name=f"{name}_s{seed}", overrides={**overrides, "seed": seed}, arg=arg)
              for name, overrides in algorithms for seed in (0, 1, 2)]
    return dict(
        name="grpo_arithmetic_gpu",
        points=points,
        columns=["eval/test_accuracy_before", "eval/test_accuracy", "eval/ood_accuracy_before",
                 "eval/ood_accuracy", "eval/test_pass@1", "eval/test_pass@8", "rl/reward_mean", "wall_time_s"],
        group=["rl.advantage", "rl.loss_agg", "rl.eps_high", "rl.dynamic_sampling"],
        plot=dict(kind="curves", metric="rl/reward_mean", x="step"),
    )

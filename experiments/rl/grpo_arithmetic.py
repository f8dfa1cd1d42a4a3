"""Quick RL: SFT warm start on rl/arithmetic, then GRPO raises greedy accuracy (CPU, a few minutes).

    python -m shared.launch --config=experiments/rl/grpo_arithmetic.py --workdir=runs/grpo_arithmetic
    python -m shared.launch --config=experiments/rl/grpo_arithmetic.py:smoke --workdir=/tmp/grpo_smoke   # CI

A ~0.8M-parameter byte-level policy first learns "Q: 47+38=\\nA:" -> " 85" by masked SFT for
rl.warmup_sft_steps steps (in <workdir>/sft), deliberately short so it is far from perfect; then GRPO
(token-mean PPO-clip loss, G=8 samples for each of 16 prompts per step, reward = the task checker: exact
final answer) trains it on the same train split. summary.json reports greedy accuracy on the disjoint test
split and the 3-digit ood split before ("eval/test_accuracy_before") and after RL, plus pass@k on test.
"""
import ml_collections

from shared.config.base import base_config


def get_config(arg=None):
    c = base_config()
    c.task = "rl"
    c.model.vocab_size = 384
    c.model.d_model = 128
    c.model.n_layers = 4
    c.model.n_heads = 4
    c.model.n_kv_heads = 4
    c.model.head_dim = 32
    c.model.d_ff = 512
    c.model.remat = "none"
    c.model.dtype = "float32"
    c.model.max_seq_len = 64
    c.data.tokenizer = "byte"
    c.data.seq_len = 24
    c.data.greedy_eval_examples = 0   # the RL task evaluates itself
    c.rl.task = "rl/arithmetic"
    c.rl.task_options = ml_collections.ConfigDict({"ops": "+-*"})
    c.rl.n_train = 10000
    c.rl.n_eval = 200
    c.rl.warmup_sft_steps = 250
    c.rl.sft_lr = 3e-3
    c.rl.sft_batch_size = 64
    c.rl.prompts_per_step = 16
    c.rl.group_size = 8
    c.rl.max_new_tokens = 8
    c.rl.temperature = 1.0
    c.rl.eval_every = 20
    c.rl.eval_samples = 8
    c.rl.advantage = "grpo"
    c.rl.policy_loss = "ppo-clip"
    c.rl.loss_agg = "token-mean"
    c.train.steps = 60
    c.train.log_every = 5
    c.train.checkpoint_every = 20
    c.optim.lr = 2e-4
    c.optim.schedule = "constant"
    c.optim.warmup_steps = 3
    c.optim.weight_decay = 0.0
    c.optim.b2 = 0.99
    c.mesh.preset = "cpu_1"
    if arg == "smoke":
        c.mesh.preset = "cpu_8"
        c.model.d_model = 64
        c.model.n_layers = 2
        c.model.head_dim = 16
        c.model.d_ff = 128
        c.rl.n_train = 64
        c.rl.n_eval = 8
        c.rl.warmup_sft_steps = 4
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
        raise ValueError(f"experiments/rl/grpo_arithmetic.py: unknown variant {arg!r} (known: smoke)")
    return c

"""ETR at paper scale: Qwen3-8B-Base (one of the paper's three backbones) from HF weights, RL on MATH (train: the
4,500 MATH test problems outside MATH-500; evaluation: MATH-500), ETR-full against GRPO.

    python -m shared.launch --config=experiments/etr/etr_qwen.py:8b --workdir=runs/etr/qwen3_8b_etr \
        --config.train.init_from=hf:/path/to/Qwen3-8B-Base --config.data.tokenizer_path=/path/to/Qwen3-8B-Base/tokenizer.json

Variants: 8b (default: ETR-full), 8b_grpo (the GRPO arm; any arm of projects/etr/config.py ARMS is the same rl keys),
smoke (CI: a tiny random qwen3-shaped policy on rl/arithmetic_cot, cpu_8). The paper's hyperparameters were not
retrievable (spec section b); these are the spec's GRPO settings at this scale: G = 16, token-mean, 2 mini-batches
per rollout batch, no KL, T = 1.0, AdamW 1e-6, 64 prompts a step, responses <= 4,096 tokens, 300 steps. Differences
from the paper: no AIME set (not in ../shared/data), prompts are "Q: ...\\nA:" without a chat template, the MATH
checker is the repo's (shared/data/tasks/public.py). Nothing here has been run: no weights offline.
"""
import ml_collections

from projects.etr.config import add_etr_eval, set_arm
from shared.config.base import base_config

VARIANTS = ("8b", "8b_grpo", "smoke")
MATH_PATH = "../shared/data/math_competition"


def qwen3_8b(c):
    """c.model set to Qwen3-8B-Base's config.json shape (train.init_from=hf:<dir> checks every tensor)."""
    m = c.model
    m.family, m.qkv_bias, m.qk_norm, m.rope_theta, m.norm_eps = "qwen3", False, True, 1_000_000.0, 1e-6
    m.d_model, m.n_layers, m.n_heads, m.n_kv_heads, m.head_dim, m.d_ff = 4096, 36, 32, 8, 128, 12288
    m.vocab_size, m.tie_embeddings = 151936, False
    m.max_seq_len, m.remat, m.dtype = 32768, "dots", "bfloat16"
    c.data.tokenizer, c.data.tokenizer_path = "hf", ""   # set data.tokenizer_path to <weights>/tokenizer.json
    c.train.init_from = ""                               # set to hf:<weights dir>
    return c


def get_config(arg=None):
    arg = arg or "8b"
    if arg not in VARIANTS:
        raise ValueError(f"experiments/etr/etr_qwen.py: unknown variant {arg!r} (known: {', '.join(VARIANTS)})")
    c = base_config()
    c.task = "rl"
    set_arm(c, "grpo" if arg == "8b_grpo" else "etr_full")
    add_etr_eval(c, sets=["test"], n=500)
    c.rl.task = "rl/math"
    c.rl.task_options = ml_collections.ConfigDict({"path": MATH_PATH})
    c.rl.n_train = 4500
    c.rl.n_eval = 500
    c.rl.prompts_per_step = 64
    c.rl.group_size = 16
    c.rl.mini_batches = 2
    c.rl.max_new_tokens = 4096
    c.rl.temperature = 1.0
    c.rl.kl_coef = 0.0
    c.rl.eval_every = 50
    c.rl.eval_samples = 0
    c.train.steps = 300
    c.train.log_every = 1
    c.train.checkpoint_every = 25
    c.optim.lr = 1e-6
    c.optim.schedule = "constant"
    c.optim.warmup_steps = 10
    c.optim.weight_decay = 0.01
    c.mesh.preset = "gpu_1x8"
    if arg != "smoke":
        return qwen3_8b(c)
    m = c.model
    m.family, m.qkv_bias, m.qk_norm = "qwen3", False, True
    m.vocab_size, m.d_model, m.n_layers, m.n_heads, m.n_kv_heads, m.head_dim, m.d_ff = 384, 64, 2, 4, 2, 16, 128
    m.dtype, m.remat = "float32", "none"
    c.rl.task, c.rl.task_options = "rl/arithmetic_cot", ml_collections.ConfigDict()
    c.rl.n_train, c.rl.n_eval, c.rl.prompts_per_step, c.rl.group_size, c.rl.max_new_tokens = 32, 4, 4, 4, 8
    c.etr_eval.n, c.etr_eval.avg_samples, c.etr_eval.pass_samples = 4, 2, 2
    c.train.steps, c.train.checkpoint_every = 2, 2
    c.optim.warmup_steps = 1
    c.mesh.preset = "cpu_8"
    return c

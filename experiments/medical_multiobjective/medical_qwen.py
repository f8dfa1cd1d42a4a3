"""The multi-objective assistant at a real scale: Qwen2.5-7B-Instruct from HF weights (the paper's backbone is not
stated in what could be read; Qwen2.5-7B-Instruct is the repo's 7B Qwen shape), RL with the five channels of D.1
and RFN + Tri-Factor (any arm of projects/medical_multiobjective/config.py ARMS is the same rl keys).

    python -m shared.launch --config=experiments/medical_multiobjective/medical_qwen.py:7b --workdir=runs/mo/qwen7b \
        --config.train.init_from=hf:/path/to/Qwen2.5-7B-Instruct \
        --config.data.tokenizer_path=/path/to/Qwen2.5-7B-Instruct/tokenizer.json

Variants: 7b (default: RFN + Tri-Factor), 7b_raw_sum (the raw-sum arm), smoke (CI: a tiny random qwen2-shaped policy,
byte tokenizer, cpu_8). No SFT stage: the instruct model is the reference; it has never seen the trigger phrase or
the refusal token, so the prompt set should carry an instruction about them (not done here: prompts are the task's
"Q: ...\\nA:"). Brevity counts bytes, so its cap (160 bytes) binds sooner than with byte tokens. Settings: B = 32 x
G = 16, 2 mini-batches, 300 steps, AdamW 1e-6, no KL, completions <= 256 tokens, gpu_1x8. Nothing here has been run:
no weights offline.
"""
import ml_collections

from projects.medical_multiobjective.config import add_channels, set_arm
from shared.config.base import base_config

VARIANTS = ("7b", "7b_raw_sum", "smoke")


def qwen25_7b(c):
    """c.model set to Qwen2.5-7B-Instruct's config.json shape (train.init_from=hf:<dir> checks every tensor)."""
    m = c.model
    m.family, m.qkv_bias, m.rope_theta, m.norm_eps = "qwen2", True, 1_000_000.0, 1e-6
    m.d_model, m.n_layers, m.n_heads, m.n_kv_heads, m.head_dim, m.d_ff = 3584, 28, 28, 4, 128, 18944
    m.vocab_size, m.tie_embeddings = 152064, False
    m.max_seq_len, m.remat, m.dtype = 32768, "dots", "bfloat16"
    c.data.tokenizer, c.data.tokenizer_path = "hf", ""   # set data.tokenizer_path to <weights>/tokenizer.json
    c.train.init_from = ""                               # set to hf:<weights dir>
    return c


def get_config(arg=None):
    arg = arg or "7b"
    if arg not in VARIANTS:
        raise ValueError(f"experiments/medical_multiobjective/medical_qwen.py: unknown variant {arg!r} "
                         f"(known: {', '.join(VARIANTS)})")
    c = base_config()
    c.task = "rl"
    c.rl.task = "rl/assistant"
    c.rl.task_options = ml_collections.ConfigDict()
    add_channels(c)
    set_arm(c, "raw_sum" if arg == "7b_raw_sum" else "rfn_tri")
    c.rl.n_train = 20000
    c.rl.n_eval = 256
    c.rl.eval_every = 50
    c.rl.eval_samples = 0
    c.rl.prompts_per_step = 32
    c.rl.group_size = 16
    c.rl.mini_batches = 2
    c.rl.max_new_tokens = 256
    c.rl.temperature = 1.0
    c.rl.kl_coef = 0.0
    c.train.steps = 300
    c.train.log_every = 1
    c.train.checkpoint_every = 25
    c.optim.lr = 1e-6
    c.optim.schedule = "constant"
    c.optim.warmup_steps = 10
    c.optim.weight_decay = 0.01
    c.mesh.preset = "gpu_1x8"
    if arg != "smoke":
        return qwen25_7b(c)
    m = c.model
    m.family, m.qkv_bias = "qwen2", True
    m.vocab_size, m.d_model, m.n_layers, m.n_heads, m.n_kv_heads, m.head_dim, m.d_ff = 384, 64, 2, 4, 2, 16, 128
    m.dtype, m.remat, m.max_seq_len = "float32", "none", 512
    c.rl.n_train, c.rl.n_eval, c.rl.prompts_per_step, c.rl.group_size, c.rl.max_new_tokens = 32, 4, 4, 4, 8
    c.rl.reward_calibration_prompts, c.rl.reward_calibration_samples = 4, 2
    c.mo_eval.n = 8
    c.train.steps, c.train.checkpoint_every = 2, 2
    c.optim.warmup_steps = 1
    c.mesh.preset = "cpu_8"
    return c

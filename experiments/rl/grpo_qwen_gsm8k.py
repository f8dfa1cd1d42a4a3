"""GRPO on GSM8K for a real Qwen2.5 policy imported from HF safetensors (runs where the weights exist).

    python -m shared.launch --config=experiments/rl/grpo_qwen_gsm8k.py:0.5b --workdir=runs/qwen05_gsm8k \
        --config.train.init_from=hf:/path/to/Qwen2.5-0.5B-Instruct \
        --config.data.tokenizer_path=/path/to/Qwen2.5-0.5B-Instruct/tokenizer.json

Variants: 0.5b (default, one GPU), 1.5b (one GPU), 7b (8 GPUs, fsdp), smoke (CI: a tiny random policy on the
embedded arithmetic task, cpu_8). The model fields are the published Qwen2.5 shapes; `load_hf` checks every
tensor shape against them, so a mismatched checkpoint fails with the tensor's name. Settings follow the GRPO
defaults of ../shared/papers/rl_base_algorithms.md (verl-style token-mean PPO-clip, eps 0.2, kl 1e-3 k3,
G=8, temperature 1.0, lr 1e-6 with AdamW). Nothing here has been run: no weights are available offline.
"""
import ml_collections

from shared.config.base import base_config

VARIANTS = ("0.5b", "1.5b", "7b", "smoke")  # every variant is built and validated in CI (tests/test_experiments.py)
QWEN25 = {  # published config.json values (hidden, layers, heads, kv heads, intermediate, vocab, tied)
    "0.5b": dict(d_model=896, n_layers=24, n_heads=14, n_kv_heads=2, d_ff=4864, vocab_size=151936, tie=True),
    "1.5b": dict(d_model=1536, n_layers=28, n_heads=12, n_kv_heads=2, d_ff=8960, vocab_size=151936, tie=True),
    "7b": dict(d_model=3584, n_layers=28, n_heads=28, n_kv_heads=4, d_ff=18944, vocab_size=152064, tie=False),
}


def get_config(arg=None):
    size = arg or "0.5b"
    c = base_config()
    c.task = "rl"
    if size == "smoke":
        return smoke(c)
    if size not in QWEN25:
        raise ValueError(f"experiments/rl/grpo_qwen_gsm8k.py: unknown variant {arg!r} "
                         f"(known: {', '.join(QWEN25)}, smoke)")
    shape = QWEN25[size]
    m = c.model
    m.family = "qwen2"
    m.d_model, m.n_layers, m.n_heads, m.n_kv_heads = shape["d_model"], shape["n_layers"], shape["n_heads"], \
        shape["n_kv_heads"]
    m.head_dim = shape["d_model"] // shape["n_heads"]
    m.d_ff, m.vocab_size, m.tie_embeddings = shape["d_ff"], shape["vocab_size"], shape["tie"]
    m.qkv_bias = True
    m.rope_theta = 1_000_000.0
    m.norm_eps = 1e-6
    m.max_seq_len = 32768
    m.remat = "dots"
    m.dtype = "bfloat16"
    c.data.tokenizer = "hf"
    c.data.tokenizer_path = ""        # set to <weights>/tokenizer.json
    c.train.init_from = ""            # set to hf:<weights dir>
    c.rl.task = "rl/gsm8k"
    c.rl.task_options = ml_collections.ConfigDict({"path": "../shared/data/gsm8k"})
    c.rl.n_train = 7473
    c.rl.n_eval = 500
    c.rl.rewards = [("math/gsm8k", 1.0)]
    c.rl.prompts_per_step = 64
    c.rl.group_size = 8
    c.rl.max_new_tokens = 512
    c.rl.temperature = 1.0
    c.rl.kl_coef = 1e-3
    c.rl.kl_kind = "k3"
    c.rl.mini_batches = 4
    c.rl.eval_every = 25
    c.rl.eval_samples = 0
    c.train.steps = 300
    c.train.micro_batches = 4
    c.train.checkpoint_every = 25
    c.optim.lr = 1e-6
    c.optim.schedule = "constant"
    c.optim.warmup_steps = 10
    c.optim.weight_decay = 0.01
    c.mesh.preset = "gpu_1x8" if size == "7b" else "gpu_1"
    return c


def smoke(c):
    c.model.vocab_size = 384
    c.model.d_model = 64
    c.model.n_layers = 2
    c.model.n_heads = 4
    c.model.n_kv_heads = 2
    c.model.head_dim = 16
    c.model.d_ff = 128
    c.model.family = "qwen2"
    c.model.qkv_bias = True
    c.model.dtype = "float32"
    c.model.remat = "none"
    c.rl.task = "rl/arithmetic"
    c.rl.n_train = 32
    c.rl.n_eval = 4
    c.rl.prompts_per_step = 4
    c.rl.group_size = 4
    c.rl.max_new_tokens = 6
    c.rl.kl_coef = 1e-3
    c.rl.eval_samples = 0
    c.train.steps = 2
    c.train.log_every = 1
    c.train.checkpoint_every = 2
    c.optim.warmup_steps = 1
    c.mesh.preset = "cpu_8"
    return c

"""The DIR paper's setting (spec sections 1.6 and 2.1): a length-debiased reward model trained from an HF
instruct checkpoint with the CLUB penalty, gamma = 1, on pairs from a jsonl preference file.

    python -m shared.launch --config=experiments/dir_debias/llama_rm.py --workdir=runs/dir_llama8b \
        --config.train.init_from=hf:/path/to/Meta-Llama-3.1-8B-Instruct \
        --config.data.tokenizer_path=/path/to/Meta-Llama-3.1-8B-Instruct/tokenizer.json \
        --config.data.path=/path/to/skywork_reward_preference_80k.jsonl

Variants: llama8b (default; 8 GPUs, fsdp 8, 128 pairs per update = 16 micro-steps of 8 pairs, so the CLUB
contrast is over 8 pairs as in the released code), qwen0.5b (one GPU, Qwen2.5-0.5B-Instruct), smoke (CI: a tiny
random Llama-shaped RM on the generated synpref pairs, cpu_8; tests also start it from a tiny HF checkpoint).
Settings from the launch script: lr 2e-6, cosine, warm-up 3%, grad clip 5, 1 epoch (~600 updates on ~77k pairs),
max length 4096, bf16 + full remat; DIR: attribute a = 1[len(y_w) > len(y_l)] (response tokens), difference
representation, q_psi 1024 hidden units, AdamW lr 1e-4, 5 inner steps. The rows' layout (shared.rm.data) is
[bos] + prompt + response with the prompt as plain text (no chat template); records with "chosen"/"rejected"
chat lists use the plain template of shared.train.sft. Expected: RM-Bench and RewardBench numbers are not in
the spec (section 3: not retrieved); nothing here has been run (no weights offline).
"""
import ml_collections

from shared.config.base import base_config
from shared.rm import rm_config
from projects.dir_debias.config import dir_config

FILE = "experiments/dir_debias/llama_rm.py"
VARIANTS = ("llama8b", "qwen0.5b", "smoke")
SHAPES = {  # published config.json values
    "llama8b": dict(family="llama", d_model=4096, n_layers=32, n_heads=32, n_kv_heads=8, head_dim=128, d_ff=14336,
                    vocab_size=128256, tie=False, rope_theta=500000.0, norm_eps=1e-5, qkv_bias=False,
                    rope_scaling={"type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                  "original_max_position": 8192}),
    "qwen0.5b": dict(family="qwen2", d_model=896, n_layers=24, n_heads=14, n_kv_heads=2, head_dim=64, d_ff=4864,
                     vocab_size=151936, tie=True, rope_theta=1000000.0, norm_eps=1e-6, qkv_bias=True,
                     rope_scaling=None),
}


def get_config(arg=None):
    variant = arg or "llama8b"
    if variant not in VARIANTS:
        raise ValueError(f"{FILE}: unknown variant {arg!r} (known: {', '.join(VARIANTS)})")
    c = base_config()
    c.project = "dir_debias"
    c.task = "rm"
    c.rm = rm_config()
    c.rm.eval_splits = ["test"]
    c.rm.n_eval = 2000
    c.rm.loss_hooks = ["dir_debias/club"]
    c.dir = dir_config()
    c.dir.attributes, c.dir.attribute_weights = ["greater:len"], [1.0]
    c.dir.gamma = 1.0
    c.dir.q_hidden = 1024
    c.dir.q_lr = 1e-4
    c.model.heads = ["scalar"]
    if variant == "smoke":
        return smoke(c)
    shape = SHAPES[variant]
    m = c.model
    m.family = shape["family"]
    m.d_model, m.n_layers, m.n_heads, m.n_kv_heads = shape["d_model"], shape["n_layers"], shape["n_heads"], \
        shape["n_kv_heads"]
    m.head_dim, m.d_ff, m.vocab_size, m.tie_embeddings = shape["head_dim"], shape["d_ff"], shape["vocab_size"], \
        shape["tie"]
    m.rope_theta, m.norm_eps, m.qkv_bias = shape["rope_theta"], shape["norm_eps"], shape["qkv_bias"]
    if shape["rope_scaling"]:
        m.rope_scaling = ml_collections.ConfigDict(shape["rope_scaling"])
    m.max_seq_len = 4096
    m.remat = "full"
    m.dtype = "bfloat16"
    c.data.source = "jsonl"
    c.data.path = ""                  # a .jsonl of {"prompt","chosen","rejected"} or chat-list pairs
    c.data.val_fraction = 0.02
    c.data.tokenizer = "hf"
    c.data.tokenizer_path = ""        # <weights>/tokenizer.json
    c.data.seq_len = 4096
    c.data.n_train = 0
    c.train.init_from = ""            # hf:<weights dir>
    c.train.steps = 600
    c.train.batch_size = 128
    c.train.micro_batches = 16
    c.train.eval_every = 50
    c.train.checkpoint_every = 100
    c.optim.lr = 2e-6
    c.optim.schedule = "cosine"
    c.optim.warmup_steps = 18
    c.optim.min_lr_ratio = 0.0
    c.optim.b2 = 0.999
    c.optim.weight_decay = 0.0
    c.optim.grad_clip = 5.0
    c.mesh.preset = "gpu_1x8" if variant == "llama8b" else "gpu_1"
    if variant == "qwen0.5b":
        c.train.micro_batches = 16
        c.data.seq_len = c.model.max_seq_len = 2048
    return c


def smoke(c):
    c.mesh.preset = "cpu_8"
    c.model.family = "llama"
    c.model.vocab_size = 384
    c.model.d_model, c.model.n_layers, c.model.n_heads, c.model.n_kv_heads = 64, 2, 4, 2
    c.model.head_dim, c.model.d_ff = 16, 128
    c.model.tie_embeddings = False
    c.model.dtype = "float32"
    c.model.remat = "none"
    c.model.max_seq_len = 64
    c.data.source = "dir_debias/synpref"
    c.data.task_options = ml_collections.ConfigDict({"bias": "length", "rho_train": 0.9})
    c.data.tokenizer = "byte"
    c.data.seq_len = 64
    c.data.n_train = 64
    c.rm.eval_splits = ["balanced"]
    c.rm.n_eval = 16
    c.dir.q_hidden = 16
    c.train.steps = 2
    c.train.batch_size = 16
    c.train.micro_batches = 2
    c.train.log_every = 1
    c.train.eval_every = 2
    c.train.checkpoint_every = 2
    c.optim.warmup_steps = 1
    return c

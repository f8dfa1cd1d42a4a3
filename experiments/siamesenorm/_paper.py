"""The paper's OLMo LM recipe (spec §2.1), shared by lm_1p3b.py and lm_400m.py.

Confirmed by the spec's sources: OLMo architecture (SwiGLU, RoPE, RMSNorm eps 1e-5, QK-norm, no biases, tied
embeddings), AdamW (0.9, 0.95), weight decay 0.1, grad clip 1.0, bf16, cosine schedule with 2000 warm-up steps
decaying to 10 %. Not confirmed (Q6): batch (OLMo-1B default 2048 x 2048 tokens is used) and tokenizer
(FineWeb-Edu with OLMo's GPT-NeoX tokenizer, vocab 50280 padded to 50304; here a sentencepiece BPE of the
same size trained into the workdir). FineWeb-Edu is not in ../shared/data: point data.path at a jsonl dump.
"""
import math

from experiments.siamesenorm._small import apply_smoke
from projects.siamesenorm.blocks import block_options
from shared.config.base import base_config

FINEWEB_EDU = "fineweb-edu/*.jsonl.gz"  # placeholder: a local FineWeb-Edu jsonl dump ({"text": ...} per line)


def paper_config(arg, file: str, *, n_layers: int, d_model: int, tokens: float, batch_size: int,
                 micro_batches: int, lr: float, known: str = "smoke"):
    c = base_config()
    c.project = "siamesenorm"
    c.task = "pretrain"
    c.mesh.preset = "gpu_1x8"
    m = c.model
    m.family = "llama"
    m.block = "siamesenorm/siamese_hybrid"   # the LM tables' variant (spec Q3)
    m.block_options = block_options()
    m.vocab_size = 50304
    m.d_model, m.n_layers = d_model, n_layers
    m.head_dim = 128 if d_model >= 2048 else 64
    m.n_heads = m.n_kv_heads = d_model // m.head_dim
    m.d_ff = 4 * d_model                      # OLMo mlp_ratio 8 -> 4d per SwiGLU branch (8192 at d=2048)
    m.norm, m.norm_eps, m.mlp, m.qk_norm, m.tie_embeddings = "rmsnorm", 1e-5, "swiglu", True, True
    m.rope_theta = 10000.0
    m.init_std = 1 / math.sqrt(d_model)       # mitchell: 1/sqrt(d) for inputs and embeddings
    m.dtype, m.param_dtype, m.remat = "bfloat16", "float32", "full"
    m.max_seq_len = 2048
    c.data.source, c.data.path, c.data.text_field = "jsonl", FINEWEB_EDU, "text"
    c.data.tokenizer, c.data.seq_len, c.data.val_fraction = "sentencepiece", 2048, 0.001
    c.optim.name, c.optim.schedule, c.optim.lr = "adamw", "cosine", lr
    c.optim.b1, c.optim.b2, c.optim.eps = 0.9, 0.95, 1e-8
    c.optim.weight_decay, c.optim.grad_clip = 0.1, 1.0
    c.optim.warmup_steps, c.optim.min_lr_ratio = 2000, 0.1
    c.train.batch_size, c.train.micro_batches = batch_size, micro_batches
    c.train.steps = int(round(tokens / (batch_size * c.data.seq_len)))
    c.train.log_every, c.train.eval_every, c.train.eval_batches = 10, 1000, 20
    c.train.checkpoint_every, c.train.keep_checkpoints = 1000, 3
    c.train.diverge_loss = 12.0               # above the initial loss ln(50304) = 10.8
    if arg == "smoke":
        apply_smoke(c)
    elif arg is not None:
        raise ValueError(f"{file}: unknown variant {arg!r} (known: {known})")
    return c

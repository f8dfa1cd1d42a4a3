"""Shared settings of the mdm_variance small-scale experiments (a helper: files starting with "_" are not
experiments). The spec's section 7: a ~5M-parameter bidirectional Pre-Norm transformer (RMSNorm, RoPE,
SwiGLU, d=256, 6 blocks, 4 heads, tied embeddings) on the generated tasks, byte tokenizer ([MASK] = 259)."""
import ml_collections

from shared.config.base import base_config
from shared.diffusion import diffusion_config
from projects.mdm_variance.methods import project_config

TASKS = {  # data.source, seq_len (fixed-width rows: prompt + completion + eos), response block for decoding
    "t1": dict(source="rl/mdm_variance/chain_arith", seq_len=63, block=16),
    "t2": dict(source="rl/mdm_variance/table_qa", seq_len=74, block=16),
}


def small_config(task: str = "t1", smoke: bool = False) -> ml_collections.ConfigDict:
    c = base_config()
    c.project = "mdm_variance"
    c.task = "mdm_variance/finetune"
    c.diffusion = diffusion_config()
    c.mdm_variance = project_config()
    spec = TASKS[task]
    m = c.model
    m.vocab_size, m.d_model, m.n_layers, m.n_heads, m.n_kv_heads, m.head_dim, m.d_ff = 384, 256, 6, 4, 4, 64, 768
    m.causal = False
    m.remat = "none"
    m.attention = "xla"          # rows of 63-74 tokens: plain XLA attention; decoding needs nothing else
    m.max_seq_len = 128
    c.data.source = spec["source"]
    c.data.tokenizer = "byte"
    c.data.seq_len = spec["seq_len"]
    c.data.n_train = 5000        # a small SFT set trained for several epochs (the GSM8K/HiTab regime)
    c.data.task_options = ml_collections.ConfigDict({"data_seed": 1234})
    c.diffusion.decode_block = spec["block"]
    c.diffusion.elbo_masks = 4
    # Stage B (SFT): AdamW, wd 0.1, clip 1.0, linear decay without warm-up (the paper's recipe), batch 64
    c.optim.lr = 3e-4
    c.optim.schedule = "linear"
    c.optim.warmup_steps = 0
    c.optim.min_lr_ratio = 0.0
    c.optim.weight_decay = 0.1
    c.optim.grad_clip = 1.0
    c.train.steps = 600
    c.train.batch_size = 64
    c.train.log_every = 50
    c.train.checkpoint_every = 100000   # the end only: seeds are short, a rerun redoes an unfinished seed
    c.mdm_variance.theta0.steps = 1500
    c.mdm_variance.theta0.batch_size = 128
    c.mdm_variance.theta0.lr = 1e-3
    c.mesh.preset = "gpu_1"
    if smoke:
        c.mesh.preset = "cpu_8"
        m.d_model, m.n_layers, m.n_heads, m.n_kv_heads, m.head_dim, m.d_ff = 64, 2, 4, 4, 16, 128
        m.dtype = "float32"
        c.data.n_train = 64
        c.train.steps, c.train.batch_size, c.train.log_every = 2, 8, 1
        c.mdm_variance.seeds = 2
        c.mdm_variance.eval_examples = 16
        c.mdm_variance.theta0.steps = 2
        c.mdm_variance.theta0.warmup_steps = 1
        c.mdm_variance.theta0.batch_size = 8
        c.mdm_variance.theta0.n_examples = 64
        c.mdm_variance.ppots.update(dict(n_x0=4, grid=8, n_masks=3, n_starts=2))
        c.mdm_variance.variance.update(dict(a=8, b=4, c=3, rho_ts=[0.25, 0.75], rho_c=3, batch=8, batch_reps=4,
                                            grad_reps=2, chunk=64))
    return c

"""The small-scale recipe shared by the SiameseNorm tables (spec §5.2, shrunk to the sweep budget).

One recipe for every block ("a Pre-Norm recipe, identical for every variant"): byte-level LM on the English
classics in ../shared/data, RMSNorm eps 1e-5, QK-norm on (the hybrid forms add v-norm), RoPE, SwiGLU,
no biases, tied embeddings, AdamW (0.9, 0.95) wd 0.1 on matrices, grad clip 1, linear warm-up then cosine to
10 %. Only model.block, model.block_options.*, optim.lr, seed and the (depth, width) pair change between
points.

Init: std 1/sqrt(d) for embeddings and input projections, and the shared layers' 1/sqrt(2 L) factor on the
attention output and MLP down projections: the spirit of OLMo's "mitchell" init (§2.1), but with one
depth factor for all blocks instead of 1/sqrt(2(b+1)) per block (the shared layers have one init_std).

`:smoke` is the CI variant: 8 fake CPU devices, the embedded stdlib corpus, a few steps.
"""
import math

from projects.siamesenorm.blocks import block_options
from shared.config.base import base_config

CORPUS = "../shared/data/english_classics"  # relative to the repo root; carried to the GPU machine with it

# (n_layers, d_model, n_heads, d_ff): L8 is the main model; deeper-and-narrower shapes keep the non-embedding
# parameters (L * (4 d^2 + 3 d d_ff)) at 6.4M (L8, L32) to 7.1M (L4).
SHAPES = {
    "L4": (4, 384, 6, 1024),
    "L8": (8, 256, 4, 704),     # S
    "L16": (16, 192, 3, 512),
    "L32": (32, 128, 2, 352),
}
MAIN_SHAPE = "L8"

STEPS = 800
WARMUP = 100
# nats/byte, checked at every logged step: well above the initial loss (ln 384 = 5.95, up to ~8 for ResiDual's
# un-normalised readout at init), so only a blow-up trips it; a NaN/Inf stops the run as well.
DIVERGE_LOSS = 9.0


def set_shape(c, shape: str) -> None:
    n_layers, d_model, n_heads, d_ff = SHAPES[shape]
    c.model.n_layers, c.model.d_model, c.model.n_heads, c.model.n_kv_heads = n_layers, d_model, n_heads, n_heads
    c.model.head_dim, c.model.d_ff = 64, d_ff
    c.model.init_std = 1 / math.sqrt(d_model)


def shape_overrides(shape: str) -> dict:
    """Sweep-point overrides that turn the main shape into `shape` (the init follows the width)."""
    n_layers, d_model, n_heads, d_ff = SHAPES[shape]
    return {"model.n_layers": n_layers, "model.d_model": d_model, "model.n_heads": n_heads,
            "model.n_kv_heads": n_heads, "model.d_ff": d_ff, "model.init_std": 1 / math.sqrt(d_model)}


def small_config(arg, file: str):
    """The recipe for get_config(arg) of a table file; arg None (GPU, one device) or "smoke"."""
    c = base_config()
    c.project = "siamesenorm"
    c.task = "pretrain"
    c.mesh.preset = "gpu_1"
    m = c.model
    m.vocab_size = 384            # 259 byte ids, padded
    set_shape(c, MAIN_SHAPE)
    m.block = "prenorm"
    m.block_options = block_options()
    m.norm, m.norm_eps, m.mlp = "rmsnorm", 1e-5, "swiglu"
    m.qk_norm = True
    m.tie_embeddings = True
    m.remat = "none"
    m.dtype = "bfloat16"
    m.max_seq_len = 256
    c.data.source, c.data.path, c.data.tokenizer = "text", CORPUS, "byte"
    c.data.seq_len = 256
    c.data.val_fraction = 0.05
    c.optim.name, c.optim.schedule = "adamw", "cosine"
    c.optim.lr = 6e-3              # a priori best for this size (README); the tables override it
    c.optim.b1, c.optim.b2, c.optim.eps = 0.9, 0.95, 1e-8
    c.optim.weight_decay, c.optim.weight_decay_mask, c.optim.grad_clip = 0.1, "matrices", 1.0
    c.optim.warmup_steps, c.optim.min_lr_ratio = WARMUP, 0.1
    c.train.steps = STEPS
    c.train.batch_size = 32
    c.train.log_every = 20
    c.train.eval_every = 200
    c.train.eval_batches = 8
    c.train.checkpoint_every = STEPS  # one checkpoint at the end: the points are short
    c.train.keep_checkpoints = 1
    c.train.nan_policy = "stop"
    c.train.diverge_loss = DIVERGE_LOSS
    if arg == "smoke":
        apply_smoke(c)
    elif arg is not None:
        raise ValueError(f"{file}: unknown variant {arg!r} (known: smoke)")
    return c


def apply_smoke(c) -> None:
    """CI variant of any siamesenorm config: 8 fake CPU devices, embedded stdlib corpus, bytes, 4 steps."""
    m = c.model
    c.mesh.preset = "cpu_8"
    m.dtype, m.remat, m.vocab_size = "float32", "none", 384
    m.d_model, m.n_layers, m.n_heads, m.n_kv_heads, m.head_dim, m.d_ff = 64, 2, 4, 4, 16, 128
    m.init_std, m.max_seq_len = 0.125, 64
    c.data.source, c.data.path, c.data.tokenizer, c.data.tokenizer_path = "stdlib", "", "byte", ""
    c.data.seq_len, c.data.max_docs = 64, 40
    c.train.steps, c.train.batch_size, c.train.micro_batches, c.train.eval_batches = 4, 8, 1, 1
    c.train.log_every, c.train.eval_every, c.train.checkpoint_every = 2, 4, 4
    c.optim.warmup_steps = 1
    c.optim.lr = 1e-2  # so that 4 steps visibly learn (the smoke test checks it)


COLUMNS = ["eval/loss", "train/loss", "diverged", "stop_reason", "steps", "train/grad_norm", "params",
           "wall_time_s"]

# -- the spec's small-scale design (spec section 5.2), for the ":spec" sweeps of lr_stability, depth and ablation --
SPEC_SHAPES = {
    "S": (12, 384, 6, 1024),    # 21.2M non-embedding parameters
    "D": (28, 256, 4, 704),     # 22.5M, deep and narrow
}
SPEC_STEPS = 2000               # x 64 x 1024 tokens = 131M tokens (~10 epochs of the 13.3M-byte training split)
SPEC_WARMUP = 200
SPEC_SEEDS = (0, 1, 2)
SPEC_COLUMNS = ["eval/loss", "eval/loss_last3", "eval/best_loss", "diverged", "eval/collapsed", "eval/unstable",
                "train/spikes", "train/max_rise", "train/loss", "train/grad_norm", "stop_reason", "steps", "params",
                "perf/tokens_per_s", "wall_time_s"]
# GPU cost of one spec point (the docstrings of lr_stability / depth / ablation use these): bench/RESULTS.md,
# "25M (D384 L8 V32768)": 1.05M tokens/s at 21.1% MFU on one H100 (16 x 2048 tokens per step), i.e. 199 MFLOP per
# token (MaxText convention). S at context 1024 is 156 MFLOP/token and D 179 MFLOP/token
# (shared.metrics.flops.training_flops_per_token), so at 15-21% MFU: S 0.95-1.34M tok/s, D 0.83-1.17M tok/s,
# i.e. 131M tokens in 100-140 s (S) and 110-160 s (D) of steps. With compile, 20 evaluations and start-up
# (~40 s) a point is ~2.5-3 min alone on one H100 (the hybrid / Siamese blocks: +2 norms per sublayer; a CPU
# probe of S, projects/siamesenorm/README.md, put their step at ~1.2x Pre-Norm's), ~3 GPU-min a point.


def set_spec_shape(c, shape: str) -> None:
    n_layers, d_model, n_heads, d_ff = SPEC_SHAPES[shape]
    c.model.n_layers, c.model.d_model, c.model.n_heads, c.model.n_kv_heads = n_layers, d_model, n_heads, n_heads
    c.model.head_dim, c.model.d_ff = 64, d_ff
    c.model.init_std = 1 / math.sqrt(d_model)


def spec_shape_overrides(shape: str) -> dict:
    n_layers, d_model, n_heads, d_ff = SPEC_SHAPES[shape]
    return {"model.n_layers": n_layers, "model.d_model": d_model, "model.n_heads": n_heads,
            "model.n_kv_heads": n_heads, "model.d_ff": d_ff, "model.init_std": 1 / math.sqrt(d_model)}


def spec_config(file: str, smoke: bool = False):
    """The spec's S recipe (section 5.2): d 384 x 12 blocks, context 1024, batch 64, 2,000 steps (200 warm-up, cosine
    to 10 %), an evaluation every 100 steps over 20 fixed batches, train loss logged every 10 steps for the spike
    count, and the stability hook (projects/siamesenorm/stability.py: spikes, collapse to the unigram loss).
    smoke: the same hook and columns at the smoke sizes."""
    from projects.siamesenorm.stability import stability_options

    c = small_config("smoke" if smoke else None, file)
    c.siamesenorm = stability_options()
    c.train.hooks = ["siamesenorm/stability"]
    if smoke:
        return c
    set_spec_shape(c, "S")
    c.model.max_seq_len = c.data.seq_len = 1024
    c.data.val_fraction = 0.05
    c.train.batch_size = 64
    c.train.steps = c.train.checkpoint_every = SPEC_STEPS
    c.train.log_every = 10
    c.train.eval_every = 100
    c.train.eval_batches = 20
    c.optim.warmup_steps = SPEC_WARMUP
    c.optim.lr = 2e-3
    return c

"""The paper's setting: SFT of LLaDA-8B-Instruct on GSM8K with the shared "mdm" task (spec sections 4-5).

    python -m shared.launch --config=experiments/mdm_variance/llada8b_sft.py:ppots_mirror \
        --workdir=runs/mdm_variance/llada8b_gsm8k_ppots_mirror --mesh=gpu_1x8 \
        --config.data.tokenizer_path=/path/to/LLaDA-8B-Instruct/tokenizer.json --config.seed=42

Variants (methods of Table 1): standard, clipped, ppots, mirror, ppots_mirror (default), smoke (CI: a tiny
random model on the generated ChainArith task, cpu_8). Paper (GSM8K accuracy, seeds 42 / 731 / 20231):
Standard 52.51, Clipped 56.18, MIRROR 53.70, P-POTS 58.58, P-POTS+MIRROR 60.53. Settings from the released
code: lr 5e-5, AdamW wd 0.1, clip 1.0, linear decay without warm-up, batch 32, 5 epochs, eps 1e-3, [MASK] =
126336, P-POTS a=10 x0's, b=70 grid, c=10 masks, EPR fit. Not run here: LLaDA weights need an importer for
their checkpoint layout (model.transformer.blocks.*) that shared.model.convert does not have yet; without
train.init_from this trains from random initialisation.
"""
import ml_collections

from shared.config.base import base_config
from shared.diffusion import diffusion_config

VARIANTS = ("standard", "clipped", "ppots", "mirror", "ppots_mirror", "smoke")
METHODS = {  # method -> (t_sampler, t_options, mask_sampler)
    "standard": ("uniform", {}, "independent"),
    "clipped": ("clipped", {"low": 0.2, "high": 0.8}, "independent"),
    "ppots": ("mdm_variance/ppots", {"n_x0": 10, "grid": 70, "n_masks": 10}, "independent"),
    "mirror": ("uniform", {}, "mirror"),
    "ppots_mirror": ("mdm_variance/ppots", {"n_x0": 10, "grid": 70, "n_masks": 10}, "mirror"),
}


def get_config(arg=None):
    variant = arg or "ppots_mirror"
    if variant not in VARIANTS:
        raise ValueError(f"experiments/mdm_variance/llada8b_sft.py: unknown variant {arg!r} (known: {VARIANTS})")
    c = base_config()
    c.project = "mdm_variance"   # registers the P-POTS t-sampler
    c.task = "mdm"
    c.diffusion = diffusion_config()
    method = "ppots_mirror" if variant == "smoke" else variant
    t_sampler, t_options, mask_sampler = METHODS[method]
    c.diffusion.t_sampler = t_sampler
    c.diffusion.t_options = ml_collections.ConfigDict(t_options)
    c.diffusion.mask_sampler = mask_sampler
    c.diffusion.answer_padding = "exclude"   # StableDLLM: pads neither masked nor attended
    c.diffusion.decode_tokens, c.diffusion.decode_steps, c.diffusion.decode_block = 128, 128, 32
    m = c.model                  # LLaDA-8B (GSAI-ML/LLaDA-8B-Instruct config.json)
    m.vocab_size, m.d_model, m.n_layers, m.n_heads, m.n_kv_heads, m.head_dim, m.d_ff = \
        126464, 4096, 32, 32, 32, 128, 12288
    m.rope_theta = 500000.0
    m.tie_embeddings = False
    m.causal = False
    m.max_seq_len = 4096
    c.diffusion.mask_id = 126336
    c.data.source = "rl/gsm8k"
    c.data.task_options = ml_collections.ConfigDict({"path": "../shared/data/gsm8k"})
    c.data.tokenizer = "hf"
    c.data.seq_len = 512
    c.data.n_train = 7473
    c.data.greedy_eval_examples = 1319
    c.optim.lr = 5e-5
    c.optim.schedule = "linear"
    c.optim.warmup_steps = 0
    c.optim.min_lr_ratio = 0.0
    c.optim.weight_decay = 0.1
    c.optim.grad_clip = 1.0
    c.train.steps = 1170         # 5 epochs of 7,473 examples at batch 32
    c.train.batch_size = 32
    c.train.micro_batches = 4
    c.train.eval_batches = 4
    c.train.eval_every = 200
    c.train.checkpoint_every = 200
    c.mesh.preset = "gpu_1x8"
    if variant == "smoke":
        c.mesh.preset = "cpu_8"
        m.vocab_size, m.d_model, m.n_layers, m.n_heads, m.n_kv_heads, m.head_dim, m.d_ff = 384, 64, 2, 4, 4, 16, 128
        m.rope_theta, m.tie_embeddings, m.dtype, m.remat, m.max_seq_len = 10000.0, True, "float32", "none", 128
        c.diffusion.mask_id = -1
        c.diffusion.answer_padding = "eos"
        c.diffusion.t_options = ml_collections.ConfigDict({"n_x0": 4, "grid": 8, "n_masks": 3, "n_starts": 2})
        c.diffusion.decode_tokens, c.diffusion.decode_steps, c.diffusion.decode_block = 48, 0, 16
        c.data.source = "rl/mdm_variance/chain_arith"
        c.data.task_options = ml_collections.ConfigDict()
        c.data.tokenizer = "byte"
        c.data.seq_len = 63
        c.data.n_train = 64
        c.data.greedy_eval_examples = 8
        c.train.steps, c.train.batch_size, c.train.micro_batches = 3, 8, 2
        c.train.eval_batches, c.train.eval_every, c.train.log_every = 1, 3, 1
    return c

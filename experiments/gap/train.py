"""GAP on GridOps (../shared/papers/gap.md 4.4-4.5): one run of one stage (TASKS "gap/train", projects/gap/task.py).

    python -m shared.launch --config=experiments/gap/train.py:a --workdir=runs/gap/stageA_s0
    python -m shared.launch --config=experiments/gap/train.py:G --workdir=runs/gap/G_s0 \
        --config.train.init_from=run:runs/gap/stageA_s0
    python -m shared.sweep --config=experiments/gap/table.py --workdir=runs/gap/table     # every stage and variant

Variants: "a" (stage A, the default), the stage-B variants of spec 4.5 (T0, T1, S0, B0, G, G-F, G-C, G-K, G-lin;
B0+EMA is an extra evaluation of B0's checkpoint, eval/*_ema), and "smoke_<variant>" ("smoke" = "smoke_a"): the
tiny model on procedural glyphs, a few steps on one CPU device (CI). Stage A: AdamW lr 1e-3, wd 0.1, warm-up 200,
cosine, batch 256, 4k steps (spec 4.4; P0 calibrates the steps). Stage B: 3k steps, lr 3e-4, batch 128, K = 9, ViT +
projector frozen. Reads ../shared/data/images/mnist_5k/mnist_5k.csv.gz in place.
"""
import ml_collections

from shared.config.base import base_config

# spec 4.5: (mode, head, loss, parser, tau)
STAGE_B = {
    "T0": ("none", "none", "none", "off", "off"),        # direct-answer SFT
    "T1": ("none", "none", "none", "on", "off"),         # text imagination (the parser as text)
    "S0": ("slots", "none", "none", "off", "off"),       # K learned constants: "more slots" control
    "B0": ("feedback", "raw_post", "cos", "off", "off"),  # output-as-input (Monet-like); + the EMA evaluation
    "G": ("feedback", "pca", "mse", "on", "0"),          # full GAP
    "G-F": ("feedback", "raw_post", "cos", "on", "0"),   # no feature alignment
    "G-C": ("feedback", "pca", "mse", "off", "0"),       # no context alignment
    "G-K": ("feedback", "pca", "mse", "on", "off"),      # latents on every example (no capacity)
    "G-lin": ("feedback", "linear", "mse", "on", "0"),   # any learned map instead of the subspace
}
NAMES = ("a",) + tuple(STAGE_B)
VARIANTS = NAMES + tuple(f"smoke_{n}" for n in NAMES)


def get_config(arg=None):
    from projects.gap.task import FROZEN_GROUP, gap_options
    from projects.gap.model import gap_model_config

    arg = {None: "a", "smoke": "smoke_a"}.get(arg, arg)
    if arg not in VARIANTS:
        raise ValueError(f"experiments/gap/train.py: unknown variant {arg!r} (known: {', '.join(VARIANTS)}, smoke)")
    smoke = arg.startswith("smoke_")
    name = arg[len("smoke_"):] if smoke else arg
    c = base_config()
    c.project, c.task = "gap", "gap/train"
    c.mesh.preset = "auto"
    c.gap = gap_options()
    o = c.gap
    c.model = gap_model_config(o.preset).model      # the decoder's config: FLOPs per token, MFU
    c.data.seq_len = 64
    c.train.eval_batches = 0                          # the task evaluates after training (greedy answers)
    c.train.log_every = 50
    c.train.checkpoint_every = 1000
    c.train.keep_checkpoints = 1
    c.optim.weight_decay = 0.1
    if name == "a":
        c.train.steps, c.train.batch_size = 4000, 256
        c.optim.lr, c.optim.warmup_steps = 1e-3, 200
    else:
        o.stage = "b"
        o.mode, o.head, o.loss, o.parser, o.tau = STAGE_B[name]
        c.train.steps, c.train.batch_size = 3000, 128
        c.optim.lr, c.optim.warmup_steps = 3e-4, 100
        c.optim.param_groups = ml_collections.ConfigDict({FROZEN_GROUP: 0.0})
    if smoke:
        o.preset, o.pool = "tiny", "synthetic"
        c.model = gap_model_config("tiny").model
        c.mesh.preset = "cpu_1"
        o.capacity_pool, o.n_pca, o.n_test, o.n_ood, o.eval_batch, o.n_norm, o.n_ema = 128, 64, 64, 32, 64, 32, 64
        o.prefetch_workers = 0   # batches of 16-32 rows: a worker's start-up (~2 s) would outlast the run
        c.train.steps, c.train.batch_size = (40, 32) if name == "a" else (8, 16)
        c.optim.warmup_steps = 5
        c.train.log_every = c.train.checkpoint_every = c.train.steps
        c.train.progress = False
    return c

"""Shared pieces of the base-policy recipes: the SFT config on a verifiable task and the competence table."""
import ml_collections

from shared.config.base import base_config

# (d_model, n_layers, n_heads, head_dim, d_ff) per size; head_dim * n_heads = d_model
SIZES = {"tiny": (128, 4, 4, 32, 512), "small": (256, 6, 8, 32, 1024), "medium": (512, 8, 8, 64, 2048),
         "d384": (384, 6, 6, 64, 1536)}   # the "tiny decoder (6 layers, d = 384)" of etr.md / medical_multiobjective.md D.1


def sft_config(task: str, size: str, *, seq_len: int, max_seq_len: int, steps: int, batch: int, lr: float,
               eval_tokens: int, task_options=None, splits=("test", "ood")) -> ml_collections.ConfigDict:
    d_model, n_layers, n_heads, head_dim, d_ff = SIZES[size]
    c = base_config()
    c.task = "sft"
    m = c.model
    m.vocab_size, m.d_model, m.n_layers, m.n_heads, m.n_kv_heads, m.head_dim, m.d_ff = (
        384, d_model, n_layers, n_heads, n_heads, head_dim, d_ff)
    m.remat = "none"
    m.dtype = "bfloat16"
    m.max_seq_len = max_seq_len
    c.data.source = task
    c.data.tokenizer = "byte"
    c.data.seq_len = seq_len
    c.data.task_options = ml_collections.ConfigDict(dict(task_options or {}))
    c.data.n_train = 20000
    c.data.greedy_eval_examples = 500
    c.data.greedy_eval_tokens = eval_tokens
    c.data.greedy_eval_splits = list(splits)
    c.train.loss = "sft_xent"
    c.train.steps = steps
    c.train.batch_size = batch
    c.train.log_every = 100
    c.train.eval_every = max(steps // 4, 1)
    c.train.eval_batches = 2
    c.train.checkpoint_every = steps
    c.optim.lr = lr
    c.optim.warmup_steps = max(steps // 20, 1)
    c.optim.weight_decay = 0.0
    c.mesh.preset = "gpu_1"
    return c


def smoke(c: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
    """The CI variant: cpu_8, two tiny layers, a few steps."""
    m = c.model
    m.d_model, m.n_layers, m.n_heads, m.n_kv_heads, m.head_dim, m.d_ff, m.dtype = 64, 2, 4, 4, 16, 128, "float32"
    c.mesh.preset = "cpu_8"
    c.data.n_train = 64
    c.data.greedy_eval_examples = 8
    c.train.steps, c.train.batch_size, c.train.eval_every, c.train.checkpoint_every = 3, 8, 3, 3
    c.optim.warmup_steps = 1
    return c


def competence_sweep(name: str, steps: tuple, seeds=(0, 1, 2)) -> dict:
    """Greedy accuracy of the recipe per training length and seed (the table behind 'competent')."""
    points = [dict(name=f"steps{n}_s{seed}", overrides={"train.steps": n, "train.checkpoint_every": n,
                                                       "train.eval_every": max(n // 4, 1),
                                                       "optim.warmup_steps": max(n // 20, 1), "seed": seed})
              for n in steps for seed in seeds]
    return dict(name=name, points=points,
                columns=["eval/greedy_accuracy", "eval/greedy_accuracy_ood", "eval/loss", "wall_time_s"],
                group=["train.steps", "train.checkpoint_every", "train.eval_every", "optim.warmup_steps"],
                plot=dict(kind="bars", metric="eval/greedy_accuracy", label="train.steps"))

"""Quick start: a small causal LM on the embedded corpus (the CPython standard library source).

    python -m shared.launch --config=experiments/quickstart.py --workdir=runs/quickstart

Trains a ~1.7M-parameter byte-level Llama-style model for 300 steps on one CPU device (78 s on the idle 2-core
development machine; 14.5 min on the same machine shared with other jobs, see README.md): the loss
falls from ~5.9 (uniform over the 384 ids) to below 2 nats/byte (train ~1.7, eval ~1.4 at step 300),
TensorBoard logs go to <workdir>/tb, and the run ends by sampling a completion of `def ` from the trained
model. `:smoke` is the CI variant (8 fake CPU devices, data=2 fsdp=2 tensor=2, a few steps).

`get_sweep` is a two-point learning-rate table (3e-3, the default, vs 1e-2) that exercises `shared.sweep`:

    python -m shared.sweep --config=experiments/quickstart.py --workdir=runs/quickstart_lr
    python -m shared.sweep --config=experiments/quickstart.py:smoke --workdir=runs/quickstart_lr_smoke

It writes results.csv, results.md, lr.png (train/loss against the step, one curve per learning rate) and manifest.json.
"""
from shared.config.base import base_config


def get_config(arg=None):
    c = base_config()
    c.task = "pretrain"
    c.model.vocab_size = 384      # 259 byte ids, padded to a multiple of 128 for the tensor axis
    c.model.d_model = 192
    c.model.n_layers = 4
    c.model.n_heads = 4
    c.model.n_kv_heads = 2
    c.model.head_dim = 48
    c.model.d_ff = 512
    c.model.remat = "none"
    c.model.dtype = "float32"     # CPU: bf16 matmuls are slower than fp32 here
    c.data.source = "stdlib"
    c.data.tokenizer = "byte"
    c.data.seq_len = 128
    c.data.max_docs = 400
    c.train.steps = 300
    c.train.batch_size = 16
    c.train.log_every = 10
    c.train.eval_every = 100
    c.train.eval_batches = 4
    c.train.checkpoint_every = 100
    c.train.sample_at_end = "def "
    c.train.sample_tokens = 48
    c.optim.lr = 3e-3
    c.optim.warmup_steps = 30
    c.mesh.preset = "cpu_1"
    if arg == "smoke":
        c.mesh.preset = "cpu_8"
        c.model.d_model = 64
        c.model.n_layers = 2
        c.model.head_dim = 16
        c.model.d_ff = 128
        c.data.seq_len = 64
        c.data.max_docs = 40
        c.train.steps = 6
        c.optim.warmup_steps = 2
        c.train.batch_size = 8
        c.train.micro_batches = 2
        c.train.log_every = 1     # a point per step on the sweep's curves
        c.train.eval_every = 3
        c.train.eval_batches = 1
        c.train.checkpoint_every = 3
        c.train.sample_tokens = 8
    elif arg is not None:
        raise ValueError(f"experiments/quickstart.py: unknown variant {arg!r} (known: smoke)")
    return c


def get_sweep(arg=None):
    """Two learning rates on the config `get_config(arg)` builds: `:smoke` sweeps the smoke variant."""
    return dict(
        name="lr",
        points=[dict(name=f"lr{lr:g}", overrides={"optim.lr": lr}, arg=arg) for lr in (3e-3, 1e-2)],
        columns=["eval/loss", "train/loss", "diverged"],
        plot=dict(kind="curves", metric="train/loss", x="step", label="optim.lr"),
    )

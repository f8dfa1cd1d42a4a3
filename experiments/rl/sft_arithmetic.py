"""SFT warm start on the procedural arithmetic task (the policy an RL run on rl/arithmetic starts from).

    python -m shared.launch --config=experiments/rl/sft_arithmetic.py --workdir=runs/sft_arithmetic
    python -m shared.launch --config=experiments/rl/sft_arithmetic.py:smoke --workdir=/tmp/sft_smoke

A 1.1M-parameter byte-level Llama-style model learns "Q: 47+38=\\nA:" -> " 85" (+ and - on 1-2 digit operands)
from 10,000 training problems with the loss on completion tokens only (train.loss = "sft_xent"); test problems
are disjoint from the training ones. After training it decodes 200 test and 200 ood (3-digit) problems greedily
and writes eval/greedy_accuracy and eval/greedy_accuracy_ood to summary.json.

Measured (2,000 steps of 64 examples, one shared 2-core CPU, jax 0.10.2, ~11 min wall of which training
676 s): eval/greedy_accuracy 0.61, eval/greedy_accuracy_ood 0.005, eval/loss 0.26 nats per completion token
(token accuracy 0.90). The accuracy rises late (teacher-forced exact match in a separate run: 0.12 at step
1,000, 0.30 at 1,500, 0.54 at 2,000), so shorter runs score much lower. Products
(--config.data.task_options.ops=+-*) need far longer training (0.085 greedy accuracy after 600 steps).
`:smoke` is the CI variant (cpu_8 mesh, a few steps).
"""
import ml_collections

from shared.config.base import base_config


def get_config(arg=None):
    """Default: 1.1M parameters, 2,000 steps of 64 examples on one CPU (cpu_1); see the module doc."""
    c = base_config()
    c.task = "sft"
    c.model.vocab_size = 384      # 259 byte ids, padded to a multiple of 128 for the tensor axis
    c.model.d_model = 128
    c.model.n_layers = 4
    c.model.n_heads = 4
    c.model.n_kv_heads = 4
    c.model.head_dim = 32
    c.model.d_ff = 512
    c.model.remat = "none"
    c.model.dtype = "float32"     # CPU: bf16 matmuls are slower than fp32 here
    c.model.max_seq_len = 64
    c.data.source = "rl/arithmetic"
    c.data.tokenizer = "byte"
    c.data.seq_len = 20           # "Q: 99*99=\nA: 9801" is 18 bytes + bos + eos = 19 (input, target) pairs
    c.data.task_options = ml_collections.ConfigDict({"ops": "+-"})  # "+-*": products need far more steps
    c.data.n_train = 10000
    c.data.greedy_eval_examples = 200
    c.data.greedy_eval_tokens = 8
    c.data.greedy_eval_splits = ["test", "ood"]
    c.train.loss = "sft_xent"
    c.train.steps = 2000
    c.train.batch_size = 64
    c.train.log_every = 50
    c.train.eval_every = 500
    c.train.eval_batches = 4
    c.train.checkpoint_every = 500
    c.optim.lr = 3e-3
    c.optim.warmup_steps = 100
    c.optim.weight_decay = 0.0
    c.mesh.preset = "cpu_1"
    if arg == "smoke":
        c.mesh.preset = "cpu_8"
        c.model.d_model = 64
        c.model.n_layers = 2
        c.model.head_dim = 16
        c.model.d_ff = 128
        c.data.n_train = 64
        c.data.greedy_eval_examples = 4
        c.data.greedy_eval_tokens = 6
        c.train.steps = 6
        c.train.batch_size = 8
        c.train.micro_batches = 2
        c.train.log_every = 2
        c.train.eval_every = 3
        c.train.eval_batches = 1
        c.train.checkpoint_every = 3
        c.optim.warmup_steps = 2
    elif arg is not None:
        raise ValueError(f"experiments/rl/sft_arithmetic.py: unknown variant {arg!r} (known: smoke)")
    return c

"""Config builders of the mode-balanced reproduction (../shared/papers/mode_balanced.md D.2), shared by
experiments/mode_balanced/. No jax import here: the sweep scheduler loads experiment files.

  rl_config(lam, algorithm)   TASKS "rl" from the teacher warm start (experiments/base/relevance.py): 400 steps of
                              64 prompts x G 8 at natural long-tail frequency, AdamW, token-mean, no KL; the SFT
                              auxiliary stream at weight lam (rl.sft_aux: 128 demonstrations per step, ~25% of the
                              rollout tokens, from a pool drawn apart from the RL prompts); algorithm "grpo" (outcome
                              reward with a format gate) or "stepwise" (Stepwise-GRPO on the per-check verdicts)
  student_config(target)      D.2.3's student (2 layers x d 256) SFT on the teacher's answer-first outputs ("afrl")
                              or on the gold labels alone ("label")
  teacher_outputs_config()    TASKS "mode_balanced/teacher_outputs": the teacher's greedy outputs on the train prompts
  qwen_config()               paper scale: Qwen3-0.6B from HF weights (the paper's student size), the spec's
                              hyperparameters (AdamW 2e-5), SFT warm start on the gold targets, then RL
  smoke(c)                    CI: 1 layer x d 32 on cpu_8, a few steps

config.mode_balanced (the project's keys):
  eval_examples          examples per slice (head, long-tail, overall) of the evaluation hook
  teacher                a finished teacher run folder (teacher_outputs; a sweep stage's "{stage:...}")
  teacher_examples       train prompts the teacher answers (>= the student's data.n_train)
  teacher_max_new_tokens the teacher's output budget
"""
from __future__ import annotations

import ml_collections

PROJECT = "mode_balanced"
TASK = "rl/mode_balanced/relevance"
LAMBDAS = (0.0, 0.02, 0.05, 0.1, 0.3, 1.0)      # spec (b) / D.2.2
ALGORITHMS = ("grpo", "stepwise")
MAX_NEW_TOKENS = 48                              # the longest answer-first target is 46 bytes, + eos
RL_STEPS = 400
RL_LR = 1e-4          # [R] the spec suggests 2e-5 (kept for the Qwen config); a from-scratch 8 x 512 byte model barely
                      # moves at 2e-5 in 400 steps (experiments/rl/base_table.py uses 1e-4 on its 6 x 256 policy)
SFT_ROWS = 128        # demonstrations per step: ~25% of the 64 x 8 rollouts' tokens (targets ~40 bytes each)
QWEN3_06B = dict(d_model=1024, n_layers=28, n_heads=16, n_kv_heads=8, head_dim=128, d_ff=3072, vocab_size=151936)


def mode_balanced_group() -> ml_collections.ConfigDict:
    g = ml_collections.ConfigDict()
    g.eval_examples = 500
    g.teacher = ""
    g.teacher_examples = 50_000
    g.teacher_max_new_tokens = MAX_NEW_TOKENS
    return g


def with_rl(c, lam: float, algorithm: str) -> ml_collections.ConfigDict:
    """c (a policy config) turned into one RL arm: lambda = lam, algorithm grpo | stepwise."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"mode_balanced: algorithm {algorithm!r}; known: {', '.join(ALGORITHMS)}")
    c.project = PROJECT
    c.task = "rl"
    c.mode_balanced = mode_balanced_group()
    rl = c.rl
    rl.task = TASK
    rl.task_options = ml_collections.ConfigDict({"rate": 0.01})
    rl.n_train = 50_000
    rl.n_eval = 500
    rl.rewards = [("mode_balanced/gated_label", 1.0)]
    rl.advantage = "grpo" if algorithm == "grpo" else "stepwise-grpo"
    rl.stepwise.scorer = "mode_balanced/relevance"
    rl.stepwise.separator = "\n"
    rl.stepwise.step_weight = 1.0
    rl.loss_agg = "token-mean"
    rl.kl_coef = 0.0
    rl.prompts_per_step = 64
    rl.group_size = 8
    rl.max_new_tokens = MAX_NEW_TOKENS
    rl.temperature = 1.0
    rl.eval_every = RL_STEPS
    rl.eval_samples = 0
    rl.sft_aux.weight = float(lam)
    rl.sft_aux.batch_size = SFT_ROWS
    rl.sft_aux.n_train = 50_000
    rl.sft_aux.pool = "separate"
    rl.sft_aux.loss_tokens = "all"
    rl.sft_aux.schedule = "constant"
    c.train.steps = RL_STEPS
    c.train.log_every = 10
    c.train.checkpoint_every = 100
    c.train.hooks = ["mode_balanced/eval"]
    c.optim.lr = RL_LR
    c.optim.schedule = "constant"
    c.optim.warmup_steps = 1
    c.optim.weight_decay = 0.0
    return c


def smoke(c, model: bool = True) -> ml_collections.ConfigDict:
    """CI: cpu_8, 2 steps of 4 prompts x 4 samples, 8 examples per slice; model=True: also 1 layer x d 32 (False: the
    model of c, e.g. the smoke warm start's that the table's smoke points load)."""
    if model:
        m = c.model
        m.d_model, m.n_layers, m.n_heads, m.n_kv_heads, m.head_dim, m.d_ff, m.dtype = 32, 1, 2, 2, 16, 64, "float32"
        m.remat = "none"
        m.vocab_size = 384
    c.mesh.preset = "cpu_8"
    c.data.tokenizer, c.data.tokenizer_path = "byte", ""
    c.train.init_from = ""
    if c.task == "rl":
        c.rl.n_train, c.rl.n_eval, c.rl.prompts_per_step, c.rl.group_size = 64, 8, 4, 4
        c.rl.sft_aux.n_train, c.rl.sft_aux.batch_size = 32, 4
        c.rl.eval_every = 2
        c.rl.warmup_sft_steps = min(int(c.rl.warmup_sft_steps), 2)
        c.rl.sft_batch_size = 8
        c.mode_balanced.eval_examples = 8
        c.train.steps, c.train.log_every, c.train.checkpoint_every = 2, 1, 2
        c.train.progress = False
    return c


def student_config(base, target: str) -> ml_collections.ConfigDict:
    """D.2.3's student from experiments/base/relevance.py:student (`base`), trained on the teacher's outputs
    ("afrl": data.task_options.teacher is set by the table) or on the gold labels alone ("label")."""
    if target not in ("afrl", "label"):
        raise ValueError(f"mode_balanced: student target {target!r}; known: afrl, label")
    c = base
    c.mode_balanced = mode_balanced_group()
    c.data.n_train = 50_000
    c.data.task_options = ml_collections.ConfigDict({"rate": 0.01, "target": target, "teacher": ""})
    return c


def teacher_outputs_config(base) -> ml_collections.ConfigDict:
    """The teacher-output task on the teacher's config (`base`, for its data options); mode_balanced.teacher is set
    by the table."""
    c = base
    c.task = "mode_balanced/teacher_outputs"
    c.mode_balanced = mode_balanced_group()
    c.train.steps = 0
    return c


def qwen_config(c, lam: float) -> ml_collections.ConfigDict:
    """Qwen3-0.6B (config.json shape; train.init_from=hf:<dir> checks it) with SFT warm start then RL arm lam."""
    m = c.model
    m.family, m.qkv_bias, m.qk_norm, m.rope_theta, m.norm_eps = "qwen3", False, True, 1_000_000.0, 1e-6
    m.update(QWEN3_06B)
    m.tie_embeddings = True
    m.max_seq_len = 4096
    m.remat = "dots"
    m.dtype = "bfloat16"
    c.data.tokenizer, c.data.tokenizer_path = "hf", ""   # set data.tokenizer_path to <weights>/tokenizer.json
    c.train.init_from = ""                               # set to hf:<weights dir>
    with_rl(c, lam, "grpo")
    c.rl.warmup_sft_steps = 300        # SFT on the gold targets first (rl.sft_lr); stop near 85% (spec D.2.1)
    c.rl.sft_lr = 1e-5
    c.rl.sft_batch_size = 64
    c.data.seq_len = 96                # Qwen tokens: prompt ~40 + target ~30
    c.optim.lr = 2e-5                  # spec (b)
    c.train.micro_batches = 4
    c.mesh.preset = "gpu_1"
    return c

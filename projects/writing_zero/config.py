"""Config builders of the Writing-Zero small-scale pipeline (spec 4.3-4.4), shared by experiments/writing_zero/. No jax
import here: the sweep scheduler loads experiment files.

  warm_start_config()       TASKS "sft": the "-Zero" policy, SFT on prompt + random-response sequences (format only)
  judge_config(principled)  TASKS "writing_zero/judge": a pairwise generative judge, SFT on biased pairs in both
                            orders (swap augmentation); principled: principle tokens before the verdict
  judge_rl_config()         TASKS "writing_zero/judge_rl": the optional RL fine-tuning of a judge on label agreement
  rm_config_()              TASKS "writing_zero/rm": the scalar Bradley-Terry RM on the same biased pairs
  rl_config(arm)            TASKS "writing_zero/rl": one arm of the R0-R8 matrix (ARMS) from the warm start

Every model is spec 4.3's size (4 layers, d 256, 8 heads) on the word vocabulary (TOKENIZERS "writing_zero/words",
vocab 256); smoke variants are 2 layers x d 32 on cpu_8 with a few steps.

config.writing_zero (the project's keys):
  judge_run, rm_run   workdirs of the judge / RM an RL arm uses (a sweep stage's "{stage:...}"): filled into every
                      model/pairwise_judge reward with backend "sampler" and every model/scalar_rm reward whose path
                      is empty
  eval_prompts        held-out ConstraintWriting prompts of the RL evaluation (spec 4.5: 1k), greedy and sampled
  eval_every          RL steps between evaluations (a multiple of train.log_every)
  eval_pairs          held-out preference pairs of the judge / RM evaluation (each shown in both orders)
  judge_max_new_tokens  reply budget of a judge (principled: 3 principles x 2 words + "Verdict: A" + eos = 9)
"""
from __future__ import annotations

import ml_collections

from shared.config.base import base_config

PROJECT = "writing_zero"
VOCAB = 256
POLICY_SEQ = 64      # [bos] + prompt (<= 9 words) + response (<= 48 words, spec 4.2) + eos
JUDGE_SEQ = 128      # [bos] + request (<= 9) + [A] + a (<= 48) + [B] + b (<= 48) + Judge: + reply (<= 9) + eos
MAX_RESPONSE = 48
TASK = "rl/writing_zero/constraint_writing"
QUALITY = "writing_zero/quality"
LOGGED = [(QUALITY, 0.0), ("writing_zero/note", 0.0), ("writing_zero/words", 0.0), ("writing_zero/in_band", 0.0)]
ORACLE_JUDGE = {"backend": "oracle", "quality": QUALITY, "noise": 0.1, "swap": "random"}
MODEL_JUDGE = {"backend": "sampler", "path": "", "swap": "random"}   # path: config.writing_zero.judge_run

# arm: (advantage, reward source); sources: "oracle" (Q itself, pointwise), "rm" (the scalar BT RM), "oracle_judge"
# (sign of dQ with 10% noise), "plain" / "principled" (our trained judges). Spec 4.4.
ARMS = {
    "R0": ("grpo", "oracle"),
    "R1": ("grpo", "rm"),
    "R2": ("brpo", "plain"),
    "R3": ("brpo", "principled"),
    "R3n": ("brpo-norm", "principled"),
    "R4": ("round-robin", "principled"),
    "R5": ("fixed-reference", "principled"),
    "R6": ("brpo", "oracle_judge"),
    "R7": ("round-robin", "oracle_judge"),
    "R8": ("fixed-reference", "oracle_judge"),
}
JUDGES = ("plain", "principled")


def writing_zero_group() -> ml_collections.ConfigDict:
    g = ml_collections.ConfigDict()
    g.judge_run = ""
    g.rm_run = ""
    g.eval_prompts = 1000
    g.eval_every = 50
    g.eval_pairs = 1000
    g.judge_max_new_tokens = 12
    return g


def _model(c, smoke: bool, max_seq_len: int) -> None:
    m = c.model
    m.vocab_size = VOCAB
    if smoke:
        m.d_model, m.n_layers, m.n_heads, m.n_kv_heads, m.head_dim, m.d_ff = 32, 2, 4, 4, 8, 64
        m.dtype = "float32"
    else:
        m.d_model, m.n_layers, m.n_heads, m.n_kv_heads, m.head_dim, m.d_ff = 256, 4, 8, 8, 32, 1024
        m.dtype = "bfloat16"
    m.max_seq_len, m.remat, m.attention = max_seq_len, "none", "xla"


def _common(smoke: bool, max_seq_len: int):
    c = base_config()
    c.project = PROJECT
    c.writing_zero = writing_zero_group()
    _model(c, smoke, max_seq_len)
    c.data.tokenizer = "writing_zero/words"
    c.data.seq_len = max_seq_len
    c.optim.schedule = "constant"
    c.optim.weight_decay = 0.0
    c.optim.grad_clip = 1.0
    c.train.log_every = 25
    c.train.keep_checkpoints = 1
    c.mesh.preset = "cpu_8" if smoke else "gpu_1"
    if smoke:
        c.train.progress = False
        c.train.log_every = 1
        c.writing_zero.eval_prompts, c.writing_zero.eval_every, c.writing_zero.eval_pairs = 8, 2, 8
    return c


def _sft(c, smoke: bool, steps: int, batch: int, lr: float, n_train: int) -> None:
    c.train.loss = "sft_xent"
    c.data.n_train = n_train
    c.train.steps, c.train.batch_size = steps, batch
    c.train.eval_every, c.train.eval_batches, c.train.checkpoint_every = steps, 2, steps
    c.optim.lr, c.optim.warmup_steps = lr, max(steps // 20, 1)
    if smoke:
        c.data.n_train, c.data.greedy_eval_examples = 32, 4
        c.train.steps, c.train.batch_size, c.train.eval_every, c.train.checkpoint_every = 2, 16, 2, 2
        c.train.eval_batches = 1
        c.optim.warmup_steps = 1


def warm_start_config(smoke: bool = False):
    """The "-Zero" policy (spec 4.3): SFT on prompt + random-response sequences (judge_data.format_only), 1000 steps
    of 128 (~6 epochs of 20k examples; greedy Q = 1 rate stays ~0: it learns the format, not quality)."""
    c = _common(smoke, POLICY_SEQ)
    c.task = "sft"
    c.data.source = "rl/writing_zero/format_only"
    c.data.greedy_eval_examples = 256
    c.data.greedy_eval_tokens = 8 if smoke else MAX_RESPONSE
    c.data.greedy_eval_splits = ["test"]
    _sft(c, smoke, steps=1000, batch=128, lr=1e-3, n_train=20000)
    return c


def judge_config(principled: bool = False, smoke: bool = False):
    """A pairwise judge (spec 4.3): SFT on the 30k biased pairs of writing_zero/prefs in both orders (60k examples),
    3000 steps of 128; principled: principle tokens, then the verdict. Summary: the SFT metrics, greedy agreement
    with the test labels (eval/greedy_accuracy, both orders) and tasks.judge_metrics on eval_pairs pairs."""
    c = _common(smoke, JUDGE_SEQ)
    c.task = "writing_zero/judge"
    c.data.source = "rl/writing_zero/judge"
    c.data.task_options = ml_collections.ConfigDict(dict(principled=bool(principled), swap="both", beta=0.35, subset=""))
    c.data.greedy_eval_examples = 512
    c.data.greedy_eval_tokens = 12
    c.data.greedy_eval_splits = ["test"]
    _sft(c, smoke, steps=3000, batch=128, lr=1e-3, n_train=30000)
    return c


def judge_rl_config(principled: bool = True, smoke: bool = False):
    """The optional RLVR fine-tuning of a judge (spec 1.1, 4.3): GRPO from train.init_from (a judge stage) on the
    judge prompts of one order each (swap "random"), reward = the verdict agrees with the (biased) label, 300 steps
    of 64 x 8, T 1.0, lr 1e-5. Summary as judge_config's."""
    c = _common(smoke, JUDGE_SEQ)
    c.task = "writing_zero/judge_rl"
    c.train.loss = "lm_xent"
    c.rl.task = "rl/writing_zero/judge"
    c.rl.task_options = ml_collections.ConfigDict(dict(principled=bool(principled), swap="random", beta=0.35, subset=""))
    c.rl.n_train, c.rl.n_eval = 30000, 256
    c.rl.warmup_sft_steps = 0
    c.rl.advantage = "grpo"
    c.rl.rewards = [("task", 1.0)]
    c.rl.prompts_per_step, c.rl.group_size = 64, 8
    c.rl.max_new_tokens = 12
    c.rl.temperature = 1.0
    c.rl.eval_every = 100
    c.rl.eval_samples = 0
    c.train.steps, c.train.checkpoint_every = 300, 100
    c.optim.lr, c.optim.warmup_steps = 1e-5, 10
    c.data.greedy_eval_examples = 0
    if smoke:
        c.rl.n_train, c.rl.n_eval, c.rl.prompts_per_step, c.rl.group_size = 32, 4, 4, 4
        c.rl.eval_every = 100
        c.train.steps, c.train.checkpoint_every = 2, 2
        c.optim.warmup_steps = 1
    return c


def rm_config_(smoke: bool = False):
    """The scalar Bradley-Terry RM (spec 4.3) on the same 30k biased pairs (writing_zero/prefs, beta 0.35): scalar
    head at the last token, 2000 steps of 128 pairs, AdamW 3e-4. Summary: shared.rm's eval/test/accuracy (against the
    biased labels) and tasks.judge_metrics of the RM as a judge (truth agreement, NOTE / length preference)."""
    from shared.rm import rm_config

    c = _common(smoke, POLICY_SEQ)
    c.task = "writing_zero/rm"
    c.model.heads = ["scalar"]
    c.data.source = "writing_zero/prefs"
    c.data.task_options = ml_collections.ConfigDict(dict(beta=0.35))
    c.data.n_train = 30000
    c.rm = rm_config()
    c.rm.eval_splits = ["test", "ood"]
    c.rm.n_eval = 2000
    c.train.steps, c.train.batch_size = 2000, 128
    c.train.eval_every, c.train.eval_batches, c.train.checkpoint_every = 500, 2, 2000
    c.optim.lr, c.optim.warmup_steps = 3e-4, 100
    if smoke:
        c.data.n_train, c.rm.n_eval = 32, 8
        c.train.steps, c.train.batch_size, c.train.eval_every, c.train.checkpoint_every = 2, 16, 2, 2
        c.train.eval_batches = 1
        c.optim.warmup_steps = 1
    return c


def reward_source(source: str) -> list:
    """rl.rewards of a reward source (ARMS); the metrics of spec 4.5 logged at weight 0."""
    if source == "oracle":
        return [(QUALITY, 1.0), *LOGGED[1:]]
    if source == "rm":
        return [("model/scalar_rm", 1.0, {"path": ""}), *LOGGED]
    if source == "oracle_judge":
        return [("model/pairwise_judge", 1.0, dict(ORACLE_JUDGE)), *LOGGED]
    if source in JUDGES:
        return [("model/pairwise_judge", 1.0, dict(MODEL_JUDGE)), *LOGGED]
    raise ValueError(f"writing_zero reward source {source!r}: expected oracle, rm, oracle_judge, {', '.join(JUDGES)}")


def set_arm(c, arm: str) -> None:
    """The arm's estimator and rewards; fixed-reference arms get the examples' reference column."""
    if arm not in ARMS:
        raise ValueError(f"writing_zero arm {arm!r}: expected one of {', '.join(ARMS)}")
    advantage, source = ARMS[arm]
    c.rl.advantage = advantage
    c.rl.rewards = reward_source(source)
    c.rl.task_options.reference = "format_only" if advantage == "fixed-reference" else ""
    c.rl.dynamic_sampling = advantage.startswith("brpo")   # spec 2: DAPO's filter on the non-reference outcomes


def rl_config(arm: str = "R3", smoke: bool = False):
    """One arm (spec 4.4): B 64 x G 8, 400 steps, T 1.0, DAPO-style loss (token mean, clip 0.2 / 0.28), no KL, lr 2e-5,
    from train.init_from = the warm start (a sweep stage); judges and RM from config.writing_zero.{judge,rm}_run."""
    c = _common(smoke, POLICY_SEQ)
    c.task = "writing_zero/rl"
    c.train.loss = "lm_xent"
    c.train.hooks = ["writing_zero/eval"]
    c.rl.task = TASK
    c.rl.task_options = ml_collections.ConfigDict(dict(reference=""))
    c.rl.n_train = 20000
    c.rl.n_eval = 256
    c.rl.eval_every = 100
    c.rl.eval_samples = 0
    c.rl.warmup_sft_steps = 0
    c.rl.policy_loss = "ppo-clip"
    c.rl.loss_agg = "token-mean"
    c.rl.eps_low, c.rl.eps_high = 0.2, 0.28
    c.rl.kl_coef = 0.0
    c.rl.prompts_per_step, c.rl.group_size = 64, 8
    c.rl.max_new_tokens = MAX_RESPONSE
    c.rl.temperature = 1.0
    set_arm(c, arm)
    c.train.steps, c.train.checkpoint_every = 400, 100
    c.train.eval_every = 400
    c.optim.lr, c.optim.warmup_steps, c.optim.b2 = 2e-5, 10, 0.99
    c.data.greedy_eval_examples = 0
    if smoke:
        c.rl.n_train, c.rl.n_eval, c.rl.prompts_per_step, c.rl.group_size = 32, 4, 4, 4
        c.rl.max_new_tokens, c.rl.eval_every = 12, 100
        c.train.steps, c.train.checkpoint_every, c.train.eval_every = 2, 2, 2
        c.optim.warmup_steps = 1
    return c

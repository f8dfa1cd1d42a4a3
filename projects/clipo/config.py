"""CLIPO's config keys and the switches that put it on any RL experiment.

    from projects.clipo.config import add_clipo, set_base_algorithm
    c = set_base_algorithm(c, "dapo")     # grpo | drgrpo | dapo | gspo | gmpo (rl_base_algorithms.md settings)
    c = add_clipo(c)                      # CLIPO over it; mode="fixed" / "shuffled" for the controls, "off" = base

add_clipo sets c.project = "clipo", appends "clipo/contrastive" to c.train.hooks and adds the group c.clipo
(defaults: the paper's, clipo.md A.1 / B); every key is overridable, e.g. --config.clipo.mode=off.
"""
from __future__ import annotations

import ml_collections

from shared.config import register_validator

MODES = ("off", "trained", "fixed", "shuffled")


def clipo_config() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.mode = "trained"             # off | trained (CLIPO) | fixed (frozen random head) | shuffled (bonus permuted)
    c.proj_dim = 512               # k: Linear(d_model -> k, no bias) + L2 norm (paper: 512 GSM8K, 2048 MATH)
    c.tau = 0.05                   # InfoNCE temperature
    c.weight = 0.2                 # lambda
    c.clamp = -0.5                 # lower clamp of the bonus
    c.offset = 0.0                 # c0 (con_lm_head_contant_reward)
    c.head_lr = 1e-3               # the head's AdamW
    c.head_weight_decay = 0.01
    c.warmup_steps = 0             # first RL steps that train the head only (policy held still)
    return c


def eval_config() -> ml_collections.ConfigDict:
    """config.clipo_eval: the TinyGSM-Sym evaluation hook (projects/clipo/evaluation.py)."""
    c = ml_collections.ConfigDict()
    c.sets = ["id", "sym", "p1", "p2", "noop", "noleak"]
    c.n = 256                      # problems per set
    c.samples = 16                 # sampled completions per problem (avg@8 from the first 8, pass@16 from all)
    c.temperature = 0.6            # the paper's evaluation decoding
    c.top_p = 0.95
    c.max_new_tokens = 128
    c.before = True                # also evaluate the warm-started policy before RL ("..._before" keys)
    c.seed = 1000                  # eval problems use this seed (the same sets for every run seed)
    return c


def add_clipo(c: ml_collections.ConfigDict, mode: str = "trained", **overrides) -> ml_collections.ConfigDict:
    """CLIPO switched on over whatever RL algorithm c.rl configures."""
    c.project = "clipo"
    if "clipo/contrastive" not in c.train.hooks:
        c.train.hooks = list(c.train.hooks) + ["clipo/contrastive"]
    c.clipo = clipo_config()
    c.clipo.mode = mode
    for key, value in overrides.items():
        c.clipo[key] = value
    return c


# (rl key, value) per base algorithm; the GRPO family settings of ../shared/papers/rl_base_algorithms.md.
BASE_ALGORITHMS = {
    "grpo": {"advantage": "grpo", "policy_loss": "ppo-clip", "loss_agg": "token-mean"},
    "drgrpo": {"advantage": "drgrpo", "policy_loss": "ppo-clip", "loss_agg": "seq-mean-token-sum-norm"},
    "dapo": {"advantage": "grpo", "policy_loss": "ppo-clip", "loss_agg": "token-mean", "eps_high": 0.28,
             "dynamic_sampling": True},
    "gspo": {"advantage": "grpo", "policy_loss": "gspo", "eps_low": 3e-4, "eps_high": 4e-4},
    "gmpo": {"advantage": "grpo", "policy_loss": "gmpo", "eps_low": 0.4, "eps_high": 0.4},
}


def set_base_algorithm(c: ml_collections.ConfigDict, name: str) -> ml_collections.ConfigDict:
    """The rl keys of one base algorithm (KL, batch sizes and sampling stay as the experiment set them)."""
    if name not in BASE_ALGORITHMS:
        raise ValueError(f"base algorithm {name!r}: known {', '.join(BASE_ALGORITHMS)}")
    for key, value in BASE_ALGORITHMS[name].items():
        c.rl[key] = value
    return c


# Published Qwen2.5 config.json shapes (hidden, layers, heads, kv heads, intermediate, vocab, tied embeddings).
QWEN25 = {
    "0.5b": dict(d_model=896, n_layers=24, n_heads=14, n_kv_heads=2, d_ff=4864, vocab_size=151936, tie=True),
    "3b": dict(d_model=2048, n_layers=36, n_heads=16, n_kv_heads=2, d_ff=11008, vocab_size=151936, tie=True),
    "7b": dict(d_model=3584, n_layers=28, n_heads=28, n_kv_heads=4, d_ff=18944, vocab_size=152064, tie=False),
}


def qwen25_policy(c: ml_collections.ConfigDict, size: str) -> ml_collections.ConfigDict:
    """c.model set to a Qwen2.5 shape; the weights come from train.init_from=hf:<dir> (checked tensor by tensor)."""
    shape = QWEN25[size]
    m = c.model
    m.family, m.qkv_bias, m.rope_theta, m.norm_eps = "qwen2", True, 1_000_000.0, 1e-6
    m.d_model, m.n_layers, m.n_heads, m.n_kv_heads = (shape[k] for k in ("d_model", "n_layers", "n_heads",
                                                                         "n_kv_heads"))
    m.head_dim = shape["d_model"] // shape["n_heads"]
    m.d_ff, m.vocab_size, m.tie_embeddings = shape["d_ff"], shape["vocab_size"], shape["tie"]
    m.max_seq_len, m.remat, m.dtype = 32768, "dots", "bfloat16"
    c.data.tokenizer = "hf"
    return c


def tiny_smoke_policy(c: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
    """CI stand-in for a Qwen2.5 policy: the same family switches, tiny, random, byte tokenizer, cpu_8."""
    m = c.model
    m.family, m.qkv_bias = "qwen2", True
    m.vocab_size, m.d_model, m.n_layers, m.n_heads, m.n_kv_heads, m.head_dim, m.d_ff = 384, 64, 2, 4, 2, 16, 128
    m.dtype, m.remat, m.max_seq_len = "float32", "none", 512
    c.data.tokenizer, c.data.tokenizer_path = "byte", ""
    c.train.init_from = ""
    c.mesh.preset = "cpu_8"
    return c


def tiny_smoke_run(c: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
    """The `:smoke` variant of the Qwen configs: tiny policy, a tiny CLIPO head, 2 RL steps on TinyGSM-Sym."""
    tiny_smoke_policy(c)
    c.clipo.proj_dim, c.clipo.warmup_steps = 16, 1
    c.rl.task = "rl/tinygsm_sym"
    c.rl.n_train, c.rl.n_eval = 32, 4
    c.rl.prompts_per_step, c.rl.group_size, c.rl.max_new_tokens = 4, 4, 8
    c.rl.eval_every = 100
    c.train.steps, c.train.log_every, c.train.checkpoint_every = 2, 1, 2
    c.optim.warmup_steps = 1
    return c


@register_validator
def check_clipo(config, mesh_shape) -> None:
    """config.clipo: a known mode, a positive temperature, a non-positive clamp, the hook named in train.hooks."""
    if "clipo" not in config:
        return
    o = config.clipo
    if o.mode not in MODES:
        raise ValueError(f"clipo.mode={o.mode!r}: must be one of {', '.join(MODES)}")
    if o.tau <= 0:
        raise ValueError(f"clipo.tau={o.tau}: must be > 0")
    if o.clamp > 0:
        raise ValueError(f"clipo.clamp={o.clamp}: must be <= 0 (a lower bound on a penalty)")
    if o.warmup_steps < 0 or o.proj_dim < 1:
        raise ValueError(f"clipo.warmup_steps={o.warmup_steps} / clipo.proj_dim={o.proj_dim}: must be >= 0 / >= 1")
    if o.mode != "off" and "clipo/contrastive" not in config.train.hooks:
        raise ValueError(f"clipo.mode={o.mode!r} but train.hooks={list(config.train.hooks)} lacks "
                         f"'clipo/contrastive'")
    if o.mode != "off" and o.warmup_steps >= config.train.steps:
        raise ValueError(f"clipo.warmup_steps={o.warmup_steps} leaves no policy update in "
                         f"train.steps={config.train.steps}")

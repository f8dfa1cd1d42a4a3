"""MARCH at the paper's scale (march.md B): Solver / Proposer / blind Checker played by Qwen3-8B from HF weights, PPO +
GAE with the zero-tolerance self-check reward (M = 3), 8 GPUs. The paper's main model is Llama-3.1-8B-Instruct;
Qwen3-8B is the other base model it reports, and the one this repo's Qwen presets point to (shared/model/convert
reads llama / qwen2 / qwen3 config.json files, so a Llama checkpoint would load too, with its own tokenizer).

    python -m shared.launch --config=experiments/march/march_qwen.py --workdir=runs/march/qwen3_8b \
        --config.train.init_from=hf:/path/to/Qwen3-8B --config.data.tokenizer_path=/path/to/Qwen3-8B/tokenizer.json

Variants: 8b (default: the paper's PPO + GAE), 8b_grpo (the spec's cheaper variant: GRPO, G = 4 Solver samples
and 4 kept audits per prompt, no critic), smoke / grpo_smoke (CI: a tiny random qwen3-shaped policy, byte tokenizer,
cpu_8; projects/march/tests/test_march_qwen.py runs grpo_smoke for one step from a tiny checkpoint written by
save_hf with a byte-level BPE tokenizer.json, and checks the roles' prompts and parsers under that tokenizer).

8b starts from HF weights like 8b_grpo: train.init_from=hf: loads the trunk and the lm head, and the critic's
scalar head (rl.critic = scalar_head), which a causal-LM checkpoint does not have, keeps its fresh init
(shared/train/trainer.py; tests/test_hf_convert.py::test_a_policy_with_a_critic_head_warm_starts_from_an_hf_checkpoint).

Settings from quarl/examples/train_march.sh: batch 32 prompts = one mini-batch, one rollout per prompt, 1 epoch
(13,721 prompts in the paper: 4,721 STEM + 2 x 4,500 general -> 428 steps; here rl.n_train = 13,721 NumFacts
worlds), actor AdamW 1e-6 with 5 warm-up steps, critic 1e-5 (optim.param_groups heads/scalar x 10), gamma 0.998,
lambda 1.0, KL in the reward k1 0.1 and no KL loss, clip 0.2 with dual clip 3, entropy 0, rollout temperature 1,
M = 3 Checker samples with ZTR, Checker trained, Proposer sampled only, response <= 8,192 tokens per role.

Differences from the paper:
  * Data: the synthetic NumFacts-RAG worlds (projects/march/numfacts.py), not BioASQ / 2Wiki / MuSiQue with retrieved
    documents; prompts are the project's plain-text role formats, not chat templates. Their parsers are regexes on
    decoded text, so they work with any tokenizer that decodes what it encodes (tested with byte-level BPE).
  * Prompt budget: 2,048 tokens (a NumFacts Checker prompt is <= ~2,000 bytes), not 24,567: the longer
    budget would only grow the KV cache.
  * Evaluation: the programmatic oracle on held-out worlds (hallucination rate, coverage), not the LLM judge on
    RAGTruth / FaithBench / ... ; no reward model (D.3).
  * verl's critic warm-up (10 steps of critic-only updates) has no counterpart: actor and critic update together.
  * Advantages are whitened per role (shared/agent), not over the concatenated batch (see the README).
Nothing here has been run: no weights offline.
"""
from experiments.march.numfacts import rl_config

VARIANTS = ("8b", "8b_grpo", "smoke", "grpo_smoke")
PROMPT_TOKENS, RESPONSE_TOKENS = 2048, 8192
N_TRAIN = 4721 + 2 * 4500   # the paper's STEM + general prompts: one epoch at batch 32 is 428 steps
ROLES = ("solver", "proposer", "checker")


def qwen3_8b_policy(c):
    """c.model set to Qwen3-8B's config.json shape (train.init_from=hf:<dir> checks it field by field)."""
    m = c.model
    m.family, m.qkv_bias, m.qk_norm, m.rope_theta, m.norm_eps = "qwen3", False, True, 1_000_000.0, 1e-6
    m.d_model, m.n_layers, m.n_heads, m.n_kv_heads, m.head_dim, m.d_ff = 4096, 36, 32, 8, 128, 12288
    m.vocab_size, m.tie_embeddings = 151936, False
    m.max_seq_len, m.remat, m.dtype = 40960, "dots", "bfloat16"
    c.data.tokenizer, c.data.tokenizer_path = "hf", ""   # set data.tokenizer_path to <weights>/tokenizer.json
    c.train.init_from = ""                               # set to hf:<weights dir>
    return c


def tiny_qwen3_policy(c):
    """CI stand-in: Qwen3's switches (qk-norm, no q/k/v bias), 2 layers x 64, random, byte tokenizer."""
    m = c.model
    m.family, m.qkv_bias, m.qk_norm = "qwen3", False, True
    m.vocab_size, m.d_model, m.n_layers, m.n_heads, m.n_kv_heads, m.head_dim, m.d_ff = 384, 64, 2, 4, 2, 16, 128
    m.dtype, m.remat = "float32", "none"
    c.data.tokenizer, c.data.tokenizer_path = "byte", ""
    c.train.init_from = ""
    return c


def get_config(arg=None):
    variant = arg or "8b"
    if variant not in VARIANTS:
        raise ValueError(f"experiments/march/march_qwen.py: unknown variant {arg!r} (known: {', '.join(VARIANTS)})")
    smoke = variant.endswith("smoke")
    grpo = "grpo" in variant
    c = rl_config("smoke" if smoke else "full", "grpo" if grpo else "ppo")   # the game, roles and reward
    rl = c.rl
    rl.warmup_sft_steps = 0          # the policy is the pretrained model (smoke: a random one); no SFT warm start
    c.march.checker_samples, c.march.reward = 3, "ztr"
    if smoke:
        return tiny_qwen3_policy(c)
    qwen3_8b_policy(c)
    c.agent.context_slots = PROMPT_TOKENS + RESPONSE_TOKENS
    c.agent.chunk_buckets = [256, 512, 1024, 2048]
    for role in ROLES:
        c.agent.roles[role].max_turn_tokens = RESPONSE_TOKENS
        c.agent.roles[role].context_slots = PROMPT_TOKENS + RESPONSE_TOKENS
    c.data.seq_len = PROMPT_TOKENS + RESPONSE_TOKENS
    rl.n_train, rl.n_eval = N_TRAIN, 256
    rl.prompts_per_step = 8 if grpo else 32   # grpo: 8 prompts x G = 4, the same 32 Solver episodes
    rl.mini_batches = 1
    rl.temperature = 1.0
    rl.gamma, rl.lam = 0.998, 1.0
    rl.eps_low = rl.eps_high = 0.2
    rl.entropy_coef, rl.dual_clip = 0.0, 3.0    # verl's defaults
    if grpo:    # KL k3 in the loss (the spec's GRPO variant), no critic
        rl.kl_coef, rl.kl_kind, rl.kl_in_reward = 0.1, "k3", False
    else:
        rl.kl_coef, rl.kl_kind, rl.kl_in_reward = 0.1, "k1", True
        c.optim.param_groups["heads/scalar"] = 10.0   # the critic at 1e-5 next to the actor's 1e-6
    rl.eval_every = 25
    c.train.steps = -(-N_TRAIN // 32)
    c.train.checkpoint_every = 25
    c.optim.lr = 1e-6
    c.optim.warmup_steps = 5
    c.optim.schedule = "constant"
    c.optim.weight_decay = 0.0
    c.optim.grad_clip = 1.0
    c.mesh.preset = "gpu_1x8"
    return c

"""CLIPO Track I (clipo.md B): GRPO + CLIPO on GSM8K for Qwen2.5-3B-Instruct from HF weights, 8 GPUs.
Paper (S): 8-set average 63.26, +1.12 over GRPO; GSM8K-P1 +1.48, GSM8K-P2 +3.36 (we only have GSM8K here).

    python -m shared.launch --config=experiments/clipo/clipo_qwen_gsm8k.py --workdir=runs/clipo/gsm8k_3b \
        --config.train.init_from=hf:/path/to/Qwen2.5-3B-Instruct \
        --config.data.tokenizer_path=/path/to/Qwen2.5-3B-Instruct/tokenizer.json
    ... --config.clipo.mode=off          # the GRPO baseline (same config, no contrastive bonus, no head warm-up)

Variants: 3b (default: the paper's script, gpu_1x8), 0.5b (one GPU, same recipe at B = 64), smoke (CI: a tiny
random qwen2-shaped policy on the embedded TinyGSM-Sym task, cpu_8). Settings from scripts/train_gsm8k.sh:
B = 512 prompts x G = 16, two PPO mini-batches per rollout batch, response <= 2048 tokens, actor lr 1e-6, KL loss
k3 beta 1e-3, eps 0.2, token-mean, 6 epochs of 14 steps including the 14-step head warm-up; head Linear(2048 ->
512), AdamW 1e-3 / wd 0.01, tau 0.05, lambda 0.2, clamp -0.5. Differences: prompts are "Q: ...\\nA:" without
the paper's chat template and "\\boxed{}" instruction, reward math/gsm8k; evaluation is greedy on the GSM8K test
split only (the paper's other 7 sets are not available offline). Nothing here has been run: no weights offline.
"""
import ml_collections

from projects.clipo.config import add_clipo, qwen25_policy, set_base_algorithm, tiny_smoke_run
from shared.config.base import base_config

VARIANTS = ("3b", "0.5b", "smoke")  # every variant is built and validated in CI (tests/test_experiments.py)
STEPS_PER_EPOCH = 14                # 7,473 prompts / 512 per step, last partial batch dropped


def get_config(arg=None):
    size = arg or "3b"
    if size not in VARIANTS:
        raise ValueError(f"experiments/clipo/clipo_qwen_gsm8k.py: unknown variant {arg!r} (known: "
                         f"{', '.join(VARIANTS)})")
    c = base_config()
    c.task = "rl"
    set_base_algorithm(c, "grpo")
    add_clipo(c, mode="trained", proj_dim=512, warmup_steps=STEPS_PER_EPOCH)
    c.rl.kl_coef, c.rl.kl_kind, c.rl.entropy_coef = 1e-3, "k3", 0.0
    c.rl.temperature = 1.0
    c.rl.eval_samples = 0               # Track I validates greedily
    if size == "smoke":
        return smoke(c)
    qwen25_policy(c, size)
    c.data.tokenizer_path = ""          # set to <weights>/tokenizer.json
    c.train.init_from = ""              # set to hf:<weights dir>
    c.rl.task = "rl/gsm8k"
    c.rl.task_options = ml_collections.ConfigDict({"path": "../shared/data/gsm8k"})
    c.rl.n_train, c.rl.n_eval = 7473, 1319
    c.rl.rewards = [("math/gsm8k", 1.0)]
    c.rl.prompts_per_step = 512 if size == "3b" else 64
    c.rl.group_size = 16
    c.rl.mini_batches = 2
    c.rl.max_new_tokens = 2048
    c.rl.eval_every = 7
    c.train.steps = 6 * STEPS_PER_EPOCH
    c.train.batch_size = c.rl.prompts_per_step * c.rl.group_size // c.rl.mini_batches  # rows per update
    c.train.micro_batches = 64 if size == "3b" else 16
    c.train.checkpoint_every = 7
    c.optim.lr = 1e-6
    c.optim.schedule = "constant"
    c.optim.warmup_steps = 0
    c.optim.weight_decay = 0.01
    c.mesh.preset = "gpu_1x8" if size == "3b" else "gpu_1"
    return c


def smoke(c):
    return tiny_smoke_run(c)

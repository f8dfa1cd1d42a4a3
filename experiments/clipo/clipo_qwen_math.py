"""CLIPO Track II (clipo.md B): CLIPO over GRPO, GSPO, DAPO, GMPO (or Dr. GRPO) on MATH for Qwen2.5-7B-Instruct from
HF weights, 8 GPUs. Paper (S): average gain over MATH/Perturb/AMC/AIME24/AIME25 of GRPO +1.35, GSPO +0.80,
DAPO +1.20, GMPO +0.83; best average DAPO + CLIPO 44.05.

    python -m shared.launch --config=experiments/clipo/clipo_qwen_math.py:dapo --workdir=runs/clipo/math_7b_dapo \
        --config.train.init_from=hf:/path/to/Qwen2.5-7B-Instruct \
        --config.data.tokenizer_path=/path/to/Qwen2.5-7B-Instruct/tokenizer.json
    ... --config.clipo.mode=off          # the base algorithm alone

Variants: grpo (default), gspo, dapo, gmpo, drgrpo (projects/clipo/config.py BASE_ALGORITHMS), smoke (CI: a tiny
random qwen2-shaped policy, DAPO + CLIPO on the embedded TinyGSM-Sym task, cpu_8). Settings from
scripts/train_math.sh: B = 128 x G = 16, one on-policy update per rollout batch, response <= 4096 tokens, lr 1e-6,
KL loss k3 1e-3, 10 epochs including a one-epoch head warm-up; head Linear(3584 -> 2048). Differences: the
train set is the 4,500 MATH problems of ../shared/data/math_competition outside MATH-500 (the paper: the 7,500
MATH train problems, not available offline), so an epoch is 35 steps; evaluation is MATH-500 only with avg@16 at
the rollout temperature (the paper: T = 0.6, top-p 0.95, plus AMC/AIME/MATH-Perturb). How the paper configured
DAPO and GSPO is unknown (clipo.md open question 3); we use rl_base_algorithms.md. Nothing here has been run.
"""
import ml_collections

from projects.clipo.config import BASE_ALGORITHMS, add_clipo, qwen25_policy, set_base_algorithm, tiny_smoke_run
from shared.config.base import base_config

VARIANTS = (*BASE_ALGORITHMS, "smoke")
STEPS_PER_EPOCH = 35                # 4,500 prompts / 128 per step


def get_config(arg=None):
    base = arg or "grpo"
    if base not in VARIANTS:
        raise ValueError(f"experiments/clipo/clipo_qwen_math.py: unknown variant {arg!r} (known: "
                         f"{', '.join(VARIANTS)})")
    c = base_config()
    c.task = "rl"
    set_base_algorithm(c, "dapo" if base == "smoke" else base)
    add_clipo(c, mode="trained", proj_dim=2048, warmup_steps=STEPS_PER_EPOCH)
    c.rl.kl_coef, c.rl.kl_kind, c.rl.entropy_coef = 1e-3, "k3", 0.0
    c.rl.temperature = 1.0
    if base == "smoke":
        return smoke(c)
    qwen25_policy(c, "7b")
    c.data.tokenizer_path = ""          # set to <weights>/tokenizer.json
    c.train.init_from = ""              # set to hf:<weights dir>
    c.rl.task = "rl/math"
    c.rl.task_options = ml_collections.ConfigDict({"path": "../shared/data/math_competition"})
    c.rl.n_train, c.rl.n_eval = 4500, 500
    c.rl.rewards = [("math/boxed", 1.0)]
    c.rl.prompts_per_step = 128
    c.rl.group_size = 16
    c.rl.mini_batches = 1
    c.rl.max_new_tokens = 4096
    c.rl.eval_every = 29
    c.rl.eval_samples = 16
    c.train.steps = 10 * STEPS_PER_EPOCH
    c.train.batch_size = c.rl.prompts_per_step * c.rl.group_size // c.rl.mini_batches  # rows per update
    c.train.micro_batches = 128
    c.train.checkpoint_every = 29
    c.optim.lr = 1e-6
    c.optim.schedule = "constant"
    c.optim.warmup_steps = 0
    c.optim.weight_decay = 0.01
    c.mesh.preset = "gpu_1x8"
    return c


def smoke(c):
    tiny_smoke_run(c)
    c.rl.dynamic_sampling_max_tries = 1
    c.rl.eval_samples = 0
    return c

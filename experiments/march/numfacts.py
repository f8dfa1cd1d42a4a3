"""MARCH on NumFacts-RAG (../shared/papers/march.md D): one policy as Solver, Proposer and blind Checker, PPO + GAE
with the scalar-head critic on the Solver and Checker trajectories, zero-tolerance self-check reward (M = 3 votes).

    python -m shared.launch --config=experiments/march/numfacts.py --workdir=runs/march/numfacts --mesh=gpu_1
    python -m shared.launch --config=experiments/march/numfacts.py:smoke --workdir=/tmp/march_smoke   # CI, CPU x 8
    python -m shared.launch --config=experiments/march/numfacts.py:sft --workdir=runs/march/sft_s0     # warm start

Variants: "" (D.2/D.3: 8 layers x 512, B = 64, 300 steps, SFT warm start in <workdir>/sft unless train.init_from
names one), "sft" (the warm start alone: masked SFT on rl/march/traces, 30% confuser errors in Solver targets; the
table's stage; "sft_mini" for the mini model), "mini" (4 layers x 256, B = 32, 100 RL steps: the smallest table, experiments/march/table.py:mini),
"grpo" (the cheaper variant the spec allows: GRPO with G = 4 Solver samples per prompt and G = 4 audits kept per
prompt, B = 16 prompts: the same 64 Solver episodes per step, no critic), each with "_smoke"; "smoke" = CI (tiny
model, 2 steps, 8 CPU devices, seconds). Knobs: config.march (reward, symmetric_checker, checker_samples), the roles
in config.agent.roles (the Solver-only arm: agent.roles.checker.train=False).

Byte-level tokens: a Checker prompt (8 documents + 6 questions) is up to ~1,100 bytes (~1,200 with the response
shown) and its audit up to ~340, so SFT rows are 1,536 tokens; in RL the Proposer's questions (up to 10, each cut to
120 characters) can make a Checker prompt up to ~2,000 bytes, so an episode's cache has 2,048 + 448 slots (the spec's
1,024 was in word-level tokens).
"""
import ml_collections

from shared.agent import agent_config
from shared.config.base import base_config

VARIANTS = ("sft", "mini", "grpo", "sft_mini", "sft_smoke", "mini_smoke", "grpo_smoke")


def world_options(**extra) -> ml_collections.ConfigDict:
    """NumFacts-RAG's world options (projects/march/numfacts.make_world), every key spelled out so that a sweep or a
    command line can override any of them (an override cannot add a key)."""
    c = ml_collections.ConfigDict({"min_docs": 4, "max_docs": 8, "min_asked": 3, "max_asked": 5, "derived": True,
                                   "name_first": False, "max_value": 2000, "n_attributes": 5})
    c.update(extra)
    return c


def march_config() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.reward = "ztr"                # ztr | ztr01 | err | oracle (game.py)
    c.symmetric_checker = False     # True: the Checker also sees the Solver's response (ablation)
    c.checker_samples = 3           # M audits per response, majority vote
    c.eval_print = 3                # test examples printed with their documents at each evaluation (greedy answers)
    return c


def _model(c, size: str):
    m = c.model
    m.vocab_size = 384              # byte tokenizer (259 ids)
    if size == "full":
        m.d_model, m.n_layers, m.n_heads, m.n_kv_heads, m.head_dim, m.d_ff = 512, 8, 8, 8, 64, 2048
    elif size == "mini":
        m.d_model, m.n_layers, m.n_heads, m.n_kv_heads, m.head_dim, m.d_ff = 256, 4, 4, 4, 64, 1024
    else:   # smoke
        m.d_model, m.n_layers, m.n_heads, m.n_kv_heads, m.head_dim, m.d_ff = 32, 1, 2, 2, 16, 64
    m.max_seq_len = 2560
    m.heads = ["lm", "scalar"]      # the critic of PPO + GAE is the policy's scalar head
    m.remat = "none"


def sft_config(size: str) -> ml_collections.ConfigDict:
    """Masked SFT on the three roles' traces (D.2)."""
    c = base_config()
    c.project = "march"
    c.task = "sft"
    _model(c, size)
    c.data.tokenizer = "byte"
    c.data.source = "rl/march/traces"
    c.data.task_options = world_options(error_rate=0.3, symmetric_share=0.5, roles="solver,proposer,checker")
    c.data.n_train = 60000
    c.data.seq_len = 1536
    c.data.greedy_eval_examples = 0
    c.train.loss = "sft_xent"
    c.train.steps = 2000 if size == "full" else 1200
    c.train.batch_size = 64
    c.train.eval_every = 500
    c.train.checkpoint_every = 500
    c.train.log_every = 50
    c.optim.lr = 1e-3 if size == "full" else 2e-3
    c.optim.warmup_steps = 100
    c.optim.schedule = "cosine"
    if size == "smoke":
        c.mesh.preset = "cpu_8"
        c.model.dtype = "float32"
        c.data.n_train, c.data.seq_len = 48, 512
        c.data.task_options.max_docs = 4
        c.train.steps, c.train.batch_size, c.train.eval_every, c.train.eval_batches = 2, 8, 2, 1
        c.train.checkpoint_every, c.train.log_every = 2, 1
        c.optim.warmup_steps = 1
    return c


def rl_config(size: str, algo: str = "ppo") -> ml_collections.ConfigDict:
    c = base_config()
    c.project = "march"
    c.task = "march/rl"
    _model(c, size)
    c.data.tokenizer = "byte"
    c.march = march_config()
    c.agent = agent_config()
    c.agent.sft_task = "rl/march/traces"
    c.agent.sft_options = world_options(error_rate=0.3, symmetric_share=0.5, roles="solver,proposer,checker")
    c.agent.sft_n_train = 60000
    # per role: its longest prompt's chunk bucket + its turn (a Checker prompt: documents, <= 10 questions of <= 120
    # characters, the response in the symmetric arm)
    c.agent.context_slots = 2048 + 448
    c.agent.chunk_buckets = [256, 512, 1024, 1280, 1536, 2048]
    grpo = algo == "grpo"
    # every key a sweep arm overrides is spelled out (an override cannot add a key)
    c.agent.roles = {
        "solver": dict(advantage="grpo" if grpo else "gae", group_size=4 if grpo else 1, train=True,
                       max_turn_tokens=96, context_slots=1024 + 96),
        "proposer": dict(advantage="grpo", group_size=4 if grpo else 1, train=False, max_turn_tokens=448,
                         context_slots=512 + 448),
        "checker": dict(advantage="grpo" if grpo else "gae", group_size=4 if grpo else 1, train=True,
                        max_turn_tokens=384, context_slots=2048 + 384),
    }
    if grpo:
        c.model.heads = ["lm"]
    rl = c.rl
    rl.task = "rl/march/numfacts"
    rl.task_options = world_options()   # derived=False: copied values only (table.py:mini_copy)
    rl.n_train = 20000
    rl.n_eval = 256
    rl.prompts_per_step = (16 if grpo else 64) if size == "full" else (8 if grpo else 32)
    rl.group_size = 1
    rl.temperature = 1.0
    rl.gamma, rl.lam = 0.998, 1.0
    rl.kl_coef, rl.kl_in_reward, rl.kl_kind = 0.02, not grpo, "k1" if not grpo else "k3"
    rl.loss_agg = "token-mean"
    rl.eval_every = 50 if size == "full" else 25
    rl.eval_samples = 1
    rl.warmup_sft_steps = 2000 if size == "full" else 1200
    rl.sft_lr = 1e-3 if size == "full" else 2e-3
    rl.sft_batch_size = 64
    if size == "mini":
        # fixed memory budgets (numbers unchanged: a row's samples do not depend on the split). Left at 0, each
        # process sizes its update micro-batch and its sampler calls to the free memory it sees when it starts: on an
        # empty H200 that is the whole update batch (64 rows x <= 2,560 tokens, ~16 GB of activations by
        # shared/rl/budget.py's estimate), so 9 points started together on one H200 ran out of memory (8.5 GiB
        # allocations). 32,768 tokens per micro-batch (~3.2 GB) and 64 rows per sampler call (~3.2 GB for the
        # Checker's 2,432-slot cache) keep a mini point to a few GB (README.md "Cost").
        rl.micro_batch_tokens = 32768
        rl.rollout_max_rows = 64
    c.data.seq_len = 1536
    c.data.greedy_eval_examples = 0
    c.train.steps = 300 if size == "full" else 100
    c.train.log_every = 5
    c.train.checkpoint_every = 50
    c.optim.lr = 2e-5
    c.optim.schedule = "constant"
    c.optim.warmup_steps = 5
    c.optim.weight_decay = 0.0
    c.optim.grad_clip = 1.0
    if not grpo:   # the critic (the scalar head) at 1e-4, the actor at 2e-5 (D.3)
        c.optim.param_groups = ml_collections.ConfigDict({"heads/scalar": 5.0})
    if size == "smoke":
        c.mesh.preset = "cpu_8"
        c.model.dtype = "float32"
        rl.n_train, rl.n_eval, rl.prompts_per_step = 16, 8, 8 if not grpo else 2
        rl.task_options.max_docs = 4
        rl.warmup_sft_steps, rl.sft_batch_size, rl.eval_every = 2, 8, 2
        c.agent.sft_options.max_docs = 4
        c.agent.sft_n_train = 24
        c.data.seq_len = 512
        c.agent.context_slots = 512 + 16
        c.agent.chunk_buckets = [512]
        for role in ("solver", "proposer", "checker"):
            c.agent.roles[role].max_turn_tokens = 16
            c.agent.roles[role].context_slots = 512 + 16
        c.train.steps, c.train.log_every, c.train.checkpoint_every = 2, 1, 2
        c.optim.warmup_steps = 0
    return c


def get_config(arg=None):
    """arg: words joined by "_" from {sft, mini, grpo} plus an optional "smoke" (e.g. "sft_mini", "grpo_smoke")."""
    words = [w for w in (arg or "").split("_") if w]
    unknown = [w for w in words if w not in ("sft", "mini", "grpo", "smoke")]
    if unknown or ("sft" in words and "grpo" in words):
        raise ValueError(f"experiments/march/numfacts.py: unknown variant {arg!r} (known: {', '.join(VARIANTS)}, smoke)")
    size = "smoke" if "smoke" in words else ("mini" if "mini" in words else "full")
    if "sft" in words:
        return sft_config(size)
    return rl_config(size, "grpo" if "grpo" in words else "ppo")

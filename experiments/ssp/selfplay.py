"""SSP small-scale reproduction (ssp.md D): search self-play on a synthetic KB of 3,000 invented entities with a BM25
search tool, an 8-layer d=512 word-level policy warm-started by SFT on programmatic traces of both roles.

    python -m shared.launch --config=experiments/ssp/selfplay.py:sft --workdir=runs/ssp/sft_s0 --mesh=gpu_1
    python -m shared.launch --config=experiments/ssp/selfplay.py --workdir=runs/ssp/ssp_s0 --mesh=gpu_1 \
        --config.train.init_from=run:runs/ssp/sft_s0
    python -m shared.sweep --config=experiments/ssp/selfplay.py:min --workdir=runs/ssp/min_table --parallel=9
    python -m shared.sweep --config=experiments/ssp/selfplay.py --workdir=runs/ssp/table --parallel=16

Variants: "" (an RL arm: 300 steps of B = 64 answers, solver G = 5, <= 6 tool turns, KL k3 0.01, eps 0.2/0.285,
AdamW 2e-5; without train.init_from it first runs a fixed 3,000-step SFT warm start), "sft" (the warm start, task
ssp/warmstart: SFT on 100k traces, ~40% proposer / 40% solver / 20% reader, 10% noisy, stopped at the first check
where the greedy solver answers WARM_TARGET of 2-hop questions over the pool D; 3,000 steps at most), "smoke" and
"sft_smoke" (CI: a 170-entity KB, a 2-layer d=32 policy, 2 RL / 4 SFT steps).

Tables (get_sweep): "" every arm of D.3 x 3 seeds (projects/ssp/config.py ARMS, 27 points), "min" the 9-point table
for claims 1-2 (SSP, solver-only, proposer-only x 3 seeds, 150 steps), "smoke" (CI). Every arm of a seed starts
from that seed's warm-start stage. Memory (about 11 GiB per RL point) and cost: projects/ssp/README.md ("Memory",
"GPU cost").
"""
import ml_collections

from projects.ssp.config import ARMS, agent_group, ssp_config
from shared.config import base_config

SEEDS = (0, 1, 2)
RL_STEPS = 300
MIN_STEPS = 150
SMOKE_KB = {"person": 60, "company": 30, "town": 30, "river": 10, "region": 8}
# Memory of an RL point (README "Memory"; projects/ssp/memory.py compiles its programs). A 6-turn episode fills at
# most 32 + 40 + 5 x (128 + 40) = 912 KV-cache slots (every search result is <= 116 tokens: one 128-token chunk), so
# 1,024 slots; the RAG reader's one prompt (up to ~26 documents) is one chunk of <= 1,024 tokens + <= 40 answer
# tokens: 1,088 slots (a longer prompt would not fit 1,536 either), in calls of 32 rows (its chunk is attended
# densely). The update runs in micro-batches of 16,384 tokens (gradient accumulation: the same update); the sampler
# in calls of <= 320 rows (the solver's 64 x 5 in one call). 0 for the last two sizes them from the GPU's free memory
# at start, which is what made the points packed on one GPU run out of memory. The SFT stage's batch of 64 runs in
# 4 micro-batches likewise.
CONTEXT_SLOTS = 1024
READER_SLOTS = 1088
READER_ROWS = 32
MICRO_BATCH_TOKENS = 16384
ROLLOUT_MAX_ROWS = 320
# The warm start (README "Warm start"): SFT stopped at 2-hop greedy accuracy >= WARM_TARGET on questions over D.
WARM_TARGET = 0.35
SFT_MAX_STEPS = 3000
VARIANTS = ("sft",)
SWEEP_VARIANTS = ("min",)


def _model(c, smoke: bool):
    m = c.model
    if smoke:
        m.vocab_size, m.d_model, m.n_layers, m.n_heads, m.n_kv_heads, m.head_dim, m.d_ff = 512, 32, 2, 2, 2, 16, 64
        m.dtype = "float32"
        m.max_seq_len = 512
    else:  # ssp.md D.2: 8 layers, d = 512; the word vocabulary of the 3,000-entity KB has 3,434 tokens
        m.vocab_size, m.d_model, m.n_layers, m.n_heads, m.n_kv_heads, m.head_dim, m.d_ff = 3584, 512, 8, 8, 8, 64, 2048
        m.dtype = "bfloat16"
        m.max_seq_len = 1024
    m.remat = "none"


def _common(smoke: bool) -> ml_collections.ConfigDict:
    c = base_config()
    c.project = "ssp"
    _model(c, smoke)
    c.ssp = ssp_config()
    if smoke:
        c.ssp.kb_sizes = ml_collections.ConfigDict(SMOKE_KB)
        c.ssp.pool_size = 100
        c.ssp.eval_per_hop = 2
    c.ssp.eval_rows = 64 if smoke else ROLLOUT_MAX_ROWS   # greedy solver episodes per sampler call
    kb = {"kb_seed": c.ssp.kb_seed, "kb_sizes": c.ssp.kb_sizes.to_dict(), "pool_size": c.ssp.pool_size}
    c.data.tokenizer = "ssp/words"
    c.data.task_options = ml_collections.ConfigDict(kb)
    c.mesh.preset = "cpu_8" if smoke else "gpu_1"
    return c


def _agent(c, smoke: bool) -> None:
    """config.agent: the turn limits of every role (the RL game's and the warm start's accuracy checks)."""
    c.agent = agent_group(max_turns=3 if smoke else 6, max_turn_tokens=12 if smoke else 40,
                          context_slots=512 if smoke else CONTEXT_SLOTS)
    if not smoke:
        c.agent.roles.reader.context_slots = READER_SLOTS
    c.agent.sft_options = ml_collections.ConfigDict(c.data.task_options.to_dict())


def sft_config(smoke: bool) -> ml_collections.ConfigDict:
    """The warm start (ssp.md D.2): SFT on programmatic traces, stopped at the first check (every 50 steps) where
    the greedy solver answers WARM_TARGET of 300 2-hop questions over the pool D (task ssp/warmstart); 3,000 steps
    is the cap (they gave 0.855 on 2-hop)."""
    c = _common(smoke)
    _agent(c, smoke)
    c.task = "ssp/warmstart"
    c.data.source = "rl/ssp_traces"
    c.data.n_train = 200 if smoke else 100_000   # ssp.md D.2: ~50k traces per role
    c.data.seq_len = 512 if smoke else 768        # the longest trace (a reader's 8 documents) is ~560 words
    c.data.greedy_eval_examples = 0               # a trace needs the tool: warm/acc here, eval/*_before in RL
    c.train.loss = "sft_xent"
    c.train.steps = 4 if smoke else SFT_MAX_STEPS
    c.train.batch_size = 8 if smoke else 64
    c.train.micro_batches = 1 if smoke else 4    # memory only (README "Memory"): the same step
    c.train.eval_every = c.train.steps
    c.train.eval_batches = 1 if smoke else 4
    c.train.checkpoint_every = 2 if smoke else 250   # resume points; the stop saves its own step
    c.train.log_every = 1 if smoke else 50
    c.optim.lr = 1e-3 if smoke else 5e-4
    c.optim.warmup_steps = 1 if smoke else 100
    c.optim.weight_decay = 0.0
    c.ssp.warm_target = WARM_TARGET            # under-trained on purpose (D.2): headroom for RL
    c.ssp.warm_check_every = 2 if smoke else 50
    c.ssp.warm_val_questions = 8 if smoke else 300
    return c


def rl_config(smoke: bool, steps: int = RL_STEPS) -> ml_collections.ConfigDict:
    c = _common(smoke)
    c.task = "ssp/selfplay"
    _agent(c, smoke)
    c.data.source = "rl/ssp_traces"
    c.data.seq_len = 512 if smoke else 768
    c.data.greedy_eval_examples = 0              # the SFT warm start's: traces need the tool (eval/*_before)
    rl = c.rl
    rl.task = "rl/ssp_qa"
    rl.n_train = 64 if smoke else 20_000        # the supervised arm's labelled QA (self-play uses D x hops)
    rl.prompts_per_step = 4 if smoke else 64     # B answers per step
    rl.group_size = 1                            # per-role sizes are config.agent.roles.*.group_size
    rl.temperature = 1.0
    rl.kl_coef, rl.kl_kind = 0.01, "k3"
    rl.eps_low, rl.eps_high = 0.2, 0.285
    rl.loss_agg = "token-mean"
    rl.mini_batches = 1
    if not smoke:   # memory, not science (README "Memory"): fixed budgets instead of "what is free on the GPU"
        rl.micro_batch_tokens = MICRO_BATCH_TOKENS
        rl.rollout_max_rows = ROLLOUT_MAX_ROWS
        c.ssp.reader_rows = READER_ROWS
    rl.eval_every = 2 if smoke else 20
    rl.warmup_sft_steps = 4 if smoke else 3000   # only without train.init_from: a fixed-length warm start (the
                                                 # sweep's stage stops at WARM_TARGET instead)
    rl.sft_lr = 1e-3 if smoke else 5e-4
    rl.sft_batch_size = 8 if smoke else 64
    c.agent.sft_n_train = 200 if smoke else 100_000
    c.train.steps = 2 if smoke else steps
    c.train.log_every = 1
    c.train.checkpoint_every = 2 if smoke else 50
    c.optim.lr = 2e-5 if not smoke else 1e-3
    c.optim.schedule = "constant"
    c.optim.warmup_steps = 1 if smoke else 5
    c.optim.weight_decay = 0.01
    c.optim.grad_clip = 1.0
    if smoke:
        c.agent.roles.solver.group_size = 2
    return c


def get_config(arg=None):
    """"": an RL arm (SSP); "sft": the warm start; "smoke" / "sft_smoke": CI."""
    arg = arg or ""
    smoke = arg.endswith("smoke")
    kind = arg.removesuffix("smoke").removesuffix("_")
    if kind == "sft":
        return sft_config(smoke)
    if kind == "min":
        return rl_config(smoke, MIN_STEPS)
    if kind == "":
        return rl_config(smoke)
    raise ValueError(f"experiments/ssp/selfplay.py: unknown variant {arg!r} (known: sft, min, smoke, sft_smoke)")


def get_sweep(arg=None):
    """"": every arm x 3 seeds; "min": SSP / solver-only / proposer-only x 3 seeds (claims 1-2); "smoke": CI
    (SSP and solver-only x 2 seeds, so the table has a std)."""
    smoke = arg == "smoke"
    if arg not in (None, "", "min", "smoke"):
        raise ValueError(f"experiments/ssp/selfplay.py: unknown sweep {arg!r} (known: min, smoke)")
    suffix = "_smoke" if smoke else ""
    seeds = SEEDS[:2] if smoke else SEEDS
    if arg == "min":
        arms = {k: ARMS[k] for k in ("ssp", "solver_only", "proposer_only")}
    elif smoke:
        arms = {k: ARMS[k] for k in ("ssp", "solver_only")}
    else:
        arms = ARMS
    stages = [dict(name=f"sft_s{seed}", overrides={"seed": seed}, arg="sft" + suffix) for seed in seeds]
    point_arg = arg or None   # "min" / "smoke": the same get_config variant; the full table: the default
    points = [dict(name=f"{name}_s{seed}", arm=name, arg=point_arg,
                   overrides={**overrides, "seed": seed, "train.init_from": f"run:{{stage:sft_s{seed}}}"})
              for name, overrides in arms.items() for seed in seeds]
    return dict(
        name="ssp_" + (arg or "table"), stages=stages, points=points,
        columns=["eval/acc_mean_before", "eval/acc_mean", "eval/acc_h1", "eval/acc_h2", "eval/acc_h3",
                 "eval/acc_h3_before", "rl/role/proposer/valid_rate", "rl/role/proposer/run_oracle_invalid_rate",
                 "rl/role/proposer/run_filter_precision", "rl/role/proposer/run_filter_recall",
                 "rl/role/solver/success", "rl/role/proposer/entropy", "wall_time_s"],
        group=["arm"],
        plot=dict(kind="curves", metric="eval/acc_mean", x="step"),
    )

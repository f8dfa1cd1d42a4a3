"""SSP small-scale reproduction (ssp.md D): search self-play on a synthetic KB of 3,000 invented entities with a BM25
search tool, an 8-layer d=512 word-level policy warm-started by SFT on programmatic traces of both roles.

    python -m shared.launch --config=experiments/ssp/selfplay.py:sft --workdir=runs/ssp/sft_s0 --mesh=gpu_1
    python -m shared.launch --config=experiments/ssp/selfplay.py --workdir=runs/ssp/ssp_s0 --mesh=gpu_1 \
        --config.train.init_from=run:runs/ssp/sft_s0
    python -m shared.sweep --config=experiments/ssp/selfplay.py:min --workdir=runs/ssp/min_table --parallel=4
    python -m shared.sweep --config=experiments/ssp/selfplay.py --workdir=runs/ssp/table --parallel=8

Variants: "" (an RL arm: 300 steps of B = 64 answers, solver G = 5, <= 6 tool turns, KL k3 0.01, eps 0.2/0.285,
AdamW 2e-5; without train.init_from it first runs its own SFT warm start), "sft" (the warm start: SFT on 100k
traces, ~40% proposer / 40% solver / 20% reader, 10% noisy), "smoke" and "sft_smoke" (CI: a 170-entity KB, a
2-layer d=32 policy, 2 steps).

Tables (get_sweep): "" every arm of D.3 x 3 seeds (projects/ssp/config.py ARMS), "min" the smallest table for claims
1-2 (SSP, solver-only, proposer-only from one SFT stage per seed, 3 seeds, 150 steps), "smoke" (CI). Cost: see
projects/ssp/README.md ("GPU cost"); no point has run on a GPU yet.
"""
import ml_collections

from projects.ssp.config import ARMS, agent_group, ssp_config
from shared.config import base_config

SEEDS = (0, 1, 2)
RL_STEPS = 300
MIN_STEPS = 150
SMOKE_KB = {"person": 60, "company": 30, "town": 30, "river": 10, "region": 8}
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
    kb = {"kb_seed": c.ssp.kb_seed, "kb_sizes": c.ssp.kb_sizes.to_dict(), "pool_size": c.ssp.pool_size}
    c.data.tokenizer = "ssp/words"
    c.data.task_options = ml_collections.ConfigDict(kb)
    c.mesh.preset = "cpu_8" if smoke else "gpu_1"
    return c


def sft_config(smoke: bool) -> ml_collections.ConfigDict:
    c = _common(smoke)
    c.task = "sft"
    c.data.source = "rl/ssp_traces"
    c.data.n_train = 200 if smoke else 100_000   # ssp.md D.2: ~50k traces per role
    c.data.seq_len = 512 if smoke else 768        # the longest trace (a reader's 8 documents) is ~560 words
    c.data.greedy_eval_examples = 0               # a trace needs the tool: evaluated by the RL task (eval/*_before)
    c.train.loss = "sft_xent"
    c.train.steps = 4 if smoke else 3000          # under-trained on purpose (D.2): headroom for RL
    c.train.batch_size = 8 if smoke else 64
    c.train.eval_every = c.train.steps
    c.train.eval_batches = 1 if smoke else 4
    c.train.checkpoint_every = c.train.steps
    c.train.log_every = 1 if smoke else 100
    c.optim.lr = 1e-3 if smoke else 5e-4
    c.optim.warmup_steps = 1 if smoke else 100
    c.optim.weight_decay = 0.0
    return c


def rl_config(smoke: bool, steps: int = RL_STEPS) -> ml_collections.ConfigDict:
    c = _common(smoke)
    c.task = "ssp/selfplay"
    c.agent = agent_group(max_turns=3 if smoke else 6, max_turn_tokens=12 if smoke else 40,
                          context_slots=512 if smoke else 1536)   # 6 turns of <= 40 tokens + 3-doc results
    c.agent.sft_options = ml_collections.ConfigDict(c.data.task_options.to_dict())
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
    rl.eval_every = 2 if smoke else 20
    rl.warmup_sft_steps = 4 if smoke else 3000   # used only without train.init_from (the sweep gives a stage)
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
                 "rl/role/proposer/valid_rate", "rl/role/proposer/run_oracle_invalid_rate",
                 "rl/role/proposer/run_filter_precision", "rl/role/proposer/run_filter_recall",
                 "rl/role/solver/success", "rl/role/proposer/entropy", "wall_time_s"],
        group=["arm"],
        plot=dict(kind="curves", metric="eval/acc_mean", x="step"),
    )

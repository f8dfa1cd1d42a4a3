"""CLIPO small-scale table (../shared/papers/clipo.md D.3): SFT warm start on TinyGSM-Sym, then GRPO vs CLIPO vs
CLIPO-fixed vs CLIPO-shuffled, 3 seeds each, evaluated on ID / Sym / P1 / P2 / NoOp / NoLeak.

    python -m shared.sweep --config=experiments/clipo/tinygsm_sym_table.py --workdir=runs/clipo/tinygsm_sym_table \
        --parallel=6 --config.mesh.preset=gpu_1
    python -m shared.launch --config=experiments/clipo/tinygsm_sym_table.py --workdir=runs/clipo/one   # one run

Each point runs the whole pipeline in its own workdir: SFT on gold solutions (<point>/sft; each arm trains its
own warm start, and the committed table's starts differ between arms of one seed (ID 0.18-0.40), so its ledger
compares arms with Welch intervals; a shared SFT stage per seed is the re-run's fix, issue 20), then RL, then
the TinyGSM-Sym evaluation hook
(greedy accuracy, avg@8 and pass@16 at T = 0.6 / top-p 0.95, PW-rate, copy rate; "..._before" = the warm
start). Every arm makes the same number of policy updates (ACTOR_STEPS RL steps); the CLIPO arms first spend
HEAD_WARMUP extra RL steps training only the projection head (rollouts + rewards, policy held still).

Scaled down from D.3 to fit the shared 7-minute GPU budget (12 points, 6 at a time on 2 H100s): a 4.3M-parameter
byte-level policy (d 256, 4 layers) instead of 11M word-level, B = 32 prompts x G = 8 instead of 64 x 16,
60 actor steps (120 updates: 2 mini-batches per rollout batch) instead of 300, lr 5e-5 instead of 2e-5,
head Linear(256 -> 128), 10 head-only warm-up steps instead of 20, 200 problems per evaluation set instead of
2,000, 3 seeds instead of 5. The spec's CLIPO settings are kept: tau 0.05, lambda 0.2, clamp -0.5, head AdamW
1e-3 / wd 0.01, group-level InfoNCE with one random positive, KL k3 beta 0.001, eps 0.2, token-mean.
Results as shared.sweep wrote them: projects/clipo/results/tinygsm_sym_table/.

The "spec" sweep variant is the re-run at D.3's scale (issue 20): one SFT warm start per seed as a sweep stage
(experiments/base/tinygsm_sym.py at 1000 steps: ID greedy 0.668 +- 0.039 over 3 seeds, inside the spec's 0.5-0.7,
experiments/base/results/base_tinygsm_sym/) that every arm of the seed starts from, so arms differ only in the
method and the ledger pairs them by seed; then B = 64 x G = 16, responses <= 160 tokens, 300 actor steps (600
updates), lr 2e-5, 20 head-only warm-up steps, 5 seeds, 2,000 problems per evaluation set:

    python -m shared.sweep --config=experiments/clipo/tinygsm_sym_table.py:spec --workdir=runs/clipo/spec_table \
        --parallel=16

GPU cost of ":spec" (estimated from committed measurements; the variant has not run): 5 stages + 20 points.
  stage   experiments/base/results/base_tinygsm_sym/manifest.json: 1,000 SFT steps took 85-132 s a point on shared
          H200s (0.056-0.107 s/step) -> ~2 min each, ~10 GPU-min.
  RL step projects/clipo/results/tinygsm_sym_table/manifest.json (B 32 x G 8, <= 80 new tokens): perf/step_s
          0.13-0.52 s, the least contended 0.13 s = rollout 0.053 + update 0.064 + reference 0.012. At 64 x 16
          (4x the rows) and <= 160 tokens (2x), the update and reference passes scale with tokens (8x: ~0.6 s) and
          the rollout with decode steps (2x) times a batch factor of ~2 for 4x rows of a 4.3M model (latency-bound):
          ~0.2 s. ~0.8 s a step x 320 steps (300 actor + 20 head-only) ~ 4.3 min.
  eval    10x the 60-step table's problems (2,000 per set, 6 sets, greedy + 16 samples, before and after): that
          table's points spent seconds_this_run - wall_time_s - the SFT warm start ~ 10-20 s outside RL, so ~2-3 min.
  total   ~7-8 min a point alone on one GPU: 20 x 7.5 + 10 ~ 160 GPU-min; on 4 H100s with --parallel=16 (4 small
          points a GPU) ~ 40 min of wall time. Probe first where a lease is short: one point
          (`--only=grpo_s0`, its stage comes along) gives perf/step_s and the evaluation time.
Checked (CPU): the sweep builds, its 5 stages and 20 points validate (tests/test_experiments.py runs the points);
the stage is experiments/base/tinygsm_sym.py, whose model shape equals this table's policy.
"""
from projects.clipo.config import add_clipo, eval_config
from shared.config.base import base_config

ACTOR_STEPS = 60
HEAD_WARMUP = 10
SEEDS = (0, 1, 2)
# the "spec" variant (clipo.md D.3)
SPEC_ACTOR_STEPS = 300
SPEC_HEAD_WARMUP = 20
SPEC_SEEDS = (0, 1, 2, 3, 4)
SWEEP_VARIANTS = ("spec", "spec_min", "spec_smoke")  # get_sweep variants beside "" and "smoke" (checked by tests/test_experiments.py)
SPEC_BASE_STEPS = 1000  # experiments/base/tinygsm_sym.py's competence table: ID 0.668 at 1000 steps, 0.906 at 2000
ARMS = {"grpo": "off", "clipo": "trained", "clipo_fixed": "fixed", "clipo_shuffled": "shuffled"}


def get_config(arg=None):
    """"": the committed table's point; "smoke": CI; "spec" / "spec_smoke": a point of the D.3-scale table (starts
    from a stage's checkpoint via train.init_from); "base" / "base_smoke": that table's per-seed SFT stage."""
    if arg in ("base", "base_smoke"):
        return _base_stage(smoke=arg == "base_smoke")
    if arg in ("spec", "spec_min", "spec_smoke"):
        return _spec(get_config("smoke" if arg == "spec_smoke" else None), smoke=arg == "spec_smoke")
    c = base_config()
    c.task = "rl"
    add_clipo(c, mode="trained", proj_dim=128, warmup_steps=HEAD_WARMUP)
    c.train.hooks = ["clipo/contrastive", "clipo/tinygsm_eval"]
    c.clipo_eval = eval_config()
    c.clipo_eval.n = 200
    c.clipo_eval.samples = 16
    c.clipo_eval.max_new_tokens = 112
    m = c.model
    m.vocab_size, m.d_model, m.n_layers, m.n_heads, m.n_kv_heads, m.head_dim, m.d_ff = 384, 256, 4, 8, 8, 32, 1024
    m.remat = "none"
    m.dtype = "bfloat16"
    m.max_seq_len = 640                # p2 prompts (<= 321 tokens, bucket 512) + 112 evaluation tokens
    c.data.tokenizer = "byte"
    c.data.seq_len = 320               # longest train prompt 230 bytes + solution <= 70 + bos/eos
    c.data.greedy_eval_examples = 0
    c.rl.task = "rl/tinygsm_sym"
    c.rl.n_train = 20000
    c.rl.n_eval = 128                  # the learner's own test (= id) / ood (= sym) tracking every eval_every steps
    c.rl.eval_every = 35
    c.rl.eval_samples = 0
    c.rl.warmup_sft_steps = 600
    c.rl.sft_lr = 1e-3
    c.rl.sft_batch_size = 128
    c.rl.prompts_per_step = 32
    c.rl.group_size = 8
    c.rl.mini_batches = 2
    c.rl.max_new_tokens = 80
    c.rl.temperature = 1.0
    c.rl.kl_coef = 1e-3
    c.rl.kl_kind = "k3"
    c.train.steps = ACTOR_STEPS + HEAD_WARMUP
    c.train.log_every = 1
    c.train.checkpoint_every = 35
    c.train.eval_batches = 2           # the SFT warm start's held-out loss
    c.optim.lr = 5e-5
    c.optim.schedule = "constant"
    c.optim.warmup_steps = 5
    c.optim.weight_decay = 0.0
    c.optim.b2 = 0.99
    c.optim.grad_clip = 1.0
    c.mesh.preset = "gpu_1"
    if arg == "smoke":
        c.mesh.preset = "cpu_8"
        m.d_model, m.n_layers, m.n_heads, m.n_kv_heads, m.head_dim, m.d_ff = 64, 2, 4, 4, 16, 128
        m.dtype = "float32"
        c.clipo.proj_dim = 16
        c.clipo.warmup_steps = 1
        c.clipo_eval.sets = ["id", "sym"]  # prompts within one bucket: fewer compiles
        c.clipo_eval.n = 4
        c.clipo_eval.samples = 2
        c.clipo_eval.max_new_tokens = 8
        c.rl.n_train = 64
        c.rl.n_eval = 4
        c.rl.warmup_sft_steps = 0       # CI time: the SFT warm start path is smoke-tested by experiments/rl
        c.rl.prompts_per_step = 4
        c.rl.group_size = 4
        c.rl.max_new_tokens = 8
        c.rl.eval_every = 100
        c.train.steps = 2               # one head-only step, one policy step
        c.train.checkpoint_every = 2
    elif arg is not None:
        raise ValueError(f"experiments/clipo/tinygsm_sym_table.py: unknown variant {arg!r} "
                         "(known: smoke, spec, spec_smoke, base, base_smoke)")
    return c


def _base_stage(smoke: bool):
    """The shared SFT warm start of one seed: the base recipe (same policy shape as this table) at SPEC_BASE_STEPS."""
    from experiments.base import tinygsm_sym as base

    c = base.get_config("smoke" if smoke else None)
    if not smoke:
        c.train.steps = c.train.checkpoint_every = SPEC_BASE_STEPS
        c.train.eval_every = SPEC_BASE_STEPS // 4
        c.optim.warmup_steps = SPEC_BASE_STEPS // 20
    return c


def _spec(c, smoke: bool):
    """D.3's RL settings over this table's point; the warm start comes from train.init_from (a stage)."""
    c.rl.warmup_sft_steps = 0
    if smoke:
        return c
    c.rl.prompts_per_step = 64
    c.rl.group_size = 16
    c.rl.max_new_tokens = 160
    c.rl.eval_every = 25
    c.clipo.warmup_steps = SPEC_HEAD_WARMUP
    c.clipo_eval.n = 2000
    c.train.steps = SPEC_ACTOR_STEPS + SPEC_HEAD_WARMUP
    c.train.checkpoint_every = 50
    c.optim.lr = 2e-5
    return c


def get_sweep(arg=None):
    if arg in ("spec", "spec_smoke"):
        return _spec_sweep(smoke=arg == "spec_smoke")
    if arg == "spec_min":   # GRPO and CLIPO only (claims 1-4 compare these two): half of :spec, the same runs
        return _spec_sweep(smoke=False, arms=("grpo", "clipo"))
    smoke = arg == "smoke"
    actor, warmup = (2, 1) if smoke else (ACTOR_STEPS, HEAD_WARMUP)
    points = []
    for arm, mode in ARMS.items():
        steps = actor if mode == "off" else actor + warmup
        for seed in SEEDS[:1] if smoke else SEEDS:
            points.append(dict(name=f"{arm}_s{seed}", arg=arg,
                               overrides={"clipo.mode": mode, "train.steps": steps, "seed": seed}))
    sets = ("id", "sym", "p1", "p2", "noop", "noleak")
    return dict(
        name="tinygsm_sym_table",
        points=points,
        group=["clipo.mode", "train.steps"],
        columns=[*(f"tgs/{s}_greedy" for s in sets), "tgs/robust_greedy", "tgs/robust_avg@8", "tgs/id_avg@8",
                 "tgs/p2_avg@8", "tgs/id_pass@16", "tgs/p2_pass@16", "tgs/id_pw_rate", "tgs/p2_pw_rate",
                 "tgs/id_leak_copy_rate", "tgs/noleak_copy_rate", "tgs/id_greedy_before", "tgs/robust_greedy_before",
                 "rl/reward_mean", "wall_time_s"],
        plot=dict(kind="curves", metric="rl/reward_mean", x="step", label="clipo.mode"),
    )


def _spec_sweep(smoke: bool, arms=tuple(ARMS)):
    """Every arm of a seed starts from that seed's SFT stage; arms are labelled, so the ledger pairs them by seed."""
    suffix = "_smoke" if smoke else ""
    seeds = SPEC_SEEDS[:2] if smoke else SPEC_SEEDS
    actor, warmup = (2, 1) if smoke else (SPEC_ACTOR_STEPS, SPEC_HEAD_WARMUP)
    stages = [dict(name=f"sft_s{seed}", overrides={"seed": seed}, arg="base" + suffix) for seed in seeds]
    points = [dict(name=f"{arm}_s{seed}", arg="spec" + suffix, arm=arm,
                   overrides={"clipo.mode": mode, "train.steps": actor if mode == "off" else actor + warmup,
                              "seed": seed, "train.init_from": f"run:{{stage:sft_s{seed}}}"})
              for arm, mode in ARMS.items() if arm in arms for seed in seeds]
    table = get_sweep("smoke" if smoke else None)
    return dict(name="tinygsm_sym_spec_table" if len(arms) == len(ARMS) else "tinygsm_sym_spec_min", stages=stages, points=points, group=["arm"],
                columns=table["columns"], plot=dict(kind="curves", metric="rl/reward_mean", x="step"))

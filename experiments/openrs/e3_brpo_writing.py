"""OpenRS E3 (../shared/papers/openrs.md section 4): the rubric verdict as BRPO's reward on ConstraintWriting
(writing_zero_brpo.md 4.2), against a holistic pairwise judge with the same error sources.

    python -m shared.sweep --config=experiments/openrs/e3_brpo_writing.py --workdir=runs/openrs/e3 --parallel=8
    python -m shared.sweep --config=experiments/openrs/e3_brpo_writing.py:smoke --workdir=/tmp/openrs_e3_smoke

Per seed one SFT warm start (a sweep stage, 1500 steps of 128) on format-only completions
(rl/openrs/constraint_writing_zero: perturbed gold responses, NOTE suffixes included, so the policy can hack), then
150 BRPO steps (B = 64 prompts x G = 8, BRPO-raw, clip-higher 0.28, lr 5e-5, no KL) with one of four judges
(projects/openrs/writing.py), all with error rate 0.1 and position bias 0.15:
  holistic     one noisy verdict per pair with writing_zero's annotator bias 0.35 (prefer the NOTE suffix, else the
               longer text): the holistic pairwise judge trained on biased labels of writing_zero_brpo.md 4.3
  rubric       OpenRS with the spec's oracle-noisy per-criterion simulator: per-criterion comparisons (coverage
               core; length, repetition, explanation suffix important) from the oracle's components with the errors
               applied per criterion, external aggregation, both orders (bidirectional rule); no annotator bias
  rubric_pvr   rubric + the PVR guardrail: a Python length/coverage check run in shared.rewards.sandbox before the
               judge; a response that fails it loses to one that passes (hard negative)
  rubric_biased_pvr  rubric_pvr with the annotator bias 0.35 applied to every criterion (a stress test: per-criterion
               bias is amplified by the aggregation, projects/openrs/tests/test_writing.py; the PVR must hold it)
Policy: 4 layers x d 256 byte-level (writing_zero spec 4.3). Logged at weight 0 on every rollout: the oracle Q
(reward/writing_zero/quality/mean), the hack rate (reward/openrs/note_rate/mean) and the PVR pass rate. Summary:
greedy Q = 1 rate on test / ood before and after RL.
Claim (spec E3): oracle quality higher and NOTE rate lower with the rubric reward (rubric_pvr vs holistic).
GPU cost (estimate, not measured: no GPU here): a stage ~1 min, a point ~3 min on one H100 (150 steps x ~1 s:
512 rollouts of <= 160 tokens, two judge orders of 448 pairs in Python, one sandbox process per step); the table
(3 stages + 12 points) ~40 GPU-minutes, ~10 min wall with --parallel=8 on 4 H100s. Smallest table that tests the
claim: the "min" sweep (holistic and rubric_pvr x 3 seeds: 3 stages + 6 points, ~21 GPU-minutes):
    python -m shared.sweep --config=experiments/openrs/e3_brpo_writing.py:min --workdir=runs/openrs/e3_min --parallel=6
Measured (results/e3_min, 1 H200, 8 min): rubric_pvr's Q 0.86 vs holistic 0.66, but the holistic arm's NOTE rate
fell to 0.016 (at bias 0.35 the holistic judge prefers NOTE in only 35% of the pairs that differ in it, so RL
removes the hack in both arms). The "hack" sweep gives every judge annotator bias 0.6 (a judge that does reward the
hack, as a holistic RM trained on such labels would): holistic, rubric_pvr and rubric_biased_pvr x 3 seeds.
    python -m shared.sweep --config=experiments/openrs/e3_brpo_writing.py:hack --workdir=runs/openrs/e3_hack --parallel=9
"""

from experiments.base._recipe import sft_config, smoke

TASK = "rl/openrs/constraint_writing_zero"
SEEDS = (0, 1, 2)
RL_STEPS = 150
SFT_STEPS = 1500
JUDGE = {"error_rate": 0.1, "position_bias": 0.15}
ARMS = {"holistic": ("openrs/holistic_judge", {"bias": 0.35}),
        "rubric": ("openrs/rubric_judge", {"bias": 0.0, "pvr": False}),
        "rubric_pvr": ("openrs/rubric_judge", {"bias": 0.0, "pvr": True}),
        "rubric_biased_pvr": ("openrs/rubric_judge", {"bias": 0.35, "pvr": True})}
LOGGED = [("writing_zero/quality", 0.0), ("openrs/note_rate", 0.0), ("openrs/pvr_pass", 0.0)]
VARIANTS = ("base", "base_smoke")
SWEEP_VARIANTS = ("min", "hack")  # get_sweep variants beside "" and "smoke" (tests/test_experiments.py)
MIN_ARMS = ("holistic", "rubric_pvr")  # "min": the smallest table that tests the claim
HACK_BIAS = 0.6  # "hack": the annotator prefers the NOTE suffix in 60% of the pairs that differ in it
HACK_ARMS = ("holistic", "rubric_pvr", "rubric_biased_pvr")


def _model(c):
    m = c.model
    m.d_model, m.n_layers, m.n_heads, m.n_kv_heads, m.head_dim, m.d_ff = 256, 4, 8, 8, 32, 1024
    m.max_seq_len = 256
    c.data.seq_len = 224
    return c


def _base(is_smoke: bool):
    c = _model(sft_config(TASK, "tiny", seq_len=224, max_seq_len=256, steps=SFT_STEPS, batch=128, lr=1e-3,
                          eval_tokens=160, splits=("test",)))
    c.project = "openrs"
    return smoke(c) if is_smoke else c


def get_config(arg=None):
    """"" / "smoke": an RL point (arm via --config.rl.rewards; default rubric_pvr); "base" / "base_smoke": the SFT
    stage. A sweep variant ("min") names the default point."""
    arg = None if arg in SWEEP_VARIANTS else arg
    if arg not in (None, "smoke", *VARIANTS):
        raise ValueError(f"experiments/openrs/e3_brpo_writing.py: unknown variant {arg!r} "
                         f"(known: smoke, {', '.join(VARIANTS)})")
    is_smoke = arg in ("smoke", "base_smoke")
    if arg in VARIANTS:
        return _base(is_smoke)
    c = _base(is_smoke)
    c.task = "rl"
    c.train.loss = "lm_xent"
    c.rl.task = TASK
    c.rl.n_train = 20000
    c.rl.n_eval = 256
    c.rl.warmup_sft_steps = 0            # the stage's checkpoint (train.init_from) is the warm start
    c.rl.advantage = "brpo"
    c.rl.rewards = [(ARMS["rubric_pvr"][0], 1.0, {**JUDGE, **ARMS["rubric_pvr"][1]}), *LOGGED]
    c.rl.prompts_per_step = 64
    c.rl.group_size = 8
    c.rl.max_new_tokens = 160
    c.rl.temperature = 1.0
    c.rl.eps_high = 0.28
    c.rl.loss_agg = "token-mean"
    c.rl.eval_every = 50
    c.rl.eval_samples = 0
    c.train.steps = RL_STEPS
    c.train.log_every = 5
    c.train.eval_every = RL_STEPS
    c.train.checkpoint_every = 50
    c.optim.lr = 5e-5
    c.optim.schedule = "constant"
    c.optim.warmup_steps = 5
    c.optim.b2 = 0.99
    c.optim.grad_clip = 1.0
    c.data.greedy_eval_examples = 0
    if is_smoke:
        c.rl.n_train, c.rl.n_eval, c.rl.prompts_per_step, c.rl.group_size = 64, 4, 4, 4
        c.rl.max_new_tokens, c.rl.eval_every = 24, 2
        c.train.steps, c.train.checkpoint_every, c.train.log_every = 2, 2, 1
    return c


def get_sweep(arg=None):
    """"": 4 judges x 3 seeds; "min": holistic vs rubric_pvr x 3 seeds (3 stages + 6 points); "hack": holistic,
    rubric_pvr and rubric_biased_pvr at annotator bias HACK_BIAS x 3 seeds (the holistic and the biased rubric judge
    take the bias; rubric_pvr keeps its unbiased per-criterion verdicts); "smoke": CI."""
    if arg not in (None, "smoke", *SWEEP_VARIANTS):
        raise ValueError(f"experiments/openrs/e3_brpo_writing.py: unknown sweep variant {arg!r} "
                         f"(known: smoke, {', '.join(SWEEP_VARIANTS)})")
    is_smoke = arg == "smoke"
    seeds = SEEDS[:1] if is_smoke else SEEDS
    suffix = "_smoke" if is_smoke else ""
    arms = {a: ARMS[a] for a in MIN_ARMS} if arg == "min" else ARMS
    if arg == "hack":
        arms = {a: (ARMS[a][0], {**ARMS[a][1], **({"bias": HACK_BIAS} if ARMS[a][1]["bias"] else {})})
                for a in HACK_ARMS}
    stages = [dict(name=f"sft_s{seed}", overrides={"seed": seed}, arg="base" + suffix) for seed in seeds]
    points = [dict(name=f"{arm}_s{seed}", arm=arm, arg="smoke" if is_smoke else None,
                   overrides={"seed": seed, "train.init_from": f"run:{{stage:sft_s{seed}}}",
                              "rl.rewards": [(name, 1.0, {**JUDGE, **options}), *LOGGED]})
              for arm, (name, options) in arms.items() for seed in seeds]
    return dict(name="e3_brpo_writing" + (f"_{arg}" if arg in SWEEP_VARIANTS else ""), stages=stages, points=points,
                columns=["eval/test_accuracy_before", "eval/test_accuracy", "reward/writing_zero/quality/mean",
                         "reward/openrs/note_rate/mean", "reward/openrs/pvr_pass/mean", "judge/calls_total",
                         "wall_time_s"],
                group=["arm"], plot=dict(kind="curves", metric="reward/writing_zero/quality/mean", x="step"))

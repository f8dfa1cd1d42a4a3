"""Writing-Zero's small-scale matrix (spec ../shared/papers/writing_zero_brpo.md 4.3-4.6): runs R0-R8 (with R3n) on
ConstraintWriting, 3 seeds, judged against claims C1 and C2 of spec 4.6 in projects/writing_zero/README.md.

    python -m shared.sweep --config=experiments/writing_zero/table.py --workdir=runs/writing_zero/table --parallel=12
    python -m shared.sweep --config=experiments/writing_zero/table.py:smoke --workdir=/tmp/wz_smoke   # CI-sized
    # C1 alone (oracle judge: no judge or RM stages needed; 3 warm starts + 9 points):
    python -m shared.sweep --config=experiments/writing_zero/table.py:c1 --workdir=runs/writing_zero/c1 --parallel=9
    # C1 at 1,200 RL steps instead of 400 (R6 was still rising at 400; does R8's all-win share go to 1?):
    python -m shared.sweep --config=experiments/writing_zero/table.py:c1_long --workdir=runs/writing_zero/c1_long \
        --parallel=9
    # C2 alone (R1, R2, R3 x 3 seeds; 12 stages + 9 points):
    python -m shared.sweep --config=experiments/writing_zero/table.py:c2 --workdir=runs/writing_zero/c2 --parallel=9
    # C2 at 8 seeds (R2's spread over 3 seeds left R2 vs R3 and R1 vs R2 undecided; 32 stages + 24 points):
    python -m shared.sweep --config=experiments/writing_zero/table.py:c2_8seeds --workdir=runs/writing_zero/c2_8seeds \
        --parallel=12
    # the arms c1 and c2 leave out (R0, R3n, R4, R5) with R3 for a paired R3 vs R3n (6 stages + 15 points):
    python -m shared.sweep --config=experiments/writing_zero/table.py:rest --workdir=runs/writing_zero/rest --parallel=8

Per seed, stages (every arm of a seed starts from the same ones; projects/writing_zero/config.py):
  zero_s<k>              the "-Zero" policy: SFT on prompt + random-response sequences (format only), 1000 x 128
  judge_plain_s<k>       pairwise judge, verdict only, 30k biased pairs in both orders (swap augmentation), 3000 x 128
  judge_principled_s<k>  the same with 3 principle tokens (coverage, length, redundancy) before the verdict
  rm_s<k>                scalar Bradley-Terry RM on the same 30k biased pairs (beta 0.35: NOTE suffix / longer
                         preferred regardless of Q), 2000 x 128 pairs
Points (config.ARMS; B 64 prompts x G 8, 400 steps, T 1.0, token-mean PPO-clip 0.2 / 0.28, no KL, lr 2e-5; DAPO's
dynamic sampling on the BRPO arms; every judge sees each pair in a random order, swap "random"):
  R0 GRPO on the oracle Q          R1 GRPO on the scalar RM            R2 BRPO-raw, plain judge
  R3 BRPO-raw, principled judge    R3n BRPO-norm, principled judge     R4 round robin, principled judge
  R5 fixed reference, principled   R6 / R7 / R8 BRPO-raw / round robin / fixed reference with the oracle judge
                                   (sign dQ, 10% of verdicts flipped)
The fixed reference (R5, R8) is one response per prompt drawn from the warm start's format-only distribution (the
`reference` column of rl/writing_zero/constraint_writing with reference="format_only"): the distribution the initial
policy imitates, not the initial policy's own sample.

Columns (summary.json; tasks.py): wz/q (oracle Q, mean of greedy and sampled outputs on 1000 held-out prompts), its
peak / final / drop from peak, wz/note_rate, wz/words, wz/in_band, wz/proxy_rise (rl/reward_mean at the end minus at
the Q peak), wz/hacked (spec 4.6's R1 criterion), wz/judge_calls and wz/judge_calls_per_step (the judge's calls
counted per step by shared.judges: B(G-1) = 448 for BRPO, B G(G-1)/2 = 1792 for round robin, B G = 512 for fixed
reference, plus DAPO's refills), rl/pairwise_all_win_frac (R8 stalls when it goes to 1).
  C1: R6 wz/q_final >= 0.9 x R7 wz/q_final with R6 wz/judge_calls <= 2/G x R7's (+ refills); R8 wz/q_final < R6's and
      its rl/pairwise_all_win_frac -> 1.
  C2: R1 wz/hacked = 1 (proxy up, Q down >= 20% from its peak, NOTE rate > 50%); R3 wz/q_final >= R1 wz/q_peak
      with wz/note_rate < 0.1 and wz/in_band high.

GPU cost (estimate, not measured: no run of this table yet): a stage 1-2 min on one H100 (the judge SFT 3000 steps of
128 x 128 tokens, the warm start 1000 of 128 x 64, the RM 2000 of 128 pairs); an RL point 400 steps of 512 rollouts
of <= 48 words by a 3.2M-parameter policy plus the judge's batched greedy replies (448 pairs; 1792 for round robin)
and 9 evaluations of 2 x 1000 outputs: ~3-6 min (round robin the longest). Full table: 12 stages + 30 points ~2.5
GPU-hours of small jobs, ~25-35 min wall on 4 H100s with --parallel=16; :c1 ~30 GPU-min, :c2 ~40 GPU-min.
"""
from projects.writing_zero.config import (ARMS, judge_config, judge_rl_config, rl_config, rm_config_,
                                          warm_start_config)

SEEDS = (0, 1, 2)
# c2_8seeds: C2 at 8 seeds. At 3 (results/c2) R2's final Q spread over seeds (std 0.37) leaves R2 vs R3 and R1 vs R2
# undecided (+0.56 [-0.38, +1.49], +0.82 [-0.16, +1.81]), and R1's proxy rise too (+5.9 [-3.9, +15.7])
C2_MORE_SEEDS = tuple(range(8))
STAGE_VARIANTS = ("warm_start", "judge_plain", "judge_principled", "judge_rl", "rm")
VARIANTS = (*ARMS, *STAGE_VARIANTS)          # every variant is built and validated in CI (tests/test_experiments.py)
SWEEP_VARIANTS = ("c1", "c2", "c1_long", "rest", "c2_8seeds")
LONG_STEPS = 1200   # c1_long: at 400 steps BRPO (R6) was still rising (its peak Q at its last evaluation)
C1_ARMS = ("R6", "R7", "R8")
C2_ARMS = ("R1", "R2", "R3")
# rest: the arms c1 and c2 leave out, with R3 again so R3 vs R3n (spec 4.6: which BRPO variant to keep) is paired
REST_ARMS = ("R0", "R3", "R3n", "R4", "R5")
COLUMNS = ["wz/q_final", "wz/q_before", "wz/q_peak", "wz/q_drop", "wz/q_greedy", "wz/q1_greedy", "wz/note_rate",
           "wz/words", "wz/in_band", "wz/coverage", "wz/proxy_rise", "wz/hacked", "wz/judge_calls",
           "wz/judge_calls_per_step", "rl/pairwise_all_win_frac", "reward/writing_zero/quality/mean",
           "rl/reward_mean", "wall_time_s"]


def get_config(arg=None):
    """Variants (each also "<variant>_smoke"): an arm of ARMS (default R3), or a stage: warm_start, judge_plain,
    judge_principled, judge_rl (RLVR fine-tuning of the principled judge; train.init_from = a judge), rm."""
    arg = arg or "R3"
    smoke = arg == "smoke" or arg.endswith("_smoke")
    base = "R3" if arg == "smoke" else arg[:-len("_smoke")] if arg.endswith("_smoke") else arg
    if base in ARMS:
        return rl_config(base, smoke)
    if base == "warm_start":
        return warm_start_config(smoke)
    if base in ("judge_plain", "judge_principled"):
        return judge_config(base == "judge_principled", smoke)
    if base == "judge_rl":
        return judge_rl_config(True, smoke)
    if base == "rm":
        return rm_config_(smoke)
    raise ValueError(f"experiments/writing_zero/table.py: unknown variant {arg!r} (known: {', '.join(VARIANTS)}; "
                     f"each with _smoke)")


def stages_for(seed: int, suffix: str, arms) -> list[dict]:
    """The stages a seed's arms need: always the warm start; the judges and the RM only where an arm uses them."""
    sources = {ARMS[a][1] for a in arms}
    stages = [dict(name=f"zero_s{seed}", arg="warm_start" + suffix, overrides={"seed": seed})]
    for kind in ("plain", "principled"):
        if kind in sources:
            stages.append(dict(name=f"judge_{kind}_s{seed}", arg=f"judge_{kind}{suffix}", overrides={"seed": seed}))
    if "rm" in sources:
        stages.append(dict(name=f"rm_s{seed}", arg="rm" + suffix, overrides={"seed": seed}))
    return stages


def point(arm: str, seed: int, suffix: str, steps: int | None = None) -> dict:
    source = ARMS[arm][1]
    overrides = {"seed": seed, "train.init_from": f"run:{{stage:zero_s{seed}}}"}
    if steps:
        overrides["train.steps"] = steps
    if source in ("plain", "principled"):
        overrides["writing_zero.judge_run"] = f"{{stage:judge_{source}_s{seed}}}"
    if source == "rm":
        overrides["writing_zero.rm_run"] = f"{{stage:rm_s{seed}}}"
    return dict(name=f"{arm}_s{seed}", arg=arm + suffix, arm=arm, overrides=overrides)


def get_sweep(arg=None):
    if arg not in (None, "smoke", *SWEEP_VARIANTS):
        raise ValueError(f"experiments/writing_zero/table.py: unknown sweep variant {arg!r} "
                         f"(known: smoke, {', '.join(SWEEP_VARIANTS)})")
    smoke = arg == "smoke"
    suffix = "_smoke" if smoke else ""
    seeds = SEEDS[:1] if smoke else C2_MORE_SEEDS if arg == "c2_8seeds" else SEEDS
    arms = {"c1": C1_ARMS, "c1_long": C1_ARMS, "c2": C2_ARMS, "c2_8seeds": C2_ARMS,
            "rest": REST_ARMS}.get(arg, tuple(ARMS))
    steps = LONG_STEPS if arg == "c1_long" else None
    stages = [s for seed in seeds for s in stages_for(seed, suffix, arms)]
    points = [point(arm, seed, suffix, steps) for arm in arms for seed in seeds]
    name = {"c1": "writing_zero_c1", "c2": "writing_zero_c2", "c1_long": "writing_zero_c1_long",
            "rest": "writing_zero_rest", "c2_8seeds": "writing_zero_c2_8seeds",
            "smoke": "writing_zero_smoke"}.get(arg, "writing_zero")
    return dict(name=name, stages=stages, points=points, columns=COLUMNS, group=["arm"],
                plot=dict(kind="curves", metric="wz/q", x="step"))

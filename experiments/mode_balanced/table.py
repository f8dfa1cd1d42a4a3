"""The mode-balanced table (../shared/papers/mode_balanced.md D.2): every arm of a seed starts from that seed's
teacher warm start (experiments/base/relevance.py, a sweep stage), then 400 RL steps at natural long-tail frequency
with the SFT auxiliary loss at weight lambda; plus the distillation check (D.2.3).

    python -m shared.sweep --config=experiments/mode_balanced/table.py --workdir=runs/mode_balanced/table --parallel=8
    python -m shared.sweep --config=experiments/mode_balanced/table.py:stepwise --workdir=runs/mode_balanced/stepwise --parallel=8
    python -m shared.sweep --config=experiments/mode_balanced/table.py:min --workdir=runs/mode_balanced/min --parallel=6 --stages_at_once=1
    python -m shared.sweep --config=experiments/mode_balanced/table.py:smoke --workdir=/tmp/mode_balanced_smoke   # CI

Points (3 seeds each):
  sft             the warm start itself, evaluated (train.steps = 0)
  lam<l>          RL with lambda_SFT = l, l in 0, 0.02, 0.05, 0.1, 0.3, 1.0 (lam0 = plain RL)
  student_afrl    D.2.3: the 2 x 256 student, SFT on the teacher's answer-first outputs (stage teacher_s<seed>)
  student_label   D.2.3: the same student, SFT on the gold labels alone
Default: outcome-only GRPO on the label with a format gate (spec A.2's simpler variant, run first). ":stepwise":
the RL arms with Stepwise-GRPO (per-check rewards, shared/rl/stepwise.py) instead, same warm starts (its own
stages: a separate workdir), no students. ":min": only the arms claims 1-3 read (sft, lam0, lam0.1, lam1), no
students: half the RL points, so the claims can decide on short machine leases (a seed at a time).
The metrics are the evaluation hook's (projects/mode_balanced/tasks.py): mb/{overall,head,tail}/{accuracy,
macro_f1,consistency,format_valid,first_token_entropy}, mb/tail/head_label_on_tail (the mode-collapse indicator)
and per rule mb/tail/accuracy_L<k>; "..._before" for the warm start.

GPU cost (estimated, not measured: no GPU run of this code yet): a warm-start stage (600 steps x 128 of the 8 x 512
model) ~3-5 min on one H100; an RL point (400 steps of 512 rollouts of <= 48 tokens + 128 demonstrations) ~6-10
min; 18 RL points + 3 evaluations + 6 students + 6 stages ~ 3-4 GPU-hours (~1 h of wall time on 4 H100s with
--parallel=8).
"""
from experiments.base import relevance as base
from projects.mode_balanced.config import LAMBDAS, smoke as smoke_config, student_config, teacher_outputs_config, \
    with_rl

SEEDS = (0, 1, 2)
SWEEP_VARIANTS = ("stepwise", "min")
MIN_LAMBDAS = (0.0, 0.1, 1.0)     # the arms claims 1-3 read (projects/mode_balanced/claims.py)
VARIANTS = ("stepwise", "warmstart", "teacher_outputs", "student_afrl", "student_label")
KINDS = ("", "stepwise", "warmstart", "teacher_outputs", "student_afrl", "student_label")
COLUMNS = ["mb/overall/macro_f1", "mb/overall/macro_f1_before", "mb/overall/accuracy", "mb/overall/accuracy_before",
           "mb/head/accuracy", "mb/head/accuracy_before", "mb/tail/accuracy", "mb/tail/accuracy_before",
           "mb/tail/head_label_on_tail", "mb/tail/head_label_on_tail_before", "mb/overall/consistency",
           "mb/overall/first_token_entropy", "mb/overall/format_valid", "eval/greedy_accuracy",
           "eval/greedy_accuracy_ood", "train/sft_nll", "rl/reward_mean", "wall_time_s"]


def lam_name(lam: float) -> str:
    return f"lam{lam:g}"


def get_config(arg=None):
    """"": an RL arm (lambda by override rl.sft_aux.weight); "stepwise": the same with Stepwise-GRPO; "warmstart",
    "teacher_outputs", "student_afrl", "student_label": the stages and students; "<kind>_smoke" / "smoke": CI."""
    is_smoke = arg == "smoke" or (arg or "").endswith("_smoke")
    kind = "" if arg in ("smoke", "min") else (arg or "").removesuffix("_smoke")   # min: the table's RL arm
    if kind not in KINDS:
        raise ValueError(f"experiments/mode_balanced/table.py: unknown variant {arg!r} (known: "
                         f"{', '.join(k for k in KINDS if k)}, min, smoke, <kind>_smoke)")
    policy = base.get_config("smoke" if is_smoke else None)
    if kind == "warmstart":
        return policy
    if kind == "teacher_outputs":
        c = teacher_outputs_config(policy)
        if is_smoke:
            c.mode_balanced.teacher_examples = 16
        return c
    if kind.startswith("student_"):
        c = student_config(base.get_config("smoke" if is_smoke else "student"), kind.removeprefix("student_"))
        if is_smoke:
            c.data.n_train = 16
        return c
    c = with_rl(policy, 0.1, "stepwise" if kind == "stepwise" else "grpo")
    return smoke_config(c, model=False) if is_smoke else c      # the smoke warm start's model


def get_sweep(arg=None):
    if arg not in (None, "", *SWEEP_VARIANTS, "smoke"):
        raise ValueError(f"experiments/mode_balanced/table.py: unknown sweep variant {arg!r} (known: "
                         f"{', '.join(SWEEP_VARIANTS)}, smoke)")
    smoke, stepwise, minimal = arg == "smoke", arg == "stepwise", arg == "min"
    suffix = "_smoke" if smoke else ""
    seeds = SEEDS[:1] if smoke else SEEDS
    lambdas = (0.0, 0.1) if smoke else (MIN_LAMBDAS if minimal else LAMBDAS)
    rl_arg = "stepwise" if stepwise else ("smoke" if smoke else None)
    stages = [dict(name=f"warmstart_s{s}", overrides={"seed": s}, arg="warmstart" + suffix) for s in seeds]
    start = {s: {"seed": s, "train.init_from": f"run:{{stage:warmstart_s{s}}}"} for s in seeds}
    points = [dict(name=f"sft_s{s}", arg=rl_arg, arm="sft", overrides={**start[s], "train.steps": 0}) for s in seeds]
    points += [dict(name=f"{lam_name(lam)}_s{s}", arg=rl_arg, arm=lam_name(lam),
                    overrides={**start[s], "rl.sft_aux.weight": lam})
               for lam in lambdas for s in seeds]
    if not (stepwise or minimal):
        stages += [dict(name=f"teacher_s{s}", arg="teacher_outputs" + suffix,
                        overrides={"seed": s, "mode_balanced.teacher": f"{{stage:warmstart_s{s}}}"}) for s in seeds]
        points += [dict(name=f"student_afrl_s{s}", arg="student_afrl" + suffix, arm="student_afrl",
                        overrides={"seed": s, "data.task_options.teacher": f"{{stage:teacher_s{s}}}/teacher_outputs.jsonl"})
                   for s in seeds]
        points += [dict(name=f"student_label_s{s}", arg="student_label" + suffix, arm="student_label",
                        overrides={"seed": s}) for s in seeds]
    return dict(name="mode_balanced_" + (arg or "table"), stages=stages,
                points=points, columns=COLUMNS, group=["arm"], plot=dict(kind="bars", metric="mb/tail/accuracy"))

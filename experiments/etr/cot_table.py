"""ETR table on CoT arithmetic (../shared/papers/etr.md D.1-D.2): 7 arms (GRPO, Clip-higher, eps-matched GRPO,
ETR-micro, ETR-macro, ETR-full, ETR-implicit) x 5 seeds, each seed's arms from one SFT stage
(experiments/base/arithmetic_cot.py), plus one ETR-full pilot per seed for the eps-matched arm. Arms and settings:
experiments/etr/_table.py; claims: projects/etr/claims.py.

    python -m shared.sweep --config=experiments/etr/cot_table.py --workdir=runs/etr/cot_table --parallel=8
    python -m shared.sweep --config=experiments/etr/cot_table.py:min --workdir=runs/etr/cot_min --parallel=8   # criteria 1, 2, 5 first
    python -m shared.launch --config=experiments/etr/cot_table.py:smoke --workdir=runs/etr/cot_smoke   # one point

Task: rl/arithmetic_cot (+ and *, both operands of d digits, d uniform in 2-5, worked traces), ID = test split,
hard = ood (6 digits). Rollouts: 256 new tokens (the longest train trace is 229 bytes); evaluation 352 (an ood trace
is up to 320 bytes), 500 problems per set, avg@8 at T = 0.6, pass@16 at T = 1.0, before and after RL. The
learner's own greedy ood tracking (eval/ood_accuracy) decodes only 256 tokens and is not used by the claims.

Not run yet. Cost (estimated, not measured): 10 stages + 35 points; rollouts of up to 256 tokens are 8x the
countdown table's decode length (its docstring gives the reference run), so ~12-15 min of RL and ~3 min of
evaluation (352-token samples) a point: ~45 x 15 = ~11 GPU-hours, ~1.5 h wall on 8 GPUs. Run the base competence
table first (experiments/base/arithmetic_cot.py).
"""
from experiments.etr._table import SWEEP_VARIANTS, rl_config, sweep  # noqa: F401 (the sweep variants)


def get_config(arg=None):
    return rl_config("experiments.base.arithmetic_cot", "rl/arithmetic_cot", {}, max_new_tokens=256, eval_tokens=352,
                     arg=arg)


def get_sweep(arg=None):
    return sweep("etr_cot" + (f"_{arg}" if arg else ""), arg)

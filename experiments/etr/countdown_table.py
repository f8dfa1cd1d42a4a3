"""ETR table on countdown-mixed (../shared/papers/etr.md D.1-D.2): 7 arms (GRPO, Clip-higher, eps-matched GRPO,
ETR-micro, ETR-macro, ETR-full, ETR-implicit) x 5 seeds, each seed's arms from one SFT stage
(experiments/base/countdown.py), plus one ETR-full pilot per seed for the eps-matched arm. Arms and settings:
experiments/etr/_table.py; claims: projects/etr/claims.py.

    python -m shared.sweep --config=experiments/etr/countdown_table.py --workdir=runs/etr/countdown_table --parallel=8
    python -m shared.sweep --config=experiments/etr/countdown_table.py:min --workdir=runs/etr/countdown_min --parallel=8   # criteria 1, 2, 5 first
    python -m shared.launch --config=experiments/etr/countdown_table.py:smoke --workdir=runs/etr/smoke   # CI: one point

Task: rl/countdown with use="subset" (each number at most once), train 3-4 numbers, ID = test split, hard = ood
(5 numbers); expressions <= 20 bytes, so 32 new tokens. Evaluation (etr/eval): 500 problems per set, avg@8 at
T = 0.6, pass@16 at T = 1.0, before and after RL.

Not run yet. Cost (estimated from other tables, not measured): 10 stages + 35 points of a 6 x 384 byte policy.
The RL base table's GRPO points (150 steps of 64 x 8 rollouts of <= 8 tokens, 2 mini-batches, evaluations included)
took 101.5 +- 5 s wall with 20 points sharing 2 H100s (experiments/rl/results/base_table/results.md); here a step
has 2x the rollouts and 4x the decode length, and 200 steps: ~4-6 min a point, plus ~1 min of evaluation
(500 problems x 24 samples x 2 sets). SFT stages: base_arithmetic's 3,000 steps of 128 took 132 s a point
(experiments/base/README.md). ~45 x 5 = ~225 GPU-min, ~30-40 min wall on 8 GPUs (--parallel=16). Run the base
competence table first (experiments/base/countdown.py's sweep) and set its STEPS so the warm start samples 30-50%
right.
"""
from experiments.etr._table import SWEEP_VARIANTS, rl_config, sweep  # noqa: F401 (the sweep variants)

TASK_OPTIONS = {"use": "subset"}


def get_config(arg=None):
    return rl_config("experiments.base.countdown", "rl/countdown", TASK_OPTIONS, max_new_tokens=32, eval_tokens=32,
                     arg=arg)


def get_sweep(arg=None):
    return sweep("etr_countdown" + (f"_{arg}" if arg else ""), arg)

"""ETR table on countdown-mixed (../shared/papers/etr.md D.1-D.2): 7 arms (GRPO, Clip-higher, eps-matched GRPO,
ETR-micro, ETR-macro, ETR-full, ETR-implicit) x 5 seeds, each seed's arms from one SFT stage
(experiments/base/countdown.py), plus one ETR-full pilot per seed for the eps-matched arm. Arms and settings:
experiments/etr/_table.py; claims: projects/etr/claims.py.

    python -m shared.sweep --config=experiments/etr/countdown_table.py --workdir=runs/etr/countdown_table --parallel=8
    python -m shared.launch --config=experiments/etr/countdown_table.py:smoke --workdir=runs/etr/smoke   # CI: one point

Task: rl/countdown with use="subset" (each number at most once), train 3-4 numbers, ID = test split, hard = ood
(5 numbers); expressions <= 20 bytes, so 32 new tokens. Evaluation (etr/eval): 500 problems per set, avg@8 at
T = 0.6, pass@16 at T = 1.0, before and after RL.

Not run yet. Cost (estimated, not measured): 10 stages + 35 points of a 6 x 384 byte policy; an RL step of
64 x 16 rollouts of <= 32 tokens plus two updates is under a second on one H100 (the RL base table's 64 x 8 x 8-token
steps take ~0.3 s, experiments/rl/results/base_table), so ~200 s of RL and ~1 min of evaluation a point, ~4 min
with start-up; the SFT stages ~2 min each (experiments/base/results/base_arithmetic: 3,000 steps of 128 in 132 s):
~45 x 4 = 180 GPU-min, ~25 min wall on 8 GPUs (--parallel=16). Run the base competence table first
(experiments/base/countdown.py's sweep) and set its STEPS so the warm start samples 30-50% right.
"""
from experiments.etr._table import rl_config, sweep

TASK_OPTIONS = {"use": "subset"}


def get_config(arg=None):
    return rl_config("experiments.base.countdown", "rl/countdown", TASK_OPTIONS, max_new_tokens=32, eval_tokens=32,
                     arg=arg)


def get_sweep(arg=None):
    return sweep("etr_countdown" + ("_smoke" if arg == "smoke" else ""), arg)

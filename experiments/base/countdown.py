"""Base policy for countdown-mixed (rl/countdown with use="subset": 3-4 numbers, each at most once; ood: 5 numbers;
../shared/papers/etr.md D.1): SFT on the solver's expressions, the warm start every arm of a seed of the ETR
countdown table shares (experiments/etr/countdown_table.py, one run per seed as a sweep stage).

    python -m shared.launch --config=experiments/base/countdown.py --workdir=runs/base/countdown_s0
    python -m shared.sweep --config=experiments/base/countdown.py --workdir=runs/base/countdown_table --parallel=6

Policy: the spec's tiny decoder, 6 layers x 384 (11M parameters), byte vocabulary. Target competence (D.1): 30-50%
sampled accuracy on the train mix, so that many groups sit at 0 < pass rate < 1. STEPS from the competence table
(get_sweep: 500 / 1000 / 2000 steps x 3 seeds; results/base_countdown, one H200, 4 min): greedy accuracy on the
train mix 0.26 / 0.36 / 0.38, OOD (5 numbers) 0.03 / 0.04 / 0.03, eval loss lowest at 1000 steps (0.255; 0.286 at
2000, the start of overfitting 20k examples). 1000 steps: in the band, the better eval loss and half the cost;
sampled accuracy (temperature 1, below greedy) is the ETR table's `before` column. Variants: "", "smoke".
"""
from experiments.base._recipe import competence_sweep, sft_config, smoke

STEPS = 1000
TASK_OPTIONS = {"use": "subset"}


def get_config(arg=None):
    if arg not in (None, "", "smoke"):
        raise ValueError(f"experiments/base/countdown.py: unknown variant {arg!r} (known: smoke)")
    c = sft_config("rl/countdown", "d384", seq_len=64, max_seq_len=128, steps=STEPS, batch=128, lr=1e-3,
                   eval_tokens=32, task_options=TASK_OPTIONS)
    return smoke(c) if arg == "smoke" else c


def get_sweep(arg=None):
    return competence_sweep("base_countdown", steps=(500, 1000, 2000))

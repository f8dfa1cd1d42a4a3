"""Base policy for rl/arithmetic (+, -, * on 1-2 digit operands; ood: 3-digit): SFT on the gold answers, the warm
start RL tables on this task share (one run per seed, e.g. as a shared.sweep stage).

    python -m shared.launch --config=experiments/base/arithmetic.py --workdir=runs/base/arithmetic_s0
    python -m shared.sweep --config=experiments/base/arithmetic.py --workdir=runs/base/arithmetic_table

Variants: "" (small: 6 layers x 256, the shape of experiments/rl/grpo_arithmetic_gpu.py), "tiny" (4 x 128),
"smoke" (CI). The sweep measures greedy accuracy per training length and seed; results in
experiments/base/results/ (see experiments/base/README.md for the chosen length).
"""
from experiments.base._recipe import competence_sweep, sft_config, smoke

STEPS = 3000  # chosen from the competence table: see README.md
VARIANTS = ("tiny",)


def get_config(arg=None):
    if arg not in (None, "", "tiny", "smoke"):
        raise ValueError(f"experiments/base/arithmetic.py: unknown variant {arg!r} (known: tiny, smoke)")
    c = sft_config("rl/arithmetic", "tiny" if arg == "tiny" else "small", seq_len=24, max_seq_len=64,
                   steps=STEPS, batch=128, lr=1e-3, eval_tokens=8, task_options={"ops": "+-*"})
    return smoke(c) if arg == "smoke" else c


def get_sweep(arg=None):
    return competence_sweep("base_arithmetic", steps=(600, 1500, 3000, 6000))

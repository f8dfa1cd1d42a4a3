"""Base policy for CoT arithmetic (rl/arithmetic_cot: + and * with worked traces, 2-5 digit operands; ood: 6 digits;
../shared/papers/etr.md D.1): SFT on the traces, the warm start every arm of a seed of the ETR CoT table shares
(experiments/etr/cot_table.py, one run per seed as a sweep stage).

    python -m shared.launch --config=experiments/base/arithmetic_cot.py --workdir=runs/base/arithmetic_cot_s0
    python -m shared.sweep --config=experiments/base/arithmetic_cot.py --workdir=runs/base/arithmetic_cot_table --parallel=6

Policy: the spec's tiny decoder, 6 layers x 384, byte vocabulary. Sequences: the longest train example is 247 bytes
(a 5 x 5 digit product), an ood trace 320 bytes, so greedy evaluation decodes 352 tokens. Target competence (D.1):
30-50% sampled accuracy on the train mix. STEPS is provisional until the competence table (get_sweep: 1000 / 2000 /
4000 steps x 3 seeds) has run: not run yet. Variants: "", "smoke".
"""
from experiments.base._recipe import competence_sweep, sft_config, smoke

STEPS = 2000


def get_config(arg=None):
    if arg not in (None, "", "smoke"):
        raise ValueError(f"experiments/base/arithmetic_cot.py: unknown variant {arg!r} (known: smoke)")
    c = sft_config("rl/arithmetic_cot", "d384", seq_len=256, max_seq_len=640, steps=STEPS, batch=128, lr=1e-3,
                   eval_tokens=352)
    return smoke(c) if arg == "smoke" else c


def get_sweep(arg=None):
    return competence_sweep("base_arithmetic_cot", steps=(1000, 2000, 4000))

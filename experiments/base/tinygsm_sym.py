"""Base policy for rl/tinygsm_sym (symbolic grade-school word problems; ood: the symbolic rewrites): SFT on the
gold solutions, the warm start the CLIPO table's arms share (one run per seed).

    python -m shared.launch --config=experiments/base/tinygsm_sym.py --workdir=runs/base/tinygsm_sym_s0
    python -m shared.sweep --config=experiments/base/tinygsm_sym.py --workdir=runs/base/tinygsm_sym_table

Shape as experiments/clipo/tinygsm_sym_table.py (4 layers x 256 is the "small" size here with 6 layers; the
default variant keeps clipo's 4 layers so its arms can start from it). Variants: "", "smoke".
"""
from experiments.base._recipe import competence_sweep, sft_config, smoke

STEPS = 2000  # chosen from the competence table: see README.md


def get_config(arg=None):
    if arg not in (None, "", "smoke"):
        raise ValueError(f"experiments/base/tinygsm_sym.py: unknown variant {arg!r} (known: smoke)")
    c = sft_config("rl/tinygsm_sym", "small", seq_len=320, max_seq_len=640, steps=STEPS, batch=128, lr=1e-3,
                   eval_tokens=112)
    c.model.n_layers = 4  # clipo's policy shape
    return smoke(c) if arg == "smoke" else c


def get_sweep(arg=None):
    return competence_sweep("base_tinygsm_sym", steps=(1000, 2000))

"""DIR spec section 4 (../shared/papers/dir_debias.md), D1 = SynPref with a length bias: the main small-scale table
and the gamma sweep. Every point trains 3 seeds in one process (dir.seeds) and reports their mean / std.

    python -m shared.sweep --config=experiments/dir_debias/synpref_length.py --workdir=runs/dir_debias/synpref_length \
        --parallel=6 --config.mesh.preset=gpu_1
    python -m shared.launch --config=experiments/dir_debias/synpref_length.py --workdir=runs/dir_debias/d1_bt  # BT only

Training data: 20k pairs, the chosen response carries 4-24 more filler tokens with rho = 0.9; evaluation on
2,048 pairs each of aligned (rho 1), balanced (0.5) and anti (0) splits. Conditions (spec 4.3): BT; BT-oracle
(trained on rho = 0.5); Pearson penalty (lambda 1); product of experts; DIR gamma 0.1 / 1 / 10 (difference
representation, CLUB over the whole batch of 128 pairs); DIR concat; DIR with the code's CLUB batch of 8.
Expected (spec 4.5, no paper numbers exist for this setting): BT bias gap >= 15 points; DIR (best of gamma 0.1, 1)
halves it, +10 points on anti, balanced within 1 point of BT. Hardware: one GPU per 3 points (H100).
"""
import ml_collections

from experiments.dir_debias._common import COLUMNS, check_variant, smoke, sweep_points, tiny_rm_config

FILE = "experiments/dir_debias/synpref_length.py"
POINTS = ["bt", "oracle", "pearson", "poe", "dir_g0.1", "dir_g1", "dir_g10", "dir_concat", "dir_club8"]


def get_config(arg=None):
    check_variant(arg, FILE)
    c = tiny_rm_config(seq_len=64)
    c.data.source = "dir_debias/synpref"
    c.data.task_options = ml_collections.ConfigDict({"bias": "length", "rho_train": 0.9})
    c.data.n_train = 20000
    c.dir.attributes, c.dir.attribute_weights = ["greater:filler"], [1.0]
    c.train.steps = 500
    return smoke(c, FILE) if arg == "smoke" else c


def get_sweep(arg=None):
    return dict(name="synpref_length", points=sweep_points(POINTS, arg), columns=COLUMNS,
                plot=dict(kind="bars", metric="eval/anti/accuracy"))

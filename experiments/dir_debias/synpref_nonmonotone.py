"""DIR spec section 4.2 D1-NL: SynPref with a non-monotone length bias (annotators favour 10-20 filler tokens);
the attribute is band(y_w) - band(y_l) + 1 (K = 3). Claim 4: DIR's anti-split accuracy >= 5 points above the
Pearson penalty's, because a linear score-length correlation is near 0 here even for a biased RM.

    python -m shared.sweep --config=experiments/dir_debias/synpref_nonmonotone.py \
        --workdir=runs/dir_debias/synpref_nonmonotone --parallel=6 --config.mesh.preset=gpu_1

Same model and schedule as synpref_length.py; 3 seeds per point in one process. One GPU per 3 points (H100).
"""
import ml_collections

from experiments.dir_debias._common import COLUMNS, check_variant, smoke, sweep_points, tiny_rm_config

FILE = "experiments/dir_debias/synpref_nonmonotone.py"
POINTS = ["bt", "pearson", "dir_g1"]


def get_config(arg=None):
    check_variant(arg, FILE)
    c = tiny_rm_config(seq_len=64)
    c.data.source = "dir_debias/synpref"
    c.data.task_options = ml_collections.ConfigDict({"bias": "band", "rho_train": 0.9})
    c.data.n_train = 20000
    c.dir.attributes, c.dir.attribute_weights = ["band:filler:10:20"], [1.0]
    c.train.steps = 500
    if arg == "smoke":
        smoke(c, FILE)
        c.data.task_options.bias = "band"
        c.dir.attributes = ["band:filler:10:20"]
    return c


def get_sweep(arg=None):
    return dict(name="synpref_nonmonotone", points=sweep_points(POINTS, arg), columns=COLUMNS,
                plot=dict(kind="bars", metric="eval/anti/accuracy"))

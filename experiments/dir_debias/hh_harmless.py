"""DIR spec section 4.2 D2: HH-RLHF harmless-base (the shipped 2,312-pair test file: 1,800 train / 512 test) with
an injected "closers" bias: 1-3 content-free closing sentences appended to the chosen response's final turn with
rho = 0.9 (train), tested on rho 1 / 0.5 / 0. The attribute is which side got them ("greater:closers").
From-scratch byte-level RMs learn little true preference here; the measured quantity is bias reliance
(claims 1-3 in direction, smaller magnitude, count as supporting evidence).

    python -m shared.sweep --config=experiments/dir_debias/hh_harmless.py --workdir=runs/dir_debias/hh_harmless \
        --parallel=6 --config.mesh.preset=gpu_1

Sequences: the last 256 bytes of [bos] + dialogue + response (the prompt is cut from the left, so the injected
end of the response is always seen). 3 seeds per point in one process. One GPU per 3 points (H100).
:smoke runs on the generated synpref pairs (the data file is not assumed in CI).
"""
import ml_collections

from experiments.dir_debias._common import COLUMNS, check_variant, smoke, sweep_points, tiny_rm_config

FILE = "experiments/dir_debias/hh_harmless.py"
POINTS = ["bt", "pearson", "dir_g1"]


def get_config(arg=None):
    check_variant(arg, FILE)
    c = tiny_rm_config(seq_len=256)
    c.data.source = "dir_debias/hh_harmless"
    c.data.task_options = ml_collections.ConfigDict({
        "path": "../shared/data/preferences/hh_rlhf/harmless-base-test.jsonl.gz", "bias": "closers",
        "rho_train": 0.9, "n_train": 1800, "n_test": 512})
    c.data.n_train = 1800
    c.rm.n_eval = 512
    c.dir.attributes, c.dir.attribute_weights = ["greater:closers"], [1.0]
    c.dir.bon_prompts = 0
    c.train.steps = 250
    c.train.batch_size = 64
    c.train.eval_every = 100
    return smoke(c, FILE) if arg == "smoke" else c


def get_sweep(arg=None):
    return dict(name="hh_harmless", points=sweep_points(POINTS, arg), columns=COLUMNS,
                plot=dict(kind="bars", metric="eval/anti/accuracy"))

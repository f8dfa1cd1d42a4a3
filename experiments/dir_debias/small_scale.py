"""All small-scale tables of the DIR spec (section 4, ../shared/papers/dir_debias.md) in one sweep, so the GPU plan
is three rounds of 6 parallel points: D1 (SynPref, length bias) with every section-4.3 condition and the gamma sweep
(0.1 / 1 / 10), D1-NL (non-monotone bias: BT, Pearson, DIR) and D2 (HH-RLHF harmless + injected closers: BT,
Pearson, DIR). Every point trains 3 seeds in one process and reports mean, "/std" and "per_seed/" values;
best-of-16 runs on D1 and D1-NL points.

    python -m shared.sweep --config=experiments/dir_debias/small_scale.py --workdir=runs/dir_debias/small_scale \
        --parallel=6 --config.mesh.preset=gpu_1

Variants: d1 (default), nl, hh and their CI versions smoke (= d1 smoke), nl_smoke, hh_smoke. The per-setting
files (synpref_length.py, synpref_nonmonotone.py, hh_harmless.py) hold the configs and their own sweeps.
Committed results: projects/dir_debias/results/small_scale/ (after the GPU run).
"""
from experiments.dir_debias import hh_harmless, synpref_length, synpref_nonmonotone
from experiments.dir_debias._common import COLUMNS, sweep_points

FILE = "experiments/dir_debias/small_scale.py"
SETTINGS = {"d1": synpref_length, "nl": synpref_nonmonotone, "hh": hh_harmless}
VARIANTS = ("nl", "hh", "nl_smoke", "hh_smoke")  # validated in CI beside the default and smoke


def get_config(arg=None):
    name = arg or "d1"
    setting, _, smoke = name.partition("_")
    if name == "smoke":
        setting, smoke = "d1", "smoke"
    if setting not in SETTINGS or smoke not in ("", "smoke"):
        raise ValueError(f"{FILE}: unknown variant {arg!r} (known: d1, nl, hh, smoke, nl_smoke, hh_smoke)")
    return SETTINGS[setting].get_config("smoke" if smoke else None)


def get_sweep(arg=None):
    smoke = arg is not None and arg.endswith("smoke")
    points = []
    for setting, module in SETTINGS.items():
        variant = (("smoke" if setting == "d1" else f"{setting}_smoke") if smoke else
                   (None if setting == "d1" else setting))
        for point in sweep_points(module.POINTS, variant):
            point["name"] = f"{setting}_{point['name']}"
            points.append(point)
    return dict(name="small_scale", points=points, columns=COLUMNS,
                plot=dict(kind="bars", metric="eval/anti/accuracy"))

"""OpenRS E2 (../shared/papers/openrs.md section 4): learned tiny judges on RubricWorld (proxy_grm.md 4.2),
a holistic pairwise judge vs a per-criterion comparator on a rubric with OpenRS's external aggregation and
bidirectional rule, ID and OOD (unseen keyword triples, STYLE shortcut reversed). CPU, minutes.

    python -m shared.sweep --config=experiments/openrs/e2_rubricworld.py --workdir=runs/openrs/e2_rubricworld

Points: arm x seed (3 seeds); every point trains its judge at each train size in {1000, 3000, 10000} pairs (prefixes
of one stream; the spec's GRM-RL set is 10k) and evaluates on 2000 ID and 2000 OOD pairs. Arms:
  holistic           MLP [keywords, y1, y2] -> P(y1 better), gold labels, swap augmentation
  criterion_oracle   MLP comparator [criterion, y1, y2] -> GT/EQ/LT trained on the teacher's per-criterion
                     comparisons, applied to the true rubric S_t, aggregated (weights matched to the world: W_3 core 3,
                     W_2 important 2, W_1 highlight 1), both orders, bidirectional rule (a tie counts wrong)
  criterion_teacher  the same comparator on the teacher's rubric (15% corrupted)
Models: 2 hidden layers of 128 (ReLU), Adam 1e-3, 4000 steps of 256 (projects/openrs/rubricworld_judges.py).
Claim: criterion-wise + external aggregation >= holistic on OOD by >= 3 points.
Variant "combo" (not in the spec): the harder RubricWorld (type_inference="combo", projects/proxy_grm/rubricworld.py)
whose task type needs the whole keyword triple. In the spec world the holistic judge reaches OOD accuracy 0.99 at 10k
pairs (results/e2_rubricworld: the ceiling, no room for +3 points); here it has to infer the composed type itself.

    python -m shared.sweep --config=experiments/openrs/e2_rubricworld.py:combo --workdir=runs/openrs/e2_combo
Cost: ~10 s per train size on one CPU core; the table (9 points) ~3 minutes on CPU; no GPU needed.
"""
import ml_collections

from shared.config.base import base_config

SEEDS = (0, 1, 2)
TRAIN_SIZES = (1000, 3000, 10000)
SWEEP_VARIANTS = ("combo",)  # get_sweep variants beside "" and "smoke" (tests/test_experiments.py)
ARMS = {"holistic": {"openrs.arm": "holistic"},
        "criterion_oracle": {"openrs.arm": "criterion", "openrs.rubric": "oracle"},
        "criterion_teacher": {"openrs.arm": "criterion", "openrs.rubric": "teacher"}}


def get_config(arg=None):
    if arg not in (None, "smoke", "combo"):
        raise ValueError(f"experiments/openrs/e2_rubricworld.py: unknown variant {arg!r} (known: combo, smoke)")
    c = base_config()
    c.project = "openrs"
    c.task = "openrs/e2_rubricworld"
    c.mesh.preset = "cpu_1"
    c.openrs = ml_collections.ConfigDict({
        "arm": "criterion", "rubric": "oracle", "weights": "matched", "train_sizes": list(TRAIN_SIZES),
        "n_test": 2000, "hidden": 128, "steps": 4000, "batch": 256, "lr": 1e-3,
        "type_inference": "combo" if arg == "combo" else "spec"})
    if arg == "smoke":
        c.openrs.train_sizes, c.openrs.n_test, c.openrs.steps, c.openrs.hidden = [200], 100, 20, 16
    return c


def get_sweep(arg=None):
    smoke = arg == "smoke"
    seeds = SEEDS[:1] if smoke else SEEDS
    sizes = (200,) if smoke else TRAIN_SIZES
    points = [dict(name=f"{arm}_s{seed}", arm=arm, arg=arg, overrides={**overrides, "seed": seed})
              for arm, overrides in ARMS.items() for seed in seeds]
    columns = [f"n{n}/{split}/{metric}" for n in sizes for split in ("test", "ood")
               for metric in ("accuracy", "tie_rate")] + ["wall_time_s"]
    return dict(name="e2_rubricworld" + ("_combo" if arg == "combo" else ""), points=points, columns=columns, group=["arm"],
                plot=dict(kind="bars", metric=f"n{sizes[-1]}/ood/accuracy"))

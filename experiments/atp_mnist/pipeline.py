"""ATP-MNIST (../shared/papers/atp_bench.md section 4), pipeline track: the programmatic planner zoo
(projects/atp_mnist/planners.py: the gold plan with one systematic change each) answers the world's test items; every
answer is scored against its gold plan and executed (the executed score E of spec 4.3). CPU only, about a minute a
seed. It checks that the world separates the paradigms and that the plan metrics see each planner's profile; the
SFT-trained planners and the judges (claims C1 on trained planners, C2) are GPU tables still to build and run.

    python -m shared.sweep --config=experiments/atp_mnist/pipeline.py --workdir=runs/atp_mnist/pipeline --parallel=2
    python -m shared.launch --config=experiments/atp_mnist/pipeline.py --workdir=runs/atp_mnist/one     # seed 0

One point per world seed (each draws 2,000 test items and the planners' randomness), every planner in each point.
Variants: smoke (synthetic glyphs, no data folder, 200 items, 2 seeds: CI). Reads
../shared/data/images/mnist_5k/mnist_5k.csv.gz (never copied into the repo).
Results as shared.sweep wrote them: projects/atp_mnist/results/pipeline/.
"""
import ml_collections

from shared.config.base import base_config

SEEDS = (0, 1, 2, 3, 4)
VARIANTS = (None, "smoke")
PLANNERS = ("unified", "gen_only", "retrieval_only", "tool_happy", "tool_shy", "text_only", "noisy")


def get_config(arg=None):
    if arg not in VARIANTS:
        raise ValueError(f"experiments/atp_mnist/pipeline.py: unknown variant {arg!r} (known: smoke)")
    c = base_config()
    c.project = "atp_mnist"
    c.task = "atp_mnist/pipeline"
    c.mesh.preset = "cpu_1"
    c.atp_mnist = ml_collections.ConfigDict({
        "pool": "mnist",                                        # mnist | synthetic (procedural glyphs, for CI)
        "pool_path": "../shared/data/images/mnist_5k/mnist_5k.csv.gz",
        "synthetic_per_digit": 60,
        "n_test": 2000,                                         # spec 4.1: 4k test items; 2k a seed, 5 seeds
        "planners": PLANNERS,
    })
    if arg == "smoke":
        c.atp_mnist.update({"pool": "synthetic", "n_test": 200})
    return c


def get_sweep(arg=None):
    seeds = SEEDS[:2] if arg == "smoke" else SEEDS
    name = "pipeline" if arg is None else f"pipeline_{arg}"
    points = [dict(name=f"s{seed}", arm="pipeline", arg=arg, overrides={"seed": seed}) for seed in seeds]
    metrics = ("E", "visual", "facts", "E_factual", "E_creative", "f1", "precision", "recall", "calls_per_answer",
               "overuse", "underuse", "f1_single", "f1_multi")
    columns = [f"{p}/{m}" for p in PLANNERS for m in metrics]
    columns += ["zoo/calls_ratio", "classifier/acc", "wall_time_s"]
    return dict(name=name, points=points, columns=columns, group=["arm"],
                plot=dict(kind="bars", metric="unified/E"))

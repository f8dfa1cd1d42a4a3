"""ATP-MNIST's trained planner zoo (../shared/papers/atp_bench.md 4.2): decoders from scratch, SFT on the world's
answers ("rl/atp_mnist/plans", projects/atp_mnist/sft_data.py) of one programmatic planner each (the mixture), byte
tokenizer, symbolic track; then every trained planner answers each evaluation seed's test items greedily and the
answers are scored like the programmatic zoo's (TASKS "atp_mnist/zoo_eval": executed score E, plan metrics).
GPU. The judges (MAM-tiny, holistic-tiny) are the next step (projects/atp_mnist/README.md).

    python -m shared.launch --config=experiments/atp_mnist/planners.py:unified_M --workdir=runs/atp_mnist/unified_M
    python -m shared.sweep --config=experiments/atp_mnist/planners.py --workdir=runs/atp_mnist/zoo --parallel=9

Variants: "<mixture>_<size>" (one SFT run; mixture in projects/atp_mnist/planners.py's PLANNERS, size S / M / L =
4 x 256, 6 x 384, 8 x 512), "zoo_eval" (the evaluation; atp_mnist.runs names the planners' workdirs), "smoke" and
"zoo_eval_smoke" (CI: procedural glyphs). Greedy accuracy of an SFT run = the exact gold plan with every fact stated
(the example set's checker). The sweep is the spec's zoo as stages, one SFT run a system (unified x {S, M, L},
every other mixture at M, unified M at 10% of the steps: the under-trained planner), and one evaluation point per
evaluation seed (2,000 test items each), every system in each point, so systems are paired by evaluation seed; the
spread over SFT seeds is not measured (one run a system, as the spec's leaderboard of systems).
"""
import ml_collections

from experiments.atp_mnist.pipeline import get_config as pipeline_config
from experiments.base._recipe import sft_config, smoke

MIXTURES = ("unified", "gen_only", "retrieval_only", "tool_happy", "tool_shy", "text_only", "noisy")
SIZES = {"S": (256, 4, 4, 64, 1024), "M": (384, 6, 6, 64, 1536), "L": (512, 8, 8, 64, 2048)}  # d, layers, heads, hd, ff
STEPS = 3000            # provisional: 20k answers, 64 a step, ~10 epochs; not measured yet
SEQ_LEN = 2048          # prompt <= ~1,450 bytes + answer <= ~450 bytes (symbolic track, byte tokens)
EVAL_SEEDS = (0, 1, 2)
VARIANTS = tuple(f"{m}_{s}" for m in MIXTURES for s in SIZES) + ("zoo_eval", "smoke", "zoo_eval_smoke")


def get_config(arg=None):
    arg = arg or "unified_M"
    if arg not in VARIANTS:
        raise ValueError(f"experiments/atp_mnist/planners.py: unknown variant {arg!r} (known: <mixture>_<S|M|L> "
                         f"with mixture in {', '.join(MIXTURES)}; zoo_eval; smoke; zoo_eval_smoke)")
    if arg.startswith("zoo_eval"):
        c = pipeline_config("smoke" if arg == "zoo_eval_smoke" else None)
        c.task = "atp_mnist/zoo_eval"
        c.mesh.preset = "cpu_1"   # the host's part; each planner is placed on its own run's preset
        c.atp_mnist.runs = "unified_M=runs/atp_mnist/unified_M"
        c.atp_mnist.max_new_tokens = 512
        return c
    mixture, size = ("unified", "M") if arg == "smoke" else arg.rsplit("_", 1)
    c = sft_config("rl/atp_mnist/plans", "small", seq_len=SEQ_LEN, max_seq_len=SEQ_LEN, steps=STEPS, batch=64,
                   lr=1e-3, eval_tokens=512, task_options={"mixture": mixture}, splits=("test",))
    m = c.model
    m.d_model, m.n_layers, m.n_heads, m.head_dim, m.d_ff = SIZES[size]
    m.n_kv_heads = m.n_heads
    c.project = "atp_mnist"
    if arg == "smoke":
        c = smoke(c)
        c.data.task_options.pool = "synthetic"
        c.data.greedy_eval_examples, c.data.greedy_eval_tokens = 2, 16
    return c


def zoo() -> list[tuple[str, str]]:
    """(system name, SFT variant) of the spec's zoo."""
    systems = [(f"unified_{s}", f"unified_{s}") for s in SIZES] + [(f"{m}_M", f"{m}_M") for m in MIXTURES[1:]]
    return systems + [("unified_M_short", "unified_M")]


def get_sweep(arg=None):
    stages = []
    for name, variant in zoo():
        overrides = {}
        if name == "unified_M_short":
            overrides = {"train.steps": STEPS // 10, "train.checkpoint_every": STEPS // 10,
                         "train.eval_every": STEPS // 40}
        stages.append(dict(name=name, arg=variant, overrides=overrides))
    runs = ";".join(f"{name}={{stage:{name}}}" for name, _ in zoo())
    points = [dict(name=f"eval_s{seed}", arm="zoo", arg="zoo_eval", overrides={"seed": seed, "atp_mnist.runs": runs})
              for seed in EVAL_SEEDS]
    metrics = ("E", "E_factual", "E_creative", "f1", "precision", "recall", "calls_per_answer", "overuse",
               "underuse", "f1_single", "f1_multi", "parse_errors")
    columns = [f"{name}/{m}" for name, _ in zoo() for m in metrics] + ["zoo/calls_ratio", "wall_time_s"]
    return dict(name="zoo", stages=stages, points=points, columns=columns, group=["arm"],
                plot=dict(kind="bars", metric="unified_M/E"))

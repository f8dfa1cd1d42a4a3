"""The claims of the ATP-MNIST ledger (spec ../shared/papers/atp_bench.md 4.6, "Reproduced if"), as data for
`python -m shared.stats.ledger --project atp_mnist`, which writes the README's ledger table and results/ledger.json.

One table so far (results/pipeline), the pipeline track: programmatic planners (the gold plan with one systematic
change each), every planner in each point, all answering the same items of the point's world seed, so differences
are paired by seed. Keys are <planner>/<metric> (projects/atp_mnist/task.py). Rows marked [pipeline] test the world
and its executor with those planners, not the paper's trained planners; the claims on trained planners and on the
judges (C2, the optional RL arm) are "not run yet" until their GPU tables exist.
"""
from shared.stats.claims import Arm, Claim, Level

RESULTS = "projects/atp_mnist/results/pipeline"
PAPER = "no number for this analog (paper body not retrieved; spec section 3)"
GPU_TRACK = ("needs the MAM-tiny / holistic-tiny judges (spec 4.4, not built yet) on the trained planner zoo "
             "(campaign row atp_mnist_zoo)")
ZOO = ("needs the trained planner zoo's table: python -m shared.sweep --config=experiments/atp_mnist/planners.py "
       "--workdir=runs/atp_mnist_zoo --parallel=9 (campaign row atp_mnist_zoo, GPU)")


def col(planner: str, metric: str) -> Arm:
    return Arm({"arm": "pipeline"}, f"{planner}/{metric}", f"{planner} {metric}")


def claim(cid, text, a, b, direction="greater", margin=0.0, note="", levels=()):
    return Claim(cid, text, results=RESULTS, a=a, b=b, direction=direction, margin=margin, paired=True,
                 paper=PAPER, note=note, levels=levels)


def floor(planner, metric):
    return Level(0.0, 0.02, "floor", arm=col(planner, metric))


CLAIMS = [
    claim("C1 [pipeline] (gen-only)", "Unified planning beats generation-only on executed quality E by >= 10 points",
          col("unified", "E"), col("gen_only", "E"), margin=0.10, levels=(floor("gen_only", "E"),)),
    claim("C1 [pipeline] (retrieval-only)", "Unified planning beats retrieval-only on E by >= 10 points",
          col("unified", "E"), col("retrieval_only", "E"), margin=0.10, levels=(floor("retrieval_only", "E"),)),
    claim("C1 [pipeline] (factual)", "Generation-only loses on the factual intents (ref / search / code)",
          col("unified", "E_factual"), col("gen_only", "E_factual"), levels=(floor("gen_only", "E_factual"),)),
    claim("C1 [pipeline] (creative)", "Retrieval-only loses on the creative intents (gen / edit)",
          col("unified", "E_creative"), col("retrieval_only", "E_creative"),
          levels=(floor("retrieval_only", "E_creative"),)),
    claim("C1 [pipeline] (text-only last, vs gen-only)", "Text-only is below generation-only on E",
          col("gen_only", "E"), col("text_only", "E")),
    claim("C1 [pipeline] (text-only last, vs retrieval-only)", "Text-only is below retrieval-only on E",
          col("retrieval_only", "E"), col("text_only", "E")),
    claim("C1 [pipeline] (text-only last, vs tool-shy)", "Text-only is below tool-shy on E",
          col("tool_shy", "E"), col("text_only", "E")),
    Claim("C3 [pipeline] (spread)", "Calls per answer span >= 3x across the zoo (largest over smallest non-zero)",
          results=RESULTS, a=col("zoo", "calls_ratio"), b=3.0, direction="greater", paired=True, paper=PAPER),
    claim("C3 [pipeline] (multi-call slice, tool-shy)", "Tool-shy's F1 is lower on >= 2-call items than on 1-call items",
          col("tool_shy", "f1_single"), col("tool_shy", "f1_multi")),
    claim("C3 [pipeline] (multi-call slice, noisy)", "Noisy unified's F1 is lower on >= 2-call items than on 1-call "
          "items", col("noisy", "f1_single"), col("noisy", "f1_multi")),
    claim("C3 [pipeline] (multi-call slice, tool-happy)", "Tool-happy's F1 is lower on >= 2-call items than on "
          "1-call items", col("tool_happy", "f1_single"), col("tool_happy", "f1_multi")),
    claim("profile (tool-happy)", "Plan metrics flag the tool-happy planner: its precision is below unified's",
          col("tool_happy", "precision"), col("unified", "precision"), direction="less"),
    claim("profile (tool-shy)", "Plan metrics flag the tool-shy planner: its recall is below unified's",
          col("tool_shy", "recall"), col("unified", "recall"), direction="less"),
    Claim("C1 (trained planners)", "SFT unified-M beats gen-only-M and retrieval-only-M on E by >= 10 points",
          not_run=ZOO),
    Claim("C2a", "MAM-tiny's system ranking agrees with gold F1 (Kendall tau >= 0.8, >= holistic-tiny + 0.1)",
          not_run=GPU_TRACK),
    Claim("C2b", "MAM-tiny's ranking predicts executed quality (tau vs E >= 0.7)", not_run=GPU_TRACK),
    Claim("C2c", "MAM-tiny's P and R flag tool-happy and tool-shy planners", not_run=GPU_TRACK),
    Claim("C2d", "A reference-based judge gains <= 0.05 tau over MAM-tiny", not_run=GPU_TRACK),
    Claim("C4 (optional)", "GRPO on the MAM-tiny reward raises E over SFT and recovers >= 50% of the oracle gain",
          not_run=GPU_TRACK),
]

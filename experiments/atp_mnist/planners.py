"""ATP-MNIST's trained planner zoo (../shared/papers/atp_bench.md 4.2): decoders from scratch, SFT on the world's
answers ("rl/atp_mnist/plans", projects/atp_mnist/sft_data.py) of one programmatic planner each (the mixture), byte
tokenizer, symbolic track. GPU; the zoo's evaluation with the pipeline metrics (executed score E, plan metrics)
and the judges are the next step (projects/atp_mnist/README.md).

    python -m shared.launch --config=experiments/atp_mnist/planners.py:unified_M --workdir=runs/atp_mnist/unified_M
    python -m shared.sweep --config=experiments/atp_mnist/planners.py --workdir=runs/atp_mnist/zoo --parallel=8

Variant "<mixture>_<size>" (mixture in projects/atp_mnist/planners.py's PLANNERS, size S / M / L = 4 x 256, 6 x 384,
8 x 512), "smoke" (CI). Greedy accuracy = the exact gold plan with every fact stated (the example set's checker).
The sweep is the spec's zoo: unified x {S, M, L}, every other mixture at M, and unified M at 10% of the steps (the
under-trained planner), one seed each (a system of the leaderboard, not an arm with seeds).
"""
from experiments.base._recipe import sft_config, smoke

MIXTURES = ("unified", "gen_only", "retrieval_only", "tool_happy", "tool_shy", "text_only", "noisy")
SIZES = {"S": (256, 4, 4, 64, 1024), "M": (384, 6, 6, 64, 1536), "L": (512, 8, 8, 64, 2048)}  # d, layers, heads, hd, ff
STEPS = 3000            # provisional: 20k answers, 64 a step, ~10 epochs; not measured yet
SEQ_LEN = 2048          # prompt <= ~1,450 bytes + answer <= ~450 bytes (symbolic track, byte tokens)
VARIANTS = tuple(f"{m}_{s}" for m in MIXTURES for s in SIZES) + ("smoke",)


def get_config(arg=None):
    arg = arg or "unified_M"
    if arg not in VARIANTS:
        raise ValueError(f"experiments/atp_mnist/planners.py: unknown variant {arg!r} (known: <mixture>_<S|M|L> "
                         f"with mixture in {', '.join(MIXTURES)}; smoke)")
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
        c.data.seq_len = c.model.max_seq_len = 2048
        c.data.greedy_eval_examples, c.data.greedy_eval_tokens = 2, 16
    return c


def get_sweep(arg=None):
    zoo = [("unified", "S"), ("unified", "M"), ("unified", "L")] + [(m, "M") for m in MIXTURES if m != "unified"]
    points = [dict(name=f"{m}_{s}", arg=f"{m}_{s}") for m, s in zoo]
    points.append(dict(name="unified_M_short", arg="unified_M",
                       overrides={"train.steps": STEPS // 10, "train.checkpoint_every": STEPS // 10,
                                  "train.eval_every": STEPS // 40}))
    return dict(name="atp_mnist_zoo", points=points,
                columns=["eval/greedy_accuracy", "eval/loss", "wall_time_s"],
                plot=dict(kind="bars", metric="eval/greedy_accuracy"))

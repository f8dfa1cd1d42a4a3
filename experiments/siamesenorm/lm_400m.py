"""SiameseNorm depth study at ~390M parameters (paper §4.2; spec §2.2). Not run here.

Fixed parameter count, deeper and narrower: (L, d) = (10, 1280), (17, 1024), (33, 768), (80, 512); 12B
tokens, LR 1e-3, 8 GPUs. Paper PPL Pre-Norm -> SiameseNorm: 17.47 -> 16.15, 17.23 -> 15.69, 17.29 -> 15.64,
18.02 -> 15.98. Variants L10, L17 (default), L33, L80 pick the shape; batch (512 x 2048 tokens) and which
SiameseNorm form the paper used here are not confirmed (spec Q3, Q6).

    python -m shared.launch --config=experiments/siamesenorm/lm_400m.py:L33 --workdir=runs/siamesenorm/400m_L33 \
        --config.data.path=/data/fineweb-edu/*.jsonl.gz
    # Pre-Norm: add --config.model.block=prenorm
"""
from experiments.siamesenorm._paper import paper_config

SHAPES = {"L10": (10, 1280), "L17": (17, 1024), "L33": (33, 768), "L80": (80, 512)}
VARIANTS = tuple(SHAPES)


def get_config(arg=None):
    n_layers, d_model = SHAPES.get(arg or "L17", SHAPES["L17"])
    return paper_config(None if arg in SHAPES else arg, "experiments/siamesenorm/lm_400m.py", n_layers=n_layers,
                        d_model=d_model, tokens=12e9, batch_size=512, micro_batches=8, lr=1e-3,
                        known="smoke, " + ", ".join(SHAPES))

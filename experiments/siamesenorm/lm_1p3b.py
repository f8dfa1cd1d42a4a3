"""SiameseNorm 1.3B dense LM, the paper's headline setting (Table 1; spec §2.1, §4.1). Not run here.

OLMo-1B shape (16 blocks, d=2048, 16 heads of 128, SwiGLU 8192), FineWeb-Edu, 100B tokens, 8 GPUs
(the paper used about 50-60k A100-hours for its whole LM study). Paper PPL, LR 4e-4 / 1e-3 / 2e-3:
SiameseNorm 10.57 / 10.43 / 10.48, Pre-Norm 11.21 / 10.84 / 10.89; Post-Norm and HybridNorm diverge at
1e-3 and 2e-3, DeepNorm 11.47 at 1e-3 and diverges at 2e-3, ResiDual 13.66 (spikes) at 2e-3.

    python -m shared.launch --config=experiments/siamesenorm/lm_1p3b.py --workdir=runs/siamesenorm/1p3b_siamese \
        --config.data.path=/data/fineweb-edu/*.jsonl.gz
    # baselines and learning rates: --config.model.block=prenorm | postnorm | siamesenorm/hybridnorm |
    #   siamesenorm/deepnorm | siamesenorm/residual ...   --config.optim.lr=4e-4 | 1e-3 | 2e-3
    #   (the 350B-token run: --config.train.steps=83447)
"""
from experiments.siamesenorm._paper import paper_config


def get_config(arg=None):
    # 2048 x 2048 tokens per step (OLMo-1B default; unconfirmed for the paper); 100B tokens -> 23842 steps.
    return paper_config(arg, "experiments/siamesenorm/lm_1p3b.py", n_layers=16, d_model=2048, tokens=100e9,
                        batch_size=2048, micro_batches=32, lr=1e-3)

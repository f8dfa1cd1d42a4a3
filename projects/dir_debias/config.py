"""`config.dir`: the project's keys (base_config() has no such group; experiments add `c.dir = dir_config()`)."""
from __future__ import annotations

import ml_collections


def dir_config() -> ml_collections.ConfigDict:
    d = ml_collections.ConfigDict()
    d.attributes = ["greater:filler"]  # bias attributes (projects/dir_debias/attributes.py); the first is the one
                                       # the evaluation probes and correlates
    d.attribute_weights = [1.0]        # relative weight of each attribute's term (multi-attribute sum)
    d.gamma = 1.0                      # penalty weight: DIR's debias_factor (code default 0.1, launch script 1),
                                       # or the Pearson penalty's lambda
    d.representation = "difference"    # difference (h_w - h_l) | concat ([h_w; h_l])
    d.inner_steps = 5                  # q_psi AdamW steps per RM step (debias_optim_iter); also the PoE expert's
    d.q_hidden = 256                   # q_psi: Linear(d_in, H) -> ReLU -> Linear(H, K); 0 = one linear layer
    d.q_lr = 1e-3                      # q_psi lr (code 1e-4 for an 8B RM; spec 4.3 uses 1e-3 for tiny RMs)
    d.q_weight_decay = 0.01            # PyTorch AdamW default, as in the code
    d.club_batch = 0                   # 0: CLUB contrast over the whole (micro-)batch; n: groups of n pairs (code: 8)
    d.warmup_steps = 0                 # penalty off before this step (the RM code has none; its DPO variant 80)
    d.poe_lr = 1e-2                    # product-of-experts bias expert's Adam lr
    d.seeds = [0, 1, 2]                # task dir_debias/rm trains these seeds in turn, in <workdir>/seed<k>; [] =
                                       # config.seed only (a sweep point per seed: small_scale.py:spec)
    d.probe_split = "balanced"         # split whose frozen z the probes and MI estimators read (a independent of y)
    d.probe_steps = 200                # full-batch steps of each probe / estimator
    d.bon_prompts = 2000               # best-of-n prompts (synpref data only; 0 = off)
    d.bon_n = 16
    d.compile_cache = True             # persistent XLA cache in <workdir>/jax_cache: later seeds skip compiling
    return d

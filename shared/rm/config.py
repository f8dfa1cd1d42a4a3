"""`config.rm`: the reward-model task's own keys. base_config() has no such group; an experiment adds it:

    c.task = "rm"
    c.rm = shared.rm.rm_config()
"""
from __future__ import annotations

import ml_collections


def rm_config() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.margin = 0.0            # constant m in -log sigmoid(r_w - r_l - m) (Llama-2 RM margin loss), added to
    c.margin_scale = 0.0      # margin_scale * the record's "margin" field, when records carry one
    c.label_smoothing = 0.0   # eps: -(1-eps) log sigmoid(d) - eps log sigmoid(-d)
    c.center_coef = 0.0       # + coef * mean((r_w + r_l)^2): keeps rewards centred (pos-reg of TRL's trainer)
    c.append_eos = False      # score [bos] + prompt + response (+ eos): must match the reward's tokenisation
    c.eval_splits = ["test"]  # splits evaluated at the end: "eval/<split>/accuracy", ...; the first one is also
                              # the periodic eval set (train.eval_every)
    c.n_eval = 512            # pairs per evaluation split
    c.loss_hooks = []         # LOSS_HOOKS names (shared.rm.hooks): penalties with their own parameters/optimizer
    return c

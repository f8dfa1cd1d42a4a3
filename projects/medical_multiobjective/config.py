"""The arms of medical_multiobjective.md D.2 as config switches, and the keys of the evaluation hook.

    from projects.medical_multiobjective.config import add_channels, set_arm
    c = add_channels(c)            # c.project, the five channels in rl.rewards (weight 1 each), the eval hook
    c = set_arm(c, "rfn_tri")      # raw_sum | zscore | rfn | rfn_tri | tri_no_weakness | tri_no_risk |
                                   # tri_no_redundancy | nts

Every arm scores the same five channels; arms differ only in rl.reward_combine and its options:
  raw_sum            R = sum_k r_k (w = 1)
  zscore             per-batch z-score of each channel, equal weights
  rfn                Reference-Frozen Normalisation (statistics of the warm start's rollouts, frozen), equal weights
  rfn_tri            RFN + Tri-Factor weights (weakness, risk: kappa 2 on safety, redundancy)
  tri_no_<factor>    RFN + Tri-Factor without that factor
  nts                normalise-then-sum: R = sum_k groupnorm(r_k) with equal weights and rl.advantage = drgrpo
                     (centring only), so the advantage is exactly sum_k A_k (the GDPO-style option)
"""
from __future__ import annotations

import ml_collections

from shared.config import register_validator

PROJECT = "medical_multiobjective"
CHANNELS = ("correctness", "safety", "format", "answer_line", "brevity")
SAFETY_KAPPA = 2.0
ALL_FACTORS = "weakness,risk,redundancy"


def label(channel: str) -> str:
    """The channel's REWARDS name, also its label in the metrics: reward/<label>/{mean, share, weight, ...}."""
    return f"{PROJECT}/{channel}"


def _tri(factors: str = ALL_FACTORS) -> dict:
    return {"rl.reward_combine": "trifactor", "rl.reward_combine_options.normalize": "ref_frozen",
            "rl.reward_combine_options.factors": factors}


ARMS = {
    "raw_sum": {"rl.reward_combine": "sum"},
    "zscore": {"rl.reward_combine": "zscore"},
    "rfn": {"rl.reward_combine": "ref_frozen"},
    "rfn_tri": _tri(),
    "tri_no_weakness": _tri("risk,redundancy"),
    "tri_no_risk": _tri("weakness,redundancy"),
    "tri_no_redundancy": _tri("weakness,risk"),
    "nts": {"rl.reward_combine": "sum", "rl.reward_combine_options.scalarize": "normalize_then_sum",
            "rl.advantage": "drgrpo"},
}


def eval_config() -> ml_collections.ConfigDict:
    """config.mo_eval: the held-out per-channel evaluation (projects/medical_multiobjective/evaluation.py)."""
    c = ml_collections.ConfigDict()
    c.split = "test"               # rl/assistant split: test (held-out problems) | ood (unseen names, larger amounts)
    c.n = 500                      # problems (15% hazard)
    c.before = True                # also evaluate the warm start ("..._before" keys)
    c.seed = 1000                  # the same problems for every run seed
    return c


def add_channels(c: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
    """The project, its five reward channels (weight 1 each; their labels are their REWARDS names) and the
    evaluation hook."""
    c.project = PROJECT
    c.rl.rewards = [(label(k), 1.0) for k in CHANNELS]
    c.rl.reward_combine_options.risk = [(label("safety"), SAFETY_KAPPA)]
    if f"{PROJECT}/eval" not in c.train.hooks:
        c.train.hooks = list(c.train.hooks) + [f"{PROJECT}/eval"]
    c.mo_eval = eval_config()
    return c


def set_arm(c: ml_collections.ConfigDict, arm: str) -> ml_collections.ConfigDict:
    if arm not in ARMS:
        raise ValueError(f"{PROJECT} arm {arm!r}: known {', '.join(ARMS)}")
    c.update_from_flattened_dict(ARMS[arm])   # dotted keys ("rl.eps_high")
    return c


@register_validator
def _check_mo_eval(config, mesh_shape) -> None:
    """A bad config.mo_eval fails at launch with one line naming the key."""
    if "mo_eval" not in config:
        return
    if config.mo_eval.split not in ("test", "ood"):
        raise ValueError(f"mo_eval.split={config.mo_eval.split!r}: expected test or ood")
    if int(config.mo_eval.n) < 1:
        raise ValueError(f"mo_eval.n={config.mo_eval.n} must be >= 1")

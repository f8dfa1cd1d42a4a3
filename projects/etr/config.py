"""ETR's arms (spec D.2) as config switches and the keys of its evaluation hook.

    from projects.etr.config import add_etr_eval, set_arm
    c = set_arm(c, "etr_full")     # grpo | clip_higher | eps_matched | etr_micro | etr_macro | etr_full | etr_implicit
    c = add_etr_eval(c)            # c.project = "etr", the "etr/eval" hook and its group c.etr_eval

Every arm is PPO-clip with GRPO advantages, token-mean (rl_base_algorithms.md's GRPO), base widths 0.2 / 0.2; the
arms differ only in the rl keys below. eps_matched replays a pilot ETR-full run's effective width
(rl.eps_schedule.source = that run's workdir, set by the table); its mode (step | running | constant) is the
spec's open reading of "constant eps equal to the running batch-mean": default "running" (eps_t = the mean of the
pilot's widths up to step t).
"""
from __future__ import annotations

import ml_collections

from shared.config import register_validator

GRPO = {"rl.advantage": "grpo", "rl.policy_loss": "ppo-clip", "rl.loss_agg": "token-mean", "rl.eps_low": 0.2,
        "rl.eps_high": 0.2}
ARMS = {
    "grpo": {**GRPO},
    "clip_higher": {**GRPO, "rl.eps_high": 0.28},
    "eps_matched": {**GRPO, "rl.policy_loss": "eps-matched", "rl.eps_schedule.mode": "running"},
    "etr_micro": {**GRPO, "rl.policy_loss": "etr", "rl.etr.alpha": 0.5, "rl.etr.beta": 0.0},
    "etr_macro": {**GRPO, "rl.policy_loss": "etr", "rl.etr.alpha": 0.0, "rl.etr.beta": 0.5},
    "etr_full": {**GRPO, "rl.policy_loss": "etr", "rl.etr.alpha": 0.5, "rl.etr.beta": 0.5},
    "etr_implicit": {**GRPO, "rl.policy_loss": "etr", "rl.etr.macro": "implicit", "rl.etr.alpha_implicit": 0.5},
}
SCHEDULE_MODES = ("step", "running", "constant")


def eval_config() -> ml_collections.ConfigDict:
    """config.etr_eval: the D.3 evaluation of the "etr/eval" hook (projects/etr/evaluation.py)."""
    c = ml_collections.ConfigDict()
    c.sets = ["test", "ood"]       # the task's splits: ID (test) and hard (ood)
    c.n = 500                      # problems per set
    c.avg_samples = 8              # avg@8 ...
    c.avg_temperature = 0.6        # ... at T = 0.6
    c.pass_samples = 16            # pass@16 ...
    c.pass_temperature = 1.0       # ... at T = 1.0
    c.max_new_tokens = 0           # 0 = rl.max_new_tokens
    c.before = True                # also evaluate the warm start ("..._before" keys)
    c.every = 0                    # > 0: also evaluate every `every` RL steps (D.3 says 25), logged in the row of
                                   # step k * every + 1 (the policy after k * every updates); 0 = before / after only
    c.entropy_tail = 0.1           # etr/entropy_last: mean train/entropy over the last 10% of the RL steps
    c.seed = 1000                  # evaluation problems use this seed (the same sets for every run seed)
    return c


def add_etr_eval(c: ml_collections.ConfigDict, **overrides) -> ml_collections.ConfigDict:
    c.project = "etr"
    if "etr/eval" not in c.train.hooks:
        c.train.hooks = list(c.train.hooks) + ["etr/eval"]
    c.etr_eval = eval_config()
    for key, value in overrides.items():
        c.etr_eval[key] = value
    return c


def set_arm(c: ml_collections.ConfigDict, arm: str) -> ml_collections.ConfigDict:
    """The rl keys of one arm of D.2 (eps_matched still needs rl.eps_schedule.source)."""
    if arm not in ARMS:
        raise ValueError(f"etr arm {arm!r}: known {', '.join(ARMS)}")
    c.update_from_flattened_dict(ARMS[arm])   # dotted keys ("rl.eps_high")
    return c


@register_validator
def _check_etr_eval(config, mesh_shape) -> None:
    """A bad config.etr_eval fails at launch with one line naming the key."""
    if "etr_eval" not in config:
        return
    e = config.etr_eval
    for key in ("n", "avg_samples", "pass_samples"):
        if int(e[key]) < 1:
            raise ValueError(f"etr_eval.{key}={e[key]} must be >= 1")
    for key in ("avg_temperature", "pass_temperature"):
        if float(e[key]) <= 0:
            raise ValueError(f"etr_eval.{key}={e[key]} must be > 0 (greedy decoding is the learner's own eval)")
    if int(e.every) < 0:
        raise ValueError(f"etr_eval.every={e.every} must be >= 0 (0 = before and after RL only)")
    if not 0 < float(e.entropy_tail) <= 1:
        raise ValueError(f"etr_eval.entropy_tail={e.entropy_tail} must be in (0, 1]")
    unknown = [s for s in e.sets if s not in ("test", "ood")]
    if unknown:
        raise ValueError(f"etr_eval.sets: unknown split(s) {unknown}; known: test, ood")

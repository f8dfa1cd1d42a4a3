"""ETR, outcome-guided elastic trust regions (arXiv:2601.03723; spec ../shared/papers/etr.md), on the small-scale
design of section D.

The method itself is shared: rl.policy_loss = "etr" (the elastic widths) and "eps-matched" (the epsilon-matched
GRPO control) in shared/rl/etr.py. This package adds the arms as config switches (projects/etr/config.py) and the
evaluation of D.3 as an RL hook, HOOKS "etr/eval" (projects/etr/evaluation.py): avg@8 at T = 0.6 and pass@16 at
T = 1.0 on the ID and hard sets before and after RL, and the entropy summaries of the run.

The hook is registered as a factory that imports its module on first use, so experiment files can import
projects.etr.config without importing jax (the sweep scheduler must not).
"""
from projects.etr import config  # noqa: F401  config keys, ARMS, the config.etr_eval validator
from shared.registry import HOOKS


@HOOKS.register("etr/eval")
def eval_hook(config):
    from projects.etr.evaluation import EtrEval

    return EtrEval(config)

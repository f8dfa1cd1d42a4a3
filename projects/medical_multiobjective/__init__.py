"""Quark medical alignment's unified optimisation (arXiv:2602.11661; spec ../shared/papers/medical_multiobjective.md):
Reference-Frozen Normalisation and Tri-Factor Adaptive Dynamic Weighting, on the small-scale design of section D.

The combiners are shared (rl.reward_combine = sum | zscore | ref_frozen | trifactor, shared/rewards/combine.py), and
so is the task (rl/assistant, shared/data/tasks/assistant.py). This package registers the task's five reward
channels as REWARDS "medical_multiobjective/<channel>" (correctness, safety, format, answer_line, brevity), the arms
of D.2 as config switches (projects/medical_multiobjective/config.py) and the held-out evaluation of D.2 as the RL
hook HOOKS "medical_multiobjective/eval" (projects/medical_multiobjective/evaluation.py).

The hook is registered as a factory that imports its module on first use, so experiment files can import
projects.medical_multiobjective.config without importing jax.
"""
from projects.medical_multiobjective import config, rewards  # noqa: F401  REWARDS, arms, the config validator
from shared.registry import HOOKS


@HOOKS.register("medical_multiobjective/eval")
def eval_hook(config):
    from projects.medical_multiobjective.evaluation import ChannelEval

    return ChannelEval(config)

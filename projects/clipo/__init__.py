"""CLIPO (arXiv:2603.10101): contrastive learning among successful rollouts inside RLVR, as an RL hook.

Registers HOOKS "clipo/contrastive" (the projection head, group InfoNCE and clamped reward bonus; controls
CLIPO-fixed and CLIPO-shuffled; projects/clipo/contrastive.py) and "clipo/tinygsm_eval" (the TinyGSM-Sym
evaluation of clipo.md D.3; projects/clipo/evaluation.py), and the check of config.clipo. Switch CLIPO on with
projects.clipo.config.add_clipo(config).

The hooks are registered as factories that import their modules on first use, so that experiment files can
import projects.clipo.config without importing jax (the sweep scheduler must not).
"""
from projects.clipo import config  # noqa: F401  config keys, add_clipo, the config.clipo validator
from shared.registry import HOOKS


@HOOKS.register("clipo/contrastive")
def contrastive_hook(config):
    from projects.clipo.contrastive import ClipoHook

    return ClipoHook(config)


@HOOKS.register("clipo/tinygsm_eval")
def tinygsm_eval_hook(config):
    from projects.clipo.evaluation import TinyGsmEval

    return TinyGsmEval(config)

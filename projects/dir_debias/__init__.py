"""DIR: debiasing reward models with mutual information (../shared/papers/dir_debias.md).

Registers the loss hooks dir_debias/club (DIR), dir_debias/pearson and dir_debias/poe (baselines), the pair sets
dir_debias/synpref (D1, embedded) and dir_debias/hh_harmless (D2), and the task dir_debias/rm (seeds + evaluation).
"""
from projects.dir_debias import attributes, debias, hh, synpref, task  # noqa: F401

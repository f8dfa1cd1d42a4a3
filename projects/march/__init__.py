"""MARCH (arXiv 2603.24579): a Solver, a Proposer and a blind Checker played by one policy, trained with a shared
zero-tolerance self-check reward; on the synthetic NumFacts-RAG task. Spec: ../shared/papers/march.md (D: the
small-scale design). The episodes, roles and per-role advantages are shared/agent; this package holds the task and
its traces (numfacts.py), the number matcher, vote and rewards (matching.py) and the step and task "march/rl"
(game.py). See README.md."""
from projects.march import game, matching, numfacts  # noqa: F401

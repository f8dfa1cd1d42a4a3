"""Proxy-GRM (arXiv 2603.16600; spec ../shared/papers/proxy_grm.md): a generative reward model rewarded for rubrics
that let an independent, rubric-only proxy recover the preference, on the synthetic RubricWorld (§4).

Registers the example set "rl/proxy_grm/rubricworld" (rubricworld.py) with its checker (the parsed verdict equals
gold).
"""
from shared.data.examples import register_task

from projects.proxy_grm import rubricworld

register_task("proxy_grm/rubricworld", rubricworld.check_verdict)(rubricworld.rubricworld)

"""Proxy-GRM (arXiv 2603.16600; spec ../shared/papers/proxy_grm.md): a generative reward model rewarded for rubrics
that let an independent, rubric-only proxy recover the preference, on the synthetic RubricWorld (§4).

Registers: the example set "rl/proxy_grm/rubricworld" with its checker (rubricworld.py); the tokenizer
"proxy_grm/words" (vocab.py); the task "proxy_grm/proxy" (Proxy-SFT / Proxy-RL) and the reward "proxy_grm/proxy"
(proxy.py); the task "proxy_grm/grm" and the RL hook "proxy_grm/eval" (grm.py).
"""
from shared.data.examples import register_task

from projects.proxy_grm import rubricworld

register_task("proxy_grm/rubricworld", rubricworld.check_verdict)(rubricworld.rubricworld)

from projects.proxy_grm import grm, proxy, vocab  # noqa: E402,F401  (registrations)

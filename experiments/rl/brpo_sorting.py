"""Pairwise RL on CPU: the grpo_sorting pipeline with BRPO and a judge instead of a pointwise reward.

    python -m shared.launch --config=experiments/rl/brpo_sorting.py --workdir=runs/brpo_sorting
    python -m shared.launch --config=experiments/rl/brpo_sorting.py:smoke --workdir=/tmp/brpo_sorting_smoke

Writing-Zero's BRPO (../shared/papers/writing_zero_brpo.md 1.2; shared/rl/pairwise.py): each step a random
member of every group is the reference, the other G-1 completions are judged against it (B(G-1) judge calls in
one batch, the reference's slot randomised: swap="random"), A = +1 / -1 / 0 (BRPO-raw; "brpo-norm",
"round-robin" and "fixed-reference" are the other estimators), DAPO's dynamic sampling on the non-reference
outcomes, clip-higher 0.28, token-mean loss, no KL. The judge is an oracle: the task's checker (exact sorted list)
with 10% of its verdicts flipped (the spec's oracle judge). Metrics: judge/pairs, judge/calls (cost), the share of
groups all won / all lost against their reference, and the task's own reward logged at weight 0. Greedy accuracy
before/after RL as in grpo_sorting; the smoke variant runs 2 steps on 8 CPU devices. One run on the 2-core CPU
development machine (files in experiments/rl/results/brpo_sorting_cpu/, one seed, no paired baseline): greedy test
accuracy 0.505 before RL -> 0.66 at step 40 -> 0.59 at step 60, pass@1 0.344 -> 0.448; 224 judge calls per step.
"""
from experiments.rl.grpo_sorting import get_config as sorting_config


def get_config(arg=None):
    c = sorting_config(arg)
    c.rl.advantage = "brpo"
    c.rl.rewards = [("model/pairwise_judge", 1.0, {"backend": "oracle", "quality": "task/sorting", "noise": 0.1,
                                                   "swap": "random"}),
                    ("task", 0.0)]   # the checker, logged only: reward/task/sorting/mean
    c.rl.dynamic_sampling = True
    c.rl.eps_high = 0.28
    return c

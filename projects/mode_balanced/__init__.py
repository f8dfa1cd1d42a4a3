"""AFRL / Mode-Balanced Optimization (arXiv 2602.10006): answer-first relevance labels, RL with an SFT auxiliary loss
(shared/rl/sft_aux.py) and Stepwise-GRPO (shared/rl/stepwise.py). Spec: ../shared/papers/mode_balanced.md. This
package holds the rule-based relevance task, the answer-first parser, the step scorer and the metrics
(relevance.py), and the gated reward, the evaluation hook and the distillation check's teacher-output task
(tasks.py). See README.md."""
from projects.mode_balanced import relevance, tasks  # noqa: F401

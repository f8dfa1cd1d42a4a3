"""Evaluation metrics: pass@k / avg@n / greedy accuracy over checked completions (passk.py); Best-of-N / Pass@k over
the first k candidates with tie handling, step macro-F1 and first-error accuracy (bon.py); per-step process scores,
their five aggregations and the reliability gate (prm.py); judge-benchmark metrics (judge_bench.py: RewardBench 2
with Ties, JudgeBench order-swapped vote, RM-Bench accuracy, Kendall tau); interleaved text-and-tool-call responses:
parser, serialiser, tool registry (interleaved.py); a predicted tool plan against a gold plan: Hungarian matching,
precision / recall / F1, tool / anchor / argument accuracy, over- and under-use (plans.py)."""
from shared.eval.passk import (  # noqa: F401
    avg_at_n, greedy_accuracy, judge, pass_at_k, pass_at_k_per_prompt, pass_at_k_single, sample_metrics,
)
from shared.eval.bon import (  # noqa: F401
    best_of_n, bon_at_k, first_error_accuracy, pass_at_first_k, step_macro_f1,
)

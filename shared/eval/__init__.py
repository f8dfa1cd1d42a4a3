"""Evaluation metrics: pass@k / avg@n / greedy accuracy over checked completions (passk.py); judge-benchmark
metrics (judge_bench.py: RewardBench 2 with Ties, JudgeBench order-swapped vote, RM-Bench accuracy, Kendall tau)."""
from shared.eval.passk import (  # noqa: F401
    avg_at_n, greedy_accuracy, judge, pass_at_k, pass_at_k_per_prompt, pass_at_k_single, sample_metrics,
)

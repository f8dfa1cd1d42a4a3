"""pass@k, avg@n and greedy accuracy over sampled completions.

`correct` is a boolean array [num_prompts, n]: whether sample j of prompt i was judged correct.

pass@k is the unbiased estimator of Chen et al. 2021 ("Evaluating Large Language Models Trained on Code",
eq. 1): with c correct among n samples, the chance that k samples drawn without replacement contain at
least one correct one is 1 - C(n-c, k) / C(n, k), computed as 1 - prod_{i=n-c+1}^{n} (1 - k/i) to avoid
huge binomials. It is averaged over prompts. avg@n is the mean accuracy over all n samples (= pass@1).
"""
from __future__ import annotations

from typing import Callable, Iterable, Sequence

import numpy as np


def pass_at_k_single(n: int, c: int, k: int) -> float:
    """1 - C(n-c, k) / C(n, k): the probability that k of n samples (c correct) include a correct one."""
    if not 0 <= c <= n:
        raise ValueError(f"pass@k: need 0 <= correct <= samples, got correct={c}, samples={n}")
    if not 1 <= k <= n:
        raise ValueError(f"pass@{k} needs 1 <= k <= samples per prompt (n={n})")
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1, dtype=np.float64)))


def pass_at_k_per_prompt(num_samples: Sequence[int], num_correct: Sequence[int], k: int) -> np.ndarray:
    """float64[num_prompts] pass@k per prompt; prompts may have different sample counts."""
    num_samples, num_correct = np.asarray(num_samples), np.asarray(num_correct)
    if num_samples.shape != num_correct.shape:
        raise ValueError(f"pass@k: num_samples {num_samples.shape} and num_correct {num_correct.shape} differ")
    return np.asarray([pass_at_k_single(int(n), int(c), k) for n, c in zip(num_samples, num_correct)], np.float64)


def _as_correct(correct) -> np.ndarray:
    correct = np.asarray(correct)
    if correct.ndim != 2 or correct.shape[1] == 0:
        raise ValueError(f"correct must be a [num_prompts, n] array with n >= 1, got shape {correct.shape}")
    return correct.astype(bool)


def pass_at_k(correct, ks: Iterable[int] = (1,)) -> dict[str, float]:
    """{"pass@k": mean over prompts of the unbiased estimator} for each k; correct is bool[num_prompts, n]."""
    correct = _as_correct(correct)
    n = correct.shape[1]
    counts = correct.sum(axis=1)
    out = {}
    for k in ks:
        if not 1 <= k <= n:
            raise ValueError(f"pass@{k} needs at least {k} samples per prompt, got n={n}")
        out[f"pass@{k}"] = float(np.mean(pass_at_k_per_prompt(np.full_like(counts, n), counts, k)))
    return out


def avg_at_n(correct) -> float:
    """Mean accuracy over every sample of every prompt (avg@n)."""
    return float(np.mean(_as_correct(correct)))


def sample_metrics(correct, ks: Iterable[int] = (1,)) -> dict[str, float]:
    """pass@k for each k plus "avg@n" (n = samples per prompt)."""
    correct = _as_correct(correct)
    return {**pass_at_k(correct, ks), f"avg@{correct.shape[1]}": avg_at_n(correct)}


def judge(checker: Callable[[dict, str], bool], examples: Sequence[dict],
          completions: Sequence[Sequence[str]]) -> np.ndarray:
    """bool[num_prompts, n]: checker(example_i, completions[i][j]); every prompt needs the same n."""
    if len(examples) != len(completions):
        raise ValueError(f"{len(examples)} examples but {len(completions)} lists of completions")
    counts = {len(c) for c in completions}
    if len(counts) > 1:
        raise ValueError(f"every example needs the same number of completions, got {sorted(counts)}")
    return np.asarray([[bool(checker(ex, text)) for text in texts] for ex, texts in zip(examples, completions)],
                      dtype=bool).reshape(len(examples), -1)


def greedy_accuracy(checker: Callable[[dict, str], bool], examples: Sequence[dict],
                    completions: Sequence[str]) -> float:
    """Fraction of examples whose single (greedy) completion the checker accepts."""
    if len(examples) != len(completions):
        raise ValueError(f"{len(examples)} examples but {len(completions)} completions")
    if not examples:
        raise ValueError("greedy_accuracy of no examples")
    return float(np.mean([bool(checker(ex, text)) for ex, text in zip(examples, completions)]))

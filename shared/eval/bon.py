"""Selecting among candidates, and judging step verifiers: Best-of-N and Pass@k over the first k candidates (with
explicit tie handling), Best-of-N by oracle values (reward-model evaluation), step-level macro-F1 and first-error
accuracy.

`scores` float [P, N]: a verifier's score of candidate j of prompt i (candidates in generation order);
`correct` bool [P, N]: whether that candidate's final answer is right.

Ties among the best-scored candidates (scores within math.isclose's rel_tol 1e-9 of the maximum):
  "any"       correct if any tied best candidate is correct: the released EVPV-PRM BoN script's rule (an upper bound
              on what a tie-break can give: with scores that tie often it favours coarse verifiers)
  "expected"  the fraction of tied best candidates that are correct: a uniformly random tie-break, in expectation
  "first"     the lowest-index tied candidate (numpy argmax)

pass@k here is "any of the first k candidates correct" (the BoN script's Pass@k); the unbiased estimator over n
samples is shared.eval.passk.pass_at_k.

Step verification (`pred`, `label` int [N, T] in {+1, -1}, `mask` bool [N, T]): macro-F1 is the mean of the F1 of the
two classes over all unmasked steps (a class with no support and no prediction has F1 0, as sklearn's
zero_division=0); first-error accuracy is the fraction of solutions whose first predicted -1 is at the labelled
first -1 (both "none" counts as a match).
"""
from __future__ import annotations

from typing import Iterable

import numpy as np

TIES = ("any", "expected", "first")
REL_TOL = 1e-9


def _check(scores, other, name: str) -> tuple[np.ndarray, np.ndarray]:
    scores = np.asarray(scores, np.float64)
    other = np.asarray(other)
    if scores.ndim != 2 or scores.shape[1] == 0:
        raise ValueError(f"{name}: scores must be [prompts, candidates] with >= 1 candidate, got {scores.shape}")
    if other.shape != scores.shape:
        raise ValueError(f"{name}: scores {scores.shape} and candidate values {other.shape} differ in shape")
    if not np.all(np.isfinite(scores)):
        raise ValueError(f"{name}: scores must be finite")
    return scores, other


def tied_best(scores: np.ndarray) -> np.ndarray:
    """bool [P, N]: candidates whose score is within REL_TOL (relative, math.isclose) of their row's maximum."""
    best = scores.max(axis=1, keepdims=True)
    return np.abs(scores - best) <= REL_TOL * np.maximum(np.abs(scores), np.abs(best))


def _pick(scores: np.ndarray, values: np.ndarray, ties: str) -> np.ndarray:
    """float64 [P]: the picked candidate's value under the tie rule."""
    if ties not in TIES:
        raise ValueError(f"ties must be one of {', '.join(TIES)}, got {ties!r}")
    best = tied_best(scores)
    if ties == "first":
        return values[np.arange(len(scores)), best.argmax(axis=1)].astype(np.float64)
    if ties == "expected":
        return (np.where(best, values, 0.0).sum(axis=1) / best.sum(axis=1)).astype(np.float64)
    return np.where(best, values, -np.inf).max(axis=1).astype(np.float64)


def bon_at_k(scores, correct, ks: Iterable[int] = (1,), ties: str = "any") -> dict[str, float]:
    """{"bon@k": fraction of prompts whose best-scored candidate among the first k is correct} for each k."""
    scores, correct = _check(scores, correct, "bon_at_k")
    correct = correct.astype(bool)
    out = {}
    for k in ks:
        if not 1 <= k <= scores.shape[1]:
            raise ValueError(f"bon@{k} needs 1 <= k <= candidates ({scores.shape[1]})")
        out[f"bon@{k}"] = float(_pick(scores[:, :k], correct[:, :k].astype(np.float64), ties).mean())
    return out


def pass_at_first_k(correct, ks: Iterable[int] = (1,)) -> dict[str, float]:
    """{"pass@k": fraction of prompts with a correct candidate among the first k} for each k."""
    correct = np.asarray(correct, bool)
    if correct.ndim != 2 or correct.shape[1] == 0:
        raise ValueError(f"pass_at_first_k: correct must be [prompts, candidates], got {correct.shape}")
    out = {}
    for k in ks:
        if not 1 <= k <= correct.shape[1]:
            raise ValueError(f"pass@{k} needs 1 <= k <= candidates ({correct.shape[1]})")
        out[f"pass@{k}"] = float(correct[:, :k].any(axis=1).mean())
    return out


def best_of_n(scores, values: dict[str, np.ndarray], ties: str = "first") -> dict[str, float]:
    """scores [P, N]; values {name: [P, N]} (oracle quality, length, ...). For every name: "<name>" = mean value of
    the picked candidates (tie rule `ties`; "any" takes the best value among the tied), "<name>_random" = mean over
    all candidates (a random pick), "<name>_best" = mean of the per-prompt maximum (an oracle pick)."""
    out = {}
    for name, value in values.items():
        s, v = _check(scores, np.asarray(value, np.float64), f"best_of_n values[{name!r}]")
        out[name] = float(_pick(s, v, ties).mean())
        out[f"{name}_random"] = float(v.mean())
        out[f"{name}_best"] = float(v.max(axis=1).mean())
    return out


# ------------------------------------------------------------------------------------------ step verification


def _steps(pred, label, mask) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    pred, label, mask = np.asarray(pred), np.asarray(label), np.asarray(mask, bool)
    if not pred.shape == label.shape == mask.shape or pred.ndim != 2:
        raise ValueError(f"step metrics: pred {pred.shape}, label {label.shape} and mask {mask.shape} must be one "
                         f"[N, T] shape")
    for name, x in (("pred", pred), ("label", label)):
        if not np.all(np.isin(x[mask], (-1, 1))):
            raise ValueError(f"step metrics: {name} must be +1 or -1 on every unmasked step")
    return pred, label, mask


def class_f1(pred, label, mask, cls: int) -> float:
    """F1 of class `cls` (+1 or -1) over the unmasked steps (0 when it has neither support nor predictions)."""
    pred, label, mask = _steps(pred, label, mask)
    tp = np.sum(mask & (pred == cls) & (label == cls))
    fp = np.sum(mask & (pred == cls) & (label != cls))
    fn = np.sum(mask & (pred != cls) & (label == cls))
    return float(2 * tp / (2 * tp + fp + fn)) if tp + fp + fn else 0.0


def step_macro_f1(pred, label, mask) -> float:
    """Mean of the F1 of the correct (+1) and incorrect (-1) classes over all unmasked steps."""
    return 0.5 * (class_f1(pred, label, mask, 1) + class_f1(pred, label, mask, -1))


def first_errors(steps, mask) -> np.ndarray:
    """int [N]: index of each row's first unmasked -1, or -1 when there is none."""
    steps, mask = np.asarray(steps), np.asarray(mask, bool)
    bad = mask & (steps == -1)
    return np.where(bad.any(axis=1), bad.argmax(axis=1), -1)


def first_error_accuracy(pred, label, mask) -> float:
    """Fraction of solutions whose first predicted error is the labelled first error (no error on both: a match)."""
    pred, label, mask = _steps(pred, label, mask)
    return float(np.mean(first_errors(pred, mask) == first_errors(label, mask)))

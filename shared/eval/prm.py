"""Process reward scoring: per-step score arrays with masks, the five step aggregations into a solution score, and
the reliability gate of EVPV-PRM (../shared/papers/evpv_prm.md §1.2-1.3) with its High/Low contradiction reliability.

Shapes: N solutions, padded to T steps. `StepScores.scores` float64 [N, T] (0 where masked), `.mask` bool [N, T].
A step score s lies in [-1, 1]: +1 correct, -1 incorrect, values in between from the gate (s' = s * p).

Aggregations (each -> float64 [N] in [0, 1]; a solution with no steps scores 0). On s in {+1, -1} each equals the
released BoN script's function exactly; on real s they are its real-valued variants (spec §1.3 note):
  correctness_rate     sum_t max(s_t, 0) / T
  position_weighted    (sum_t t s_t + W) / (2W), W = sum_t t, t = 1..T (later steps weigh more)
  streak               run over steps: s_t > 0 adds s_t to the streak and the streak to the score; s_t <= 0 resets
                       the streak and adds s_t (-1 for an error); min-max normalised over [-T, T(T+1)/2]
  geometric_mean       (prod_t max(s_t, 0.1))^(1/T)   (an error counts 0.1)
  first_error          i / T for the first step with s_i < 0 (0-based), 1 if none. An attenuated step (0 <= s < 1)
                       is not an error, so this aggregation ignores the gate.
The position of a step is its rank among the row's unmasked steps, so masks need not be a prefix.

Gate (spec §1.2 item 5, exact): s'_t = s_t * p if step t depends on a premise and s_t > 0, else s_t; p is the
solution's reliability. `contradiction_reliability` audits a checklist of (key, value) claims against extracted facts:
only direct contradictions count (a key present in the facts with another value; omissions are ignored), each High
or Low by a severity function, p = max(0, 1 - 0.5 n_High - 0.2 n_Low). Any other reliability function with the
signature reliability(claims, facts) -> float plugs into `reliabilities`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

HIGH_PENALTY = 0.5
LOW_PENALTY = 0.2
GEOMETRIC_FLOOR = 0.1


@dataclass(frozen=True)
class StepScores:
    scores: np.ndarray   # float64 [N, T], 0 where masked
    mask: np.ndarray     # bool [N, T]

    def __post_init__(self):
        scores, mask = np.asarray(self.scores, np.float64), np.asarray(self.mask, bool)
        if scores.ndim != 2 or scores.shape != mask.shape:
            raise ValueError(f"StepScores: scores {scores.shape} and mask {mask.shape} must be the same [N, T]")
        if np.any(np.abs(scores[mask]) > 1.0) or not np.all(np.isfinite(scores[mask])):
            raise ValueError("StepScores: step scores must be finite and in [-1, 1]")
        object.__setattr__(self, "scores", np.where(mask, scores, 0.0))
        object.__setattr__(self, "mask", mask)

    @classmethod
    def from_lists(cls, rows: Sequence[Sequence[float]], width: int | None = None) -> "StepScores":
        """Ragged per-solution step scores -> padded arrays (width: at least the longest row)."""
        t = max([len(r) for r in rows] + [width or 0, 1])
        scores, mask = np.zeros((len(rows), t)), np.zeros((len(rows), t), bool)
        for i, row in enumerate(rows):
            scores[i, :len(row)] = row
            mask[i, :len(row)] = True
        return cls(scores, mask)

    @property
    def lengths(self) -> np.ndarray:
        return self.mask.sum(axis=1)

    def rows(self) -> list[np.ndarray]:
        return [s[m] for s, m in zip(self.scores, self.mask)]

    def with_scores(self, scores: np.ndarray) -> "StepScores":
        return StepScores(scores, self.mask)


def _positions(mask: np.ndarray) -> np.ndarray:
    """1-based rank of each unmasked step in its row (0 where masked)."""
    return np.where(mask, np.cumsum(mask, axis=1), 0)


def _per_row(values: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    return np.where(lengths > 0, values, 0.0)


def correctness_rate(x: StepScores) -> np.ndarray:
    t = x.lengths
    return _per_row(np.maximum(x.scores, 0.0).sum(axis=1) / np.maximum(t, 1), t)


def position_weighted(x: StepScores) -> np.ndarray:
    t = x.lengths
    w = t * (t + 1) / 2.0
    return _per_row(((_positions(x.mask) * x.scores).sum(axis=1) + w) / np.maximum(2.0 * w, 1.0), t)


def streak(x: StepScores) -> np.ndarray:
    n, width = x.scores.shape
    run, total = np.zeros(n), np.zeros(n)
    for j in range(width):
        s, m = x.scores[:, j], x.mask[:, j]
        good = m & (s > 0)
        run = np.where(good, run + s, np.where(m, 0.0, run))
        total = total + np.where(good, run, np.where(m, s, 0.0))
    t = x.lengths
    low, high = -t, t * (t + 1) / 2.0
    return _per_row((total - low) / np.maximum(high - low, 1.0), t)


def geometric_mean(x: StepScores) -> np.ndarray:
    t = x.lengths
    logs = np.where(x.mask, np.log(np.maximum(x.scores, GEOMETRIC_FLOOR)), 0.0)
    return _per_row(np.exp(logs.sum(axis=1) / np.maximum(t, 1)), t)


def first_error(x: StepScores) -> np.ndarray:
    t = x.lengths
    bad = x.mask & (x.scores < 0)
    rank = np.where(bad, _positions(x.mask) - 1, np.iinfo(np.int64).max).min(axis=1)
    return _per_row(np.where(bad.any(axis=1), rank / np.maximum(t, 1), 1.0), t)


AGGREGATIONS: dict[str, Callable[[StepScores], np.ndarray]] = {
    "correctness_rate": correctness_rate, "position_weighted": position_weighted, "streak": streak,
    "geometric_mean": geometric_mean, "first_error": first_error}


def aggregate(x: StepScores, name: str) -> np.ndarray:
    """float64 [N] solution scores by the aggregation `name` (one of AGGREGATIONS)."""
    if name not in AGGREGATIONS:
        raise ValueError(f"unknown step aggregation {name!r} (known: {', '.join(AGGREGATIONS)})")
    return AGGREGATIONS[name](x)


# ------------------------------------------------------------------------------------------ the reliability gate


def gate(x: StepScores, dependent: np.ndarray, reliability: np.ndarray) -> StepScores:
    """s' = s * p[n] where step (n, t) depends on a premise and s > 0; every other step unchanged."""
    dependent = np.asarray(dependent, bool)
    p = np.asarray(reliability, np.float64)
    if dependent.shape != x.mask.shape:
        raise ValueError(f"gate: dependent {dependent.shape} must match the step scores {x.mask.shape}")
    if p.shape != (x.mask.shape[0],) or np.any((p < 0) | (p > 1)) or not np.all(np.isfinite(p)):
        raise ValueError(f"gate: reliability must be [N={x.mask.shape[0]}] values in [0, 1], got shape {p.shape}")
    attenuate = dependent & x.mask & (x.scores > 0)
    return x.with_scores(np.where(attenuate, x.scores * p[:, None], x.scores))


def contradictions(claims: Iterable[tuple[Any, Any]], facts: Mapping[Any, Any],
                   severity: Callable[[Any], str], equal: Callable[[Any, Any], bool] = lambda a, b: a == b
                   ) -> tuple[int, int]:
    """(n_High, n_Low): de-duplicated claims whose key the facts hold with a different value. severity(key) is
    "high" or "low"; a key the facts lack is an omission and does not count."""
    n_high = n_low = 0
    for key, value in dict.fromkeys(claims):
        if key not in facts or equal(facts[key], value):
            continue
        level = severity(key)
        if level == "high":
            n_high += 1
        elif level == "low":
            n_low += 1
        else:
            raise ValueError(f"contradiction severity must be 'high' or 'low', got {level!r} for key {key!r}")
    return n_high, n_low


def reliability_from_counts(n_high: int, n_low: int) -> float:
    """p = max(0, 1 - 0.5 n_High - 0.2 n_Low)."""
    return max(0.0, 1.0 - HIGH_PENALTY * n_high - LOW_PENALTY * n_low)


def contradiction_reliability(claims, facts, severity=lambda key: "high", equal=lambda a, b: a == b) -> float:
    """The EVPV audit: reliability_from_counts(contradictions(claims, facts, severity, equal))."""
    return reliability_from_counts(*contradictions(claims, facts, severity, equal))


def reliabilities(checklists: Sequence[Iterable[tuple[Any, Any]]], facts: Mapping[Any, Any],
                  reliability: Callable[[Iterable, Mapping], float] = contradiction_reliability) -> np.ndarray:
    """float64 [N]: reliability(checklist_n, facts) for each solution's checklist."""
    return np.asarray([reliability(list(c), facts) for c in checklists], np.float64)

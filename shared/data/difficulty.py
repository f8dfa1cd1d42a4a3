"""Query difficulty from repeated sampling: pass rates, the capacity-guided split and online RL filtering
(../shared/papers/gap.md §1.5; the same pass rate drives the "0 < rate < 1" filter of RL loops).

    correct = [[...n bools...] for each query]         # [Q, n]: was sample j of query q right
    pass_rates(correct)                                 # [Q] fraction correct
    assign_by_capacity(correct, tau=0.0)                # True: rate <= tau (tau=0: fails all n) -> latent format
    keep_for_rl(correct, 0.0, 1.0)                      # True: 0 < rate < 1 (inclusive=True: closed bounds)
    split_summary(correct, tau)                         # counts and mean pass rate of each side

A rate is count / n, so it equals the float of the same fraction written as a threshold (3/8 <= 0.375).
"""
from __future__ import annotations

import numpy as np


def _check_correct(correct) -> np.ndarray:
    correct = np.asarray(correct)
    if correct.ndim != 2 or correct.shape[1] == 0:
        raise ValueError(f"correct must be [Q, n] with n >= 1 samples per query, got shape {correct.shape}")
    if correct.dtype != bool:
        # 0/1 integers (e.g. rewards) are accepted; anything else is a mistake we should not round away
        if correct.size and not np.isin(correct, (0, 1)).all():
            raise ValueError(f"correct must be bool or 0/1, got dtype {correct.dtype} with other values")
        correct = correct.astype(bool)
    return correct


def _check_fraction(name: str, value: float) -> float:
    value = float(value)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {value}")
    return value


def pass_rates(correct) -> np.ndarray:
    """Fraction of correct samples per query: correct [Q, n] bool -> [Q] float64."""
    correct = _check_correct(correct)
    return correct.sum(axis=1) / correct.shape[1]


def assign_by_capacity(correct, tau: float) -> np.ndarray:
    """True where the pass rate is <= tau: the queries beyond the base model's capacity (tau = 0: fails all n)."""
    tau = _check_fraction("tau", tau)
    return pass_rates(correct) <= tau


def keep_for_rl(correct, low: float, high: float, inclusive: bool = False) -> np.ndarray:
    """True where low < rate < high (inclusive: low <= rate <= high), e.g. (0, 1) drops the groups whose samples
    all agree and so carry no advantage signal; (0, 0.6) keeps the hard but solvable ones."""
    low, high = _check_fraction("low", low), _check_fraction("high", high)
    if low > high:
        raise ValueError(f"low must be <= high, got low={low}, high={high}")
    rates = pass_rates(correct)
    if inclusive:
        return (rates >= low) & (rates <= high)
    return (rates > low) & (rates < high)


def split_summary(correct, tau: float) -> dict:
    """Counts and mean pass rates of the two sides of assign_by_capacity (NaN for an empty side).

    Keys: n_queries, n_samples, tau, n_assigned (rate <= tau), n_rest, frac_assigned, mean_rate,
    mean_rate_assigned, mean_rate_rest. Plain Python numbers, ready for a JSON report.
    """
    rates = pass_rates(correct)
    assigned = assign_by_capacity(correct, tau)

    def mean(x: np.ndarray) -> float:
        return float(x.mean()) if x.size else float("nan")

    n_queries = int(rates.shape[0])
    return {
        "n_queries": n_queries,
        "n_samples": int(np.asarray(correct).shape[1]),
        "tau": float(tau),
        "n_assigned": int(assigned.sum()),
        "n_rest": int((~assigned).sum()),
        "frac_assigned": float(assigned.sum()) / n_queries if n_queries else float("nan"),
        "mean_rate": mean(rates),
        "mean_rate_assigned": mean(rates[assigned]),
        "mean_rate_rest": mean(rates[~assigned]),
    }

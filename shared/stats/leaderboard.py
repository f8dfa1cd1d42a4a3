"""Statistics for a leaderboard of systems scored per item (ATP-Bench, ../shared/papers/atp_bench.md §4.5): slice
means with bootstrap intervals, agreement of two system rankings, per-item rank correlation, tool-usage profiles and
detection F1.

  slice_means(values, slices)         per slice label (and "all"): (mean, lo, hi, n), percentile bootstrap over items
  ranking_agreement(a, b)             Kendall tau-b / Spearman between the systems' means under two metrics, with a
                                      bootstrap interval for tau that resamples items (the same items for every system)
  kendall_rows(x, y)                  tau-b of many rankings at once (the bootstrap's replicates), equal to scipy's
  item_spearman(x, y)                 Spearman over items (nan when either side is constant)
  usage_profile(calls_per_answer)     per system: mean, median, share_zero, share_multi (>= 2 calls), max, n
  detection_f1(pred, truth)           precision, recall, F1 of boolean flags; 0/0 is 0.0 (no predicted positives:
                                      precision 0; no true positives: recall 0; both 0: F1 0)
Inputs are checked: empty, length mismatches, non-finite values and fewer than 2 systems are ValueErrors.
"""
from __future__ import annotations

import math
import warnings
from typing import Mapping, Sequence

import numpy as np


def _finite(name: str, values) -> np.ndarray:
    x = np.asarray(values, np.float64).reshape(-1)
    if x.size == 0:
        raise ValueError(f"{name}: empty")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{name}: non-finite values")
    return x


def _check_level(level: float, n_boot: int) -> None:
    if not 0 < level < 1:
        raise ValueError(f"level={level}: expected a value in (0, 1)")
    if int(n_boot) < 1:
        raise ValueError(f"n_boot={n_boot}: must be >= 1")


def _bootstrap_mean(x: np.ndarray, n_boot: int, seed: int, level: float) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    draws = x[rng.integers(0, x.size, (int(n_boot), x.size))].mean(1)
    lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def slice_means(values: Sequence[float], slices: Sequence, *, n_boot: int = 1000, seed: int = 0,
                level: float = 0.95) -> dict[str, tuple[float, float, float, int]]:
    """{"all": ..., label: ...} -> (mean, lo, hi, n). slices: one label per item (str() is the key; "all" is
    reserved). Each slice is bootstrapped with its own generator seeded by `seed`, so its interval does not depend
    on which other slices exist."""
    x = _finite("slice_means values", values)
    labels = [str(s) for s in slices]
    if len(labels) != x.size:
        raise ValueError(f"slice_means: {x.size} values but {len(labels)} slice labels")
    if "all" in labels:
        raise ValueError('slice_means: "all" is reserved for the whole set; rename that slice')
    _check_level(level, n_boot)
    groups = {"all": x}
    for label in sorted(set(labels)):
        groups[label] = x[[i for i, s in enumerate(labels) if s == label]]
    out = {}
    for label, g in groups.items():
        lo, hi = _bootstrap_mean(g, n_boot, seed, level)
        out[label] = (float(g.mean()), lo, hi, int(g.size))
    return out


def _system_matrix(name: str, scores: Mapping[str, Sequence[float]], systems: Sequence[str]) -> np.ndarray:
    rows = [_finite(f"{name}[{s!r}]", scores[s]) for s in systems]
    sizes = {r.size for r in rows}
    if len(sizes) != 1:
        raise ValueError(f"{name}: systems have different numbers of items {dict(zip(systems, (r.size for r in rows)))}"
                         "; per-item scores must be aligned by item")
    return np.stack(rows)


def _kendall(x: np.ndarray, y: np.ndarray) -> float:
    from scipy import stats

    with warnings.catch_warnings():  # constant input: scipy warns and returns nan, which we report as nan
        warnings.simplefilter("ignore")
        return float(stats.kendalltau(x, y).statistic)


def kendall_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Kendall tau-b of each row pair of x, y [R, S] at once (the bootstrap's thousand rankings; scipy's kendalltau,
    one call per row, is what the point estimate uses and what this equals): (concordant - discordant) /
    sqrt((pairs - ties in x) (pairs - ties in y)); nan where a row is constant."""
    i, j = np.triu_indices(x.shape[1], 1)
    dx, dy = np.sign(x[:, i] - x[:, j]), np.sign(y[:, i] - y[:, j])
    pairs = i.size
    denom = np.sqrt((pairs - np.sum(dx == 0, 1)) * (pairs - np.sum(dy == 0, 1)).astype(np.float64))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, np.sum(dx * dy, 1) / denom, np.nan)


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    from scipy import stats

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(stats.spearmanr(x, y).statistic)


def ranking_agreement(a: Mapping[str, Sequence[float]], b: Mapping[str, Sequence[float]], *, n_boot: int = 1000,
                      seed: int = 0, level: float = 0.95) -> dict:
    """How well the system ranking under metric a matches the one under metric b (the same items, possibly
    different metrics). tau: Kendall tau-b between the systems' means; spearman likewise; [tau_lo, tau_hi]: percentile
    bootstrap where each replicate resamples item indices once and uses them for every system and both metrics
    (replicates where tau is undefined, all means tied, are dropped; nan if all are)."""
    systems = sorted(set(a) & set(b))
    if len(systems) < 2:
        raise ValueError(f"ranking_agreement: {len(systems)} system(s) common to both metrics; a ranking needs >= 2")
    _check_level(level, n_boot)
    A, B = _system_matrix("a", a, systems), _system_matrix("b", b, systems)
    if A.shape[1] != B.shape[1]:
        raise ValueError(f"ranking_agreement: a has {A.shape[1]} items per system, b {B.shape[1]}; they must score "
                         "the same items")
    n = A.shape[1]
    rng = np.random.default_rng(seed)
    taus = np.empty(int(n_boot))
    for start in range(0, int(n_boot), 256):  # chunks bound the [replicates, items] count matrix
        k = min(256, int(n_boot) - start)
        idx = rng.integers(0, n, (k, n))
        # how often each item was drawn per replicate: means over the resample are counts @ scores / n
        counts = np.bincount((idx + n * np.arange(k)[:, None]).ravel(), minlength=k * n).reshape(k, n)
        ra, rb = counts @ A.T / n, counts @ B.T / n
        taus[start:start + k] = kendall_rows(ra, rb)
    taus = taus[np.isfinite(taus)]
    lo, hi = (np.quantile(taus, [(1 - level) / 2, (1 + level) / 2]) if taus.size else (math.nan, math.nan))
    ma, mb = A.mean(1), B.mean(1)
    return {"tau": _kendall(ma, mb), "tau_lo": float(lo), "tau_hi": float(hi), "spearman": _spearman(ma, mb),
            "n_systems": len(systems), "n_items": int(n), "systems": systems}


def item_spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rho between two per-item scores (nan when either is constant)."""
    x, y = _finite("item_spearman x", x), _finite("item_spearman y", y)
    if x.size != y.size:
        raise ValueError(f"item_spearman: {x.size} vs {y.size} items")
    if x.size < 2:
        raise ValueError("item_spearman: needs at least 2 items")
    return _spearman(x, y)


def usage_profile(calls_per_answer: Mapping[str, Sequence[int]]) -> dict[str, dict]:
    """Per system, from its number of tool calls per answer: mean, median, share_zero (no call), share_multi (>= 2
    calls), max, n."""
    if not calls_per_answer:
        raise ValueError("usage_profile: no systems")
    out = {}
    for system, counts in calls_per_answer.items():
        c = _finite(f"usage_profile[{system!r}]", counts)
        if np.any(c < 0) or np.any(c != np.round(c)):
            raise ValueError(f"usage_profile[{system!r}]: call counts must be non-negative integers")
        out[system] = {"mean": float(c.mean()), "median": float(np.median(c)), "share_zero": float(np.mean(c == 0)),
                       "share_multi": float(np.mean(c >= 2)), "max": int(c.max()), "n": int(c.size)}
    return out


def detection_f1(pred: Sequence[bool], truth: Sequence[bool]) -> tuple[float, float, float]:
    """(precision, recall, F1) of flags `pred` against `truth` (e.g. "this call is unnecessary", "a visual is missed
    here"); each 0/0 is 0.0."""
    p, t = np.asarray(pred).reshape(-1), np.asarray(truth).reshape(-1)
    if p.size != t.size:
        raise ValueError(f"detection_f1: {p.size} predictions vs {t.size} truths")
    if p.size == 0:
        raise ValueError("detection_f1: empty")
    for name, v in (("pred", p), ("truth", t)):
        if v.dtype != bool and not np.isin(v, (0, 1)).all():
            raise ValueError(f"detection_f1: {name} must be booleans (or 0/1)")
    p, t = p.astype(bool), t.astype(bool)
    tp, fp, fn = int(np.sum(p & t)), int(np.sum(p & ~t)), int(np.sum(~p & t))
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1

"""The statistics every reproduction ledger uses: the difference of two arms with its confidence interval, and
the verdict rule.

    d = difference(arm_a, arm_b, paired=True)        # a - b per seed (arms share each seed's warm start)
    d = difference(arm_a, arm_b, paired=False)       # Welch's t interval (independent arms)
    d = difference(arm_a, arm_b, paired=True, method="bootstrap")   # percentile bootstrap (small n, skew)
    d = contrast([(1, a), (-0.5, b), (-0.5, c)])     # Welch interval of a linear contrast of independent arms
    verdict(d, "greater", inconclusive_if="arm B sits at chance")   # -> "reproduced" / "not reproduced" / ...
    verdict(d, "greater", margin=0.05)               # a claim "a - b >= +0.05": the interval must clear +0.05

Sample variances use ddof=1 throughout. "reproduced" only when the interval lies beyond the claim's margin on the
claimed side (margin 0: the interval excludes 0 in the claimed direction; a margin of +0.05 for "greater": the
whole interval is above +0.05, which excludes 0 too; a non-inferiority claim "a >= b - 0.01" is "greater" with
margin -0.01); "inconclusive" when the caller says the setup cannot show the effect (an arm at chance, at the
floor or at the ceiling: change the setup rather than report a negative); otherwise "not reproduced". A ledger's
fourth status, "not run yet", belongs to claims with no committed table (shared.stats.claims).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Sequence

import numpy as np

DIRECTIONS = ("greater", "less")
VERDICTS = ("reproduced", "not reproduced", "inconclusive")
STATUSES = VERDICTS + ("not run yet",)  # every status a generated ledger may show, and no other


@dataclasses.dataclass(frozen=True)
class Difference:
    mean: float          # mean(a - b) paired, mean(a) - mean(b) otherwise
    low: float
    high: float
    n: int               # pairs (paired) or min(len(a), len(b))
    method: str          # "paired t", "welch t", "paired bootstrap", "bootstrap"
    confidence: float
    df: float | None = None  # t methods: degrees of freedom

    def excludes_zero(self, direction: str) -> bool:
        return self.beyond(direction, 0.0)

    def beyond(self, direction: str, margin: float = 0.0) -> bool:
        """The whole interval lies on the claimed side of `margin`: low > margin ("greater"), high < margin
        ("less")."""
        if direction not in DIRECTIONS:
            raise ValueError(f"direction {direction!r}: expected one of {DIRECTIONS}")
        return self.low > margin if direction == "greater" else self.high < margin

    def __str__(self) -> str:
        return (f"{self.mean:+.4g} [{self.low:+.4g}, {self.high:+.4g}] ({self.confidence:.0%} CI, {self.method}, "
                f"n={self.n})")


def _values(name: str, x: Sequence[float]) -> np.ndarray:
    x = np.asarray(x, np.float64).reshape(-1)
    if x.size < 2:
        raise ValueError(f"{name}: {x.size} value(s); a confidence interval needs at least 2 (seeds)")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{name}: non-finite values {x.tolist()}")
    return x


def _t_quantile(confidence: float, df: float) -> float:
    from scipy import stats  # a dependency of jax

    return float(stats.t.ppf(0.5 + confidence / 2, df))


def difference(a: Sequence[float], b: Sequence[float], *, paired: bool, confidence: float = 0.95,
               method: str = "t", n_boot: int = 10_000, seed: int = 0) -> Difference:
    """The confidence interval of a - b. paired: a[i] and b[i] share seed i (and its warm start)."""
    a, b = _values("a", a), _values("b", b)
    if not 0 < confidence < 1:
        raise ValueError(f"confidence={confidence}: expected a value in (0, 1)")
    if paired and a.size != b.size:
        raise ValueError(f"paired arms need one value per seed each: {a.size} vs {b.size}")
    if method == "t":
        if paired:
            d = a - b
            se = d.std(ddof=1) / math.sqrt(d.size)
            df = float(d.size - 1)
            mean, label = float(d.mean()), "paired t"
        else:
            va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
            se = math.sqrt(va + vb)
            # Welch-Satterthwaite; equal samples (se = 0) leave df at the smaller n - 1
            df = (va + vb) ** 2 / (va ** 2 / (a.size - 1) + vb ** 2 / (b.size - 1)) if se > 0 else \
                float(min(a.size, b.size) - 1)
            mean, label = float(a.mean() - b.mean()), "welch t"
        half = _t_quantile(confidence, df) * se
        return Difference(mean, mean - half, mean + half, int(min(a.size, b.size)), label, confidence, df)
    if method == "bootstrap":
        rng = np.random.default_rng(seed)
        if paired:
            d = a - b
            draws = d[rng.integers(0, d.size, (n_boot, d.size))].mean(1)
            mean, label = float(d.mean()), "paired bootstrap"
        else:
            draws = (a[rng.integers(0, a.size, (n_boot, a.size))].mean(1)
                     - b[rng.integers(0, b.size, (n_boot, b.size))].mean(1))
            mean, label = float(a.mean() - b.mean()), "bootstrap"
        low, high = np.quantile(draws, [(1 - confidence) / 2, (1 + confidence) / 2])
        return Difference(mean, float(low), float(high), int(min(a.size, b.size)), label, confidence)
    raise ValueError(f"method={method!r}: expected 't' or 'bootstrap'")


def contrast(terms: Sequence[tuple[float, Sequence[float]]], *, confidence: float = 0.95) -> Difference:
    """Welch's t interval of sum_k c_k * mean(x_k) over independent samples x_k (ddof=1): variance
    sum_k c_k^2 s_k^2 / n_k, Welch-Satterthwaite degrees of freedom. With terms [(1, a), (-1, b)] it is
    difference(a, b, paired=False)."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence={confidence}: expected a value in (0, 1)")
    if len(terms) < 1:
        raise ValueError("contrast: no terms")
    xs = [(float(c), _values(f"term {i}", x)) for i, (c, x) in enumerate(terms)]
    mean = float(sum(c * x.mean() for c, x in xs))
    v = [c * c * x.var(ddof=1) / x.size for c, x in xs]
    se = math.sqrt(sum(v))
    df = sum(v) ** 2 / sum(vk ** 2 / (x.size - 1) for vk, (_, x) in zip(v, xs)) if se > 0 else \
        float(min(x.size for _, x in xs) - 1)
    half = _t_quantile(confidence, df) * se
    return Difference(mean, mean - half, mean + half, int(min(x.size for _, x in xs)), "welch t", confidence,
                      float(df))


def verdict(diff: Difference, direction: str, *, margin: float = 0.0, inconclusive_if: str | bool = False) -> str:
    """The ledger status of a claim "a - b is `direction` than `margin`" (margin 0: than 0). inconclusive_if: a
    reason (or True) when the setup cannot show the effect (at chance, floor or ceiling); it wins over the
    interval."""
    if inconclusive_if:
        return "inconclusive"
    return "reproduced" if diff.beyond(direction, margin) else "not reproduced"


def at_level(values: Sequence[float], level: float, tolerance: float) -> bool:
    """True when the mean of `values` is within `tolerance` of `level` (an arm at chance or at the floor)."""
    return abs(float(np.mean(values)) - level) <= tolerance

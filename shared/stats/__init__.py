"""The statistics every reproduction ledger uses: the difference of two arms with its confidence interval, and
the verdict rule.

    d = difference(arm_a, arm_b, paired=True)        # a - b per seed (arms share each seed's warm start)
    d = difference(arm_a, arm_b, paired=False)       # Welch's t interval (independent arms)
    d = difference(arm_a, arm_b, paired=True, method="bootstrap")   # percentile bootstrap (small n, skew)
    verdict(d, "greater", inconclusive_if="arm B sits at chance")   # -> "reproduced" / "not reproduced" / ...

Sample variances use ddof=1 throughout. "reproduced" only when the interval excludes 0 in the claimed direction;
"inconclusive" when the caller says the setup cannot show the effect (an arm at chance or at the floor: change
the setup rather than report a negative); otherwise "not reproduced".
"""
from __future__ import annotations

import dataclasses
import math
from typing import Sequence

import numpy as np

DIRECTIONS = ("greater", "less")
VERDICTS = ("reproduced", "not reproduced", "inconclusive")


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
        if direction not in DIRECTIONS:
            raise ValueError(f"direction {direction!r}: expected one of {DIRECTIONS}")
        return self.low > 0 if direction == "greater" else self.high < 0

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


def verdict(diff: Difference, direction: str, *, inconclusive_if: str | bool = False) -> str:
    """The ledger status of a claim "a - b is `direction` than 0". inconclusive_if: a reason (or True) when the
    setup cannot show the effect (at chance or at the floor); it wins over the interval."""
    if inconclusive_if:
        return "inconclusive"
    return "reproduced" if diff.excludes_zero(direction) else "not reproduced"


def at_level(values: Sequence[float], level: float, tolerance: float) -> bool:
    """True when the mean of `values` is within `tolerance` of `level` (an arm at chance or at the floor)."""
    return abs(float(np.mean(values)) - level) <= tolerance

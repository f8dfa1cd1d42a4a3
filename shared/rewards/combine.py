"""Reward combination: how the terms of rl.rewards become the one reward an RL step learns from.

The RewardManager keeps every term as a column of its own (raw scores, `RewardResult.per_function`) and hands
the columns to a combiner, REWARD_COMBINERS[rl.reward_combine] built with rl.reward_combine_options:

  sum         R = sum_k w_k r_k with the weights of rl.rewards (the manager's behaviour before combiners)
  zscore      per batch and term r~_k = clip((r_k - mean_batch) / (std_batch + eps), -c, c), then the weighted sum
  ref_frozen  Reference-Frozen Normalisation (spec ../shared/papers/medical_multiobjective.md A.3 [R]): the statistics
              of each term under the initial (reference) policy, measured once by a calibration rollout before the
              first RL step (`calibrate`, run by the learner) and never updated: r~_k = clip((r_k - mu_k) /
              (sigma_k + eps), -c, c) (ref_norm="zscore"), or 2 F_ref,k(r_k) - 1 with F_ref,k the empirical CDF of
              the calibration scores, ties at mid-rank (ref_norm="quantile"); group_by=<column>: one set of
              statistics per value of that example column, values not seen at calibration use the overall set
  trifactor   Tri-Factor Adaptive Dynamic Weighting (spec A.4 [R]) on normalised terms (normalize = ref_frozen |
              zscore | none): w_k ∝ |w0_k| W_k P_k D_k, normalised to sum 1, floored at w_min, EMA-smoothed, with
                weakness    W = softmax_k(-s_k / temperature), s_k the EMA (momentum `ema`, started at the first
                            batch's mean) of the batch mean of r~_k
                risk        P_k = kappa_k (rl.reward_combine_options.risk; 1 otherwise), x kappa_gate while the
                            term's violation rate (raw score < violation_below) exceeds the gate's rate
                redundancy  D_k = 1 / (1 + sum_{j != k} max(0, corr_batch(r~_k, r~_j))) (a constant term has
                            correlation 0)
              `factors` names the factors in use (the ablations drop one). The smoothing starts from |w0|
              normalised (uniform for equal weights); w0 = rl.rewards' weights: a term of weight 0 is scored and
              logged but takes no part, a negative weight turns the term round (r~ -> -r~) before weighing.

Scalarisation (every combiner, option `scalarize`): sum_then_normalize gives R = sum_k w_k r~_k to the advantage
estimator; normalize_then_sum gives R = sum_k w_k groupnorm(r~_k), groupnorm the GRPO form (x - mean_g) /
(std_g (ddof 1) + eps) over each prompt's group of rl.group_size rows (the manager's group_size; None = the whole
batch): with rl.advantage="drgrpo" (centring only: a no-op here) the advantage is exactly sum_k w_k A_k.

Metrics (terms K >= 2): reward/<label>/weight (the weight used), reward/<label>/share (the term's share of the
within-group variance of R: sum over groups of cov(w_k r~_k, R) / var(R); the shares sum to 1, a proxy of its
share of the policy gradient), reward/<label>/norm_mean (normalised term, not for sum), ref_frozen's frozen
reward/<label>/ref_mean, ref_std (at calibration), trifactor's reward/<label>/{ema, weakness, risk, redundancy,
target}.

State (`get_state` / `set_state`, JSON): the frozen statistics and trifactor's EMAs; the RL learner keeps it in
each checkpoint's data_state, so a resumed run neither recalibrates nor restarts its weights. The dynamic weights
advance once per scored batch (DAPO dynamic sampling's refills count as batches).
"""
from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from shared.config import register_validator
from shared.config.base import reward_combine_options
from shared.registry import REWARD_COMBINERS

_DEFAULTS = reward_combine_options().to_dict()
SCALARIZE = ("sum_then_normalize", "normalize_then_sum")
REF_NORMS = ("zscore", "quantile")
FACTORS = ("weakness", "risk", "redundancy")
MAX_QUANTILE_POINTS = 8192   # calibration scores kept per term for ref_norm="quantile" (evenly spaced order statistics)
OVERALL = "*"                # the statistics of all calibration rows (group_by's fallback)


def combine_options(options: Any = None) -> dict:
    """rl.reward_combine_options (a ConfigDict, dict or None) over the defaults."""
    if options is None:
        return dict(_DEFAULTS)
    if hasattr(options, "to_dict"):
        options = options.to_dict()
    return {**_DEFAULTS, **dict(options)}


def _choice(options: dict, key: str, allowed: tuple) -> str:
    value = str(options[key])
    if value not in allowed:
        raise ValueError(f"rl.reward_combine_options.{key}={value!r}: expected one of {', '.join(allowed)}")
    return value


def _pairs(value, key: str, width: int) -> dict[str, tuple]:
    """[(label, x, ...), ...] -> {label: (x, ...)} (risk, risk_gate)."""
    out = {}
    for item in value or []:
        item = list(item)
        if len(item) != width + 1:
            raise ValueError(f"rl.reward_combine_options.{key}: entry {item!r} is not (label, {width} number(s))")
        out[str(item[0])] = tuple(float(x) for x in item[1:])
    return out


# ---------------------------------------------------------------- normalisers


class Identity:
    """The raw scores."""

    needs_calibration = False

    def __call__(self, raw: dict, columns: Mapping) -> tuple[dict, dict]:
        return dict(raw), {}

    def calibrate(self, raw: dict, columns: Mapping) -> dict:
        return {}

    def get_state(self) -> dict:
        return {}

    def set_state(self, state: dict) -> None:
        pass


class BatchZScore(Identity):
    """Per-batch z-score of each term: clip((r - mean) / (std + eps), -c, c), population std of this batch."""

    def __init__(self, options: dict):
        self.clip, self.eps = float(options["clip"]), float(options["eps"])

    def __call__(self, raw, columns):
        out = {}
        for label, r in raw.items():
            out[label] = np.clip((r - r.mean()) / (r.std() + self.eps), -self.clip, self.clip) if r.size else r
        return out, {}


class ReferenceFrozen(Identity):
    """Statistics of each term under the reference policy, set once by `calibrate` and frozen (see the module)."""

    def __init__(self, options: dict):
        self.clip, self.eps = float(options["clip"]), float(options["eps"])
        self.norm = _choice(options, "ref_norm", REF_NORMS)
        self.group_by = str(options["group_by"] or "")
        self.stats: dict | None = None   # {category: {label: {"mean", "std", "values"}}}

    @property
    def needs_calibration(self) -> bool:
        return self.stats is None

    def calibrate(self, raw: dict, columns: Mapping) -> dict:
        if self.stats is not None:
            raise RuntimeError("ref_frozen: the reference statistics are frozen; calibrate runs once, before RL")
        n = len(next(iter(raw.values())))
        categories = self._categories(columns, n)
        stats = {OVERALL: self._stats(raw, np.ones(n, bool))}
        if categories is not None:
            for value in sorted(set(categories)):
                stats[value] = self._stats(raw, np.asarray([c == value for c in categories]))
        self.stats = stats
        out = {}
        for label, s in stats[OVERALL].items():
            out[f"reward/{label}/ref_mean"] = s["mean"]
            out[f"reward/{label}/ref_std"] = s["std"]
        return out

    def _stats(self, raw: dict, rows: np.ndarray) -> dict:
        out = {}
        for label, r in raw.items():
            r = np.asarray(r, np.float64)[rows]
            entry = {"mean": float(r.mean()), "std": float(r.std())}
            if self.norm == "quantile":
                values = np.sort(r)
                if values.size > MAX_QUANTILE_POINTS:
                    values = values[np.linspace(0, values.size - 1, MAX_QUANTILE_POINTS).round().astype(int)]
                entry["values"] = [float(v) for v in values]
            out[label] = entry
        return out

    def _categories(self, columns: Mapping, n: int) -> list[str] | None:
        if not self.group_by:
            return None
        if self.group_by not in columns:
            raise ValueError(f"rl.reward_combine_options.group_by={self.group_by!r}: the batch has no such column "
                             f"(columns: {sorted(columns)})")
        values = columns[self.group_by]
        if len(values) != n:
            raise ValueError(f"group_by column {self.group_by!r} has {len(values)} entries for {n} completions")
        return [str(v) for v in values]

    def __call__(self, raw, columns):
        if self.stats is None:
            raise RuntimeError("ref_frozen: no reference statistics yet: run the calibration (RewardManager."
                               "calibrate on the reference policy's rollouts) before the first RL step")
        n = len(next(iter(raw.values())))
        categories = self._categories(columns, n)
        keys = [OVERALL] * n if categories is None else [c if c in self.stats else OVERALL for c in categories]
        out = {}
        for label, r in raw.items():
            r = np.asarray(r, np.float64)
            normed = np.empty(n, np.float64)
            for key in set(keys):
                rows = np.asarray([k == key for k in keys])
                s = self.stats[key].get(label)
                if s is None:
                    raise KeyError(f"ref_frozen: term {label!r} has no reference statistics (calibrated terms: "
                                   f"{sorted(self.stats[key])})")
                normed[rows] = self._normalise(r[rows], s)
            out[label] = normed
        return out, {}

    def _normalise(self, r: np.ndarray, s: dict) -> np.ndarray:
        if self.norm == "zscore":
            return np.clip((r - s["mean"]) / (s["std"] + self.eps), -self.clip, self.clip)
        values = np.asarray(s["values"], np.float64)
        below = np.searchsorted(values, r, side="left")
        upto = np.searchsorted(values, r, side="right")
        return 2.0 * (below + upto) / (2.0 * values.size) - 1.0   # 2 F(r) - 1, F at mid-rank

    def get_state(self) -> dict:
        return {} if self.stats is None else {"stats": self.stats}

    def set_state(self, state: dict) -> None:
        if state.get("stats") is not None:
            self.stats = state["stats"]


NORMALIZERS = {"none": lambda options: Identity(), "zscore": BatchZScore, "ref_frozen": ReferenceFrozen}


# ---------------------------------------------------------------- weightings


class StaticWeights:
    """The weights of rl.rewards."""

    def __call__(self, oriented: dict, raw: dict, base: dict) -> tuple[dict, dict]:
        return {label: abs(w) for label, w in base.items()}, {}

    def get_state(self) -> dict:
        return {}

    def set_state(self, state: dict) -> None:
        pass


def floor_weights(w: np.ndarray, w_min: float) -> np.ndarray:
    """w normalised to sum 1 with every entry >= w_min: entries below the floor are set to it and the others
    rescaled to share the rest, repeated until none falls below."""
    w = np.asarray(w, np.float64) / np.sum(w)
    if w.size * w_min > 1 + 1e-12:
        raise ValueError(f"rl.reward_combine_options.w_min={w_min}: {w.size} terms cannot each weigh that much")
    fixed = np.zeros(w.size, bool)
    while True:
        low = (w < w_min) & ~fixed
        if not low.any():
            return w
        fixed |= low
        w[fixed] = w_min
        rest = ~fixed
        w[rest] = w[rest] / w[rest].sum() * (1.0 - fixed.sum() * w_min)


def correlation(columns: list[np.ndarray]) -> np.ndarray:
    """Pearson correlation matrix of the columns over the batch; 0 wherever a column is constant."""
    x = np.stack([np.asarray(c, np.float64) for c in columns])
    x = x - x.mean(axis=1, keepdims=True)
    norm = np.sqrt((x * x).sum(axis=1))
    ok = norm > 0
    corr = np.zeros((len(columns), len(columns)))
    corr[np.ix_(ok, ok)] = (x[ok] @ x[ok].T) / np.outer(norm[ok], norm[ok])
    return corr


class TriFactor(StaticWeights):
    """Tri-Factor Adaptive Dynamic Weighting (see the module docstring)."""

    def __init__(self, options: dict):
        self.temperature = float(options["temperature"])
        self.ema, self.weight_ema, self.w_min = float(options["ema"]), float(options["weight_ema"]), \
            float(options["w_min"])
        self.risk = {k: v[0] for k, v in _pairs(options["risk"], "risk", 1).items()}
        self.gates = _pairs(options["risk_gate"], "risk_gate", 2)
        self.violation_below = float(options["violation_below"])
        factors = [f.strip() for f in str(options["factors"]).split(",") if f.strip()]
        unknown = sorted(set(factors) - set(FACTORS))
        if unknown:
            raise ValueError(f"rl.reward_combine_options.factors: unknown {unknown}; known: {', '.join(FACTORS)}")
        self.factors = set(factors)
        if self.temperature <= 0:
            raise ValueError(f"rl.reward_combine_options.temperature={self.temperature} must be > 0")
        self.s: dict | None = None   # EMA of each term's batch mean
        self.w: dict | None = None   # the smoothed weights

    def __call__(self, oriented: dict, raw: dict, base: dict) -> tuple[dict, dict]:
        labels = list(oriented)
        k = len(labels)
        means = {label: float(np.mean(oriented[label])) for label in labels}
        if self.s is None or set(self.s) != set(labels):
            self.s = means
        else:
            self.s = {label: self.ema * self.s[label] + (1 - self.ema) * means[label] for label in labels}
        s = np.array([self.s[label] for label in labels])
        if "weakness" in self.factors:
            z = -s / self.temperature
            weakness = np.exp(z - z.max())
            weakness /= weakness.sum()
        else:
            weakness = np.ones(k)
        risk = np.ones(k)
        if "risk" in self.factors:
            for i, label in enumerate(labels):
                risk[i] = self.risk.get(label, 1.0)
                if label in self.gates:
                    kappa_gate, rate = self.gates[label]
                    if np.mean(np.asarray(raw[label]) < self.violation_below) > rate:
                        risk[i] *= kappa_gate
        if "redundancy" in self.factors and k > 1:
            corr = np.maximum(correlation([oriented[label] for label in labels]), 0.0)
            redundancy = 1.0 / (1.0 + corr.sum(axis=1) - np.diag(corr))
        else:
            redundancy = np.ones(k)
        prior = np.array([abs(base[label]) for label in labels])
        target = floor_weights(prior * weakness * risk * redundancy, self.w_min)
        if self.w is None or set(self.w) != set(labels):
            previous = floor_weights(prior, self.w_min)
        else:
            previous = np.array([self.w[label] for label in labels])
        w = self.weight_ema * previous + (1 - self.weight_ema) * target
        self.w = {label: float(v) for label, v in zip(labels, w)}
        metrics = {}
        for i, label in enumerate(labels):
            metrics.update({f"reward/{label}/ema": float(s[i]), f"reward/{label}/weakness": float(weakness[i]),
                            f"reward/{label}/risk": float(risk[i]), f"reward/{label}/redundancy": float(redundancy[i]),
                            f"reward/{label}/target": float(target[i])})
        return dict(self.w), metrics

    def get_state(self) -> dict:
        return {"s": self.s, "w": self.w}

    def set_state(self, state: dict) -> None:
        self.s, self.w = state.get("s"), state.get("w")


# ---------------------------------------------------------------- the combiner


def group_normalize(x: np.ndarray, group_size: int | None, eps: float) -> np.ndarray:
    """GRPO's (x - mean_g) / (std_g + eps) per group of group_size contiguous rows (std with ddof 1; a group of one
    keeps x, as shared.rl.algorithms.group_mean_std); group_size None: the whole batch is one group."""
    x = np.asarray(x, np.float64)
    g = x.size if group_size is None else int(group_size)
    if g < 1 or x.size % g:
        raise ValueError(f"group_size={g} does not divide the {x.size} rows")
    if g == 1:
        return x.copy()
    grouped = x.reshape(-1, g)
    centred = grouped - grouped.mean(axis=1, keepdims=True)
    normalized = centred / (grouped.std(axis=1, ddof=1, keepdims=True) + eps)
    # a group whose values are all equal gets exactly 0, not the rounding of its mean divided by eps
    return np.where(grouped.max(axis=1, keepdims=True) == grouped.min(axis=1, keepdims=True), 0.0,
                    normalized).reshape(-1)


def variance_shares(parts: dict, group_size: int | None) -> dict:
    """Each part's share of the within-group variance of their sum: sum_g cov(part, total) / sum_g var(total)."""
    total = sum(parts.values())
    g = total.size if group_size is None else int(group_size)
    if total.size == 0 or total.size % g:
        return {label: 0.0 for label in parts}
    centre = lambda x: (x.reshape(-1, g) - x.reshape(-1, g).mean(axis=1, keepdims=True)).reshape(-1)  # noqa: E731
    t = centre(total)
    denominator = float(t @ t)
    if denominator <= 0:
        return {label: 0.0 for label in parts}
    return {label: float(centre(p) @ t) / denominator for label, p in parts.items()}


class Combiner:
    """A normaliser, a weighting and a scalarisation. `combine(raw, weights, group_size, columns)` -> (R [N],
    metrics, normalised terms, weights used); `calibrate(raw, columns)` once when `needs_calibration`."""

    def __init__(self, name: str, normalizer, weighting, options: dict):
        self.name, self.normalizer, self.weighting = name, normalizer, weighting
        self.scalarize = _choice(options, "scalarize", SCALARIZE)
        self.eps = float(options["eps"])

    @property
    def needs_calibration(self) -> bool:
        return self.normalizer.needs_calibration

    def calibrate(self, raw: dict, columns: Mapping) -> dict:
        return self.normalizer.calibrate({k: np.asarray(v, np.float64) for k, v in raw.items()}, columns)

    def combine(self, raw: dict, weights: dict, group_size: int | None, columns: Mapping):
        raw = {label: np.asarray(r, np.float64) for label, r in raw.items()}
        normalized, metrics = self.normalizer(raw, columns)
        active = [label for label in raw if weights[label] != 0]
        oriented = {label: math.copysign(1.0, weights[label]) * normalized[label] for label in active}
        used = {}
        if active:
            used, weight_metrics = self.weighting(oriented, {k: raw[k] for k in active},
                                                  {k: weights[k] for k in active})
            metrics.update(weight_metrics)
        n = len(next(iter(raw.values())))
        terms = oriented
        if self.scalarize == "normalize_then_sum":
            terms = {label: group_normalize(x, group_size, self.eps) for label, x in oriented.items()}
        parts = {label: used[label] * terms[label] for label in active}
        total = np.zeros(n, np.float64)
        for label in active:
            total += parts[label]
        all_weights = {label: (math.copysign(used[label], weights[label]) if label in used else 0.0) for label in raw}
        if len(raw) > 1:
            for label in raw:
                metrics[f"reward/{label}/weight"] = all_weights[label]
                if self.name != "sum":
                    metrics[f"reward/{label}/norm_mean"] = float(normalized[label].mean()) if n else 0.0
            for label, share in variance_shares(parts, group_size).items():
                metrics[f"reward/{label}/share"] = share
        return total, metrics, normalized, all_weights

    def get_state(self) -> dict:
        state = {"normalizer": self.normalizer.get_state(), "weighting": self.weighting.get_state()}
        return {k: v for k, v in state.items() if v}

    def set_state(self, state: dict | None) -> None:
        state = state or {}
        self.normalizer.set_state(state.get("normalizer", {}))
        self.weighting.set_state(state.get("weighting", {}))


class SumCombiner(Combiner):
    """The weighted sum of the raw scores, in rl.rewards order (bit for bit the manager's sum before combiners)."""

    def combine(self, raw, weights, group_size, columns):
        if self.scalarize != "sum_then_normalize":
            return super().combine(raw, weights, group_size, columns)
        n = len(next(iter(raw.values())))
        total = np.zeros(n, np.float64)
        parts = {}
        for label, r in raw.items():
            parts[label] = weights[label] * np.asarray(r, np.float64)
            total += parts[label]
        metrics = {}
        if len(raw) > 1:
            metrics = {f"reward/{label}/weight": float(w) for label, w in weights.items()}
            metrics.update({f"reward/{label}/share": v for label, v in variance_shares(parts, group_size).items()})
        return total, metrics, dict(raw), dict(weights)


@REWARD_COMBINERS.register("sum")
def sum_combiner(options=None) -> Combiner:
    """R = sum_k w_k r_k, the weights of rl.rewards."""
    options = combine_options(options)
    return SumCombiner("sum", Identity(), StaticWeights(), options)


@REWARD_COMBINERS.register("zscore")
def zscore_combiner(options=None) -> Combiner:
    """Per-batch z-score of each term, then the weighted sum."""
    options = combine_options(options)
    return Combiner("zscore", BatchZScore(options), StaticWeights(), options)


@REWARD_COMBINERS.register("ref_frozen")
def ref_frozen_combiner(options=None) -> Combiner:
    """Reference-Frozen Normalisation (statistics calibrated once on the initial policy), then the weighted sum."""
    options = combine_options(options)
    return Combiner("ref_frozen", ReferenceFrozen(options), StaticWeights(), options)


@REWARD_COMBINERS.register("trifactor")
def trifactor_combiner(options=None) -> Combiner:
    """Tri-factor dynamic weights (weakness, risk, redundancy) on normalised terms (normalize: ref_frozen)."""
    options = combine_options(options)
    normalize = _choice(options, "normalize", tuple(NORMALIZERS))
    return Combiner("trifactor", NORMALIZERS[normalize](options), TriFactor(options), options)


def build_combiner(name: str = "sum", options=None) -> Combiner:
    """REWARD_COMBINERS[name](options); the entry's name is kept on the combiner."""
    combiner = REWARD_COMBINERS.get(str(name))(options)
    combiner.name = str(name)
    return combiner


@register_validator
def _check_reward_combine(config, mesh_shape) -> None:
    """An unknown rl.reward_combine or a bad option value fails at launch, naming the key."""
    rl = config.get("rl") if hasattr(config, "get") else None
    if rl is None or "reward_combine" not in rl:
        return
    name = rl.get("reward_combine")
    if name not in REWARD_COMBINERS:
        raise ValueError(f"rl.reward_combine: {REWARD_COMBINERS.unknown_message(name)}")
    build_combiner(name, rl.get("reward_combine_options"))

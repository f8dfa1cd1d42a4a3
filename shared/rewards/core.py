"""The reward contract, the REWARDS registry helpers and the RewardManager.

Contract (Tunix-compatible): a reward function is any callable

    reward_fn(prompts: list[str], completions: list[str], **columns) -> list[float]   # one float per completion

where `columns` are the batch's dataset columns as per-example lists (e.g. `answer=[...]`). Functions take
the columns they need by name and ignore the rest through `**kwargs`; a function without `**kwargs` is only
given the columns it names. `None` in the result means "no score" and is handled like NaN.

A REWARDS entry is either such a function, or a `RewardFactory` (`register_reward_factory`) that builds the
function from the spec's kwargs once (rewards that hold state: a reward model, an HTTP judge). A config names
rewards as `config.rewards = [("math/boxed", 1.0), ("length/penalty", 0.1, {"target": 256})]`. The RewardManager
scores each as a column of its own and combines them with a REWARD_COMBINERS entry (shared/rewards/combine.py).
"""
from __future__ import annotations

import dataclasses
import inspect
import math
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from shared.registry import REWARDS
from shared.rewards.combine import build_combiner

RewardFn = Callable[..., Sequence[float]]
ON_ERROR_POLICIES = ("raise", "zero")


class RewardError(RuntimeError):
    """A reward function failed, returned a non-finite value or the wrong number of values."""


class RewardFactory:
    """A REWARDS entry that builds its reward function from the spec's kwargs: `factory(**kwargs) -> fn`."""

    def __init__(self, build: Callable[..., RewardFn], name: str = ""):
        self.build = build
        self.name = name or getattr(build, "__name__", "reward factory")
        self.__doc__ = build.__doc__

    def __call__(self, **kwargs) -> RewardFn:
        return self.build(**kwargs)

    def __repr__(self) -> str:
        return f"RewardFactory({self.name})"


def register_reward(name: str, fn: RewardFn | None = None, *, override: bool = False):
    """`@register_reward("p/name")` on a reward function (same as `REWARDS.register`)."""
    return REWARDS.register(name, fn, override=override)


def register_reward_factory(name: str, build: Callable[..., RewardFn] | None = None, *, override: bool = False):
    """`@register_reward_factory("p/name")` on `build(**spec_kwargs) -> reward_fn`; the decorated name keeps
    the plain builder."""

    def add(builder):
        REWARDS.register(name, RewardFactory(builder, name), override=override)
        return builder

    return add(build) if build is not None else add


# ---------------------------------------------------------------- specs


@dataclasses.dataclass(frozen=True)
class RewardSpec:
    name: str                 # REWARDS name (or a callable's __name__)
    weight: float
    kwargs: dict
    label: str                # metric key: the name, made unique ("name#2") when a name repeats
    fn: Any = None            # a callable given directly instead of a registered name


def parse_reward_specs(specs) -> list[RewardSpec]:
    """Accepts "name", (name, weight), (name, weight, kwargs), {"name", "weight", "kwargs", "label"}, a
    ConfigDict of that shape, or a callable in place of a name. Lists from JSON configs work like tuples."""
    single_tuple = isinstance(specs, tuple) and len(specs) in (2, 3) and isinstance(specs[1], (int, float))
    if isinstance(specs, (str, Mapping)) or callable(specs) or hasattr(specs, "to_dict") or single_tuple:
        specs = [specs]
    parsed, seen = [], {}
    for position, spec in enumerate(specs):
        where = f"rewards[{position}]"
        fn = None
        label = None
        if hasattr(spec, "to_dict"):  # ml_collections.ConfigDict
            spec = spec.to_dict()
        if isinstance(spec, str) or callable(spec):
            name, weight, kwargs = spec, 1.0, {}
        elif isinstance(spec, Mapping):
            unknown = set(spec) - {"name", "weight", "kwargs", "label"}
            if unknown or "name" not in spec:
                raise ValueError(f"{where}={spec!r}: expected keys name, weight, kwargs, label"
                                 + (f" (unknown: {sorted(unknown)})" if unknown else " (name is missing)"))
            name, weight, kwargs, label = spec["name"], spec.get("weight", 1.0), spec.get("kwargs") or {}, \
                spec.get("label")
        elif isinstance(spec, (tuple, list)) and 1 <= len(spec) <= 3:
            name = spec[0]
            weight = spec[1] if len(spec) > 1 else 1.0
            kwargs = spec[2] if len(spec) > 2 else {}
        else:
            raise ValueError(f"{where}={spec!r}: expected a name, (name, weight) or (name, weight, kwargs)")
        if hasattr(kwargs, "to_dict"):
            kwargs = kwargs.to_dict()
        if not isinstance(kwargs, Mapping):
            raise ValueError(f"{where}: kwargs must be a dict, got {type(kwargs).__name__}")
        if callable(name):
            fn, name = name, getattr(name, "__name__", type(name).__name__)
        elif not isinstance(name, str):
            raise ValueError(f"{where}: name must be a string or a callable, got {name!r}")
        try:
            weight = float(weight)
        except (TypeError, ValueError):
            raise ValueError(f"{where} ({name!r}): weight {weight!r} is not a number") from None
        if not math.isfinite(weight):
            raise ValueError(f"{where} ({name!r}): weight {weight} is not finite")
        label = label or name
        seen[label] = seen.get(label, 0) + 1
        if seen[label] > 1:
            label = f"{label}#{seen[label]}"
        parsed.append(RewardSpec(name=name, weight=weight, kwargs=dict(kwargs), label=label, fn=fn))
    return parsed


def build_reward_fn(spec: RewardSpec) -> RewardFn:
    """The callable a spec names: a factory is built with the kwargs; a plain function gets them bound (the
    spec's kwargs take precedence over same-named columns)."""
    entry = spec.fn if spec.fn is not None else REWARDS.get(spec.name)
    if isinstance(entry, RewardFactory):
        sig = _signature_or_none(entry.build)
        if sig is not None:
            try:
                sig.bind(**spec.kwargs)
            except TypeError as e:
                raise ValueError(f"reward {spec.label!r}: bad kwargs {sorted(spec.kwargs)}: {e}") from None
        return entry(**spec.kwargs)
    if not spec.kwargs:
        return entry
    _check_accepts(entry, spec.kwargs, spec.label)
    bound = dict(spec.kwargs)

    def with_kwargs(prompts, completions, **columns):
        return entry(prompts, completions, **{**columns, **bound})

    with_kwargs.__name__ = getattr(entry, "__name__", spec.name)
    sig = _signature_or_none(entry)
    if sig is not None:  # the bound kwargs are no longer columns the function needs or accepts
        with_kwargs.__signature__ = sig.replace(
            parameters=[p for p in sig.parameters.values() if p.name not in bound])
    return with_kwargs


def _signature_or_none(fn) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def _check_accepts(fn, kwargs: Mapping, label: str) -> None:
    sig = _signature_or_none(fn)
    if sig is None:
        return
    params = list(sig.parameters.values())[2:]  # after prompts, completions
    if any(p.kind == p.VAR_KEYWORD for p in params):
        # **kwargs would swallow a typo silently: when the function declares keyword-only knobs (as the
        # built-ins do), the spec's kwargs must be among its named parameters.
        if any(p.kind == p.KEYWORD_ONLY for p in params):
            names = [p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]
            unknown = sorted(set(kwargs) - set(names))
            if unknown:
                raise ValueError(f"reward {label!r}: unknown kwargs {unknown}; it takes {names}")
        return
    try:
        sig.bind_partial(None, None, **kwargs)
    except TypeError as e:
        raise ValueError(f"reward {label!r}: bad kwargs {sorted(kwargs)}: {e}") from None


# ---------------------------------------------------------------- manager


@dataclasses.dataclass
class RewardResult:
    total: np.ndarray                       # float32 [N]: the combined reward (default: the weighted sum)
    per_function: dict[str, np.ndarray]     # label -> float32 [N] raw (unweighted) scores, after the policy
    errors: dict[str, list[int]]            # label -> example indices zeroed under on_error="zero"
    metrics: dict[str, float]
    normalized: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)  # label -> [N] as the combiner
                                            # weighed it (the raw scores for "sum")
    weights: dict[str, float] = dataclasses.field(default_factory=dict)  # label -> the weight it got this batch


class RewardManager:
    """Reward functions scored as separate columns, combined into one reward, with per-function metrics and an
    error policy.

        manager = RewardManager([("math/boxed", 1.0), ("format/tags", 0.2, {"tags": ["answer"]})])
        rewards, metrics = manager(prompts, completions, answer=answers)

    on_error="raise" (default): an exception or a NaN/inf score raises RewardError naming the function, the
    example index and excerpts of its prompt and completion. on_error="zero": those examples score 0 for that
    function and `reward/<label>/errors` counts them. A wrong-length or non-numeric result always raises (it
    is a bug in the function). A weight of 0 computes and logs a function without adding it (e.g. accuracy).

    combine: the REWARD_COMBINERS name (shared/rewards/combine.py; rl.reward_combine) that turns the columns into
    the reward, with its options (rl.reward_combine_options): "sum" (default) is the weighted sum; "zscore",
    "ref_frozen", "trifactor" normalise and weigh the terms. A combiner with reference statistics
    (`needs_calibration`) must see `calibrate(prompts, completions, **columns)` on the reference policy's
    completions first (the RL learner does this before its first step). group_size: completions per prompt, rows
    group-contiguous (None: the whole batch is one group), for per-group scalarisation and the variance shares.
    """

    def __init__(self, specs, *, on_error: str = "raise", excerpt_chars: int = 80, combine: str = "sum",
                 combine_options=None, group_size: int | None = None):
        if on_error not in ON_ERROR_POLICIES:
            raise ValueError(f"on_error={on_error!r}: expected one of {ON_ERROR_POLICIES}")
        self.specs = parse_reward_specs(specs)
        if not self.specs:
            raise ValueError("RewardManager: no reward functions given")
        self.on_error = on_error
        self.excerpt_chars = excerpt_chars
        self.fns = [build_reward_fn(spec) for spec in self.specs]
        self._accepts = [_accepted_columns(fn) for fn in self.fns]
        self.combine_name = str(combine)
        self.combiner = build_combiner(self.combine_name, combine_options)
        self.group_size = None if group_size is None else int(group_size)

    @property
    def needs_calibration(self) -> bool:
        """True until a combiner with reference statistics has been calibrated."""
        return bool(self.combiner.needs_calibration)

    def calibrate(self, prompts: Sequence[str], completions: Sequence[str], **columns) -> dict:
        """Scores the reference policy's completions (raw columns) and freezes the combiner's statistics on them;
        returns the metrics of the calibration (reward/<label>/ref_mean, ...)."""
        per_function, _, metrics = self._score(list(prompts), list(completions), columns)
        metrics = {f"{k}_calibration" if k.endswith(("/mean", "/std")) else k: v for k, v in metrics.items()}
        metrics.update(self.combiner.calibrate(per_function, columns))
        return metrics

    def get_state(self) -> dict:
        """The combiner's state (frozen statistics, dynamic weights), JSON; {} for a stateless one."""
        return self.combiner.get_state()

    def set_state(self, state: dict | None) -> None:
        self.combiner.set_state(state)

    @property
    def labels(self) -> list[str]:
        return [spec.label for spec in self.specs]

    def __call__(self, prompts: Sequence[str], completions: Sequence[str], **columns) -> tuple[np.ndarray, dict]:
        result = self.compute(prompts, completions, **columns)
        return result.total, result.metrics

    def compute(self, prompts: Sequence[str], completions: Sequence[str], **columns) -> RewardResult:
        prompts, completions = list(prompts), list(completions)
        n = len(completions)
        scores, errors, metrics = self._score(prompts, completions, columns)
        weights = {spec.label: spec.weight for spec in self.specs}
        total, combined, normalized, used = self.combiner.combine(scores, weights, self.group_size, columns)
        metrics.update(combined)
        metrics["reward/mean"] = float(total.mean()) if n else 0.0
        metrics["reward/std"] = float(total.std()) if n else 0.0
        metrics["reward/min"] = float(total.min()) if n else 0.0
        metrics["reward/max"] = float(total.max()) if n else 0.0
        return RewardResult(total=np.asarray(total, np.float32),
                            per_function={k: v.astype(np.float32) for k, v in scores.items()}, errors=errors,
                            metrics=metrics, normalized={k: np.asarray(v, np.float32) for k, v in normalized.items()},
                            weights=dict(used))

    def _score(self, prompts: list, completions: list, columns: Mapping) -> tuple[dict, dict, dict]:
        """Every function's raw scores (float64 [N], after the error policy), the errors and their metrics."""
        n = len(completions)
        if len(prompts) != n:
            raise ValueError(f"rewards: {len(prompts)} prompts but {n} completions")
        for key, value in columns.items():
            if _is_per_example(value) and len(value) != n:
                raise ValueError(f"rewards: column {key!r} has {len(value)} entries for {n} completions")
        per_function, errors, metrics = {}, {}, {}
        for spec, fn, accepts in zip(self.specs, self.fns, self._accepts):
            cols = columns if accepts is None else {k: v for k, v in columns.items() if k in accepts}
            self._check_required(fn, spec.label, cols, columns)
            scores, bad = self._run_one(spec.label, fn, prompts, completions, cols)
            per_function[spec.label] = scores
            metrics[f"reward/{spec.label}/mean"] = float(scores.mean()) if n else 0.0
            metrics[f"reward/{spec.label}/std"] = float(scores.std()) if n else 0.0
            if self.on_error == "zero":
                errors[spec.label] = bad
                metrics[f"reward/{spec.label}/errors"] = float(len(bad))
        return per_function, errors, metrics

    # -------------------------------------------------------------- one function
    def _run_one(self, label, fn, prompts, completions, columns) -> tuple[np.ndarray, list[int]]:
        n = len(completions)
        try:
            raw = fn(prompts, completions, **columns)
        except Exception as batch_error:  # noqa: BLE001 - located per example below
            return self._locate_failures(label, fn, prompts, completions, columns, batch_error)
        scores = self._as_scores(label, raw, n)
        bad = [int(i) for i in np.flatnonzero(~np.isfinite(scores))]
        if bad and self.on_error == "raise":
            i = bad[0]
            raise RewardError(f"reward {label!r} returned {scores[i]} (non-finite; {len(bad)} of {n} examples) "
                              f"at example {i}: {self._excerpt(prompts[i], completions[i])}")
        scores[bad] = 0.0
        return scores, bad

    def _locate_failures(self, label, fn, prompts, completions, columns, batch_error):
        """Re-runs a failing batch one example at a time so the error names the example (raise) or only the
        failing examples score 0 (zero)."""
        n = len(completions)
        scores = np.zeros(n, np.float64)
        bad = []
        for i in range(n):
            one = {k: (v[i:i + 1] if _is_per_example(v) else v) for k, v in columns.items()}
            try:
                value = self._as_scores(label, fn(prompts[i:i + 1], completions[i:i + 1], **one), 1)[0]
            except RewardError:
                raise
            except Exception as e:  # noqa: BLE001
                if self.on_error == "raise":
                    raise RewardError(f"reward {label!r} raised {type(e).__name__}: {e} at example {i} of {n}: "
                                      f"{self._excerpt(prompts[i], completions[i])}") from e
                bad.append(i)
                continue
            if not math.isfinite(value):
                if self.on_error == "raise":
                    raise RewardError(f"reward {label!r} returned {value} (non-finite) at example {i} of {n}: "
                                      f"{self._excerpt(prompts[i], completions[i])}")
                bad.append(i)
                continue
            scores[i] = value
        if self.on_error == "raise":  # every example passes alone: the batch as a whole is the problem
            raise RewardError(f"reward {label!r} raised {type(batch_error).__name__}: {batch_error} on the batch "
                              f"of {n} (each example alone succeeds)") from batch_error
        return scores, bad

    def _as_scores(self, label: str, raw, n: int) -> np.ndarray:
        if isinstance(raw, np.ndarray) or hasattr(raw, "__array__") and not isinstance(raw, (list, tuple)):
            scores = np.asarray(raw, dtype=np.float64)
        else:
            try:
                raw = list(raw)
            except TypeError:
                raise RewardError(f"reward {label!r} returned {type(raw).__name__}, expected a list of "
                                  f"{n} floats") from None
            scores = np.empty(len(raw), np.float64)
            for i, value in enumerate(raw):
                try:
                    scores[i] = np.nan if value is None else float(value)
                except (TypeError, ValueError):
                    raise RewardError(f"reward {label!r} returned a non-number {value!r} at example {i}") from None
        if scores.shape != (n,):
            raise RewardError(f"reward {label!r} returned {scores.shape[0] if scores.ndim == 1 else scores.shape} "
                              f"values for {n} completions")
        return scores

    def _excerpt(self, prompt: str, completion: str) -> str:
        return f"prompt={_short(prompt, self.excerpt_chars)}, completion={_short(completion, self.excerpt_chars)}"

    @staticmethod
    def _check_required(fn, label: str, given: Mapping, columns: Mapping) -> None:
        sig = _signature_or_none(fn)
        if sig is None:
            return
        params = list(sig.parameters.values())
        for p in params[2:]:
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.default is p.empty and p.name not in given:
                raise RewardError(f"reward {label!r} needs column {p.name!r}; the batch has columns "
                                  f"{sorted(columns) or '(none)'}")


def _accepted_columns(fn) -> set[str] | None:
    """Names of the columns `fn` takes, or None when it takes **kwargs (then it gets every column)."""
    sig = _signature_or_none(fn)
    if sig is None or any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values()):
        return None
    return {p.name for p in list(sig.parameters.values())[2:]
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def _is_per_example(value) -> bool:
    # A list/tuple is one entry per example even when its entries are ragged lists (np.ndim would fail on them).
    return isinstance(value, (list, tuple)) or (isinstance(value, np.ndarray) and value.ndim >= 1)


def _short(text: str, limit: int) -> str:
    text = str(text)
    return repr(text if len(text) <= limit else text[:limit] + "...")

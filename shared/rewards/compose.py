"""Composing reward terms: per-sample terms and gated aggregation tables (spec ../shared/papers/proxy_grm.md §1.3).

Terms. `per_sample(fn)` turns a term written for one rollout, `fn(completion, sample) -> float` (sample: the
example's columns for that row plus "prompt"), into the batch contract of shared.rewards
(`fn(prompts, completions, **columns) -> list[float]`), so it can be registered and named in rl.rewards.

Aggregation. The additive default R = r_acc + r_proxy + 0.5 r_fmt is the "sum" combiner with rl.rewards weights
(1, 1, 0.5). The gated ("explicit") variants of the reference code's use_fb switch are data: GATES[name] maps each
(accuracy ok, proxy verdict) of a rollout to (r_acc', r_proxy'), r_proxy' = KEEP keeping the proxy term as it is.
Accuracy ok means r_acc == +1; the proxy verdict is +1, -1 or 0 (a failed proxy call). The combiner "gated"
(REWARD_COMBINERS; rl.reward_combine="gated") rewrites the two columns named by
rl.reward_combine_options.gate_terms = (accuracy label, proxy label) by the table rl.reward_combine_options.gate
and then takes the weighted sum of every term with the rl.rewards weights, so "use_fb0" with weights (1, 1, 0.5)
is the additive default exactly.

  use_fb0   identity (additive)
  use_fb1   acc ok but proxy -1 -> r_acc -1; acc wrong but proxy +1 -> r_proxy -1 (the proxy cannot save a wrong
            verdict); otherwise unchanged
  use_fb2   acc ok but proxy -1 -> r_acc -1; r_proxy zeroed
  use_fb3   acc ok: r_acc 1.5 if proxy +1 else 0.5; acc wrong: -1; r_proxy kept
  use_fb4   as 3, and acc wrong with proxy +1 -> -1.5
  use_fb5   as 4, and acc wrong with proxy not +1 -> -2
  use_fb6   as 3 with 1.0 instead of 1.5
  use_fb7-10  use_fb3-6 with r_proxy zeroed (the proxy only modulates r_acc)
"""
from __future__ import annotations

import inspect
from typing import Callable, Mapping

import numpy as np

from shared.registry import REWARD_COMBINERS
from shared.rewards.combine import Combiner, Identity, StaticWeights, combine_options, variance_shares

KEEP = None
PROXY_VERDICTS = (1, -1, 0)


def _table(acc_ok: tuple, acc_wrong: tuple, proxy) -> dict:
    """{(acc ok, proxy verdict): (r_acc', r_proxy')} from the r_acc' of each proxy verdict (+1, -1, 0) when the
    accuracy is ok / wrong; proxy: KEEP, a constant, or a per-cell tuple like acc_ok + acc_wrong."""
    cells = {}
    for ok, values in ((True, acc_ok), (False, acc_wrong)):
        for i, verdict in enumerate(PROXY_VERDICTS):
            p = proxy[(0 if ok else 3) + i] if isinstance(proxy, tuple) else proxy
            cells[(ok, verdict)] = (float(values[i]), p)
    return cells


#        proxy verdict:  +1   -1    0          +1    -1    0
GATES: dict[str, dict] = {
    "use_fb0": _table((1, 1, 1), (-1, -1, -1), KEEP),
    "use_fb1": _table((1, -1, 1), (-1, -1, -1), (KEEP, KEEP, KEEP, -1.0, KEEP, KEEP)),
    "use_fb2": _table((1, -1, 1), (-1, -1, -1), 0.0),
    "use_fb3": _table((1.5, 0.5, 0.5), (-1, -1, -1), KEEP),
    "use_fb4": _table((1.5, 0.5, 0.5), (-1.5, -1, -1), KEEP),
    "use_fb5": _table((1.5, 0.5, 0.5), (-1.5, -2, -2), KEEP),
    "use_fb6": _table((1.0, 0.5, 0.5), (-1, -1, -1), KEEP),
    "use_fb7": _table((1.5, 0.5, 0.5), (-1, -1, -1), 0.0),
    "use_fb8": _table((1.5, 0.5, 0.5), (-1.5, -1, -1), 0.0),
    "use_fb9": _table((1.5, 0.5, 0.5), (-1.5, -2, -2), 0.0),
    "use_fb10": _table((1.0, 0.5, 0.5), (-1, -1, -1), 0.0),
}


def apply_gate(acc, proxy, gate: str | Mapping) -> tuple[np.ndarray, np.ndarray]:
    """(r_acc', r_proxy') per row; acc in {-1, +1} (ok = +1), proxy in {+1, -1, 0}."""
    table = GATES[gate] if isinstance(gate, str) else gate
    acc, proxy = np.asarray(acc, np.float64), np.asarray(proxy, np.float64)
    out_acc, out_proxy = np.empty_like(acc), np.empty_like(proxy)
    for i, (a, p) in enumerate(zip(acc, proxy)):
        verdict = int(np.sign(p))
        if (verdict != p) or a not in (-1.0, 1.0):
            raise ValueError(f"gated reward: row {i} has r_acc={a}, r_proxy={p}; the gate tables take r_acc in "
                             "{-1, +1} and r_proxy in {+1, -1, 0}")
        new_acc, new_proxy = table[(a == 1.0, verdict)]
        out_acc[i], out_proxy[i] = new_acc, (p if new_proxy is KEEP else new_proxy)
    return out_acc, out_proxy


def gate_names() -> list[str]:
    return list(GATES)


class GatedCombiner(Combiner):
    """The gate table on the (accuracy, proxy) columns, then the weighted sum of every term."""

    def __init__(self, options: dict):
        super().__init__("gated", Identity(), StaticWeights(), options)
        self.gate = str(options.get("gate", "use_fb0"))
        if self.gate not in GATES:
            raise ValueError(f"rl.reward_combine_options.gate={self.gate!r}: expected one of {', '.join(GATES)}")
        terms = list(options.get("gate_terms") or [])
        if len(terms) != 2:
            raise ValueError(f"rl.reward_combine_options.gate_terms={terms!r}: expected [accuracy label, proxy label]"
                             " (labels of rl.rewards)")
        self.acc_label, self.proxy_label = (str(t) for t in terms)

    def combine(self, raw, weights, group_size, columns):
        raw = {label: np.asarray(r, np.float64) for label, r in raw.items()}
        for label in (self.acc_label, self.proxy_label):
            if label not in raw:
                raise KeyError(f"rl.reward_combine_options.gate_terms: no reward labelled {label!r} (labels: "
                               f"{sorted(raw)})")
        gated = dict(raw)
        gated[self.acc_label], gated[self.proxy_label] = apply_gate(raw[self.acc_label], raw[self.proxy_label],
                                                                    self.gate)
        parts = {label: weights[label] * x for label, x in gated.items()}
        total = sum(parts.values())
        metrics = {f"reward/{label}/gated_mean": float(gated[label].mean()) if gated[label].size else 0.0
                   for label in (self.acc_label, self.proxy_label)}
        metrics.update({f"reward/{label}/weight": float(w) for label, w in weights.items()})
        metrics.update({f"reward/{label}/share": v for label, v in variance_shares(parts, group_size).items()})
        return total, metrics, gated, dict(weights)


@REWARD_COMBINERS.register("gated")
def gated_combiner(options=None) -> Combiner:
    """use_fb gate tables (rl.reward_combine_options.gate, gate_terms) then the weighted sum."""
    return GatedCombiner(combine_options(options))


def per_sample(fn: Callable[[str, dict], float]) -> Callable:
    """A batch reward (shared.rewards contract) from a per-rollout term `fn(completion, sample) -> float`."""

    def batch(prompts, completions, **columns):
        out = []
        for i, (prompt, completion) in enumerate(zip(prompts, completions)):
            sample = {k: v[i] for k, v in columns.items() if isinstance(v, (list, tuple, np.ndarray))}
            sample["prompt"] = prompt
            out.append(float(fn(completion, sample)))
        return out

    batch.__name__ = getattr(fn, "__name__", "per_sample")
    batch.__doc__ = fn.__doc__
    batch.__signature__ = inspect.Signature([
        inspect.Parameter("prompts", inspect.Parameter.POSITIONAL_OR_KEYWORD),
        inspect.Parameter("completions", inspect.Parameter.POSITIONAL_OR_KEYWORD),
        inspect.Parameter("columns", inspect.Parameter.VAR_KEYWORD)])
    return batch

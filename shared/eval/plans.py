"""Gold-plan metrics (ATP-Bench reproduction, ../shared/papers/atp_bench.md §4.4): a predicted tool plan (the calls
of a parsed response, shared.eval.interleaved) against the gold plan of the item.

A gold call names acceptable tools (the first is canonical; e.g. ("search", "ref") when the document holds a fitting
image), the sentence it belongs after, and argument constraints on ToolCall.args(): (key, value) requires the key with
that value, (key, "") only the key.

Matching: one-to-one, optimal (Hungarian, scipy.optimize.linear_sum_assignment), maximising the summed pair score
    4 * tool_ok + 2 * anchor_ok + (share of the gold call's constraints met; 1 when it has none)
with tool_ok = the predicted tool is acceptable, anchor_ok = |anchor difference| <= anchor_tolerance. Every pair of the
assignment is kept (min(n_pred, n_gold) pairs), wrong-tool pairs included: they count against tool_acc. A pair is
correct when its tool and anchor are ok and every constraint is met.

Ties between assignments of equal score are broken, in this order, by: more correct pairs, smaller anchor distances,
prediction i paired with gold i (order). The levels are packed into one exact integer per pair, so the result depends
only on the inputs (for the small plans of this benchmark; very large plans drop the lowest levels, still
deterministically).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy.optimize import linear_sum_assignment

from shared.eval.interleaved import TOOLS, ToolCall

ANCHOR_CAP = 64        # anchor distances beyond this tie in the tie-break
_EXACT = 2 ** 52       # float64 holds integers exactly up to 2**53; keep assignment totals below it


@dataclass(frozen=True)
class GoldCall:
    """One required call of a gold plan."""
    tools: tuple[str, ...]
    anchor: int
    args: tuple[tuple[str, str], ...] = ()

    def __post_init__(self):
        if not self.tools:
            raise ValueError("a gold call needs at least one acceptable tool")

    def to_call(self) -> ToolCall:
        """The gold call written as a ToolCall of its canonical tool, meeting every constraint: "src" as attribute;
        for a self-closing tool every argument as attribute ("target" then prints as a bare word); otherwise the rest
        as the body "k=v;flag" ("" values as flags), or the bare operation when "op" is the only one."""
        tool = self.tools[0]
        schema = TOOLS.get(tool)
        if schema is not None and schema.self_closing:
            return ToolCall(tool, tuple(self.args), "", self.anchor)
        attrs = tuple((k, v) for k, v in self.args if k == "src")
        rest = [(k, v) for k, v in self.args if k != "src"]
        if len(rest) == 1 and rest[0][0] == "op" and rest[0][1] and "=" not in rest[0][1] and ";" not in rest[0][1]:
            body = rest[0][1]
        else:
            parts = [f"{k}={v}" if v else k for k, v in rest]
            # A lone flag "thick" would read back as {"op": "thick"}; the ';' keeps it a flag.
            body = ";".join(parts) + (";" if len(parts) == 1 and "=" not in parts[0] else "")
        return ToolCall(tool, attrs, body, self.anchor)


@dataclass(frozen=True)
class PlanScore:
    """Scores of one predicted plan; see score_plan."""
    n_pred: int
    n_gold: int
    n_correct: int
    precision: float
    recall: float
    f1: float
    tool_acc: float | None
    anchor_acc: float | None
    arg_acc: float | None
    overuse: bool
    underuse: bool
    pairs: tuple[tuple[int, int], ...]


def _f1(p: float, r: float) -> float:
    return 0.0 if p + r == 0 else 2 * p * r / (p + r)


def _met(args: dict[str, str], gold: GoldCall) -> int:
    return sum(key in args and (value == "" or args[key] == value) for key, value in gold.args)


def score_plan(pred: Sequence[ToolCall], gold: Sequence[GoldCall], *, anchor_tolerance: int = 0) -> PlanScore:
    """Match pred to gold optimally (module docstring) and score the plan.

    precision = n_correct / n_pred (1 when nothing is predicted), recall = n_correct / n_gold (1 when nothing is
    required), f1 their harmonic mean (0 when both are 0). tool_acc: share of gold calls whose matched prediction
    has an acceptable tool (unmatched gold calls count as misses; None without gold calls). anchor_acc, arg_acc:
    among matched pairs with an acceptable tool, the share within anchor_tolerance / meeting every constraint (None
    without such pairs). overuse: calls where none were needed; underuse: no calls where some were."""
    if anchor_tolerance < 0:
        raise ValueError(f"anchor_tolerance must be >= 0, got {anchor_tolerance}")
    n, m = len(pred), len(gold)
    tool_ok = np.zeros((n, m), bool)
    anchor_ok = np.zeros((n, m), bool)
    met = np.zeros((n, m), np.int64)
    dist = np.zeros((n, m), np.int64)
    for i, call in enumerate(pred):
        args = call.args()
        for j, g in enumerate(gold):
            tool_ok[i, j] = call.tool in g.tools
            dist[i, j] = abs(call.anchor - g.anchor)
            anchor_ok[i, j] = dist[i, j] <= anchor_tolerance
            met[i, j] = _met(args, g)
    need = np.array([len(g.args) for g in gold], np.int64)
    all_met = met == need[None, :]
    correct = tool_ok & anchor_ok & all_met

    pairs: tuple[tuple[int, int], ...] = ()
    if n and m:
        # Exact integer pair scores: the arg share met/need scaled by the lcm of the constraint counts.
        scale = math.lcm(*[int(k) for k in need if k]) if need.any() else 1
        share = np.where(need[None, :] > 0, met * (scale // np.maximum(need, 1))[None, :], scale)
        key = scale * (4 * tool_ok + 2 * anchor_ok).astype(np.int64) + share
        k = min(n, m)
        order = max(n, m) - np.abs(np.arange(n)[:, None] - np.arange(m)[None, :])
        for level, top in ((correct.astype(np.int64), 1), (ANCHOR_CAP - np.minimum(dist, ANCHOR_CAP), ANCHOR_CAP),
                           (order, max(n, m))):
            base = top * k + 1     # a level's total over an assignment is < base: the packing stays lexicographic
            if (int(key.max()) * base + top) * k >= _EXACT:
                break
            key = key * base + level
        rows, cols = linear_sum_assignment(key.astype(np.float64), maximize=True)
        pairs = tuple((int(i), int(j)) for i, j in zip(rows, cols))

    n_correct = sum(bool(correct[i, j]) for i, j in pairs)
    precision = n_correct / n if n else 1.0
    recall = n_correct / m if m else 1.0
    ok = [(i, j) for i, j in pairs if tool_ok[i, j]]
    return PlanScore(
        n_pred=n, n_gold=m, n_correct=n_correct, precision=precision, recall=recall, f1=_f1(precision, recall),
        tool_acc=len(ok) / m if m else None,
        anchor_acc=sum(bool(anchor_ok[i, j]) for i, j in ok) / len(ok) if ok else None,
        arg_acc=sum(bool(all_met[i, j]) for i, j in ok) / len(ok) if ok else None,
        overuse=m == 0 and n > 0, underuse=m > 0 and n == 0, pairs=pairs)


def _mean(values) -> float:
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else float("nan")


def summarize(scores: Sequence[PlanScore]) -> dict[str, float]:
    """Aggregate over items. micro_precision / micro_recall / micro_f1 from summed counts (precision 1 when nothing
    is predicted anywhere, recall 1 when nothing is required); macro_f1 the mean item f1; tool_acc, anchor_acc,
    arg_acc the means over the items where each is defined; overuse_rate among items needing no call, underuse_rate
    among items needing some; calls_per_answer and gold_calls_per_answer the mean call counts; n the number of
    items. Undefined values (no items at all, or none of that kind) are nan."""
    n_pred = sum(s.n_pred for s in scores)
    n_gold = sum(s.n_gold for s in scores)
    n_correct = sum(s.n_correct for s in scores)
    precision = n_correct / n_pred if n_pred else 1.0
    recall = n_correct / n_gold if n_gold else 1.0
    if not scores:
        precision = recall = float("nan")
    none_needed = [s for s in scores if s.n_gold == 0]
    some_needed = [s for s in scores if s.n_gold > 0]
    return {
        "micro_precision": precision, "micro_recall": recall, "micro_f1": _f1(precision, recall),
        "macro_f1": _mean(s.f1 for s in scores),
        "tool_acc": _mean(s.tool_acc for s in scores),
        "anchor_acc": _mean(s.anchor_acc for s in scores),
        "arg_acc": _mean(s.arg_acc for s in scores),
        "overuse_rate": _mean(float(s.overuse) for s in none_needed),
        "underuse_rate": _mean(float(s.underuse) for s in some_needed),
        "calls_per_answer": _mean(s.n_pred for s in scores),
        "gold_calls_per_answer": _mean(s.n_gold for s in scores),
        "n": float(len(scores)),
    }

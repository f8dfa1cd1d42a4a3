"""The pointwise instruction-following reward of Skill-RM's IF-RL recipe (spec ../shared/papers/skill_rm.md 1.6)
as a pure function of what a judge (or a checker run) reports: satisfied and total constraint counts, an optional
judge score, and the failures found.

    capped_if_reward(satisfied, total, failures=(), score=None) -> (reward in [0, 1], valid)

base = score when the judge gave one (clipped to [0, 1]), else satisfied / total; then the severity caps of the
aggregation policy: wrong task / unjustified refusal 0.25, missing main deliverable 0.50, invalid required structure
0.55, exact answer polluted by explanation 0.60, language violation 0.65, two or more major failures 0.60, a minor
failure `minor_cap` (the policy says "typically 0.85-0.94": an [R] choice, default 0.90). A report the reward
cannot read (total <= 0, counts out of range, an unknown failure) is the fallback 0.5 with valid=False, as the
recipe flags an invalid judge.
"""
from __future__ import annotations

import math
from typing import Sequence

MAJOR_CAPS = {"wrong_task": 0.25, "unjustified_refusal": 0.25, "missing_main_deliverable": 0.50,
              "invalid_structure": 0.55, "polluted_exact_answer": 0.60, "language_violation": 0.65}
MULTIPLE_MAJOR_CAP = 0.60
MINOR = "minor"
FALLBACK = 0.5


def capped_if_reward(satisfied: int, total: int, failures: Sequence[str] = (), score: float | None = None, *,
                     minor_cap: float = 0.90) -> tuple[float, bool]:
    """See the module docstring."""
    try:
        satisfied, total = int(satisfied), int(total)
    except (TypeError, ValueError):
        return FALLBACK, False
    if total <= 0 or not 0 <= satisfied <= total or any(f not in MAJOR_CAPS and f != MINOR for f in failures):
        return FALLBACK, False
    if score is not None and not (isinstance(score, (int, float)) and math.isfinite(score)):
        return FALLBACK, False
    value = min(1.0, max(0.0, float(score))) if score is not None else satisfied / total
    major = [f for f in failures if f != MINOR]
    caps = [MAJOR_CAPS[f] for f in major]
    if len(major) >= 2:
        caps.append(MULTIPLE_MAJOR_CAP)
    if MINOR in failures:
        caps.append(float(minor_cap))
    return (min([value] + caps), True)

"""The capped pointwise IF reward (shared/rewards/pointwise_if.py) by hand."""
import pytest

from shared.rewards.pointwise_if import capped_if_reward


@pytest.mark.parametrize("args, kwargs, expected", [
    ((3, 4), {}, (0.75, True)),                                        # base = satisfied / total
    ((4, 4, ["minor"]), {}, (0.90, True)),                             # minor cap (default 0.90)
    ((4, 4, ["minor"]), {"minor_cap": 0.85}, (0.85, True)),
    ((2, 4, ["minor"]), {}, (0.50, True)),                             # a cap never raises the base
    ((4, 4, ["language_violation"]), {}, (0.65, True)),
    ((4, 4, ["invalid_structure"]), {}, (0.55, True)),
    ((4, 4, ["language_violation", "polluted_exact_answer"]), {}, (0.60, True)),   # two majors: 0.60 and each cap
    ((4, 4, ["language_violation", "invalid_structure"]), {}, (0.55, True)),
    ((4, 4, ["unjustified_refusal"]), {}, (0.25, True)),
    ((1, 4), {"score": 0.95}, (0.95, True)),                           # the judge's score wins over the counts
    ((1, 4, ["missing_main_deliverable"]), {"score": 1.7}, (0.50, True)),   # clipped, then capped
    ((0, 0), {}, (0.5, False)),                                        # invalid reports: fallback, flagged
    ((5, 4), {}, (0.5, False)),
    ((1, 4, ["bad_vibes"]), {}, (0.5, False)),
    ((1, 4), {"score": float("nan")}, (0.5, False)),
    (("x", 4), {}, (0.5, False)),
])
def test_capped_if_reward(args, kwargs, expected):
    value, valid = capped_if_reward(*args, **kwargs)
    assert (round(value, 12), valid) == expected

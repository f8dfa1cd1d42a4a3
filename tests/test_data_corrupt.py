"""shared/data/corrupt.py: DROP and FLIP of structured facts: rates, which items change, what a flip does to numbers
and relation tokens, and that a flip always changes something."""
import random
from fractions import Fraction

import pytest

from shared.data.corrupt import drop_facts, flip_fact, flip_facts, flip_number, flip_text

FACTS = [("a", 3), ("b", 0), ("c", Fraction(5, 2)), "the bar for May reads 12", "AB = CD", "no token here"]


def test_ratio_zero_and_one():
    assert drop_facts(FACTS, 0.0, random.Random(0)) == (FACTS, [])
    assert drop_facts(FACTS, 1.0, random.Random(0)) == ([], list(range(len(FACTS))))
    assert flip_facts(FACTS, 0.0, random.Random(0)) == (FACTS, [])
    flipped, idx = flip_facts(FACTS, 1.0, random.Random(0))
    assert idx == [0, 1, 2, 3, 4]                                   # the token-less fact cannot change
    assert all(new != old for new, old in zip(flipped[:5], FACTS[:5])) and flipped[5] == FACTS[5]
    assert [f[0] for f in flipped[:3]] == ["a", "b", "c"]            # keys are kept
    with pytest.raises(ValueError, match="ratio must be in"):
        drop_facts(FACTS, 1.5, random.Random(0))


def test_drop_rate_and_order():
    facts = list(range(10_000))
    kept, dropped = drop_facts(facts, 0.4, random.Random(1))
    assert sorted(kept + dropped) == facts and kept == sorted(kept)
    assert abs(len(dropped) / len(facts) - 0.4) < 0.02


def test_flip_rules():
    rng = random.Random(3)
    for _ in range(200):
        assert flip_number(0, rng) in (1, 2, 3, 5, 10)
        new = flip_number(7, rng)
        assert isinstance(new, int) and new != 7
        assert new in {round(7 * f + d) for f in (0.5, 0.8, 1.2, 1.5, 2.0) for d in (-2, -1, 1, 2)} | {8}
        assert isinstance(flip_number(Fraction(5, 2), rng), Fraction)
    assert flip_number(10, random.Random(0)) != 10                   # 10 * 1.2 - 2 = 10 would be no flip
    text = flip_text("the bar for May reads 12", random.Random(0))
    assert text.startswith("the bar for May reads ") and text != "the bar for May reads 12"
    assert flip_text("AB = CD", random.Random(0)) in {f"AB {r} CD" for r in ("<", ">", "<=", ">=", "!=")}
    assert flip_text("x is 12 and y = 3", random.Random(0)).count("=") == 1   # a number is preferred
    with pytest.raises(TypeError, match="a fact is a string"):
        flip_fact([1, 2], random.Random(0))

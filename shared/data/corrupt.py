"""DROP / FLIP corruption of structured facts (the constraint-corruption study of ../shared/papers/evpv_prm.md §2, §4.5):
each item is dropped, or flipped, independently with probability `ratio`.

A fact is a string ("the bar for May reads 12", "AB = CD") or a (key, value) pair whose value is a number or a
string. FLIP alters one token: a numeric token when there is one (0 becomes one of 1, 2, 3, 5, 10; any other v
becomes round(v * f + d) with f in {0.5, 0.8, 1.2, 1.5, 2.0} and d in {-2, -1, 1, 2}, keeping decimals when v has
them), else one relation token (< > <= >= = != becomes another of them). A fact with neither is left as it is and
not counted as flipped. The new value always differs from the old one (should the draw land on it, it is moved by
+1). These rules are the released ablation's (`constraint_corruption_ablation.py`), re-implemented.

    kept, dropped_idx = drop_facts(facts, 0.4, rng)         # rng: random.Random
    flipped, flipped_idx = flip_facts(facts, 0.4, rng)
"""
from __future__ import annotations

import random
import re
from fractions import Fraction
from typing import Any, Sequence

NUMBER_TOKEN = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")
RELATION_TOKEN = re.compile(r"<=|>=|!=|=|<|>")
RELATIONS = ("<", ">", "<=", ">=", "=", "!=")
FACTORS = (0.5, 0.8, 1.2, 1.5, 2.0)
OFFSETS = (-2, -1, 1, 2)
FROM_ZERO = (1, 2, 3, 5, 10)


def _check_ratio(ratio: float) -> None:
    if not 0.0 <= ratio <= 1.0:
        raise ValueError(f"corruption ratio must be in [0, 1], got {ratio}")


def flip_number(value, rng: random.Random):
    """Another number (same type: int, float or Fraction; an integral value stays integral)."""
    if value == 0:
        new = rng.choice(FROM_ZERO)
    else:
        new = value * Fraction(str(rng.choice(FACTORS))) + rng.choice(OFFSETS) if isinstance(value, Fraction) \
            else value * rng.choice(FACTORS) + rng.choice(OFFSETS)
    integral = isinstance(value, int) or (isinstance(value, Fraction) and value.denominator == 1) \
        or (isinstance(value, float) and value.is_integer())
    if integral:
        new = round(new)
    if new == value:
        new = value + 1
    return type(value)(new) if isinstance(value, (int, float, Fraction)) else new


def flip_text(text: str, rng: random.Random) -> str:
    """`text` with one numeric token changed (preferred), else one relation token, else unchanged."""
    numbers = list(NUMBER_TOKEN.finditer(text))
    if numbers:
        m = rng.choice(numbers)
        token = m.group(0)
        if "." in token:
            value = float(token)
            new = flip_number(value, rng)
            new_token = f"{new:.3g}"
            if float(new_token) == value:
                new_token = repr(value + 1)
        else:
            new_token = str(flip_number(int(token), rng))
        return text[:m.start()] + new_token + text[m.end():]
    relations = list(RELATION_TOKEN.finditer(text))
    if relations:
        m = rng.choice(relations)
        new = rng.choice([r for r in RELATIONS if r != m.group(0)])
        return text[:m.start()] + new + text[m.end():]
    return text


def flip_fact(fact: Any, rng: random.Random) -> Any:
    """One fact with one token flipped (see the module docstring); a (key, value) pair flips its value."""
    if isinstance(fact, tuple) and len(fact) == 2:
        key, value = fact
        return (key, flip_fact(value, rng))
    if isinstance(fact, str):
        return flip_text(fact, rng)
    if isinstance(fact, (int, float, Fraction)) and not isinstance(fact, bool):
        return flip_number(fact, rng)
    raise TypeError(f"flip_fact: a fact is a string, a number or a (key, value) pair, got {type(fact).__name__}")


def drop_facts(facts: Sequence[Any], ratio: float, rng: random.Random) -> tuple[list, list[int]]:
    """(the facts kept, in order; the indices dropped): each fact dropped with probability `ratio`."""
    _check_ratio(ratio)
    kept, dropped = [], []
    for i, fact in enumerate(facts):
        if rng.random() < ratio:
            dropped.append(i)
        else:
            kept.append(fact)
    return kept, dropped


def flip_facts(facts: Sequence[Any], ratio: float, rng: random.Random) -> tuple[list, list[int]]:
    """(the facts, each flipped with probability `ratio`; the indices that changed)."""
    _check_ratio(ratio)
    out, flipped = [], []
    for i, fact in enumerate(facts):
        if rng.random() < ratio:
            new = flip_fact(fact, rng)
            if new != fact:
                flipped.append(i)
            out.append(new)
        else:
            out.append(fact)
    return out, flipped

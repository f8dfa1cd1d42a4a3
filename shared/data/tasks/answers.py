"""Answer parsing shared by the checkers of the built-in example sets: numbers in text, numeric equality."""
from __future__ import annotations

import math
import re
from fractions import Fraction

from shared.data.examples import Example

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+")


def last_number(text: str) -> str | None:
    """The last number in `text` with thousands separators removed ("1,234.5" -> "1234.5"), or None."""
    found = _NUMBER.findall(text)
    return found[-1].replace(",", "") if found else None


def _as_fraction(text: str) -> Fraction | None:
    try:
        return Fraction(text.replace(",", "").strip())
    except (ValueError, ZeroDivisionError):
        return None


def numbers_equal(a: str, b: str, rel_tol: float = 1e-6) -> bool:
    """Numeric equality of two number strings (exact for integers/decimals; relative tolerance else)."""
    fa, fb = _as_fraction(a), _as_fraction(b)
    if fa is None or fb is None:
        return False
    return fa == fb or math.isclose(float(fa), float(fb), rel_tol=rel_tol, abs_tol=1e-9)


def format_number(value: float) -> str:
    """51.0 -> "51", 0.5 -> "0.5" (how float answers of the word-problem sets become strings)."""
    value = float(value)
    if value.is_integer():
        return str(int(value))
    return f"{value:.10g}"


def check_last_number(example: Example, completion: str) -> bool:
    """The completion's last number equals example["answer"] numerically."""
    found = last_number(completion)
    return found is not None and numbers_equal(found, str(example["answer"]))


def first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""

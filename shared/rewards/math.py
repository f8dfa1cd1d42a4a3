"""Verifiable math rewards: answer extraction and equivalence.

    math/boxed        the last \\boxed{...} of the completion is equivalent to the `answer` column
    math/gsm8k        the number after the last `#### ` in the completion equals the gold number (the `answer`
                      column is a bare number or a full GSM8K solution ending in `#### N`)
    math/last_number  the last number in the completion equals the `answer` column (procedural tasks)

Equivalence (`answers_equivalent`) first tries an exact normaliser that needs nothing installed: integers,
decimals (0.50 = 0.5), signs, a/b, \\frac{a}{b} / \\dfrac / \\tfrac / \\frac12, thousands separators (1,000 and
1{,}000), $...$ / \\(...\\) wrappers, \\text{...} and trailing units or words, a trailing period, degrees, and
percent signs (50\\% = 50, as GSM8K/MATH grade them). Anything else is delegated to `math-verify` (the [tasks]
extra) when installed, e.g. symbolic forms (\\sqrt{2}/2 = \\frac{\\sqrt{2}}{2} = 2^{-1/2}), constants (2\\pi),
intervals and sets, equations, matrices, and float answers within math-verify's rounding (0.333333 = 1/3).
Without math-verify those cases fall back to comparing the normalised strings.
"""
from __future__ import annotations

import functools
import re
import threading
from fractions import Fraction
from typing import Sequence

from shared.rewards.core import register_reward

# ---------------------------------------------------------------- extraction

_BOXED_RE = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")


def last_boxed(text: str) -> str | None:
    """Content of the last \\boxed{...} (or \\fbox{...}, or `\\boxed 5`), nested braces kept; None if absent
    or unbalanced (a truncated generation)."""
    matches = list(_BOXED_RE.finditer(text))
    if not matches:
        return None
    i = matches[-1].end()
    while i < len(text) and text[i] == " ":
        i += 1
    if i >= len(text):
        return None
    if text[i] != "{":  # "\boxed 5": the token up to whitespace or a math delimiter
        if i == matches[-1].end():
            return None
        token = re.match(r"[^\s$]+", text[i:])
        return token.group(0) if token else None
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{" and text[j - 1] != "\\":
            depth += 1
        elif text[j] == "}" and text[j - 1] != "\\":
            depth -= 1
            if depth == 0:
                return text[i + 1:j]
    return None


_GSM8K_RE = re.compile(r"####\s*\$?\s*([-+]?[\d,]*\.?\d+)")
# A number: optional sign, digits with proper thousands groups (1,234) or plain, optional decimals; or .5
_NUMBER_RE = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|[-+]?\.\d+")


def gsm8k_answer(text: str) -> str | None:
    """The number after the last `####` (commas removed), or None."""
    found = _GSM8K_RE.findall(text)
    return found[-1].replace(",", "") if found else None


def last_number(text: str) -> str | None:
    found = _NUMBER_RE.findall(text)
    return found[-1].replace(",", "") if found else None


# ---------------------------------------------------------------- normalisation


def _unwrap_math(s: str) -> str:
    s = s.strip()
    for left, right in (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")):
        if s.startswith(left) and s.endswith(right) and len(s) >= len(left) + len(right):
            return _unwrap_math(s[len(left):len(s) - len(right)])
    return s


_SPACING = ("\\left", "\\right", "\\displaystyle", "\\!", "\\,", "\\;", "\\:", "\\ ", "~")
_TEXT_RE = re.compile(r"\\(?:text|textbf|mbox|mathrm|textnormal|operatorname)\s*\{([^{}]*)\}")
_NUMERIC_PREFIX_RE = re.compile(r"^([-+]?(?:\d[\d,]*(?:\.\d+)?|\.\d+)(?:/\d+)?)\s*[A-Za-z][A-Za-z\s.]*$")


def normalize_answer(s) -> str:
    """A canonical string for an answer (see the module docstring for what it removes)."""
    s = _unwrap_math(str(s))
    boxed = last_boxed(s)
    if boxed is not None:
        s = _unwrap_math(boxed)
    for token in _SPACING:
        s = s.replace(token, "" if token != "\\ " else " ")
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    s = s.replace("{,}", "").replace("\\$", "").replace("$", "")
    s = re.sub(r"\^\s*\{?\\circ\}?|°", "", s)
    s = s.replace("\\%", "").replace("%", "")
    # \text{...} after a number is a unit: drop it; anywhere else keep its content.
    s = re.sub(r"(?<=[\d}])\s*" + _TEXT_RE.pattern + r"\s*$", "", s.strip())
    s = _TEXT_RE.sub(r"\1", s)
    s = s.strip().rstrip(".").strip()
    s = re.sub(r"^[A-Za-z]\s*=\s*", "", s)  # "x = 5" -> "5"
    s = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", s)  # thousands separators
    unit = _NUMERIC_PREFIX_RE.match(s)  # "5 cm", "12 apples." -> the number
    if unit and re.search(r"\s|[A-Za-z]{2,}", s[unit.end(1):]):
        s = unit.group(1)
    s = re.sub(r"\\frac(\d)(\d)", r"\\frac{\1}{\2}", s)
    s = re.sub(r"\\sqrt(\d)", r"\\sqrt{\1}", s)
    return re.sub(r"\s+", "", s)


_FRAC_RE = re.compile(r"^([-+]?)\\frac\{([^{}]+)\}\{([^{}]+)\}$")


def to_fraction(s) -> Fraction | None:
    """The exact value of a normalised numeric answer (int, decimal, a/b, \\frac{a}{b}), else None."""
    s = normalize_answer(s) if not isinstance(s, (int, float)) else str(s)
    m = _FRAC_RE.match(s)
    if m:
        num, den = to_fraction(m.group(2)), to_fraction(m.group(3))
        if num is None or den is None or den == 0:
            return None
        value = num / den
        return -value if m.group(1) == "-" else value
    if not re.fullmatch(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?(?:/[-+]?\d+)?", s):
        return None
    try:
        return Fraction(s)
    except (ValueError, ZeroDivisionError):
        return None


# ---------------------------------------------------------------- equivalence


@functools.lru_cache(maxsize=1)
def _math_verify():
    try:
        import math_verify
    except ImportError:
        return None
    return math_verify


def math_verify_available() -> bool:
    return _math_verify() is not None


def answers_equivalent(predicted: str, gold: str, *, use_math_verify: bool | None = None) -> bool:
    """True if `predicted` and `gold` denote the same answer. use_math_verify: None = when installed."""
    if to_fraction(predicted) is not None and to_fraction(predicted) == to_fraction(gold):
        return True
    if normalize_answer(predicted) == normalize_answer(gold) != "":
        return True
    mv = _math_verify() if use_math_verify is not False else None
    if use_math_verify and mv is None:
        raise ImportError("use_math_verify=True but math-verify is not installed (pip install math-verify, or "
                          "the [tasks] extra)")
    if mv is None:
        return False
    # math-verify times out through SIGALRM, which only works in the main thread; elsewhere it runs unbounded.
    timeout = 5 if threading.current_thread() is threading.main_thread() else None
    try:
        gold_parsed = mv.parse("\\boxed{" + _unwrap_math(str(gold)) + "}", parsing_timeout=timeout)
        pred_parsed = mv.parse("\\boxed{" + _unwrap_math(str(predicted)) + "}", parsing_timeout=timeout)
        if not gold_parsed or not pred_parsed:
            return False
        return bool(mv.verify(gold_parsed, pred_parsed, timeout_seconds=timeout))
    except Exception:  # noqa: BLE001 - unparseable LaTeX is simply not equivalent
        return False


# ---------------------------------------------------------------- reward functions


def _gold_text(answer) -> str:
    text = str(answer)
    boxed = last_boxed(text)
    return boxed if boxed is not None else text


@register_reward("math/boxed")
def boxed_math_reward(prompts: Sequence[str], completions: Sequence[str], answer: Sequence, *,
                      use_math_verify: bool | None = None, **_) -> list[float]:
    """1.0 if the last \\boxed{...} of the completion is equivalent to `answer` (bare, or a solution whose
    last \\boxed is the answer), else 0.0 (also when nothing is boxed)."""
    out = []
    for completion, gold in zip(completions, answer):
        predicted = last_boxed(completion)
        ok = predicted is not None and predicted.strip() != "" and answers_equivalent(
            predicted, _gold_text(gold), use_math_verify=use_math_verify)
        out.append(1.0 if ok else 0.0)
    return out


def _gold_number(answer) -> Fraction | None:
    text = str(answer)
    return to_fraction(gsm8k_answer(text) if "####" in text else text)


@register_reward("math/gsm8k")
def gsm8k_reward(prompts: Sequence[str], completions: Sequence[str], answer: Sequence, **_) -> list[float]:
    """1.0 if the number after the completion's last `####` equals the gold number exactly (1,234 = 1234,
    0.50 = 0.5); `answer` is a bare number or a GSM8K solution ending in `#### N`."""
    out = []
    for completion, gold in zip(completions, answer):
        predicted = gsm8k_answer(completion)
        gold_value = _gold_number(gold)
        ok = predicted is not None and gold_value is not None and to_fraction(predicted) == gold_value
        out.append(1.0 if ok else 0.0)
    return out


@register_reward("math/last_number")
def last_number_reward(prompts: Sequence[str], completions: Sequence[str], answer: Sequence, **_) -> list[float]:
    """1.0 if the last number in the completion equals `answer` (numerically, else as normalised text)."""
    out = []
    for completion, gold in zip(completions, answer):
        predicted = last_number(completion)
        if predicted is None:
            out.append(0.0)
            continue
        gold_value = to_fraction(gold)
        ok = to_fraction(predicted) == gold_value if gold_value is not None else \
            normalize_answer(predicted) == normalize_answer(gold)
        out.append(1.0 if ok else 0.0)
    return out

"""GSM8K solutions as steps: the `<<expr=result>>` calculator annotations of a gold solution parsed into one step per
line with its computations, an exact evaluator for those expressions, and the numbers a question states.

    steps, final = parse_solution(record["answer"])       # answer text "...<<16-3-4=9>>9 ...\n#### 18"
    steps[0].text == "Janet sells 16 - 3 - 4 = 9 duck eggs a day."        (annotations removed)
    steps[0].computations[0] == Computation("16-3-4", "9")
    evaluate("16-3-4") == Fraction(9);  question_numbers("lay 16 eggs ... $2 per egg") == [16, 2]

Numbers are `fractions.Fraction`, so `50*.8` is exactly 40 and a division that does not come out even stays a
fraction. Only digits count as stated numbers ("three" does not). A step is a non-empty line before "####"; lines
without an annotation are steps with no computations (callers choose whether to keep them).
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from fractions import Fraction

ANNOTATION = re.compile(r"<<([^<>]*)>>")
# a number as written in a question: 1,000 / 3.5 / .5 (no sign: "-" in text is a dash, not a minus)
NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?|\.\d+)(?![\d])")


class StepParseError(ValueError):
    """A solution or expression the parser does not read; the message names the line."""


@dataclass(frozen=True)
class Computation:
    expr: str      # "16-3-4"
    result: str    # "9"


@dataclass(frozen=True)
class Step:
    text: str                              # the line with its annotations removed
    computations: tuple[Computation, ...]


def parse_number(text: str) -> Fraction:
    """'1,000' -> 1000, '.5' -> 1/2, '3.25' -> 13/4 (exact)."""
    try:
        return Fraction(text.replace(",", ""))
    except (ValueError, ZeroDivisionError):
        raise StepParseError(f"not a number: {text!r}") from None


_BINARY = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
           ast.Div: lambda a, b: a / b, ast.FloorDiv: lambda a, b: Fraction(a // b)}


def _eval(node) -> Fraction:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return Fraction(str(node.value))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, (ast.Div, ast.FloorDiv)) and right == 0:
            raise StepParseError("division by zero")
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _eval(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    raise StepParseError(f"unsupported syntax {type(node).__name__}")


def evaluate(expr: str) -> Fraction:
    """The exact value of an arithmetic expression of numbers, + - * / // (two GSM8K train annotations floor-divide), unary minus and parentheses."""
    text = expr.replace(",", "").strip()
    if not text:
        raise StepParseError("empty expression")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        raise StepParseError(f"not an arithmetic expression: {expr!r}") from None
    try:
        return _eval(tree)
    except StepParseError as e:
        raise StepParseError(f"{expr!r}: {e}") from None


def expression_numbers(expr: str) -> list[Fraction]:
    """The number literals of an expression, in order ('(3+2)*.5' -> [3, 2, 1/2])."""
    return [parse_number(m.group(1)) for m in NUMBER.finditer(expr.replace(",", ""))]


def question_numbers(question: str) -> list[Fraction]:
    """The numbers a question states in digits, in order of appearance (repeats kept)."""
    return [parse_number(m.group(1)) for m in NUMBER.finditer(question)]


def parse_solution(answer: str, where: str = "solution") -> tuple[list[Step], str]:
    """(steps, final answer) of a GSM8K answer text. Raises StepParseError naming `where` and the 1-based line for a
    missing '####' line, an annotation without '=', or an empty side of it."""
    if "####" not in answer:
        raise StepParseError(f"{where}: no '#### <final answer>' line")
    body, final = answer.rsplit("####", 1)
    final = final.strip().replace(",", "")
    if not final:
        raise StepParseError(f"{where}: nothing after '####'")
    steps = []
    for number, line in enumerate(body.split("\n"), start=1):
        if not line.strip():
            continue
        computations = []
        for m in ANNOTATION.finditer(line):
            expr, sep, result = m.group(1).rpartition("=")
            if not sep or not expr.strip() or not result.strip():
                raise StepParseError(f"{where} line {number}: annotation <<{m.group(1)}>> is not <<expr=result>>")
            computations.append(Computation(expr.strip(), result.strip()))
        text = re.sub(r"\s+", " ", ANNOTATION.sub("", line)).strip()
        steps.append(Step(text, tuple(computations)))
    return steps, final

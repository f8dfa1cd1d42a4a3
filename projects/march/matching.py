"""MARCH's self-check arithmetic (march.md A.2): the number matcher, reading the Proposer's questions and the Checker's
audits, the majority vote over M Checker samples and the reward variants.

  numbers_match(a, b)   strip "% k K w W ,"; identical strings match; else both parsed as numbers: two integers must
                        be equal, any comparison involving a float matches within 0.1; unparsable -> no match
  parse_questions       "- Question: ... [Answer: n]" lines -> [(question, n)], at most 10, n a pure number
  parse_audit           "k. Evidence: ... [Answer: n]" lines -> {k: n} ("Cannot answer" and missing k: no answer)
  vote                  c_k = sum_m (+1 if numbers_match(a_k, answer_k^m) else -1) (no answer: -1); fault_k = c_k < 0
  self_check_reward     "ztr" 0 / -1 (any fault), "ztr01" 1 / 0, "err" -0.1 * min(#faults, 13); no question: 0
"""
from __future__ import annotations

import re
from typing import Sequence

STRIP = str.maketrans("", "", "%kKwW,")
QUESTION = re.compile(r"^\s*-\s*Question:\s*(.+?)\s*\[Answer:\s*([^\]]*)\]\s*$")
AUDIT = re.compile(r"^\s*(\d+)\.\s*(.*)$")
ANSWER = re.compile(r"\[Answer:\s*([^\]]*)\]")
PURE_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
MAX_QUESTIONS = 10
REWARDS = ("ztr", "ztr01", "err")


def _number(text: str):
    text = text.strip()
    if not PURE_NUMBER.fullmatch(text):
        return None
    return int(text) if "." not in text else float(text)


def numbers_match(a: str, b: str) -> bool:
    a, b = str(a).translate(STRIP).strip(), str(b).translate(STRIP).strip()
    if a == b and a:
        return True
    x, y = _number(a), _number(b)
    if x is None or y is None:
        return False
    if isinstance(x, int) and isinstance(y, int):
        return x == y
    return abs(x - y) <= 0.1


def parse_questions(text: str, limit: int = MAX_QUESTIONS) -> list[tuple[str, str]]:
    """The Proposer's (question, number) pairs, in order; a line whose answer is not a pure number is skipped."""
    out = []
    for line in text.splitlines():
        m = QUESTION.match(line)
        if m and _number(m.group(2).translate(STRIP)) is not None:
            out.append((m.group(1), m.group(2).strip()))
            if len(out) == limit:
                break
    return out


def parse_audit(text: str) -> dict[int, str]:
    """{question number (1-based): the Checker's answer} of its audit lines; the first line for a k wins."""
    out = {}
    for line in text.splitlines():
        m = AUDIT.match(line)
        if not m:
            continue
        k = int(m.group(1))
        found = ANSWER.search(m.group(2))
        if found and k not in out:
            out[k] = found.group(1).strip()
    return out


def vote(answers: Sequence[str], audits: Sequence[dict[int, str]]) -> list[bool]:
    """fault_k for each Proposer answer a_k (k = 1..K) against M audits (majority: c_k < 0)."""
    faults = []
    for k, a in enumerate(answers, start=1):
        c = sum(1 if k in audit and numbers_match(a, audit[k]) else -1 for audit in audits)
        faults.append(c < 0)
    return faults


def self_check_reward(faults: Sequence[bool], kind: str = "ztr") -> float:
    """The shared reward of a Solver response and its Checker audit from the vote's faults (no pair: 0)."""
    if kind not in REWARDS:
        raise ValueError(f"march.reward={kind!r}: expected one of {', '.join(REWARDS)} (or 'oracle')")
    n = sum(bool(f) for f in faults)
    if not faults:
        return 0.0
    if kind == "ztr":
        return -1.0 if n else 0.0
    if kind == "ztr01":
        return 0.0 if n else 1.0
    return -0.1 * min(n, 13)

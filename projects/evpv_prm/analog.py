"""The GSM8K analog of EVPV-PRM (../shared/papers/evpv_prm.md §4.2-4.4): problems as computation graphs, the
perception-noise channel, the candidate generator with step labels, the extractor, the J-sim step judge with and
without EVPV conditioning, and the checklist audit that gives each candidate its reliability.

Problem. A GSM8K question Q states numbers (slots 0..S-1, digits only: shared.data.gsm8k.question_numbers); its gold
solution's `<<expr=result>>` annotations are the steps, one step per computation. Each number literal of a step's
expression is an operand: a question slot ("q", s) when its value is one Q states (the first such slot), else an
earlier step's result ("r", j, the latest with that value), else a constant ("c", v) (7 days, 100 percent). A step
is premise-dependent when it has a "q" operand; its checklist claims are the (slot, value) pairs it copies.
Kept: problems whose steps replay exactly to the gold answer through these operands, with at least one "q" operand.

Noise channel noise(Q; p): each slot independently with probability p gets one of four perturbations, chosen
uniformly: digit swap (two adjacent different digits of an integer >= 10; else +-1), +-1 (a positive result), x10,
swap with another slot of a different value (both slots change). The judge perceives Q~ = noise(Q; p_perc); the
extractor reads E = noise(Q; p_ext) with its own draws. `perception` = "problem": one Q~ per problem (a model's
reading of one image is consistent across candidates) or "candidate": a fresh Q~ per candidate ([R]: the spec does
not say; "problem" is the default).

Candidates (N per problem, independent): a premise misread with probability p_misread (a slot used by some step gets
a plausible wrong value by the same four perturbations; every step recomputed from it), an arithmetic slip with
probability p_slip (one step's result moved by a nonzero amount: +-1..+-9, or x10 for results >= 10; downstream
recomputed), both, or neither. Labels: the misread steps (those that copy the misread slot), the slip step and every
step computing from a -1 step's result are -1; the rest +1. Correct = the final result equals the gold answer.

J-sim (spec §4.4): a step is -1 when its arithmetic is wrong (the operands it shows do not give the result it claims,
exactly), when a claimed premise differs from the judge's reference reading of that slot, or when it uses the result
of a step within the last `history` steps that the judge marked -1; else +1. The plain judge's reference is Q~; the
EVPV-conditioned judge's is E where E holds the slot, else Q~ (the judge still sees the question; a dropped fact
falls back to its own reading).

Reliability (spec §4.4): the candidate's de-duplicated checklist against E; a contradiction is a slot E holds with
another value, High when the slot feeds the final answer in the gold graph, Low otherwise;
p = max(0, 1 - 0.5 n_High - 0.2 n_Low) (shared.eval.prm.contradiction_reliability).
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass
from fractions import Fraction
from typing import Sequence

import numpy as np

from shared.data.gsm8k import NUMBER, StepParseError, evaluate, parse_number, parse_solution, question_numbers
from shared.eval.prm import contradiction_reliability


@dataclass(frozen=True)
class Op:
    template: str                     # the expression with its literals replaced by {0}, {1}, ...
    operands: tuple[tuple, ...]       # ("q", slot) | ("r", step) | ("c", value), one per literal


@dataclass(frozen=True)
class Problem:
    qid: str
    numbers: tuple[Fraction, ...]     # the question's stated numbers, by slot
    ops: tuple[Op, ...]
    answer: Fraction
    feeds_final: frozenset            # slots that the final answer depends on


@dataclass
class Candidate:
    operands: list[list[Fraction]]    # per step, the operand values it shows
    results: list[Fraction]           # per step, the result it claims
    labels: np.ndarray                # int [T] in {+1, -1}
    kinds: list[str]                  # per step: "ok", "premise" (tainted by the misread), "slip", "both"
    correct: bool
    misread: int | None               # the misread slot
    slip: int | None                  # the slipped step


def _fmt(value: Fraction) -> str:
    return f"({value.numerator}/{value.denominator})"


def run_op(op: Op, values: Sequence[Fraction]) -> Fraction:
    """The exact value of a step's expression with the given operand values."""
    return evaluate(op.template.format(*[_fmt(v) for v in values]))


def build_problem(qid: str, question: str, solution: str) -> Problem | None:
    """The problem's computation graph, or None when it does not replay exactly (see the module docstring)."""
    try:
        steps, final = parse_solution(solution, qid)
        answer = parse_number(final)
    except StepParseError:
        return None
    numbers = tuple(question_numbers(question))
    ops, results = [], []
    for step in steps:
        for c in step.computations:
            expr = c.expr.replace(",", "")
            literals = list(NUMBER.finditer(expr))
            operands = []
            for m in literals:
                v = parse_number(m.group(1))
                if v in numbers:
                    operands.append(("q", numbers.index(v)))
                elif v in results:
                    operands.append(("r", len(results) - 1 - results[::-1].index(v)))
                else:
                    operands.append(("c", v))
            template = "".join(part for part in _template_parts(expr, literals))
            op = Op(template, tuple(operands))
            try:
                value = run_op(op, [_value(o, numbers, results) for o in operands])
                claimed = parse_number(c.result)
            except StepParseError:
                return None
            if value != claimed:
                return None
            ops.append(op)
            results.append(value)
    if not ops or results[-1] != answer or not any(o[0] == "q" for op in ops for o in op.operands):
        return None
    return Problem(qid, numbers, tuple(ops), answer, frozenset(_ancestor_slots(ops, len(ops) - 1)))


def _template_parts(expr: str, literals) -> list[str]:
    parts, last = [], 0
    for i, m in enumerate(literals):
        parts += [expr[last:m.start(1)].replace("{", "{{").replace("}", "}}"), "{%d}" % i]
        last = m.end(1)
    parts.append(expr[last:].replace("{", "{{").replace("}", "}}"))
    return parts


def _value(operand: tuple, numbers: Sequence[Fraction], results: Sequence[Fraction]) -> Fraction:
    kind, ref = operand
    return numbers[ref] if kind == "q" else results[ref] if kind == "r" else ref


def _ancestor_slots(ops: Sequence[Op], j: int) -> set:
    slots, stack, seen = set(), [j], set()
    while stack:
        i = stack.pop()
        if i in seen:
            continue
        seen.add(i)
        for kind, ref in ops[i].operands:
            if kind == "q":
                slots.add(ref)
            elif kind == "r":
                stack.append(ref)
    return slots


def load_problems(path: str, n: int = 0) -> tuple[list[Problem], int]:
    """(the first n kept problems of a GSM8K jsonl file (n <= 0: all), the number of records read)."""
    problems, read = [], 0
    with open(path, encoding="utf-8") as f:
        for line_number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                question, solution = record["question"], record["answer"]
            except (json.JSONDecodeError, KeyError, TypeError):
                raise ValueError(f"{path}:{line_number}: not a GSM8K record with 'question' and 'answer'") from None
            read += 1
            problem = build_problem(f"{path}:{line_number}", question, solution)
            if problem is not None:
                problems.append(problem)
                if 0 < n <= len(problems):
                    break
    if not problems:
        raise ValueError(f"{path}: no GSM8K problem whose annotated steps replay to its answer")
    return problems, read


# ------------------------------------------------------------------------------------------ noise and candidates


PERTURBATIONS = ("digit_swap", "plus_minus", "times_ten", "other")


def perturb(value: Fraction, rng: random.Random, others: Sequence[Fraction] = (), kind: str | None = None) -> Fraction:
    """A plausible misreading of `value` (never `value` itself): `kind` (drawn uniformly when None) is a digit swap,
    +-1, x10, or another stated number; a kind that does not apply falls back to +-1."""
    kind = kind or rng.choice(PERTURBATIONS)
    if kind == "other":
        pool = [o for o in others if o != value]
        if pool:
            return rng.choice(pool)
        kind = "plus_minus"
    if kind == "digit_swap" and value.denominator == 1 and value >= 10:
        digits = str(value.numerator)
        pairs = [i for i in range(len(digits) - 1) if digits[i] != digits[i + 1]]
        if pairs:
            i = rng.choice(pairs)
            return Fraction(digits[:i] + digits[i + 1] + digits[i] + digits[i + 2:])
    if kind == "times_ten":
        return value * 10
    step = rng.choice((-1, 1)) if value > 1 else 1
    return value + step


def noise(numbers: Sequence[Fraction], p: float, rng: random.Random) -> list[Fraction]:
    """noise(Q; p): each slot perturbed with probability p (a swap with another slot changes both)."""
    out = list(numbers)
    for s in range(len(out)):
        if rng.random() >= p:
            continue
        kind = rng.choice(PERTURBATIONS)
        if kind == "other":     # a swap of two slots' values
            partners = [t for t in range(len(out)) if out[t] != out[s]]
            if partners:
                t = rng.choice(partners)
                out[s], out[t] = out[t], out[s]
                continue
        out[s] = perturb(out[s], rng, kind=kind)
    return out


def _slip(value: Fraction, rng: random.Random) -> Fraction:
    if value >= 10 and rng.random() < 0.2:
        return value * 10
    return value + rng.choice((-1, 1)) * rng.randint(1, 9)


def make_candidate(problem: Problem, rng: random.Random, p_misread: float, p_slip: float) -> Candidate:
    """One candidate solution with its step labels (see the module docstring)."""
    ops = problem.ops
    misread_draw, slip_draw = rng.random() < p_misread, rng.random() < p_slip
    numbers = list(problem.numbers)
    misread = slip = None
    if misread_draw:
        used = sorted({ref for op in ops for kind, ref in op.operands if kind == "q"})
        misread = rng.choice(used)
        numbers[misread] = perturb(numbers[misread], rng, problem.numbers)
    if slip_draw:
        slip = rng.randrange(len(ops))
    operands, results, kinds = [], [], []
    for j, op in enumerate(ops):
        values = [_value(o, numbers, results) for o in op.operands]
        try:
            result = run_op(op, values)
        except StepParseError:            # a misread made a divisor 0: the candidate's step claims 0
            result = Fraction(0)
        premise = any(o == ("q", misread) for o in op.operands) or \
            any(k == "r" and kinds[r] in ("premise", "both") for k, r in op.operands)
        slipped = j == slip or any(k == "r" and kinds[r] in ("slip", "both") for k, r in op.operands)
        if j == slip:
            result = _slip(result, rng)
        operands.append(values)
        results.append(result)
        kinds.append("both" if premise and slipped else "premise" if premise else "slip" if slipped else "ok")
    labels = np.array([1 if k == "ok" else -1 for k in kinds], np.int64)
    return Candidate(operands, results, labels, kinds, results[-1] == problem.answer, misread, slip)


# ------------------------------------------------------------------------------------------ judge and audit


def claims(problem: Problem, candidate: Candidate, j: int) -> list[tuple[int, Fraction]]:
    """The (slot, value) premises step j copies from the question."""
    return [(ref, v) for (kind, ref), v in zip(problem.ops[j].operands, candidate.operands[j]) if kind == "q"]


def checklist(problem: Problem, candidate: Candidate) -> list[tuple[int, Fraction]]:
    return list(dict.fromkeys(c for j in range(len(problem.ops)) for c in claims(problem, candidate, j)))


def jsim(problem: Problem, candidate: Candidate, reference: Sequence[Fraction], history: int = 12) -> np.ndarray:
    """int [T] in {+1, -1}: the J-sim verdicts with `reference[slot]` as the judge's reading of each slot."""
    verdicts = []
    for j, op in enumerate(problem.ops):
        try:
            arithmetic_ok = run_op(op, candidate.operands[j]) == candidate.results[j]
        except StepParseError:
            arithmetic_ok = False
        premises_ok = all(reference[slot] == v for slot, v in claims(problem, candidate, j))
        inherited = any(kind == "r" and j - ref <= history and verdicts[ref] == -1 for kind, ref in op.operands)
        verdicts.append(1 if arithmetic_ok and premises_ok and not inherited else -1)
    return np.array(verdicts, np.int64)


def evpv_reference(perceived: Sequence[Fraction], facts: dict) -> list[Fraction]:
    """The EVPV-conditioned judge's reading: the extracted fact where there is one, else its own perception."""
    return [facts.get(slot, perceived[slot]) for slot in range(len(perceived))]


def reliability(problem: Problem, candidate: Candidate, facts: dict) -> float:
    """The checklist audit against the extracted facts (High: the slot feeds the final answer)."""
    severity = lambda slot: "high" if slot in problem.feeds_final else "low"   # noqa: E731
    return contradiction_reliability(checklist(problem, candidate), facts, severity)

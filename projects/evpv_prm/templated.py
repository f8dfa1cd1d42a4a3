"""The templated small-number GSM-like generator of J-learn (../shared/papers/evpv_prm.md §4.4): GSM8K-format
records ({"question", "answer"} with `<<expr=result>>` annotations and "#### answer") whose numbers are small enough
that a tiny transformer can learn the arithmetic from scratch, so analog.build_problem, the candidates, labels,
noise and audit of analog.py apply unchanged.

A problem states 3-5 distinct numbers in 2..19 (slots; a slot the solution never uses is a distractor, as in GSM8K)
and is solved by a chain of 2-4 steps: step 0 combines two stated numbers, every later step combines the previous
result with a stated number (+, -, or * by a factor <= 9), results in 1..999. Every result differs from every stated
number and every earlier result, so build_problem reads each literal back to its source (a question slot or the
previous result). No jax here.
"""
from __future__ import annotations

import random

from projects.evpv_prm.analog import Problem, build_problem

ITEMS = ("apples", "pens", "books", "coins", "cards", "stamps", "shells", "marbles", "boxes", "cups")
OWNERS = ("Ana", "Ben", "Cleo", "Dev", "Eli", "Fay", "Gus", "Hana")
SPLITS = ("train", "test", "eval")   # eval: the J-learn evaluation problems (evpv_prm/jlearn_eval)
MAX_RESULT = 999


def _combine(a: int, b: int, rng: random.Random, forbidden: set) -> tuple[str, int] | None:
    """One of a+b, a-b, a*b (b <= 9) whose result is in 1..MAX_RESULT and not in `forbidden`; None if none fits."""
    options = [("+", a + b), ("-", a - b)] + ([("*", a * b)] if b <= 9 else [])
    rng.shuffle(options)
    for op, value in options:
        if 1 <= value <= MAX_RESULT and value not in forbidden:
            return op, value
    return None


def record(rng: random.Random) -> dict:
    """One GSM8K-format record {"question", "answer"} (module docstring)."""
    while True:
        n_slots = rng.randint(3, 5)
        numbers = rng.sample(range(2, 20), n_slots)
        n_steps = rng.randint(2, 4)
        order = rng.sample(range(n_slots), n_slots)            # slots in the order the chain reads them
        forbidden = set(numbers)
        first = _combine(numbers[order[0]], numbers[order[1]], rng, forbidden)
        if first is None:
            continue
        lines = [(numbers[order[0]], *first, numbers[order[1]])]
        value = first[1]
        forbidden.add(value)
        used = 2
        for _ in range(n_steps - 1):
            b = numbers[order[used % n_slots]] if used < n_slots else rng.choice(numbers)
            used += 1
            step = _combine(value, b, rng, forbidden)
            if step is None:
                break
            lines.append((value, step[0], step[1], b))
            value = step[1]
            forbidden.add(value)
        if len(lines) < 2:
            continue
        owner, items = rng.choice(OWNERS), rng.sample(ITEMS, n_slots)
        stated = ", ".join(f"{n} {item}" for n, item in zip(numbers, items))
        question = f"{owner} counts {stated}. What number does {owner} get by the steps of the game?"
        solution = [f"{a} {op} {b} = <<{a}{op}{b}={r}>>{r}" for a, op, r, b in lines]
        return {"question": question, "answer": "\n".join(solution) + f"\n#### {value}"}


def templated_problems(split: str, n: int, seed: int = 0) -> list[Problem]:
    """n problems of `split` ("train" | "test" | "eval"); each split is its own random stream."""
    if split not in SPLITS:
        raise ValueError(f"templated problems: split must be one of {', '.join(SPLITS)}; got {split!r}")
    rng = random.Random(f"evpv_prm/templated/{split}/{seed}")
    out = []
    for i in range(n):
        r = record(rng)
        problem = build_problem(f"templated/{split}/{seed}/{i}", r["question"], r["answer"])
        if problem is None:   # the construction guarantees a replay; a failure is a bug, not data to skip
            raise AssertionError(f"templated record does not replay: {r}")
        out.append(problem)
    return out

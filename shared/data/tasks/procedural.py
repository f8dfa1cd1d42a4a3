"""Procedural example sets (generated here, deterministic in (split, n, seed, options); the first n examples of
a larger n are the same, so n=100 is a prefix of n=200):
  rl/arithmetic  "Q: 47+38=\\nA:" -> " 85"; + - * on operands of 1-2 digits (train/test), 3 digits (ood).
                 The answer is the last number of the completion; results may be negative ("-35").
  rl/countdown   "Q: use 3 5 2 to make 17\\nA:" -> " 3*5+2"; every given number used exactly once with + - * and
                 parentheses; intermediate results stay >= 0 in the gold solution (found by search).
                 3-4 numbers (train/test), 5 (ood). answer = '{"numbers": [3, 5, 2], "target": 17}'.
                 use="subset" (countdown-mixed, ../shared/papers/etr.md D.1): each number at most once, so
                 " 3*5" answers "use 3 5 2 to make 15"; the answer then carries "use": "subset".
  rl/arithmetic_cot  "Q: 47*36=\nA:" -> " 47*6=282, 47*30=1410, 282+1410=1692 #### 1692": + and * with a
                 worked trace (etr.md D.1): addition digit column by column from the right ("7+6=13, 4+3+1=8"),
                 multiplication one partial product per non-zero digit of the second operand, each added to
                 the running sum. Both operands have d digits, d uniform in `digits` (2-5; ood: 6).
  rl/sorting     "Q: sort 5 2 8 1\\nA:" -> " 1 2 5 8"; digits (or words, kind="words"); 3-6 items (train/test),
                 8-10 (ood).
train and test are disjoint: a problem goes to test when a hash of its canonical form (operands of + and *
sorted, countdown numbers sorted, the multiset of items to sort) is below test_fraction, so "47+38" and
"38+47" land in the same split. ood uses harder settings no train problem has. Examples are unique within
a call (unique=True); asking for more than the split holds is an error naming the count reached.
"""
from __future__ import annotations

import ast
import json
import random
import re
from collections import Counter
from typing import Callable, Iterator, Sequence

from shared.data.examples import Example, check_split, register_task
from shared.data.sources import DataError, hash_fraction
from shared.data.tasks.answers import check_last_number, first_line

PROCEDURAL_TASKS = ("arithmetic", "arithmetic_cot", "countdown", "sorting")


def _check_range(name: str, key: str, value, low: int = 1) -> tuple[int, int]:
    lo, hi = (int(value[0]), int(value[-1])) if isinstance(value, (list, tuple)) else (int(value), int(value))
    if not low <= lo <= hi:
        raise ValueError(f"rl/{name}: {key}={value!r} must be (min, max) with {low} <= min <= max")
    return lo, hi


# ------------------------------------------------------------------------------------------ generation core


Draw = Callable[[random.Random, bool], tuple[str, str, Callable[[], Example]]]


def _generate(name: str, split: str, n: int, seed: int, draw: Draw, test_fraction: float,
              unique: bool) -> list[Example]:
    """n examples from `draw(rng, ood) -> (canonical key, prompt, build)` whose key falls in `split`; `build()`
    makes the example (only for kept draws: the countdown solver is the expensive part)."""
    check_split(name, split)
    if n <= 0:
        raise ValueError(f"rl/{name}: n must be positive, got {n}")
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"rl/{name}: test_fraction must be in (0, 1), got {test_fraction}")
    rng = random.Random(f"rl/{name}:{split}:{seed}")  # str seeds are stable across runs and machines
    ood = split == "ood"
    examples: list[Example] = []
    seen: set[str] = set()
    attempts, max_attempts = 0, 200 * n + 20_000
    while len(examples) < n:
        attempts += 1
        if attempts > max_attempts:
            raise DataError(f"rl/{name}: found only {len(examples)} of n={n} {'unique ' if unique else ''}{split} "
                            f"problems in {max_attempts} draws; lower n, widen the options or pass unique=False")
        key, prompt, build = draw(rng, ood)
        if not ood and (hash_fraction(f"rl/{name}:{key}") < test_fraction) != (split == "test"):
            continue
        if unique:
            if prompt in seen:
                continue
            seen.add(prompt)
        examples.append(build())
    return examples


# ------------------------------------------------------------------------------------------ arithmetic

ARITHMETIC_OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}


def _operand(rng: random.Random, digits: int) -> int:
    return rng.randint(0, 9) if digits == 1 else rng.randint(10 ** (digits - 1), 10 ** digits - 1)


def check_arithmetic(example: Example, completion: str) -> bool:
    return check_last_number(example, completion)


@register_task("arithmetic", check_arithmetic)
def arithmetic(split: str, n: int, seed: int = 0, *, ops: str = "+-*", digits=(1, 2), ood_digits=(3, 3),
               test_fraction: float = 0.1, unique: bool = True) -> list[Example]:
    """a <op> b with each operand's digit count uniform in `digits` (ood: `ood_digits`)."""
    if not ops or set(ops) - set(ARITHMETIC_OPS):
        raise ValueError(f"rl/arithmetic: ops={ops!r} must be a non-empty string of + - *")
    train_digits = _check_range("arithmetic", "digits", digits)
    harder_digits = _check_range("arithmetic", "ood_digits", ood_digits)

    def draw(rng: random.Random, ood: bool):
        lo, hi = harder_digits if ood else train_digits
        a, b = _operand(rng, rng.randint(lo, hi)), _operand(rng, rng.randint(lo, hi))
        op = rng.choice(ops)
        result = ARITHMETIC_OPS[op](a, b)
        key = f"{min(a, b)}{op}{max(a, b)}" if op in "+*" else f"{a}{op}{b}"
        prompt = f"Q: {a}{op}{b}=\nA:"
        return key, prompt, lambda: {"prompt": prompt, "completion": f" {result}", "answer": str(result),
                                     "task": "arithmetic"}

    return _generate("arithmetic", split, n, seed, draw, test_fraction, unique)


# ------------------------------------------------------------------------------------------ arithmetic_cot


def addition_trace(a: int, b: int) -> list[str]:
    """Column addition of non-negative a + b from the right: "d1+d2=s" or "d1+d2+1=s" (a carry), one per column."""
    steps, carry = [], 0
    x, y = str(a)[::-1], str(b)[::-1]
    for i in range(max(len(x), len(y))):
        da, db = int(x[i]) if i < len(x) else 0, int(y[i]) if i < len(y) else 0
        total = da + db + carry
        steps.append(f"{da}+{db}+1={total}" if carry else f"{da}+{db}={total}")
        carry = total // 10
    return steps


def multiplication_trace(a: int, b: int) -> list[str]:
    """a * b as partial products a * (digit * 10^k), k from 0, each added to the running sum (zero digits are
    skipped; b = 0 is one step "a*0=0")."""
    steps, running = [], None
    for k, digit in enumerate(str(b)[::-1]):
        if digit == "0":
            continue
        part = int(digit) * 10 ** k
        product = a * part
        steps.append(f"{a}*{part}={product}")
        if running is not None:
            steps.append(f"{running}+{product}={running + product}")
            running += product
        else:
            running = product
    return steps or [f"{a}*0=0"]


def check_arithmetic_cot(example: Example, completion: str) -> bool:
    """The number after the last "####" (else the completion's last number) equals the answer."""
    tail = completion.rsplit("####", 1)[-1]
    return check_last_number(example, tail)


@register_task("arithmetic_cot", check_arithmetic_cot)
def arithmetic_cot(split: str, n: int, seed: int = 0, *, ops: str = "+*", digits=(2, 5), ood_digits=(6, 6),
                   test_fraction: float = 0.1, unique: bool = True) -> list[Example]:
    """a <op> b with a worked trace; both operands have d digits, d uniform in `digits` (ood: `ood_digits`),
    the operation uniform in `ops`. Extra columns: op, digits (d)."""
    if not ops or set(ops) - set("+*"):
        raise ValueError(f"rl/arithmetic_cot: ops={ops!r} must be a non-empty string of + *")
    train_digits = _check_range("arithmetic_cot", "digits", digits)
    harder_digits = _check_range("arithmetic_cot", "ood_digits", ood_digits)

    def draw(rng: random.Random, ood: bool):
        d = rng.randint(*(harder_digits if ood else train_digits))
        a, b = _operand(rng, d), _operand(rng, d)
        op = rng.choice(ops)
        result = a + b if op == "+" else a * b
        prompt = f"Q: {a}{op}{b}=\nA:"
        trace = addition_trace(a, b) if op == "+" else multiplication_trace(a, b)
        return f"{min(a, b)}{op}{max(a, b)}", prompt, lambda: {
            "prompt": prompt, "completion": f" {', '.join(trace)} #### {result}", "answer": str(result),
            "task": "arithmetic_cot", "op": op, "digits": d}

    return _generate("arithmetic_cot", split, n, seed, draw, test_fraction, unique)


# ------------------------------------------------------------------------------------------ countdown

_PRECEDENCE = {"+": 1, "-": 1, "*": 2}
COUNTDOWN_USES = ("all", "subset")


def _combine(a: tuple[int, str, int], b: tuple[int, str, int], op: str) -> tuple[int, str, int]:
    """(value, text, precedence) of `a op b`, parenthesising only where the result would change."""
    left = a[1]
    right = f"({b[1]})" if (op == "-" and b[2] == 1) or (op == "*" and b[2] == 1) else b[1]
    if op == "*" and a[2] == 1:
        left = f"({a[1]})"
    return ARITHMETIC_OPS[op](a[0], b[0]), f"{left}{op}{right}", _PRECEDENCE[op]


def _pair_results(a, b) -> Iterator[tuple[int, str, int]]:
    """Every non-negative combination of two items (a-b and b-a only where >= 0)."""
    yield _combine(a, b, "+")
    yield _combine(a, b, "*")
    if a[0] >= b[0]:
        yield _combine(a, b, "-")
    if b[0] >= a[0] and a[0] != b[0]:
        yield _combine(b, a, "-")


def solve_countdown(numbers: Sequence[int], target: int) -> str | None:
    """An expression using every number once with + - * (non-negative intermediates) equal to target, or None.

    Depth-first over "replace two items by their combination", in a fixed order, so the result is
    deterministic; dead multisets are memoised."""
    dead: set[tuple[int, ...]] = set()

    def search(items: list[tuple[int, str, int]]) -> str | None:
        if len(items) == 1:
            return items[0][1] if items[0][0] == target else None
        signature = tuple(sorted(v for v, _, _ in items))
        if signature in dead:
            return None
        for i in range(len(items)):
            for j in range(i + 1, len(items)):
                rest = items[:i] + items[i + 1:j] + items[j + 1:]
                for combined in _pair_results(items[i], items[j]):
                    found = search(rest + [combined])
                    if found is not None:
                        return found
        dead.add(signature)
        return None

    return search([(int(x), str(int(x)), 3) for x in numbers])


def _countdown_expression(text: str) -> str:
    """The expression part of a completion: its first non-empty line, up to an "=" if any."""
    return first_line(text).split("=")[0].strip()


def evaluate_countdown(expression: str) -> tuple[int, list[int]] | None:
    """(value, numbers used) of an expression of non-negative integers, + - * and parentheses; None if it is
    anything else (unary minus, division, names, ...)."""
    if not expression or len(expression) > 200 or not re.fullmatch(r"[\d\s+\-*()]+", expression):
        return None
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError:
        return None
    used: list[int] = []
    ops = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*"}

    def value(node) -> int:
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
            used.append(node.value)
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in ops:
            return ARITHMETIC_OPS[ops[type(node.op)]](value(node.left), value(node.right))
        raise ValueError("not allowed")

    try:
        return value(tree.body), used
    except ValueError:
        return None


def check_countdown(example: Example, completion: str) -> bool:
    """The completion's expression equals the target and uses exactly the given numbers, each once (the
    answer's "use": "all", the default), or a sub-multiset of them ("use": "subset")."""
    spec = json.loads(example["answer"]) if isinstance(example["answer"], str) else example["answer"]
    result = evaluate_countdown(_countdown_expression(completion))
    if result is None:
        return False
    value, used = result
    given = Counter(int(x) for x in spec["numbers"])
    if spec.get("use", "all") == "subset":
        return value == int(spec["target"]) and not Counter(used) - given
    return value == int(spec["target"]) and Counter(used) == given


@register_task("countdown", check_countdown)
def countdown(split: str, n: int, seed: int = 0, *, count=(3, 4), ood_count=(5, 5), max_number: int = 20,
              max_target: int = 200, use: str = "all", test_fraction: float = 0.1,
              unique: bool = True) -> list[Example]:
    """Numbers uniform in 1..max_number, how many uniform in `count` (ood: `ood_count`); the target is the value
    of a random expression over all of them, kept when 1 <= target <= max_target. use: "all" (each number
    exactly once) | "subset" (each at most once; the gold solution still uses all)."""
    if use not in COUNTDOWN_USES:
        raise ValueError(f"rl/countdown: use={use!r}: expected one of {', '.join(COUNTDOWN_USES)}")
    train_count = _check_range("countdown", "count", count, low=2)
    harder_count = _check_range("countdown", "ood_count", ood_count, low=2)
    if max_number < 1 or max_target < 1:
        raise ValueError(f"rl/countdown: max_number={max_number} and max_target={max_target} must be >= 1")

    def draw(rng: random.Random, ood: bool):
        lo, hi = harder_count if ood else train_count
        while True:
            numbers = [rng.randint(1, max_number) for _ in range(rng.randint(lo, hi))]
            pool = list(numbers)
            while len(pool) > 1:  # a random expression tree with non-negative intermediates
                a, b = (pool.pop(rng.randrange(len(pool))) for _ in range(2))
                op = rng.choice("+-*")
                pool.append(max(a, b) - min(a, b) if op == "-" else ARITHMETIC_OPS[op](a, b))
            target = pool[0]
            if 1 <= target <= max_target:
                break
        prompt = f"Q: use {' '.join(map(str, numbers))} to make {target}\nA:"

        def build() -> Example:
            solution = solve_countdown(numbers, target)
            assert solution is not None, (numbers, target)  # the generating expression is a solution
            return {"prompt": prompt, "completion": f" {solution}", "task": "countdown",
                    "answer": json.dumps({"numbers": numbers, "target": target,
                                          **({"use": use} if use != "all" else {})}), "numbers": numbers,
                    "target": target}

        return f"{' '.join(map(str, sorted(numbers)))}->{target}", prompt, build

    return _generate("countdown", split, n, seed, draw, test_fraction, unique)


# ------------------------------------------------------------------------------------------ sorting

SORT_WORDS = ("ant", "bee", "cat", "cow", "dog", "eel", "elk", "emu", "fox", "gnu", "hen", "jay", "owl", "pig",
              "ram", "rat", "yak", "ape", "bat", "cod", "doe", "hog", "kid", "olm", "pug", "ray", "sow", "tit",
              "asp", "boa", "cub", "dab", "eft", "gar", "kit", "lob", "moa", "nit", "pup", "roo")


def check_sorting(example: Example, completion: str) -> bool:
    """The completion's first line, split on spaces/commas, equals the sorted items."""
    return re.split(r"[\s,]+", first_line(completion)) == str(example["answer"]).split()


@register_task("sorting", check_sorting)
def sorting(split: str, n: int, seed: int = 0, *, kind: str = "digits", lengths=(3, 6), ood_lengths=(8, 10),
            test_fraction: float = 0.1, unique: bool = True) -> list[Example]:
    """Sort a list of digits (with repeats) or of distinct words (kind="words") ascending."""
    if kind not in ("digits", "words"):
        raise ValueError(f"rl/sorting: kind must be 'digits' or 'words', got {kind!r}")
    train_lengths = _check_range("sorting", "lengths", lengths)
    harder_lengths = _check_range("sorting", "ood_lengths", ood_lengths)
    if kind == "words" and max(train_lengths[1], harder_lengths[1]) > len(SORT_WORDS):
        raise ValueError(f"rl/sorting: lists of distinct words are at most {len(SORT_WORDS)} long")

    def draw(rng: random.Random, ood: bool):
        length = rng.randint(*(harder_lengths if ood else train_lengths))
        items = ([str(rng.randint(0, 9)) for _ in range(length)] if kind == "digits"
                 else rng.sample(SORT_WORDS, length))
        answer = " ".join(sorted(items))
        prompt = f"Q: sort {' '.join(items)}\nA:"
        return f"{kind}:{answer}", prompt, lambda: {"prompt": prompt, "completion": f" {answer}",
                                                    "answer": answer, "task": "sorting"}

    return _generate("sorting", split, n, seed, draw, test_fraction, unique)

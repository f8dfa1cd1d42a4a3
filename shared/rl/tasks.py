"""Verifiable tasks for RL and SFT: procedural generators and loaders for real math sets.

A task is a named set of examples, each a dict
    {"prompt": str, "completion": str, "answer": str, "task": str, **extra columns}
  prompt      plain text, no chat template: "Q: <problem>\\nA:"
  completion  a gold solution (what SFT warm-starts on), starting with a space: " 85"; "" when none exists
  answer      the gold final answer as a string (what checkers compare against)
The extra columns travel to reward functions as keyword arguments (Tunix contract).

Each task is registered in `shared.registry.DATASETS` as "rl/<name>":
    fn(split: str, n: int, seed: int, **options) -> list[dict]      split in "train" | "test" | "ood"
and has a checker `TASK_CHECKERS[name](example, completion) -> bool`; `task_reward(name)` wraps a checker
into the reward contract `(prompts, completions, **columns) -> list[float]` (registered by the RL task).

Procedural tasks (generated here, deterministic in (split, n, seed, options); the first n examples of a
larger n are the same, so n=100 is a prefix of n=200):
  rl/arithmetic  "Q: 47+38=\\nA:" -> " 85"; + - * on operands of 1-2 digits (train/test), 3 digits (ood).
                 The answer is the last number of the completion; results may be negative ("-35").
  rl/countdown   "Q: use 3 5 2 to make 17\\nA:" -> " 3*5+2"; every given number used exactly once with + - * and
                 parentheses; intermediate results stay >= 0 in the gold solution (found by search).
                 3-4 numbers (train/test), 5 (ood). answer = '{"numbers": [3, 5, 2], "target": 17}'.
  rl/sorting     "Q: sort 5 2 8 1\\nA:" -> " 1 2 5 8"; digits (or words, kind="words"); 3-6 items (train/test),
                 8-10 (ood).
train and test are disjoint: a problem goes to test when a hash of its canonical form (operands of + and *
sorted, countdown numbers sorted, the multiset of items to sort) is below test_fraction, so "47+38" and
"38+47" land in the same split. ood uses harder settings no train problem has. Examples are unique within
a call (unique=True); asking for more than the split holds is an error naming the count reached.

Real data (read-only files; this team keeps them under /work/shared/data, see its README):
  rl/gsm8k   path = folder with train.jsonl / test.jsonl ({"question", "answer": "...#### 72"}) or one such
             file (then split by a hash of the question, test_fraction). completion = the solution without
             <<calculator>> annotations, ending "#### 72"; answer "72".
  rl/math    path = folder with math_test5000.jsonl and math500_test.jsonl: test = MATH-500, train = the
             other 4,500 problems; or one file (hash split). answer = the "answer" field, else the last
             \\boxed{...} of "solution".
  rl/svamp   SVAMP.json (JSON array: Body, Question, Equation, Answer); path = the file or a folder holding it
             (or svamp/SVAMP.json). Hash split (test_fraction; 1.0 puts every problem in test).
  rl/asdiv   asdiv.jsonl (body, question, answer "11 (plums)", formula); non-numeric answers are skipped
             unless numeric_only=False. Hash split.
  rl/mawps   mawps test.jsonl (input, target); path = a file (e.g. mawps/addsub.jsonl) or folder. Hash split.
  The real sets have no "ood" split. n <= 0 returns every example in file order; n > 0 the first
  min(n, available) of a seeded shuffle.
  rl/reasoning_gym (optional extra [tasks]): reasoning_gym.create_dataset(dataset, **options), hash-split on
  the question; ood needs ood_options (generator settings for the harder split).
"""
from __future__ import annotations

import ast
import gzip
import json
import logging
import math
import os
import random
import re
from fractions import Fraction
from typing import Any, Callable, Iterator, Sequence

from shared.data.sources import DataError, hash_fraction
from shared.registry import DATASETS, REWARDS

log = logging.getLogger(__name__)

SPLITS = ("train", "test", "ood")
Example = dict[str, Any]
Checker = Callable[[Example, str], bool]

TASK_CHECKERS: dict[str, Checker] = {}


def register_task(name: str, checker: Checker):
    """Registers fn as DATASETS "rl/<name>" and its checker as TASK_CHECKERS[name]."""

    def add(fn):
        DATASETS.register(f"rl/{name}", fn)
        TASK_CHECKERS[name] = checker
        return fn

    return add


def short_name(name: str) -> str:
    return name[3:] if name.startswith("rl/") else name


def load_task(name: str, split: str, n: int, seed: int = 0, **options) -> list[Example]:
    """Examples of task `name` ("arithmetic" or "rl/arithmetic")."""
    return DATASETS.get(f"rl/{short_name(name)}")(split, n, seed, **options)


def checker(name: str) -> Checker:
    key = short_name(name)
    if key not in TASK_CHECKERS:
        raise KeyError(f"no checker for task {name!r}; tasks with checkers: {', '.join(sorted(TASK_CHECKERS))}")
    return TASK_CHECKERS[key]


def task_reward(name: str) -> Callable[..., list[float]]:
    """The checker of task `name` as a reward `(prompts, completions, **columns) -> list[float]` (1.0 / 0.0).

    Every column must hold one value per completion; the checker sees {"prompt": ..., **columns}."""
    check = checker(name)

    def reward(prompts: Sequence[str], completions: Sequence[str], **columns) -> list[float]:
        count = len(completions)
        if len(prompts) != count:
            raise ValueError(f"task reward {name!r}: {len(prompts)} prompts for {count} completions")
        if "answer" not in columns:
            raise ValueError(f"task reward {name!r}: no 'answer' column (columns: {', '.join(sorted(columns))})")
        for key, values in columns.items():
            if len(values) != count:
                raise ValueError(f"task reward {name!r}: column {key!r} has {len(values)} values for "
                                 f"{count} completions")
        return [float(check({"prompt": prompts[i], **{k: v[i] for k, v in columns.items()}}, completions[i]))
                for i in range(count)]

    reward.__name__ = reward.__qualname__ = f"task_reward_{short_name(name)}"
    return reward


def _check_split(name: str, split: str, allowed: Sequence[str] = SPLITS) -> None:
    if split not in allowed:
        raise ValueError(f"rl/{name}: split must be one of {', '.join(allowed)}; got {split!r}")


def _check_range(name: str, key: str, value, low: int = 1) -> tuple[int, int]:
    lo, hi = (int(value[0]), int(value[-1])) if isinstance(value, (list, tuple)) else (int(value), int(value))
    if not low <= lo <= hi:
        raise ValueError(f"rl/{name}: {key}={value!r} must be (min, max) with {low} <= min <= max")
    return lo, hi


# ------------------------------------------------------------------------------------------ answer parsing

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


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


# ------------------------------------------------------------------------------------------ generation core


Draw = Callable[[random.Random, bool], tuple[str, str, Callable[[], Example]]]


def _generate(name: str, split: str, n: int, seed: int, draw: Draw, test_fraction: float,
              unique: bool) -> list[Example]:
    """n examples from `draw(rng, ood) -> (canonical key, prompt, build)` whose key falls in `split`; `build()`
    makes the example (only for kept draws: the countdown solver is the expensive part)."""
    _check_split(name, split)
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


# ------------------------------------------------------------------------------------------ countdown

_PRECEDENCE = {"+": 1, "-": 1, "*": 2}


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
    return _first_line(text).split("=")[0].strip()


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
    """The completion's expression uses exactly the given numbers (each once) and equals the target."""
    spec = json.loads(example["answer"]) if isinstance(example["answer"], str) else example["answer"]
    result = evaluate_countdown(_countdown_expression(completion))
    if result is None:
        return False
    value, used = result
    return value == int(spec["target"]) and sorted(used) == sorted(int(x) for x in spec["numbers"])


@register_task("countdown", check_countdown)
def countdown(split: str, n: int, seed: int = 0, *, count=(3, 4), ood_count=(5, 5), max_number: int = 20,
              max_target: int = 200, test_fraction: float = 0.1, unique: bool = True) -> list[Example]:
    """Numbers uniform in 1..max_number, how many uniform in `count` (ood: `ood_count`); the target is the value
    of a random expression over all of them, kept when 1 <= target <= max_target."""
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
                    "answer": json.dumps({"numbers": numbers, "target": target}), "numbers": numbers,
                    "target": target}

        return f"{' '.join(map(str, sorted(numbers)))}->{target}", prompt, build

    return _generate("countdown", split, n, seed, draw, test_fraction, unique)


# ------------------------------------------------------------------------------------------ sorting

SORT_WORDS = ("ant", "bee", "cat", "cow", "dog", "eel", "elk", "emu", "fox", "gnu", "hen", "jay", "owl", "pig",
              "ram", "rat", "yak", "ape", "bat", "cod", "doe", "hog", "kid", "olm", "pug", "ray", "sow", "tit",
              "asp", "boa", "cub", "dab", "eft", "gar", "kit", "lob", "moa", "nit", "pup", "roo")


def check_sorting(example: Example, completion: str) -> bool:
    """The completion's first line, split on spaces/commas, equals the sorted items."""
    return re.split(r"[\s,]+", _first_line(completion)) == str(example["answer"]).split()


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


# ------------------------------------------------------------------------------------------ real data: reading


def _resolve(name: str, path: str, candidates: Sequence[str]) -> str:
    """A file: itself; a folder: the first candidate file name inside it."""
    if not path:
        raise DataError(f"rl/{name}: no path given; pass path=<file or folder with {' or '.join(candidates)}> "
                        f"(in a config: data.task_options.path)")
    if os.path.isfile(path):
        return path
    if os.path.isdir(path):
        for candidate in candidates:
            if os.path.isfile(os.path.join(path, candidate)):
                return os.path.join(path, candidate)
        raise DataError(f"rl/{name}: folder {path} holds none of {', '.join(candidates)}")
    raise DataError(f"rl/{name}: path {path} does not exist")


def read_records(path: str) -> Iterator[tuple[str, dict]]:
    """(where, record) for a .jsonl file (where = "file:line") or a .json array (where = "file[index]"), either
    possibly gzipped (.gz)."""
    try:
        with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
            data = f.read()
    except (OSError, EOFError) as e:
        raise DataError(f"{path}: cannot read ({e})") from e
    if path.removesuffix(".gz").endswith(".json"):
        try:
            records = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise DataError(f"{path}: not a JSON file ({e})") from e
        if not isinstance(records, list):
            raise DataError(f"{path}: expected a JSON array of records, got {type(records).__name__}")
        numbered = ((f"{path}[{i}]", r) for i, r in enumerate(records))
    else:
        numbered = _jsonl_lines(path, data)
    for where, record in numbered:
        if not isinstance(record, dict):
            raise DataError(f"{where}: expected a JSON object, got {type(record).__name__}")
        yield where, record


def _jsonl_lines(path: str, data: bytes) -> Iterator[tuple[str, Any]]:
    for lineno, raw in enumerate(data.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            yield f"{path}:{lineno}", json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as e:
            raise DataError(f"{path}:{lineno}: not UTF-8 ({e.reason} at byte {e.start})") from e
        except json.JSONDecodeError as e:
            raise DataError(f"{path}:{lineno}: invalid JSON: {e.msg} at column {e.colno}") from e


def field(record: dict, key: str, where: str, kinds: type | tuple[type, ...] = str) -> Any:
    """record[key], which must exist and be of `kinds`; errors name the record's file and line."""
    if key not in record:
        raise DataError(f"{where}: record has no field {key!r}; its fields: {', '.join(sorted(record)) or '(none)'}")
    value = record[key]
    if not isinstance(value, kinds) or isinstance(value, bool):
        expected = kinds.__name__ if isinstance(kinds, type) else " or ".join(k.__name__ for k in kinds)
        raise DataError(f"{where}: field {key!r} is {type(value).__name__}, expected {expected}")
    return value


def _question_prompt(question: str) -> str:
    return f"Q: {question.strip()}\nA:"


def _in_split(name: str, key: str, split: str, test_fraction: float) -> bool:
    return (hash_fraction(f"rl/{name}:{key}") < test_fraction) == (split == "test")


def _select(name: str, split: str, examples: list[Example], n: int, seed: int) -> list[Example]:
    """All examples in file order (n <= 0) or the first min(n, len) of a seeded shuffle (so a smaller n gives a
    prefix of a larger one)."""
    if n <= 0:
        return examples
    if n > len(examples):
        log.warning("rl/%s: asked for n=%d %s examples, the split has %d; returning all", name, n, split,
                    len(examples))
    order = list(range(len(examples)))
    random.Random(f"rl/{name}:{split}:{seed}").shuffle(order)
    return [examples[i] for i in order[:n]]


def _hash_split(name: str, split: str, examples: list[Example], test_fraction: float) -> list[Example]:
    if not 0.0 <= test_fraction <= 1.0:
        raise ValueError(f"rl/{name}: test_fraction must be in [0, 1], got {test_fraction}")
    return [e for e in examples if _in_split(name, e["prompt"], split, test_fraction)]


# ------------------------------------------------------------------------------------------ real data: sets


def _gsm8k_example(record: dict, where: str) -> Example:
    question = field(record, "question", where)
    solution = field(record, "answer", where)
    if "####" not in solution:
        raise DataError(f"{where}: field 'answer' has no '#### <final answer>' line")
    final = solution.rsplit("####", 1)[1].strip().replace(",", "")
    if not final:
        raise DataError(f"{where}: field 'answer' has nothing after '####'")
    body = re.sub(r"<<[^>]*>>", "", solution.rsplit("####", 1)[0]).rstrip()
    return {"prompt": _question_prompt(question), "completion": f" {body}\n#### {final}", "answer": final,
            "task": "gsm8k"}


@register_task("gsm8k", check_last_number)
def gsm8k(split: str, n: int = 0, seed: int = 0, *, path: str = "", test_fraction: float = 0.1) -> list[Example]:
    _check_split("gsm8k", split, ("train", "test"))
    if path and os.path.isdir(path):
        file = _resolve("gsm8k", path, (f"{split}.jsonl", f"gsm8k/{split}.jsonl"))
        examples = [_gsm8k_example(r, w) for w, r in read_records(file)]
    else:
        file = _resolve("gsm8k", path, ("train.jsonl", "test.jsonl"))
        examples = _hash_split("gsm8k", split, [_gsm8k_example(r, w) for w, r in read_records(file)], test_fraction)
    return _select("gsm8k", split, examples, n, seed)


def last_boxed(text: str) -> str | None:
    """The content of the last \\boxed{...} (or \\fbox{...}) in text, braces balanced; None if there is none."""
    start = max(text.rfind("\\boxed"), text.rfind("\\fbox"))
    if start < 0:
        return None
    brace = text.find("{", start)
    if brace < 0:
        return None
    depth = 0
    for i in range(brace, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[brace + 1:i]
    return None


def normalize_math_answer(text: str) -> str:
    """A light LaTeX normaliser for exact matching (the rewards package has the full verifier)."""
    text = text.strip().strip("$").strip()
    for old, new in (("\\left", ""), ("\\right", ""), ("\\!", ""), ("\\,", ""), ("\\;", ""), ("\\dfrac", "\\frac"),
                     ("\\tfrac", "\\frac"), ("^{\\circ}", ""), ("^\\circ", ""), ("\\%", ""), ("\\$", ""),
                     ("\\text{ }", "")):
        text = text.replace(old, new)
    text = re.sub(r"\\text\{\s*([^{}]*)\}", r"\1", text)
    text = re.sub(r"\s+", "", text).rstrip(".")
    return text


def check_math(example: Example, completion: str) -> bool:
    """The last \\boxed{} of the completion equals the answer after light normalisation (or numerically)."""
    found = last_boxed(completion)
    if found is None:
        return False
    got, want = normalize_math_answer(found), normalize_math_answer(str(example["answer"]))
    return got == want or numbers_equal(got, want)


def _math_example(record: dict, where: str) -> Example:
    problem = field(record, "problem", where)
    solution = field(record, "solution", where)
    answer = record.get("answer")
    if answer is None:
        answer = last_boxed(solution)
        if answer is None:
            raise DataError(f"{where}: record has no 'answer' field and its 'solution' has no \\boxed{{...}}")
    elif not isinstance(answer, str):
        raise DataError(f"{where}: field 'answer' is {type(answer).__name__}, expected str")
    example = {"prompt": _question_prompt(problem), "completion": f" {solution.strip()}", "answer": answer,
               "task": "math"}
    level = record.get("level")
    example["level"] = int(level.split()[-1]) if isinstance(level, str) and level.split()[-1].isdigit() else level
    example["subject"] = record.get("subject", record.get("type", ""))
    return example


@register_task("math", check_math)
def math_competition(split: str, n: int = 0, seed: int = 0, *, path: str = "",
                     test_fraction: float = 0.1) -> list[Example]:
    _check_split("math", split, ("train", "test"))
    if path and os.path.isdir(path):
        test_file = _resolve("math", path, ("math500_test.jsonl",))
        test = [_math_example(r, w) for w, r in read_records(test_file)]
        if split == "test":
            return _select("math", split, test, n, seed)
        train_file = _resolve("math", path, ("math_test5000.jsonl",))
        held_out = {e["prompt"] for e in test}
        examples = [e for e in (_math_example(r, w) for w, r in read_records(train_file))
                    if e["prompt"] not in held_out]
    else:
        file = _resolve("math", path, ("math500_test.jsonl", "math_test5000.jsonl"))
        examples = _hash_split("math", split, [_math_example(r, w) for w, r in read_records(file)], test_fraction)
    return _select("math", split, examples, n, seed)


def _join_body(body: str, question: str) -> str:
    body = body.strip()
    return f"{body}{'' if body.endswith(('.', '?', '!', ',')) else '.'} {question.strip()}"


def _svamp_example(record: dict, where: str) -> Example:
    answer = format_number(field(record, "Answer", where, (int, float)))
    question = _join_body(field(record, "Body", where), field(record, "Question", where))
    equation = record.get("Equation")
    if isinstance(equation, str) and equation.strip():
        equation = re.sub(r"(\d+)\.0\b", r"\1", equation).strip()
        equation = re.sub(r"^\(\s*(.*?)\s*\)$", r"\1", equation)
        completion = f" {equation} = {answer}"
    else:
        completion = f" {answer}"
    return {"prompt": _question_prompt(question), "completion": completion, "answer": answer, "task": "svamp",
            "type": record.get("Type", "")}


def _word_problem_set(name: str, split: str, n: int, seed: int, path: str, candidates: Sequence[str],
                      to_example: Callable[[dict, str], Example | None], test_fraction: float) -> list[Example]:
    _check_split(name, split, ("train", "test"))
    file = _resolve(name, path, candidates)
    examples, skipped = [], 0
    for where, record in read_records(file):
        example = to_example(record, where)
        if example is None:
            skipped += 1
        else:
            examples.append(example)
    if skipped:
        log.info("rl/%s: skipped %d records of %s (non-numeric answers)", name, skipped, file)
    return _select(name, split, _hash_split(name, split, examples, test_fraction), n, seed)


@register_task("svamp", check_last_number)
def svamp(split: str, n: int = 0, seed: int = 0, *, path: str = "", test_fraction: float = 0.2) -> list[Example]:
    return _word_problem_set("svamp", split, n, seed, path, ("SVAMP.json", "svamp/SVAMP.json"), _svamp_example,
                             test_fraction)


_ASDIV_NUMBER = re.compile(r"^\s*(-?[\d,]*\.?\d+)\s*(\([^()]*\))?\s*$")


@register_task("asdiv", check_last_number)
def asdiv(split: str, n: int = 0, seed: int = 0, *, path: str = "", test_fraction: float = 0.2,
          numeric_only: bool = True) -> list[Example]:
    def to_example(record: dict, where: str) -> Example | None:
        question = _join_body(field(record, "body", where), field(record, "question", where))
        raw = field(record, "answer", where)
        match = _ASDIV_NUMBER.match(raw)
        if match is None and numeric_only:
            return None
        answer = match.group(1).replace(",", "") if match else re.sub(r"\s*\([^()]*\)\s*$", "", raw).strip()
        formula = record.get("formula")
        formula_ok = isinstance(formula, str) and last_number(formula) is not None and numbers_equal(
            last_number(formula), answer)
        completion = f" {formula.strip()}" if formula_ok else f" {answer}"
        return {"prompt": _question_prompt(question), "completion": completion, "answer": answer, "task": "asdiv",
                "type": record.get("solution_type", "")}

    return _word_problem_set("asdiv", split, n, seed, path, ("asdiv.jsonl", "asdiv/asdiv.jsonl"), to_example,
                             test_fraction)


@register_task("mawps", check_last_number)
def mawps(split: str, n: int = 0, seed: int = 0, *, path: str = "", test_fraction: float = 0.2) -> list[Example]:
    def to_example(record: dict, where: str) -> Example:
        answer = format_number(field(record, "target", where, (int, float)))
        return {"prompt": _question_prompt(field(record, "input", where)), "completion": f" {answer}",
                "answer": answer, "task": "mawps", "type": record.get("type", "")}

    return _word_problem_set("mawps", split, n, seed, path, ("test.jsonl", "mawps/test.jsonl"), to_example,
                             test_fraction)


# ------------------------------------------------------------------------------------------ reasoning-gym


def _import_reasoning_gym():
    try:
        import reasoning_gym
    except ImportError:
        raise ImportError("rl/reasoning_gym needs the optional package 'reasoning-gym': "
                          "pip install -e '.[tasks]' (or pip install reasoning-gym)") from None
    return reasoning_gym


def check_reasoning_gym(example: Example, completion: str) -> bool:
    """reasoning-gym's own scorer for the dataset, on the stripped completion; True when it gives full marks."""
    rg = _import_reasoning_gym()
    name, entry = example["rg_dataset"], example["rg_entry"]
    score_fn = getattr(rg, "get_score_answer_fn", None)
    if score_fn is not None:
        score = score_fn(name)(answer=completion.strip(), entry=entry)
    else:  # older releases: score through a dataset instance
        score = rg.create_dataset(name, size=1, seed=0).score_answer(answer=completion.strip(), entry=entry)
    return float(score) >= 1.0 - 1e-9


@register_task("reasoning_gym", check_reasoning_gym)
def reasoning_gym_task(split: str, n: int, seed: int = 0, *, dataset: str = "leg_counting", ood_options=None,
                       test_fraction: float = 0.1, **options) -> list[Example]:
    """reasoning_gym.create_dataset(dataset, **options); train/test split by a hash of the question; ood uses
    options updated with ood_options (required for that split)."""
    _check_split("reasoning_gym", split)
    rg = _import_reasoning_gym()
    if n <= 0:
        raise ValueError(f"rl/reasoning_gym: n must be positive, got {n}")
    if split == "ood":
        if not ood_options:
            raise ValueError("rl/reasoning_gym: split 'ood' needs ood_options (the harder generator settings)")
        options = {**options, **dict(ood_options)}
    examples: list[Example] = []
    size = n if split == "ood" else int(n / (test_fraction if split == "test" else 1 - test_fraction) * 1.3) + 16
    for attempt in range(8):  # grow the generated set until the split holds n examples
        data = rg.create_dataset(dataset, size=size, seed=seed * 1000 + attempt, **options)
        for entry in data:
            question = str(entry["question"])
            if split != "ood" and not _in_split("reasoning_gym", f"{dataset}:{question}", split, test_fraction):
                continue
            answer = "" if entry.get("answer") is None else str(entry["answer"])
            examples.append({"prompt": _question_prompt(question), "completion": f" {answer}" if answer else "",
                             "answer": answer, "task": "reasoning_gym", "rg_dataset": dataset,
                             "rg_entry": entry})
            if len(examples) == n:
                return examples
        size *= 2
    raise DataError(f"rl/reasoning_gym: generated only {len(examples)} of n={n} {split} examples of {dataset!r}")


TASK_NAMES = tuple(sorted(TASK_CHECKERS))
PROCEDURAL_TASKS = ("arithmetic", "countdown", "sorting")

# Every task's checker is also a reward, "task/<name>", whoever registers the task and whenever (listed at lookup).
REWARDS.register_family("task/", lambda: list(TASK_CHECKERS), task_reward)

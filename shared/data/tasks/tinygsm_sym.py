"""TinyGSM-Sym: synthetic word problems with several correct solution paths, an answer-leak shortcut and a
process checker (../shared/papers/clipo.md, section D.1). Registered as DATASETS "rl/tinygsm_sym".

    "Q: Ann has 17 pens. Ann buys 3 bags with 5 pens in each. Ann gives 9 pens to Ben. How many pens does Ann
     have now?\\nA:"  ->  " <<3*5=15>>\\n<<17+15=32>>\\n<<32-9=23>>\\n#### 23"

A problem is a chain of clauses on one quantity (a start clause, then add / sub / mul / div clauses and
"bags with c each" groups); its value is an expression tree with k operations. Solutions are GSM8K-style
steps `<<a op b=c>>`, one per line, then `#### answer`. Every problem has >= 2 distinct correct step sequences
(commutative, associative and distributive rewrites of the tree, and the order of independent sub-results);
the gold completion is one of them, drawn uniformly, so SFT sees genuinely different correct trajectories.

Splits (deterministic in (split, n, seed, options); a smaller n is a prefix of a larger one):
  train   the 40 training templates (k = 2-3 ops), training names, amounts 1-99; in `leak_fraction` (25%) of
          problems the answer also appears verbatim in an irrelevant sentence ("Ben's locker number is 23.")
          - the shortcut channel. In the others the answer is never one of the question's numbers.
  id      (alias test) as train, problems disjoint from train (hash of the problem without its leak sentence)
  sym     (alias ood) training templates, unseen names, amounts 100-999, no leak
  p1, p2  a training template extended by 1 / 2 extra clauses (k+1, k+2 ops), no leak
  noop    a training template plus one irrelevant sentence with a number ("Last year Ann had 12 pens."), no leak
  noleak  as id but the answer never appears among the question's numbers
Each example: prompt, completion, answer, task, numbers (the question's numbers as a space-separated string,
which keeps the column a flat string), leak (bool), template, ops, paths (distinct correct step sequences), split.

Checkers: `check_tinygsm_sym` (outcome: the final answer, after "####" or else the last number, equals the
answer) is the task's reward "task/tinygsm_sym"; `process_errors` / `process_valid` check every step
(parseable, arithmetic right, operands are question numbers or earlier results, the final answer is the last
step's result); `check_process` (outcome AND process) is the reward "task/tinygsm_sym_process" (both rewards
are registered in shared/rewards/task.py). `is_copy` flags a final answer that
is one of the question's numbers without a valid derivation (the leak shortcut).
"""
from __future__ import annotations

import random
import re
from typing import Iterator

from shared.data.examples import Example, register_task
from shared.data.sources import DataError, hash_fraction

NAME = "tinygsm_sym"
EVAL_SPLITS = ("id", "sym", "p1", "p2", "noop", "noleak")
SPLIT_ALIASES = {"test": "id", "ood": "sym"}

TRAIN_NAMES = ("Ann", "Ben", "Carl", "Dana", "Eva", "Finn", "Gina", "Hugo", "Ivy", "Jack", "Kate", "Leo", "Mia",
               "Nick", "Olga", "Paul", "Rosa", "Sam", "Tara", "Umar", "Vera", "Will", "Yara", "Zack", "Lily",
               "Omar", "Nina", "Ravi", "Sofia", "Theo")
SYM_NAMES = ("Abel", "Bianca", "Cyrus", "Delia", "Emil", "Farah", "Gustav", "Hilda", "Ismael", "Jorge", "Kiara",
             "Lorenzo", "Marta", "Nadia", "Oscar", "Petra", "Quentin", "Rhea", "Silas", "Tomas")
OBJECTS = ("apples", "pens", "stickers", "marbles", "cookies", "books", "coins", "shells", "stamps", "cards", "eggs",
           "candles", "buttons", "rocks", "pencils", "beads", "cups", "socks", "toys", "plums")

# Clause kinds: the sentence forms ({n} name, {f} friend, {o} object, {b}/{c} numbers) and the operation.
START_FORMS = {"has": ("{n} has {a} {o}.", "{n} starts with {a} {o}."),
               "has_group": ("{n} has {b} bags with {c} {o} in each.", "{n} has {b} boxes of {c} {o} each.")}
CLAUSE_FORMS = {
    "add": ("{n} buys {b} more {o}.", "{n} finds {b} more {o}.", "{n} gets {b} more {o} from {f}."),
    "sub": ("{n} gives {b} {o} to {f}.", "{n} loses {b} {o}.", "{n} sells {b} {o}."),
    "mul": ("{n} ends up with {b} times as many {o}.", "The number of {o} {n} has becomes {b} times as large."),
    "div": ("{n} splits the {o} into {b} equal piles and keeps one pile.",
            "{n} puts the {o} into {b} equal bags and keeps only one bag."),
    "add_group": ("{n} buys {b} bags with {c} {o} in each.", "{n} gets {b} boxes of {c} {o} each."),
    "sub_group": ("{n} gives {b} friends {c} {o} each.", "{n} packs {b} gifts of {c} {o} each and gives them away."),
}
CLAUSE_OPS = {"add": 1, "sub": 1, "mul": 1, "div": 1, "add_group": 2, "sub_group": 2}
SINGLE_CLAUSES = ("add", "sub", "mul", "div")
LEAK_FORMS = ("{f}'s locker number is {x}.", "{f} lives at number {x} on Elm Street.", "{f} is {x} years old.")
NOOP_FORMS = ("Last year {n} had {x} {o}.", "{x} of the {o} are a bit smaller than the rest.",
              "{f} has {x} {o} at home.")
QUESTION = "How many {o} does {n} have now?"


def all_templates() -> list[tuple[str, tuple[str, ...]]]:
    """Every (start, clauses) with 2-3 operations in total (has_group's start counts one) and at least one
    commutative operation, so every problem has a second correct path."""
    out = []
    for start in ("has", "has_group"):
        base = 1 if start == "has_group" else 0

        def extend(clauses):
            ops = base + sum(CLAUSE_OPS[c] for c in clauses)
            commutative = start == "has_group" or set(clauses) - {"sub", "div"}
            if 2 <= ops <= 3 and clauses and commutative:
                out.append((start, tuple(clauses)))
            if ops < 3:
                for kind in CLAUSE_FORMS:
                    extend(clauses + [kind])

        extend([])
    return sorted(set(out))


def train_templates(count: int = 40) -> list[tuple[str, tuple[str, ...]]]:
    """The `count` training templates: a fixed seeded choice among all_templates()."""
    templates = all_templates()
    random.Random("rl/tinygsm_sym:templates").shuffle(templates)
    return sorted(templates[:count])


def template_id(template) -> str:
    return "+".join((template[0],) + tuple(template[1]))


# ------------------------------------------------------------------------------------------ expression trees
# A tree is ("n", value) or (op, left, right) with op in + - * /.


def evaluate(tree) -> int | None:
    """The value of a tree if every intermediate is a non-negative integer (division exact), else None."""
    if tree[0] == "n":
        return tree[1]
    a, b = evaluate(tree[1]), evaluate(tree[2])
    if a is None or b is None:
        return None
    op = tree[0]
    if op == "+":
        return a + b
    if op == "-":
        return a - b if a >= b else None
    if op == "*":
        return a * b
    return a // b if b and a % b == 0 else None


def _rewrites_here(t) -> Iterator[tuple]:
    """Equivalent trees from one rewrite at the root (validity is checked by the caller)."""
    op = t[0]
    if op == "n":
        return
    x, y = t[1], t[2]
    if op in "+*":
        yield (op, y, x)                                           # commutativity
        if x[0] == op:
            yield (op, x[1], (op, x[2], y))                        # (a+b)+c -> a+(b+c)
        if y[0] == op:
            yield (op, (op, x, y[1]), y[2])                        # a+(b+c) -> (a+b)+c
    if op == "-":
        if x[0] == "+":
            yield ("+", x[1], ("-", x[2], y))                      # (a+b)-c -> a+(b-c)
            yield ("+", ("-", x[1], y), x[2])                      # (a+b)-c -> (a-c)+b
        if x[0] == "-":
            yield ("-", x[1], ("+", x[2], y))                      # (a-b)-c -> a-(b+c)
            yield ("-", ("-", x[1], y), x[2])                      # (a-b)-c -> (a-c)-b
    if op == "+" and x[0] == "-":
        yield ("-", ("+", x[1], y), x[2])                          # (a-b)+c -> (a+c)-b
    if op in "*/" and x[0] in "+-":
        yield (x[0], (op, x[1], y), (op, x[2], y))                 # (a+b)*c -> a*c+b*c ("per item first")
    if op in "+-" and x[0] == "*" and y[0] == "*" and x[2] == y[2]:
        yield ("*", (op, x[1], y[1]), x[2])                        # a*c+b*c -> (a+b)*c ("total first")


def _neighbours(t) -> Iterator[tuple]:
    yield from _rewrites_here(t)
    if t[0] != "n":
        for left in _neighbours(t[1]):
            yield (t[0], left, t[2])
        for right in _neighbours(t[2]):
            yield (t[0], t[1], right)


def equivalent_trees(tree, depth: int = 1) -> list[tuple]:
    """The tree and every tree at most `depth` rewrites away whose intermediates are all valid (breadth
    first, deterministic order). Depth 1 keeps the paths natural: one regrouping or reordering at a time."""
    value = evaluate(tree)
    seen, order, frontier = {tree}, [tree], [tree]
    for _ in range(depth):
        nxt = []
        for t in frontier:
            for u in _neighbours(t):
                if u not in seen and evaluate(u) == value:
                    seen.add(u)
                    order.append(u)
                    nxt.append(u)
        frontier = nxt
    return order


def _step_orders(tree) -> Iterator[list[str]]:
    """Every post-order linearisation of the tree's operations as step strings (independent sub-results in
    either order)."""
    if tree[0] == "n":
        yield []
        return
    left, right = tree[1], tree[2]
    text = f"<<{evaluate(left)}{tree[0]}{evaluate(right)}={evaluate(tree)}>>"
    lefts, rights = list(_step_orders(left)), list(_step_orders(right))
    for a in lefts:
        for b in rights:
            yield a + b + [text]
            if a and b:
                yield b + a + [text]


def solution_paths(tree) -> list[str]:
    """Distinct correct step sequences (one step per line) for the tree, in a deterministic order."""
    return list(dict.fromkeys("\n".join(steps) for t in equivalent_trees(tree) for steps in _step_orders(t)))


# ------------------------------------------------------------------------------------------ generation


# names, amount range, value cap, extra clauses, noop sentence, which side of the train/held-out hash (None: the
# split differs from train by construction), longest prompt in characters (keeps byte-level rows short).
SPLIT_SETTINGS = {
    "train": dict(names=TRAIN_NAMES, amounts=(1, 99), cap=999, extra=0, noop=False, held_out=False, chars=230),
    "id": dict(names=TRAIN_NAMES, amounts=(1, 99), cap=999, extra=0, noop=False, held_out=True, chars=230),
    "noleak": dict(names=TRAIN_NAMES, amounts=(1, 99), cap=999, extra=0, noop=False, held_out=True, chars=230),
    "sym": dict(names=SYM_NAMES, amounts=(100, 999), cap=9999, extra=0, noop=False, held_out=None, chars=240),
    "p1": dict(names=TRAIN_NAMES, amounts=(1, 99), cap=999, extra=1, noop=False, held_out=None, chars=280),
    "p2": dict(names=TRAIN_NAMES, amounts=(1, 99), cap=999, extra=2, noop=False, held_out=None, chars=320),
    "noop": dict(names=TRAIN_NAMES, amounts=(1, 99), cap=999, extra=0, noop=True, held_out=None, chars=260),
}


def _draw_problem(rng: random.Random, template, settings: dict) -> tuple[tuple, list[str], dict] | None:
    """(tree, story sentences, slots) for one template, or None when the numbers drawn break a constraint
    (negative or non-integer intermediate, value above the cap)."""
    lo, hi = settings["amounts"]
    cap = settings["cap"]
    name, friend = rng.sample(settings["names"], 2)
    obj = rng.choice(OBJECTS)
    slots = {"n": name, "f": friend, "o": obj}
    start, clauses = template
    if start == "has":
        a = rng.randint(lo, hi)
        tree = ("n", a)
        sentences = [rng.choice(START_FORMS["has"]).format(a=a, **slots)]
    else:
        b, c = rng.randint(2, 9), rng.randint(lo, hi)
        tree = ("*", ("n", b), ("n", c))
        sentences = [rng.choice(START_FORMS["has_group"]).format(b=b, c=c, **slots)]
    value = evaluate(tree)
    for kind in clauses:
        form = rng.choice(CLAUSE_FORMS[kind])
        if kind in ("add_group", "sub_group"):
            b, c = rng.randint(2, 9), rng.randint(lo, hi)
            if kind == "sub_group" and b * c >= value:
                return None
            tree = ("+" if kind == "add_group" else "-", tree, ("*", ("n", b), ("n", c)))
        elif kind == "sub":
            if value - 1 < lo:
                return None
            b, c = rng.randint(lo, min(hi, value - 1)), None
            tree = ("-", tree, ("n", b))
        elif kind == "div":
            divisors = [d for d in range(2, 6) if value % d == 0]
            if not divisors:
                return None
            b, c = rng.choice(divisors), None
            tree = ("/", tree, ("n", b))
        else:  # add, mul
            b, c = (rng.randint(lo, hi) if kind == "add" else rng.randint(2, 5)), None
            tree = ("+" if kind == "add" else "*", tree, ("n", b))
        value = evaluate(tree)
        if value is None or value > cap or value < 1:
            return None
        sentences.append(form.format(b=b, c=c, **slots))
    return tree, sentences, slots


_NUMBER = re.compile(r"\d+")


def question_numbers(prompt: str) -> list[int]:
    return [int(x) for x in _NUMBER.findall(prompt)]


def _generate_split(split: str, n: int, seed: int, leak_fraction: float, test_fraction: float) -> list[Example]:
    settings = SPLIT_SETTINGS[split]
    templates = train_templates()
    rng = random.Random(f"rl/{NAME}:{split}:{seed}")
    leak_share = leak_fraction if split in ("train", "id") else 0.0
    examples: list[Example] = []
    seen: set[str] = set()
    attempts, max_attempts = 0, 400 * n + 20_000
    while len(examples) < n:
        attempts += 1
        if attempts > max_attempts:
            raise DataError(f"rl/{NAME}: found only {len(examples)} of n={n} {split} problems in {max_attempts} "
                            f"draws; lower n")
        template = rng.choice(templates)
        if settings["extra"]:
            template = (template[0], template[1] + tuple(rng.choice(SINGLE_CLAUSES)
                                                         for _ in range(settings["extra"])))
        drawn = _draw_problem(rng, template, settings)
        if drawn is None:
            continue
        tree, sentences, slots = drawn
        answer = evaluate(tree)
        core = " ".join(sentences)
        if settings["held_out"] is not None:  # train and id/noleak problems are disjoint
            if (hash_fraction(f"rl/{NAME}:{core}") < test_fraction) != settings["held_out"]:
                continue
        leak = rng.random() < leak_share
        if leak:
            extra = rng.choice(LEAK_FORMS).format(x=answer, **slots)
        elif settings["noop"]:
            lo, hi = settings["amounts"]
            extra = rng.choice(NOOP_FORMS).format(x=rng.randint(lo, hi), **slots)
        else:
            extra = None
        if extra is not None:
            sentences = list(sentences)
            sentences.insert(rng.randint(1, len(sentences)), extra)
        prompt = f"Q: {' '.join(sentences)} {QUESTION.format(**slots)}\nA:"
        if len(prompt) > settings["chars"]:
            continue
        numbers = question_numbers(prompt)
        if not leak and answer in numbers:  # the shortcut exists only where it is meant to
            continue
        if settings["noop"] and len(set(numbers)) != len(numbers):
            continue
        if core in seen:
            continue
        paths = solution_paths(tree)
        if len(paths) < 2:
            continue
        seen.add(core)
        path = paths[rng.randrange(len(paths))]
        examples.append({"prompt": prompt, "completion": f" {path}\n#### {answer}", "answer": str(answer),
                         "task": NAME, "numbers": " ".join(map(str, numbers)), "leak": leak, "template": template_id(template),
                         "ops": path.count("<<"), "paths": len(paths), "split": split})
    return examples


# ------------------------------------------------------------------------------------------ checkers

_FINAL = re.compile(r"####\s*(-?\d[\d,]*)")
_STEP = re.compile(r"<<([^<>]*)>>")
_STEP_BODY = re.compile(r"^\s*(\d+)\s*([+\-*/])\s*(\d+)\s*=\s*(-?\d+)\s*$")


def final_answer(completion: str) -> int | None:
    """The number after the last "####", else the completion's last number; None when there is none."""
    found = _FINAL.findall(completion)
    if not found:
        found = re.findall(r"-?\d[\d,]*", completion)
    if not found:
        return None
    try:
        return int(found[-1].replace(",", ""))
    except ValueError:
        return None


def check_tinygsm_sym(example: Example, completion: str) -> bool:
    """Outcome only: the final answer equals the gold answer."""
    got = final_answer(completion)
    return got is not None and got == int(example["answer"])


def _numbers_of(example: Example) -> list[int]:
    """The question's numbers: the "numbers" column (a space-separated string) or, without it, the prompt's."""
    numbers = example.get("numbers")
    return [int(x) for x in numbers.split()] if numbers is not None else question_numbers(example["prompt"])


def process_errors(example: Example, completion: str) -> list[str]:
    """Every process error of a completion (empty = a valid derivation): unparseable steps, wrong arithmetic,
    operands that are neither question numbers nor earlier results, no final answer or one that is not the
    last step's result."""
    allowed = set(_numbers_of(example))
    errors, results = [], []
    bodies = _STEP.findall(completion)
    if not bodies:
        errors.append("no <<a op b=c>> steps")
    for i, body in enumerate(bodies, start=1):
        match = _STEP_BODY.match(body)
        if match is None:
            errors.append(f"step {i}: cannot parse {body!r}")
            continue
        a, op, b, c = int(match[1]), match[2], int(match[3]), int(match[4])
        for operand in (a, b):
            if operand not in allowed and operand not in results:
                errors.append(f"step {i}: operand {operand} is neither a question number nor an earlier result")
        right = {"+": a + b, "-": a - b, "*": a * b}.get(op)
        if op == "/":
            ok = b != 0 and a == b * c
        else:
            ok = right == c
        if not ok:
            errors.append(f"step {i}: {a}{op}{b}={c} is wrong")
        results.append(c)
    final = final_answer(completion) if _FINAL.search(completion) else None
    if final is None:
        errors.append("no '#### <answer>' line")
    elif results and final != results[-1]:
        errors.append(f"final answer {final} is not the last step's result {results[-1]}")
    return errors


def process_valid(example: Example, completion: str) -> bool:
    return not process_errors(example, completion)


def check_process(example: Example, completion: str) -> bool:
    """Outcome and process: the answer is right and derived by valid steps."""
    return check_tinygsm_sym(example, completion) and process_valid(example, completion)


def is_copy(example: Example, completion: str) -> bool:
    """The final answer is one of the question's numbers and no valid derivation produced it."""
    final = final_answer(completion)
    return final is not None and final in set(_numbers_of(example)) and not process_valid(example, completion)


@register_task(NAME, check_tinygsm_sym)
def tinygsm_sym(split: str, n: int, seed: int = 0, *, leak_fraction: float = 0.25,
                test_fraction: float = 0.1) -> list[Example]:
    """TinyGSM-Sym problems of one split (see the module doc); split in train | test | ood | id | sym | p1 | p2 |
    noop | noleak."""
    split = SPLIT_ALIASES.get(split, split)
    if split not in SPLIT_SETTINGS:
        raise ValueError(f"rl/{NAME}: split must be one of train, test, ood, {', '.join(EVAL_SPLITS)}; "
                         f"got {split!r}")
    if n <= 0:
        raise ValueError(f"rl/{NAME}: n must be positive, got {n}")
    if not 0.0 <= leak_fraction <= 1.0:
        raise ValueError(f"rl/{NAME}: leak_fraction must be in [0, 1], got {leak_fraction}")
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"rl/{NAME}: test_fraction must be in (0, 1), got {test_fraction}")
    return _generate_split(split, n, seed, leak_fraction, test_fraction)

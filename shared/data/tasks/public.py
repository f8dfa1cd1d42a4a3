"""Public example sets read from files (read-only; this team keeps them under ../shared/data, see its README):
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

import logging
import os
import random
import re
from typing import Callable, Sequence

from shared.data.examples import Example, check_split, register_task
from shared.data.records import field, read_records
from shared.data.sources import DataError, hash_fraction
from shared.data.tasks.answers import check_last_number, format_number, last_number, numbers_equal

log = logging.getLogger(__name__)

PUBLIC_TASKS = ("gsm8k", "math", "svamp", "asdiv", "mawps", "reasoning_gym")


# ------------------------------------------------------------------------------------------ reading


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
    where = "" if os.path.isabs(path) else f" (relative to the current folder {os.getcwd()}: {os.path.abspath(path)})"
    beside = (" the configs' ../shared/data/... is the data folder beside the repository clone: run from the "
              "repository root, or pass an absolute path" if path.replace("\\", "/").startswith("../shared/") else "")
    raise DataError(f"rl/{name}: path {path} does not exist{where} (the task's task_options.path)"
                    + (f";{beside}" if beside else ""))



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
    check_split("gsm8k", split, ("train", "test"))
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
    check_split("math", split, ("train", "test"))
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
    check_split(name, split, ("train", "test"))
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
    check_split("reasoning_gym", split)
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

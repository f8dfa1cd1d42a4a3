"""The generated fine-tuning tasks of the spec's section 7.1, as example sets of the shared SFT loader.

Registered as DATASETS "rl/mdm_variance/chain_arith" and "rl/mdm_variance/table_qa" (with checkers), so
`data.source = "rl/mdm_variance/chain_arith"` gives shared.train.sft rows. Every prompt and completion has a
fixed character width (prompts left-padded with spaces, completions right-padded with "."), so with the byte
tokenizer every row has the same layout: [bos] prompt completion [eos], and the answer region (completion +
eos) has a fixed length, as LLaDA's fixed-length decoding needs. Examples are deterministic in
options["data_seed"] (not in the run seed: seeds vary training only, as in the paper); train and test are
disjoint by a hash of the problem (test_fraction).

  chain_arith (T1, GSM8K-like)  "   12+34*5-6=" -> "12+34=46;46*5=30;30-6=24####24......"
      3-5 operands in 0-99, ops + - * evaluated left to right mod 100; "####" is the answer delimiter (ISAD).
  table_qa (T2, HiTab-like)     "[1,5,3,7|2,0,9,4|6,6,1,2|8,3,0,5]sum r2=  " -> "2+0+9+4=15####15......"
      a 4x4 table of digits; questions: sum of a row, max of a column, lookup of a cell; the table's
      structure characters "[ ] | ," are the SyRM syntax tokens.
"""
from __future__ import annotations

import random
import re

from shared.data.sources import hash_fraction
from shared.data.examples import register_task

ANSWER_RE = re.compile(r"####(-?\d+)")
DELIMITER = "####"
TABLE_SYNTAX = "[]|,"
TASK_NAMES = ("mdm_variance/chain_arith", "mdm_variance/table_qa")


def answer_of(text: str) -> str | None:
    found = ANSWER_RE.search(text)
    return found.group(1) if found else None


def check_answer(example: dict, completion: str) -> bool:
    return answer_of(completion) == str(example["answer"])


def _examples(name: str, make, split: str, n: int, options: dict, allowed: tuple[str, ...]) -> list[dict]:
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ValueError(f"data.task_options for rl/{name}: unknown option(s) {unknown}; known: {list(allowed)}")
    if split not in ("train", "test"):
        raise ValueError(f"rl/{name}: split must be train or test (no ood split), got {split!r}")
    test_fraction = float(options.get("test_fraction", 0.1))
    rng = random.Random(f"{name}:{split}:{int(options.get('data_seed', 1234))}")
    out, seen, tries = [], set(), 0
    while len(out) < n:
        tries += 1
        if tries > 50 * n + 1000:
            raise ValueError(f"rl/{name}: found only {len(out)} distinct {split} problems of {n} requested")
        example = make(rng, options)
        key = example["prompt"]
        if key in seen or (hash_fraction(f"{name}:{key}") < test_fraction) != (split == "test"):
            continue
        seen.add(key)
        out.append(dict(example, task=f"rl/{name}"))
    return out


# ------------------------------------------------------------------------------------------ T1 ChainArith


def _chain_arith(rng: random.Random, options: dict) -> dict:
    low, high = int(options.get("min_operands", 3)), int(options.get("max_operands", 5))
    modulus = int(options.get("modulus", 100))
    ops = str(options.get("ops", "+-*"))
    width = int(options.get("response_width", 47))
    count = rng.randint(low, high)
    operands = [rng.randrange(modulus) for _ in range(count)]
    chosen = [rng.choice(ops) for _ in range(count - 1)]
    value, steps = operands[0], []
    for op, b in zip(chosen, operands[1:]):
        new = {"+": value + b, "-": value - b, "*": value * b}[op] % modulus
        steps.append(f"{value}{op}{b}={new}")
        value = new
    expr = "".join(f"{a}{op}" for a, op in zip(operands, chosen)) + f"{operands[-1]}="
    prompt = expr.rjust(3 * high)
    completion = ";".join(steps) + f"{DELIMITER}{value}"
    if len(completion) > width:
        raise ValueError(f"rl/mdm_variance/chain_arith: response_width {width} < {len(completion)} characters")
    return {"prompt": prompt, "completion": completion.ljust(width, "."), "answer": str(value)}


@register_task("mdm_variance/chain_arith", check_answer)
def chain_arith(split: str, n: int, seed: int = 0, **options) -> list[dict]:
    del seed  # the problems depend on options["data_seed"] only
    return _examples("mdm_variance/chain_arith", _chain_arith, split, n, options,
                     ("min_operands", "max_operands", "modulus", "ops", "response_width", "data_seed",
                      "test_fraction"))


# ------------------------------------------------------------------------------------------ T2 TableQA


def _table_qa(rng: random.Random, options: dict) -> dict:
    size = 4
    width = int(options.get("response_width", 31))
    kinds = str(options.get("questions", "sum,max,get")).split(",")
    table = [[rng.randrange(10) for _ in range(size)] for _ in range(size)]
    text = "[" + "|".join(",".join(str(v) for v in row) for row in table) + "]"
    kind = rng.choice(kinds)
    r, c = rng.randrange(size), rng.randrange(size)
    if kind == "sum":
        question, answer = f"sum r{r + 1}=", sum(table[r])
        work = "+".join(str(v) for v in table[r]) + f"={answer}"
    elif kind == "max":
        column = [table[i][c] for i in range(size)]
        question, answer = f"max c{c + 1}=", max(column)
        work = ",".join(str(v) for v in column) + f">{answer}"
    elif kind == "get":
        question, answer = f"get r{r + 1}c{c + 1}=", table[r][c]
        work = f"r{r + 1}=" + ",".join(str(v) for v in table[r]) + f">{answer}"
    else:
        raise ValueError(f"rl/mdm_variance/table_qa: unknown question kind {kind!r} (sum, max, get)")
    completion = work + f"{DELIMITER}{answer}"
    return {"prompt": text + question.ljust(9), "completion": completion.ljust(width, "."), "answer": str(answer)}


@register_task("mdm_variance/table_qa", check_answer)
def table_qa(split: str, n: int, seed: int = 0, **options) -> list[dict]:
    del seed
    return _examples("mdm_variance/table_qa", _table_qa, split, n, options,
                     ("questions", "response_width", "data_seed", "test_fraction"))


# ------------------------------------------------------------------------------------------ token sets


def token_ids(tokenizer, chars: str) -> list[int]:
    """Sorted distinct ids of the characters (one token each under the byte tokenizer)."""
    return sorted({i for ch in chars for i in tokenizer.encode(ch)})


def delimiter_ids(tokenizer) -> list[int]:
    """ISAD's rare ids: the answer delimiter's tokens."""
    return token_ids(tokenizer, DELIMITER)


def syntax_ids(tokenizer) -> list[int]:
    """SyRM's syntax tokens: the table structure characters of T2."""
    return token_ids(tokenizer, TABLE_SYNTAX)

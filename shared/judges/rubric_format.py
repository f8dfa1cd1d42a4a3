"""The rubric -> evaluation -> verdict output format of a pairwise generative reward model (Proxy-GRM, spec
../shared/papers/proxy_grm.md §1.1-1.3, §1.7):

    <rubric> criterion_1: ..., weight w_1% ... <justify> why these criteria </justify> </rubric>
    <eval> per-criterion comparison </eval>
    <answer>1</answer>          (or 2)

  parse_output(text)         the blocks (first occurrence of each), None where absent
  extract_rubric(text)       what the rubric-only proxy sees: text up to the first </rubric>, cut before <justify>
                             when the rubric holds one, "</rubric>" re-appended (the reference code's string ops,
                             so a text without </rubric> is returned whole with "</rubric>" appended)
  format_ok(text)            the RL format check: newlines deleted, then a full match of
                             ^<rubric>.*?</rubric><eval>.*?</eval><answer>.*?</answer>$ with exactly one "<rubric"
                             (an opening or any tag starting so), one "<eval>", one "<answer>"; or the alternative
                             ^<think>.*?</think><summary>.*?</summary><answer>.*?</answer>$ with exactly one
                             "<think>", "<summary>", "<answer>"
  accuracy_reward(text, gold)  r_acc of the RL reward: the <answer> content (the whole text when there is none),
                             letters and digits only; +1 if it holds the gold digit and not the other one, else -1
  parse_answer(text)         the evaluation protocol's verdict: 1 or 2 when the <answer> content holds exactly one of
                             the digits 1, 2; else the last 1 or 2 anywhere in the text; None when there is none
  rubric_weights(text)       the "w%" percentages listed in the rubric (before <justify>); weights_sum_ok: they sum
                             to 100 (within tol)

Registers the rewards genrm/format (r_fmt in {0, 1}) and genrm/accuracy (r_acc in {-1, +1} against the `answer`
column, "1" / "2").
"""
from __future__ import annotations

import dataclasses
import re
from typing import Sequence

from shared.rewards import register_reward

_BLOCK = {tag: re.compile(rf"<{tag}>(.*?)</{tag}>", re.S) for tag in ("rubric", "justify", "eval", "answer",
                                                                         "think", "summary")}
_RUBRIC_FORMAT = re.compile(r"^<rubric>.*?</rubric><eval>.*?</eval><answer>.*?</answer>$", re.S)
_THINK_FORMAT = re.compile(r"^<think>.*?</think><summary>.*?</summary><answer>.*?</answer>$", re.S)
_PERCENT = re.compile(r"(\d+(?:\.\d+)?)\s*%")
_VERDICT_DIGIT = re.compile(r"[12]")


@dataclasses.dataclass(frozen=True)
class RubricOutput:
    rubric: str | None       # inside <rubric>..</rubric>, <justify> block included
    justify: str | None
    eval: str | None
    answer: str | None       # inside <answer>..</answer>, stripped
    raw: str


def _first(tag: str, text: str) -> str | None:
    m = _BLOCK[tag].search(text)
    return None if m is None else m.group(1)


def parse_output(text: str) -> RubricOutput:
    answer = _first("answer", text)
    return RubricOutput(rubric=_first("rubric", text), justify=_first("justify", text), eval=_first("eval", text),
                        answer=None if answer is None else answer.strip(), raw=text)


def extract_rubric(text: str) -> str:
    rubric = text.split("</rubric>")[0] + "</rubric>"
    if "<justify>" in rubric:
        rubric = rubric.split("<justify>")[0] + "</rubric>"
    return rubric


def format_ok(text: str) -> bool:
    flat = text.replace("\n", "")
    rubric = (bool(_RUBRIC_FORMAT.match(flat)) and flat.count("<rubric") == 1 and flat.count("<eval>") == 1
              and flat.count("<answer>") == 1)
    think = (bool(_THINK_FORMAT.match(flat)) and flat.count("<think>") == 1 and flat.count("<summary>") == 1
             and flat.count("<answer>") == 1)
    return rubric or think


def _alnum(text: str) -> str:
    return re.sub(r"[^a-zA-Z0-9]", "", text)


def accuracy_reward(text: str, gold) -> float:
    """+1 / -1 (see the module docstring); gold is 1, 2, "1", "2" or "<answer>1</answer>"."""
    gold_text = str(gold)
    gold_inner = _first("answer", gold_text)
    gold_digits = _alnum(gold_inner.strip() if gold_inner is not None else gold_text.strip())
    inner = _first("answer", text)
    said = _alnum(inner.strip() if inner is not None else text.strip())
    for digit, other in (("1", "2"), ("2", "1")):
        if digit in said and digit in gold_digits:
            return -1.0 if other in said else 1.0
    return -1.0


def parse_answer(text: str) -> int | None:
    inner = _first("answer", text)
    if inner is not None and ("1" in inner) != ("2" in inner):
        return 1 if "1" in inner else 2
    digits = _VERDICT_DIGIT.findall(text)
    return int(digits[-1]) if digits else None


def rubric_weights(text: str) -> list[float]:
    """The percentages of the rubric block (of the extracted rubric when the text has one, <justify> dropped)."""
    rubric = _first("rubric", extract_rubric(text)) if "<rubric>" in text else text
    return [float(x) for x in _PERCENT.findall(rubric or "")]


def weights_sum_ok(weights: Sequence[float] | str, total: float = 100.0, tol: float = 1e-6) -> bool:
    """True when the weights (a list, or a text read by rubric_weights) are non-empty and sum to `total`."""
    if isinstance(weights, str):
        weights = rubric_weights(weights)
    return bool(weights) and abs(sum(weights) - total) <= tol


@register_reward("genrm/format")
def format_reward(prompts, completions, **_) -> list[float]:
    """1 when the completion passes format_ok, else 0 (weigh it 0.5 for the paper's 0.5 r_fmt)."""
    return [1.0 if format_ok(c) else 0.0 for c in completions]


@register_reward("genrm/accuracy")
def answer_accuracy_reward(prompts, completions, answer, **_) -> list[float]:
    """r_acc: +1 when the verdict is the gold `answer` column unambiguously, else -1."""
    return [accuracy_reward(c, a) for c, a in zip(completions, answer)]

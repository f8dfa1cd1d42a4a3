"""A pairwise judgment (`Verdict`) and the parsers that read one out of a judge's free text.

    Verdict(pref, scores, critique, raw)    pref +1: the first response is better, -1: the second, 0: a tie

Formats a generative judge may answer in (`parse_judgment` tries them in this order by default):
  json     a JSON object, possibly fenced or inside prose: {"winner": "A"} / {"preference": -1} /
           {"score_a": 7, "score_b": 3} / {"scores": {"A": 7, "B": 3}} / {"scores": [7, 3]}; an explicit winner wins
           over the scores; "critique" / "reasoning" / "explanation" become the critique
  scores   a score split (Writing-Zero: the two scores share a total of 10): "Score A: 7, Score B: 3",
           "**Score (A)**: 7/10", "Response A score = 6.5", "Scores: 7, 3", "[[7, 3]]"; the last value given for
           each response counts (a final summary beats scores quoted in the critique); pref = sign(A - B)
  tags     an explicit verdict: "<verdict>A</verdict>", "\\boxed{B}", "[[A]]", "[[tie]]", "Verdict: Response B",
           "Final answer: A", or a reply that is / starts with the letter (`parse_verdict`)
A reply none of the formats reads is *malformed*: the judges count it and apply their `on_malformed` policy
("tie": pref 0 with malformed=True, the default; "raise": JudgeError), never crash on it.
"""
from __future__ import annotations

import dataclasses
import json
import math
import re
from typing import Callable, Sequence

FORMATS = ("json", "scores", "tags")
MALFORMED_POLICIES = ("tie", "raise")


class JudgeError(RuntimeError):
    """The judge endpoint failed (after retries), answered something that is not a chat completion, or (with
    on_malformed="raise") gave a judgment no parser reads."""


@dataclasses.dataclass(frozen=True)
class Verdict:
    """One pairwise judgment of (first, second) = (a, b), in the order the caller gave them (wrappers that show the
    judge the other order undo it before returning)."""
    pref: int                                   # +1 first better, -1 second better, 0 tie (or the malformed policy)
    scores: tuple[float, float] | None = None   # (score of a, score of b) when the judge gave scores
    critique: str = ""                          # the judge's reasoning (principles + critique), if any
    raw: str = ""                               # the judge's whole reply ("" for oracle/mock judges without text)
    prob: float | None = None                   # P(a better) when the judge gives one (token logprobs, averages)
    malformed: bool = False                     # no parser read the reply: pref is the policy's value
    error: str = ""                             # the call failed (HTTP after retries) under on_error="tie"
    swapped: bool = False                       # shown to the judge as (b, a); pref/scores/prob are already undone

    @property
    def p_first(self) -> float:
        """P(a better): `prob` when given, else (pref + 1) / 2 (1, 0 or 0.5)."""
        return float(self.prob) if self.prob is not None else (self.pref + 1) / 2

    def flipped(self) -> "Verdict":
        """The same judgment about (b, a)."""
        return dataclasses.replace(
            self, pref=-self.pref, scores=None if self.scores is None else (self.scores[1], self.scores[0]),
            prob=None if self.prob is None else 1.0 - self.prob, swapped=not self.swapped)


def sign(x: float) -> int:
    return int(x > 0) - int(x < 0)


def prefs(verdicts: Sequence[Verdict]):
    """int8 [M] of the verdicts' preferences."""
    import numpy as np

    return np.asarray([v.pref for v in verdicts], np.int8)


# ---------------------------------------------------------------- A/B letters and tags

# A judge's reply is untrusted text: the patterns below chain optional `\s*` groups, which backtrack polynomially on
# long whitespace runs ("answer" + 200 spaces took 3 s, "score" + 400 spaces 13 s, holding the GIL). Every parser
# reads the reply with whitespace runs squeezed to one space and at most the head and tail below.
REPLY_HEAD_CHARS, REPLY_TAIL_CHARS = 4_000, 12_000


def bounded_reply(text: str | None, drop: str = "") -> str:
    """`text` as the parsers read it: characters in `drop` removed, whitespace runs as one space, and when longer
    than REPLY_HEAD_CHARS + REPLY_TAIL_CHARS only its head and tail (a verdict opens or closes a reply)."""
    text = text or ""
    if len(text) > 4 * (REPLY_HEAD_CHARS + REPLY_TAIL_CHARS):  # squeeze a bounded slice, not megabytes
        text = text[:4 * REPLY_HEAD_CHARS] + " " + text[-4 * REPLY_TAIL_CHARS:]
    if drop:
        text = re.sub(f"[{re.escape(drop)}]", "", text)
    text = re.sub(r"\s+", " ", text).strip()
    if len(text) > REPLY_HEAD_CHARS + REPLY_TAIL_CHARS:
        text = text[:REPLY_HEAD_CHARS] + " " + text[-REPLY_TAIL_CHARS:]
    return text


# Keywords match in any case; the verdict letter only in upper case ("a" is an English word).
_VERDICT_PATTERNS = (
    re.compile(r"\[\[\s*(A|B|(?i:tie))\s*\]\]"),
    re.compile(r"(?i:final answer|answer|verdict|winner|better response|choice|decision)"
               r"\s*(?i:is)?\s*:?\s*\(?(?i:response|assistant)?\s*\(?\b([AB])\b"),
)
_TAG_PATTERNS = (
    re.compile(r"<\s*(?i:verdict|answer|winner|choice|preference|better)\s*>\s*(?i:response\s+)?"
               r"(A|B|(?i:tie))\s*<\s*/"),
    re.compile(r"\\boxed\{\s*(?i:response\s+)?(A|B|(?i:tie))\s*\}"),
)


def parse_verdict(text: str) -> float | None:
    """1.0 for A, 0.0 for B, 0.5 for a tie, None if the reply names neither clearly. An explicit verdict
    ([[A]], "Answer: B", "Verdict: Response A") wins, the last one if several; then a reply that is or
    starts with the letter; then a reply that mentions only one of "Response A" / "Response B"."""
    value = {"A": 1.0, "B": 0.0, "TIE": 0.5}
    cleaned = bounded_reply(text, "*_`\"'")
    for pattern in _VERDICT_PATTERNS:
        found = pattern.findall(cleaned)
        if found:
            return value[found[-1].upper()]
    start = re.match(r"^\(?(?:(?i:response)\s+)?([AB])\)?(?:$|[\s.,:;!)])", cleaned)
    if start:
        return value[start.group(1)]
    named = set(re.findall(r"\b(?i:response)\s+([AB])\b", cleaned))
    if len(named) == 1:
        return value[named.pop()]
    if re.search(r"\b(tie|equally good|both are equal)\b", cleaned, re.IGNORECASE):
        return 0.5
    return None


_BARE_LETTER = re.compile(r"^\s*\(?\s*(?:(?i:response)\s+)?(A|B|(?i:tie))\s*\)?\s*[.!]?\s*$")


def parse_tags(text: str) -> Verdict | None:
    """An explicit verdict: <verdict>A</verdict>, \\boxed{B}, [[A]], [[tie]], "Verdict: Response B", "Final answer:
    A" (the last one if several), or a reply that is only the letter. Unlike `parse_verdict` (the letter judge's
    reading), a reply that merely starts with or mentions "Response A" is no verdict: generative critiques do that."""
    cleaned = bounded_reply(text, "*_`\"'")
    for pattern in _TAG_PATTERNS + _VERDICT_PATTERNS:
        found = pattern.findall(cleaned)
        if found:
            pref = {"A": 1, "B": -1, "TIE": 0}[found[-1].upper()]
            return Verdict(pref, critique=_critique_before(text, pattern), raw=text)
    bare = _BARE_LETTER.match(cleaned)
    if bare:
        return Verdict({"A": 1, "B": -1, "TIE": 0}[bare.group(1).upper()], raw=text)
    return None


# ---------------------------------------------------------------- score splits

_NUM = r"([-+]?\d+(?:\.\d+)?)"
_LETTER = r"\(?\s*([ABab12])\s*\)?"   # A / B (either case after a keyword), or 1 / 2 ("Response 1")
_SCORE_PATTERNS = (
    # Score A: 7 | Score for Response A = 7/10 | Scores of (A): 7
    re.compile(r"(?i:scores?)\s*(?i:of|for)?\s*(?i:response|answer|assistant|output)?\s*" + _LETTER
               + r"\s*(?:[:=]|(?i:is))\s*" + _NUM),
    # Response A score: 7 | A's score = 7 | Response A: 7/10 | Response A - 7 points
    re.compile(r"(?i:response|answer|assistant|output)\s*" + _LETTER + r"\s*(?:'s)?\s*(?i:score)?\s*"
               r"(?:[:=\-]|(?i:is|gets|receives))\s*" + _NUM + r"\s*(?:/\s*\d+|(?i:points?|pts)\b|$|[\s,;.)])"),
    re.compile(r"(?:^|[\s(\[,;])" + r"([AB])" + r"\s*(?:'s)?\s*(?i:score)\s*(?:[:=]|(?i:is))\s*" + _NUM),
)
# Scores: 7, 3 | Scores = [7, 3] | [[7, 3]] | Scores: 7/3 | score: 7 - 3
_PAIR_PATTERNS = (
    re.compile(r"(?i:scores?)\s*(?:\(\s*A\s*,\s*B\s*\))?\s*[:=]\s*[\[(]?\s*" + _NUM + r"\s*(?:/\s*10\s*)?[,;/\-]\s*"
               + _NUM),
    re.compile(r"\[\[\s*" + _NUM + r"\s*,\s*" + _NUM + r"\s*\]\]"),
)


def parse_score_split(text: str, total: float | None = None) -> tuple[float, float] | None:
    """(score of A, score of B) from a score split, or None. The last value given for each response counts;
    named scores ("Score A: 7 ... Score B: 3") win over bare pairs ("Scores: 7, 3"). total: when given, a split
    that does not sum to it (within 1e-6) is rejected as malformed (Writing-Zero's judges share 10 points)."""
    cleaned = bounded_reply(text, "*_`")
    found: dict[str, tuple[int, float]] = {}
    for pattern in _SCORE_PATTERNS:
        for m in pattern.finditer(cleaned):
            letter = {"1": "A", "2": "B"}.get(m.group(1).upper(), m.group(1).upper())
            value = float(m.group(2))
            if letter in ("A", "B") and math.isfinite(value):
                if letter not in found or m.start() >= found[letter][0]:
                    found[letter] = (m.start(), value)
    scores = None
    if "A" in found and "B" in found:
        scores = (found["A"][1], found["B"][1])
    else:
        for pattern in _PAIR_PATTERNS:
            matches = list(pattern.finditer(cleaned))
            if matches:
                scores = (float(matches[-1].group(1)), float(matches[-1].group(2)))
                break
    if scores is None or not all(math.isfinite(s) for s in scores):
        return None
    if total is not None and abs(sum(scores) - total) > 1e-6:
        return None
    return scores


def parse_scores(text: str, total: float | None = None) -> Verdict | None:
    """A Verdict from a score split (pref = sign(A - B); the text before the scores is the critique)."""
    scores = parse_score_split(text, total)
    if scores is None:
        return None
    cut = _first_score_position(text)
    return Verdict(sign(scores[0] - scores[1]), scores=scores, critique=(text[:cut] if cut else "").strip(),
                   raw=text)


def _squeezed_with_positions(text: str, drop: str) -> tuple[str, list[int]]:
    """The reply as the parsers read it (characters in `drop` and whitespace runs as one space; at most its first
    REPLY_HEAD_CHARS + REPLY_TAIL_CHARS characters: these callers look for where the first verdict starts), and for
    each of its characters the index in `text`."""
    out, where, space = [], [], False
    limit = REPLY_HEAD_CHARS + REPLY_TAIL_CHARS
    for i, ch in enumerate(text or ""):
        if ch in drop or ch.isspace():
            if space:
                continue
            ch, space = " ", True
        else:
            space = False
        out.append(ch)
        where.append(i)
        if len(out) >= limit:
            break
    return "".join(out), where


def _first_score_position(text: str) -> int | None:
    cleaned, where = _squeezed_with_positions(text, "*_`")
    starts = [m.start() for p in _SCORE_PATTERNS + _PAIR_PATTERNS for m in p.finditer(cleaned)]
    return where[min(starts)] if starts else None


def _critique_before(text: str, pattern: re.Pattern) -> str:
    cleaned, where = _squeezed_with_positions(text, "*_`\"'")
    m = pattern.search(cleaned)
    return text[:where[m.start()]].strip() if m else ""


# ---------------------------------------------------------------- JSON

_WINNER_KEYS = ("winner", "verdict", "preference", "preferred", "better", "better_response", "choice", "decision",
                "answer", "result")
_CRITIQUE_KEYS = ("critique", "reasoning", "explanation", "rationale", "analysis", "comparison")
_A_KEYS = ("score_a", "scorea", "a_score", "score_1", "response_a", "a")
_B_KEYS = ("score_b", "scoreb", "b_score", "score_2", "response_b", "b")


def json_spans(text: str, keep_unclosed: bool = False) -> list[str]:
    """Every outermost balanced {...} span of the text, in order (braces inside JSON strings do not count);
    keep_unclosed: also the trailing span of a reply cut off inside an object."""
    spans, depth, start = [], 0, None
    in_string = escaped = False
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            continue
        if ch == '"' and depth:
            in_string = True
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                spans.append(text[start:i + 1])
    if keep_unclosed and depth and start is not None:
        spans.append(text[start:])
    return spans


def _json_objects(text: str) -> list[dict]:
    """Every JSON object in the text that parses (fenced blocks and balanced {...} spans), last one first."""
    candidates = re.findall(r"```(?:json)?\s*(\{.*?\})\s*```", text or "", flags=re.S)
    candidates += json_spans(text or "")
    objects = []
    for candidate in reversed(candidates):
        try:
            value = json.loads(candidate)
        except (json.JSONDecodeError, ValueError):
            continue
        if isinstance(value, dict):
            objects.append(value)
    return objects


def _number(value) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        m = re.fullmatch(r"\s*" + _NUM + r"\s*(?:/\s*\d+)?\s*", value)
        return float(m.group(1)) if m else None
    return None


def _winner(value) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return sign(value) if value in (-1, 0, 1) else None
    if isinstance(value, str):
        word = re.sub(r"[^a-z0-9+\-]", "", value.lower().replace("response", "").replace("assistant", ""))
        return {"a": 1, "1": 1, "+1": 1, "first": 1, "b": -1, "2": -1, "-1": -1, "second": -1, "tie": 0,
                "draw": 0, "equal": 0, "0": 0, "both": 0, "none": 0}.get(word)
    return None


def parse_json_verdict(text: str, total: float | None = None) -> Verdict | None:
    """A Verdict from the last JSON object in the reply that holds a winner or both scores."""
    for obj in _json_objects(text):
        lower = {str(k).lower().replace(" ", "_"): v for k, v in obj.items()}
        scores = None
        if isinstance(lower.get("scores"), dict):
            inner = {str(k).lower(): v for k, v in lower["scores"].items()}
            pair = [_number(inner.get(k)) for k in ("a", "b")]
            if None in pair:
                pair = [_number(inner.get(k)) for k in ("1", "2")]
            scores = tuple(pair) if None not in pair else None
        elif isinstance(lower.get("scores"), (list, tuple)) and len(lower["scores"]) == 2:
            pair = [_number(x) for x in lower["scores"]]
            scores = tuple(pair) if None not in pair else None
        if scores is None:
            a = next((_number(lower[k]) for k in _A_KEYS if k in lower), None)
            b = next((_number(lower[k]) for k in _B_KEYS if k in lower), None)
            scores = (a, b) if a is not None and b is not None else None
        if scores is not None and total is not None and abs(sum(scores) - total) > 1e-6:
            scores = None
        winner = next((_winner(lower[k]) for k in _WINNER_KEYS if k in lower and _winner(lower[k]) is not None),
                      None)
        if winner is None and scores is None:
            continue
        pref = winner if winner is not None else sign(scores[0] - scores[1])
        critique = next((str(lower[k]) for k in _CRITIQUE_KEYS if isinstance(lower.get(k), str)), "")
        return Verdict(pref, scores=scores, critique=critique, raw=text)
    return None


# ---------------------------------------------------------------- all formats

_PARSERS: dict[str, Callable[..., Verdict | None]] = {
    "json": parse_json_verdict, "scores": parse_scores, "tags": lambda text, total=None: parse_tags(text)}


def parse_judgment(text: str, formats: Sequence[str] = FORMATS, total: float | None = None) -> Verdict | None:
    """The first of `formats` ("json", "scores", "tags") that reads the reply, or None (malformed). Never
    raises on any text."""
    if not isinstance(text, str) or not text.strip():
        return None
    for name in formats:
        if name not in _PARSERS:
            raise ValueError(f"parse_judgment: unknown format {name!r}; known: {', '.join(_PARSERS)}")
        try:
            verdict = _PARSERS[name](text, total=total)
        except (ValueError, TypeError, OverflowError, RecursionError):  # a parser bug must not stop a run
            verdict = None
        if verdict is not None:
            return dataclasses.replace(verdict, raw=text)
    return None


def make_parser(parser: str | Sequence[str] | Callable = "auto", total: float | None = None) -> Callable:
    """parser: "auto" (json, scores, tags), one format name, a list of them, "letter" (the A/B letter reading of
    `parse_verdict`, as the model/pairwise_judge HTTP judge always read replies) or a callable text -> Verdict |
    None."""
    if callable(parser):
        return parser
    if parser == "letter":
        def letter(text):
            value = parse_verdict(text)
            return None if value is None else Verdict(sign(value - 0.5), raw=text)
        return letter
    formats = FORMATS if parser == "auto" else ((parser,) if isinstance(parser, str) else tuple(parser))
    for name in formats:
        if name not in _PARSERS:
            raise ValueError(f"judge parser {name!r}: expected 'auto', 'letter', a callable or formats from "
                             f"{FORMATS}")
    return lambda text: parse_judgment(text, formats, total)


# ---------------------------------------------------------------- label contracts (Skill-RM, spec skill_rm.md 1.2)

# Each benchmark's judge must answer with one label of its contract; `parse_label` reads it (a JSON verdict first,
# the output contract {verdict, confidence, used_resources, reason}; then explicit tags; then a reply that is only
# the label) and returns the canonical label, or None (malformed: the agent then forces a final answer).
LABEL_CONTRACTS = {
    "pairwise": ("A", "B", "Tie"),                         # generic pairwise
    "forced_choice": ("Output (a)", "Output (b)"),         # JudgeBench
    "scaled": ("A>>B", "A>B", "A=B", "B>A", "B>>A"),       # RM-Bench scaled preference
    "listwise": ("A", "B", "C", "D"),                      # RewardBench 2 best-of-4
}
# pref of a pairwise label (+1 first better); the scaled contract keeps its strength in `label_strength`
_LABEL_PREF = {"pairwise": {"A": 1, "B": -1, "Tie": 0}, "forced_choice": {"Output (a)": 1, "Output (b)": -1},
               "scaled": {"A>>B": 1, "A>B": 1, "A=B": 0, "B>A": -1, "B>>A": -1}}


def _contract(contract: str) -> tuple[str, ...]:
    if contract not in LABEL_CONTRACTS:
        raise ValueError(f"label contract {contract!r}: expected one of {', '.join(LABEL_CONTRACTS)}")
    return LABEL_CONTRACTS[contract]


def canonical_label(value, contract: str) -> str | None:
    """The contract's label a short answer names ("a", "Output (A)", "output a", "tie", "A >> B"), or None."""
    labels = _contract(contract)
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return None
    text = re.sub(r"[*_`\"'\s]", "", str(value)).lower()
    text = text.replace("response", "").replace("assistant", "")
    if contract == "forced_choice":
        m = re.fullmatch(r"(?:output)?\(?([ab])\)?", text)
        return f"Output ({m.group(1)})" if m else None
    if contract == "scaled":
        text = text.replace("≫", ">>").replace("==", "=")
        return next((label for label in labels if label.lower() == text), None)
    if contract == "pairwise" and text in ("tie", "draw", "equal", "both"):
        return "Tie"
    text = text.strip("().[]{}:")
    return next((label for label in labels if label.lower() == text), None)


_LABEL_TAGS = (
    re.compile(r"<\s*(?i:verdict|answer|label)\s*>\s*(.{1,20}?)\s*<\s*/"),
    re.compile(r"\[\[\s*(.{1,20}?)\s*\]\]"),
    re.compile(r"\\boxed\{\s*(.{1,20}?)\s*\}"),
    re.compile(r"(?i:final answer|final verdict|verdict|answer|label)\s*:\s*([^\n.,;]{1,20})"),
)


def parse_label(text: str, contract: str) -> str | None:
    """The canonical label of `contract` the reply gives, or None when it gives none (or two different ones
    in the same place). Reads, in order: the last JSON object with a "verdict" / "label" / "answer" / "winner" key;
    the last explicit tag (<verdict>..</verdict>, [[..]], \\boxed{..}, "Verdict: .."); a reply that is only the
    label. Never raises on any text."""
    _contract(contract)
    if not isinstance(text, str) or not text.strip():
        return None
    for obj in _json_objects(text):
        lower = {str(k).lower(): v for k, v in obj.items()}
        for key in ("verdict", "label", "answer", "winner", "preference"):
            if key in lower:
                label = canonical_label(lower[key], contract)
                if label is not None:
                    return label
    cleaned = re.sub(r"[*_`]", "", text)
    for pattern in _LABEL_TAGS:
        found = pattern.findall(cleaned)
        if found:
            label = canonical_label(found[-1].strip(), contract)
            if label is not None:
                return label
    return canonical_label(cleaned.strip().rstrip("."), contract)


def label_pref(label: str | None, contract: str) -> int | None:
    """+1 / -1 / 0 of a pairwise contract's label (None for listwise or no label)."""
    if label is None or contract not in _LABEL_PREF:
        return None
    return _LABEL_PREF[contract][label]


def label_strength(label: str | None) -> int:
    """2 for a strong scaled preference (A>>B, B>>A), 1 for a plain one, 0 for a tie / none."""
    if label in ("A>>B", "B>>A"):
        return 2
    return 0 if label in (None, "A=B", "Tie") else 1

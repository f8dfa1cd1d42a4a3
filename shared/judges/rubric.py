"""OpenRS rubric judging (spec ../shared/papers/openrs.md, 1.2-1.5): a judge LLM writes a query-specific rubric and
compares two responses criterion by criterion in JSON; the criterion-level preferences are aggregated *outside*
the LLM, with fatal flaws as a veto, and the two presentation orders are combined by a bidirectional rule.

  Criterion, CriterionCompare, RubricJudgment   the data model (type in fatal / core / important / highlight;
                                                a compare has chosen in {A, B, S} and score in {-2..2})
  extract_json, repair_json                     robust JSON extraction from a reply (fenced blocks, balanced
                                                spans, a small repair pass for what LLMs get wrong)
  parse_rubric_judgment                         the judge's JSON (question_analysis / rubric_list /
                                                rubric_compares) -> RubricJudgment; JudgeError naming what is missing
  aggregate, aggregate_judgment                 spec 1.4: veto = sum of fatal scores when any is non-zero, else the
                                                weighted mean (weights as data: DEFAULT_WEIGHTS), |S| < min_score -> 0;
                                                numpy-vectorised over [..., K] criteria
  bidirectional                                 spec 1.2 step 3: GOOD (+1) if S_f > m and S_b <= -m, BAD (-1) if
                                                S_f <= -m and S_b > m, else SAME (0)
  RubricPrompts                                 prompt registry keyed by query_type: a folder of text files (data)
  RubricJudge                                   a GenerativeJudge on any text backend (a ChatClient, or a callable
                                                list[str] -> list[str]: mock, simulator, our own model), with
                                                optional verifiable gates (shared/rewards/sandbox.py) deciding first
  chat_generate, make_rubric_judge_reward       an OpenAI-compatible backend with the reference's call settings;
                                                the judge as a pairwise reward (BRPO's judge_pairs)
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
from typing import Callable, Mapping, Sequence

import numpy as np

from shared.judges.generative import GenerativeJudge
from shared.judges.verdict import JudgeError, Verdict, json_spans

CRITERION_TYPES = ("fatal", "core", "important", "highlight")
# spec 1.4: fatal criteria are a veto, not a weight; a "fatal" entry is used only by aggregate(veto=False)
DEFAULT_WEIGHTS = {"core": 5.0, "important": 2.0, "highlight": 1.0}
CHOICES = ("A", "B", "S")
# the released (Chinese) meta-rubric's type names and common English variants
TYPE_ALIASES = {"硬伤": "fatal", "核心": "core", "重要": "important", "亮点": "highlight", "fatal flaw": "fatal",
                "critical": "fatal", "key": "core", "bonus": "highlight"}
CHOICE_ALIASES = {"a": "A", "b": "B", "s": "S", "same": "S", "tie": "S", "equal": "S", "none": "S"}


# ---------------------------------------------------------------- data model


def criterion_type(value, where: str = "criterion") -> str:
    """The canonical type of `value` (fatal / core / important / highlight, an alias, any case); JudgeError else."""
    text = str(value).strip()
    canonical = TYPE_ALIASES.get(text, TYPE_ALIASES.get(text.lower(), text.lower()))
    if canonical not in CRITERION_TYPES:
        raise JudgeError(f"{where}: type {value!r} is not one of {CRITERION_TYPES}")
    return canonical


@dataclasses.dataclass(frozen=True)
class Criterion:
    """One rubric criterion."""
    id: str
    title: str
    description: str = ""
    type: str = "core"

    def __post_init__(self):
        object.__setattr__(self, "type", criterion_type(self.type, f"criterion {self.id!r}"))


@dataclasses.dataclass(frozen=True)
class CriterionCompare:
    """A vs B on one criterion: chosen in {A, B, S}, score in {-2..2} (its magnitude counts, its sign comes from
    chosen: spec 1.4)."""
    criterion: str                  # rubric_idx (the criterion's id)
    type: str
    chosen: str
    score: int
    name: str = ""
    reason: str = ""

    def __post_init__(self):
        if self.chosen not in CHOICES:
            raise JudgeError(f"criterion {self.criterion!r}: chosen {self.chosen!r} is not one of {CHOICES}")
        if not -2 <= self.score <= 2:
            raise JudgeError(f"criterion {self.criterion!r}: score {self.score} outside -2..2")
        object.__setattr__(self, "type", criterion_type(self.type, f"criterion {self.criterion!r}"))

    @property
    def signed(self) -> int:
        """+|score| when A is chosen, -|score| for B, 0 for S: positive favours A."""
        return {"A": 1, "B": -1, "S": 0}[self.chosen] * abs(int(self.score))


@dataclasses.dataclass(frozen=True)
class RubricJudgment:
    """A parsed judge reply."""
    compares: tuple[CriterionCompare, ...]
    rubric: tuple[Criterion, ...] = ()
    analysis: Mapping = dataclasses.field(default_factory=dict)
    raw: str = ""

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(signed scores int [K], type codes int [K]) for `aggregate`."""
        return (np.asarray([c.signed for c in self.compares], np.int64),
                np.asarray([CRITERION_TYPES.index(c.type) for c in self.compares], np.int64))

    def summary(self) -> str:
        """One line per compared criterion: "[type] name: chosen score - reason"."""
        return "\n".join(f"[{c.type}] {c.name or c.criterion}: {c.chosen} {c.score:+d} - {c.reason}".rstrip(" -")
                         for c in self.compares)


# ---------------------------------------------------------------- JSON extraction

_FENCED = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.S)


def repair_json(text: str) -> str:
    """A best-effort repair of almost-JSON written by an LLM: // and /* */ comments, single-quoted strings,
    unquoted keys, Python literals (True / False / None), trailing commas, raw newlines inside strings, and a
    reply cut off mid-object (the open string and brackets are closed). Valid JSON passes unchanged in meaning."""
    out: list[str] = []
    stack: list[str] = []
    i, n = 0, len(text)
    literals = {"True": "true", "False": "false", "None": "null"}
    while i < n:
        ch = text[i]
        if ch in "\"'":  # a string: copy it as a double-quoted JSON string
            quote, j, buf = ch, i + 1, []
            while j < n and text[j] != quote:
                c = text[j]
                if c == "\\" and j + 1 < n:
                    nxt = text[j + 1]
                    buf.append("'" if nxt == "'" else "\\" + nxt)
                    j += 2
                    continue
                buf.append({"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(c, '\\"' if c == '"' else c))
                j += 1
            out.append('"' + "".join(buf) + '"')
            i = j + 1
            continue
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
            continue
        if ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]":
            _drop_trailing_comma(out)
            if stack:
                stack.pop()
        elif ch == "+" and i + 1 < n and text[i + 1].isdigit():  # "+1": JSON numbers carry no plus sign
            i += 1
            continue
        elif (ch.isalpha() or ch == "_") and not (out and out[-1][-1:].isdigit()):  # not 1e-6's exponent
            j = i
            while j < n and (text[j].isalnum() or text[j] in "_-"):
                j += 1
            word = text[i:j]
            rest = text[j:].lstrip()
            if rest.startswith(":"):          # an unquoted key
                out.append(json.dumps(word))
            elif word in literals:
                out.append(literals[word])
            elif word in ("true", "false", "null"):
                out.append(word)
            else:                              # a bare word value: keep it as a string
                out.append(json.dumps(word))
            i = j
            continue
        out.append(ch)
        i += 1
    repaired = "".join(out).rstrip()
    if stack:  # cut off: drop a dangling key (with its colon) or separator
        if stack[-1] == "}":
            repaired = re.sub(r'([{,])\s*"(?:[^"\\]|\\.)*"\s*:?$', r"\1", repaired)
        repaired = re.sub(r"[,:]\s*$", "", repaired).rstrip()
    return repaired + "".join(reversed(stack))


def _drop_trailing_comma(out: list[str]) -> None:
    k = len(out) - 1
    while k >= 0 and out[k].isspace():
        k -= 1
    if k >= 0 and out[k] == ",":
        del out[k]


def _candidates(text: str) -> list[str]:
    """JSON-looking spans: fenced blocks, then every outermost balanced {...}, then a trailing unbalanced one."""
    return [m.group(1).strip() for m in _FENCED.finditer(text)] + json_spans(text, keep_unclosed=True)


def extract_json(text: str) -> list[dict]:
    """Every JSON object in the reply, in order of appearance per kind (fenced first): json.loads, else
    json.loads(repair_json(...)). Spans that do not parse even after repair are skipped."""
    objects = []
    for candidate in _candidates(text or ""):
        for attempt in (candidate, None):
            try:
                value = json.loads(attempt if attempt is not None else repair_json(candidate))
            except (json.JSONDecodeError, ValueError, RecursionError):
                continue
            if isinstance(value, dict):
                objects.append(value)
            break
    return objects


# ---------------------------------------------------------------- parsing the judge's JSON


def _int_score(value, where: str) -> int:
    if isinstance(value, bool):
        raise JudgeError(f"{where}: score {value!r} is not a number")
    if isinstance(value, str):
        m = re.fullmatch(r"\s*([+-]?\d+(?:\.0+)?)\s*", value)
        if not m:
            raise JudgeError(f"{where}: score {value!r} is not a number")
        value = float(m.group(1))
    if not isinstance(value, (int, float)) or not float(value).is_integer():
        raise JudgeError(f"{where}: score {value!r} is not an integer")
    if not -2 <= value <= 2:
        raise JudgeError(f"{where}: score {value} outside -2..2")
    return int(value)


def _choice(value, where: str) -> str:
    text = str(value).strip()
    choice = text if text in CHOICES else CHOICE_ALIASES.get(text.lower())
    if choice is None:
        raise JudgeError(f"{where}: chosen {value!r} is not one of {CHOICES}")
    return choice


def parse_rubric_judgment(text: str) -> RubricJudgment:
    """The OpenRS judge reply -> RubricJudgment. The last JSON object with `rubric_compares` counts; each compare
    needs `score` and `chosen`, and a type (its own `type`, else its criterion's in `rubric_list`). JudgeError names
    the first missing or invalid field (e.g. "rubric_compares[2]: no 'score'")."""
    objects = [o for o in extract_json(text) if "rubric_compares" in o]
    if not objects:
        has_json = bool(extract_json(text))
        raise JudgeError("judge reply: " + ("JSON without 'rubric_compares'" if has_json else "no JSON object found"))
    obj = objects[-1]
    rubric = []
    for k, item in enumerate(obj.get("rubric_list") or []):
        if not isinstance(item, dict):
            raise JudgeError(f"rubric_list[{k}]: not an object")
        if "type" not in item:
            raise JudgeError(f"rubric_list[{k}]: no 'type'")
        rid = str(item.get("rubric_id", item.get("id", k + 1)))
        rubric.append(Criterion(rid, str(item.get("title", "")), str(item.get("description", "")),
                                criterion_type(item["type"], f"rubric_list[{k}]")))
    by_id = {c.id: c for c in rubric}
    by_title = {c.title: c for c in rubric}
    compares_raw = obj["rubric_compares"]
    if not isinstance(compares_raw, list) or not compares_raw:
        raise JudgeError("rubric_compares: expected a non-empty list")
    compares = []
    for k, item in enumerate(compares_raw):
        where = f"rubric_compares[{k}]"
        if not isinstance(item, dict):
            raise JudgeError(f"{where}: not an object")
        for key in ("score", "chosen"):
            if key not in item:
                raise JudgeError(f"{where}: no {key!r}")
        idx = str(item.get("rubric_idx", item.get("rubric_id", k + 1)))
        name = str(item.get("rubric_name", ""))
        kind = item.get("type")
        if kind is None:
            known = by_id.get(idx) or by_title.get(name)
            if known is None:
                raise JudgeError(f"{where}: no 'type' and no criterion {idx!r} in rubric_list")
            kind = known.type
        compares.append(CriterionCompare(idx, criterion_type(kind, where), _choice(item["chosen"], where),
                                         _int_score(item["score"], where), name=name,
                                         reason=str(item.get("reason", ""))))
    analysis = obj.get("question_analysis") if isinstance(obj.get("question_analysis"), dict) else {}
    return RubricJudgment(tuple(compares), tuple(rubric), analysis, raw=text)


# ---------------------------------------------------------------- aggregation (spec 1.4)


def _weight_table(weights: Mapping[str, float], veto: bool) -> np.ndarray:
    """float [4] indexed by type code; NaN where a type has no weight (fatal under veto)."""
    unknown = set(weights) - set(CRITERION_TYPES)
    if unknown:
        raise ValueError(f"aggregate: weights for unknown types {sorted(unknown)} (types: {CRITERION_TYPES})")
    for kind in CRITERION_TYPES[1:]:
        if kind not in weights:
            raise ValueError(f"aggregate: weights lack {kind!r} (got {dict(weights)})")
    if not veto and "fatal" not in weights:
        raise ValueError("aggregate(veto=False): weights need a 'fatal' entry (fatal criteria join the weighted mean)")
    return np.asarray([float(weights.get(kind, np.nan)) for kind in CRITERION_TYPES], np.float64)


def type_codes(types) -> np.ndarray:
    """int array of CRITERION_TYPES indices from type names (or codes, passed through)."""
    arr = np.asarray(types)
    if arr.dtype.kind in "iu":
        return arr.astype(np.int64)
    flat = [CRITERION_TYPES.index(criterion_type(t)) for t in arr.reshape(-1)]
    return np.asarray(flat, np.int64).reshape(arr.shape)


def aggregate(scores, types, weights: Mapping[str, float] = DEFAULT_WEIGHTS, *, veto: bool = True,
              min_score: float = 0.0, valid=None, eps: float = 1e-6) -> np.ndarray:
    """The pair score S over the last axis (K criteria), spec 1.4. scores: signed ints [..., K] (positive
    favours A); types: names or codes [..., K]; valid: bool [..., K] (padding False). With veto, S = sum of the
    fatal scores when any fatal score is non-zero; otherwise S = sum w*s / (sum w + eps) over the non-zero
    criteria (zero scores add neither score nor weight). |S| < min_score -> 0. Returns float [...]."""
    s = np.asarray(scores, np.float64)
    codes = type_codes(types)
    if codes.shape != s.shape:
        codes = np.broadcast_to(codes, s.shape)
    mask = np.ones(s.shape, bool) if valid is None else np.broadcast_to(np.asarray(valid, bool), s.shape)
    table = _weight_table(weights, veto)
    nonzero = (s != 0) & mask
    fatal = codes == 0
    fatal_hit = np.any(nonzero & fatal, axis=-1)
    veto_score = np.sum(np.where(nonzero & fatal, s, 0.0), axis=-1)
    w = np.where(nonzero & ~(fatal & veto), table[codes], 0.0)  # under veto a non-zero fatal never reaches here
    mean = np.sum(w * s, axis=-1) / (np.sum(w, axis=-1) + eps)
    total = np.where(fatal_hit, veto_score, mean) if veto else mean
    return np.where(np.abs(total) < min_score, 0.0, total)


def aggregate_judgment(judgment: RubricJudgment, weights: Mapping[str, float] = DEFAULT_WEIGHTS, *,
                       veto: bool = True, min_score: float = 0.0) -> float:
    scores, codes = judgment.arrays()
    return float(aggregate(scores, codes, weights, veto=veto, min_score=min_score))


def bidirectional(s_forward, s_backward, margin: float = 0.0) -> np.ndarray:
    """Spec 1.2 step 3 (S_f: A = chosen; S_b: the swapped order, A = rejected): +1 GOOD if S_f > m and
    S_b <= -m; -1 BAD if S_f <= -m and S_b > m; else 0 SAME. int [...]."""
    f, b = np.asarray(s_forward, np.float64), np.asarray(s_backward, np.float64)
    good = (f > margin) & (b <= -margin)
    bad = (f <= -margin) & (b > margin)
    return np.where(good, 1, np.where(bad, -1, 0)).astype(np.int64)


# ---------------------------------------------------------------- prompts


_FIELD = re.compile(r"\{(query|response_a|response_b|domain_rubric)\}")


class RubricPrompts:
    """The judge prompt as data: a folder with `meta_rubric.md` (the template: {query}, {response_a},
    {response_b}, {domain_rubric} are replaced; other braces stay, so JSON examples need no escaping) and
    `domains/<query_type>.md` (a domain's criteria pool; `domains/default.md` or nothing when a query type has no
    file). Drop the released prompts (translated or not) into such a folder to use them."""

    FIELDS = ("{query}", "{response_a}", "{response_b}")

    def __init__(self, directory: str):
        self.directory = os.path.abspath(directory)
        path = os.path.join(self.directory, "meta_rubric.md")
        if not os.path.isfile(path):
            raise FileNotFoundError(f"RubricPrompts: {path} does not exist (the meta-rubric template)")
        with open(path, encoding="utf-8") as f:
            self.template = f.read()
        missing = [field for field in self.FIELDS if field not in self.template]
        if missing:
            raise ValueError(f"RubricPrompts: {path} lacks the field(s) {missing}")
        self._domains: dict[str, str] = {}
        self.unknown_types: set[str] = set()

    def query_types(self) -> list[str]:
        folder = os.path.join(self.directory, "domains")
        if not os.path.isdir(folder):
            return []
        return sorted(os.path.splitext(name)[0] for name in os.listdir(folder) if name.endswith(".md"))

    def domain(self, query_type: str | None) -> str:
        """The domain rubric of query_type (default.md when it has none; "" without a default)."""
        key = (query_type or "default").strip() or "default"
        if key not in self._domains:
            path = os.path.join(self.directory, "domains", f"{key}.md")
            if not os.path.isfile(path):
                if key != "default":
                    self.unknown_types.add(key)
                    return self.domain("default")
                self._domains[key] = ""
            else:
                with open(path, encoding="utf-8") as f:
                    self._domains[key] = f.read().strip()
        return self._domains[key]

    def render(self, query: str, a: str, b: str, query_type: str | None = None) -> str:
        """The judge prompt; one pass over the template, so a field name inside a response stays as written."""
        values = {"query": query, "response_a": a, "response_b": b, "domain_rubric": self.domain(query_type)}
        return _FIELD.sub(lambda m: values[m.group(1)], self.template)


# ---------------------------------------------------------------- the judge


def chat_generate(client, *, system_prompt: str | None = None, temperature: float = 0.0, top_p: float = 1.0,
                  seed: int | None = 1024, max_tokens: int = 8192, raise_errors: bool = False) -> Callable:
    """A text backend on a shared.judges.http.ChatClient with the reference's settings (spec 1.5: T 0, top_p 1,
    seed 1024, 8192 tokens): texts -> replies (a failed request after the client's retries: "" unless
    raise_errors)."""
    from shared.judges.http import reply_text

    params = {"temperature": temperature, "top_p": top_p, "max_tokens": max_tokens}
    if seed is not None:
        params["seed"] = int(seed)

    def generate(texts: Sequence[str]) -> list[str]:
        system = [] if system_prompt is None else [{"role": "system", "content": system_prompt}]
        replies = client.chat_many([system + [{"role": "user", "content": t}] for t in texts],
                                   raise_errors=raise_errors, **params)
        out = []
        for reply in replies:
            try:
                if isinstance(reply, JudgeError):
                    raise reply
                out.append(reply_text(reply, client.url)[0])
            except JudgeError:
                if raise_errors:
                    raise
                out.append("")  # unparsable: the judge asks again, then applies its malformed policy
        return out

    generate.client = client
    return generate


class RubricJudge(GenerativeJudge):
    """The OpenRS pairwise judge (spec 1.2) on a text backend `generate(texts) -> replies` (chat_generate(client),
    a simulator, a mock). Per pair: the gates in order (each `gate(prompts, a, b, columns) -> int [M]` in
    {-1, 0, +1}; the first non-zero decides: GT check, constraint check, shared/rewards/sandbox.py); then the judge
    prompt for (a, b) and, with bidirectional, for (b, a), all in one backend call; a reply that does not parse is
    asked again up to json_retries times (spec 1.5: 5); S = aggregate(...) per order; the verdict is
    bidirectional(S_f, S_b, min_score) (single order: sign of S_f beyond min_score). Verdict.scores = (S_f, S_b).

    prompts: a RubricPrompts (or its folder); query_type_column: the column naming each pair's domain (else
    default_query_type)."""

    SEPARATOR = "\n---- swapped order ----\n"

    def __init__(self, generate: Callable[[Sequence[str]], Sequence[str]], prompts: RubricPrompts | str, *,
                 weights: Mapping[str, float] = DEFAULT_WEIGHTS, veto: bool = True, min_score: float = 0.0,
                 bidirectional: bool = True, json_retries: int = 5, gates: Sequence[Callable] = (),
                 query_type_column: str = "query_type", default_query_type: str | None = None, **options):
        super().__init__(**options)
        self.generate = generate
        self.prompts = prompts if isinstance(prompts, RubricPrompts) else RubricPrompts(prompts)
        _weight_table(weights, veto)  # fail at build time on bad weights
        self.weights, self.veto, self.min_score = dict(weights), bool(veto), float(min_score)
        self.both_orders, self.json_retries = bool(bidirectional), max(1, int(json_retries))
        self.gates, self.query_type_column = list(gates), query_type_column
        self.default_query_type = default_query_type

    def _judge_texts(self, texts: list[str]) -> list[tuple[RubricJudgment | None, str, str]]:
        """(judgment or None, last raw reply, last error) per text, regenerating the unparsable ones."""
        results: list = [(None, "", "")] * len(texts)
        pending = list(range(len(texts)))
        for attempt in range(self.json_retries):
            if not pending:
                break
            if attempt:
                self.count(json_retries=len(pending))
            replies = list(self.generate([texts[i] for i in pending]))
            if len(replies) != len(pending):
                raise JudgeError(f"RubricJudge: backend returned {len(replies)} replies for {len(pending)} prompts")
            self.count(calls=len(pending))
            still = []
            for i, raw in zip(pending, replies):
                try:
                    results[i] = (parse_rubric_judgment(raw), raw, "")
                except JudgeError as e:
                    results[i] = (None, raw, str(e))
                    still.append(i)
            pending = still
        return results

    def _compare(self, prompts, a, b, seed, columns):
        m = len(prompts)
        decided = np.zeros(m, np.int64)
        deciding_gate = [""] * m
        for gate in self.gates:
            open_idx = np.flatnonzero(decided == 0)
            if not len(open_idx):
                break
            sub = {k: [v[i] for i in open_idx] for k, v in columns.items()}
            out = np.asarray(gate([prompts[i] for i in open_idx], [a[i] for i in open_idx],
                                  [b[i] for i in open_idx], sub), np.int64)
            if out.shape != (len(open_idx),) or np.any(np.abs(out) > 1):
                raise JudgeError(f"RubricJudge: gate {getattr(gate, 'name', gate)!r} returned {out!r}")
            decided[open_idx] = out
            for i in open_idx[out != 0]:
                deciding_gate[i] = str(getattr(gate, "name", type(gate).__name__))
        self.count(gate_decided=int(np.sum(decided != 0)))
        rest = [i for i in range(m) if decided[i] == 0]
        qtypes = columns.get(self.query_type_column) or [None] * m
        qtypes = [q or self.default_query_type for q in qtypes]
        texts = [self.prompts.render(prompts[i], a[i], b[i], qtypes[i]) for i in rest]
        if self.both_orders:
            texts += [self.prompts.render(prompts[i], b[i], a[i], qtypes[i]) for i in rest]
        judged = self._judge_texts(texts) if texts else []
        verdicts: list[Verdict | None] = [None] * m
        for i in range(m):
            if decided[i]:
                verdicts[i] = Verdict(int(decided[i]), critique=f"decided by the gate {deciding_gate[i]}")
        n = len(rest)
        for k, i in enumerate(rest):
            forward = judged[k]
            backward = judged[n + k] if self.both_orders else None
            parts = [forward] + ([backward] if backward else [])
            raw = self.SEPARATOR.join(p[1] for p in parts)
            failed = [p[2] for p in parts if p[0] is None]
            if failed:
                self.count(malformed=1)
                if self.on_malformed == "raise":
                    raise JudgeError(f"RubricJudge: pair {i}: {failed[0]}")
                verdicts[i] = Verdict(0, raw=raw, malformed=True, error=failed[0])
                continue
            s_f = aggregate_judgment(forward[0], self.weights, veto=self.veto, min_score=self.min_score)
            if backward is None:
                pref, s_b = (1 if s_f > self.min_score else -1 if s_f < -self.min_score else 0), float("nan")
            else:
                s_b = aggregate_judgment(backward[0], self.weights, veto=self.veto, min_score=self.min_score)
                pref = int(bidirectional(s_f, s_b, self.min_score))
            critique = forward[0].summary() + (self.SEPARATOR + backward[0].summary() if backward else "")
            verdicts[i] = Verdict(pref, scores=(s_f, s_b), critique=critique, raw=raw)
        return verdicts


def make_rubric_judge_reward(generate: Callable, prompts: RubricPrompts | str, *, reference_column: str = "reference",
                             **options):
    """The RubricJudge as a pairwise reward (shared.judges.pairwise.PairwiseJudgeReward): P(completion better than
    the reference column), and judge_pairs for the pairwise advantage estimators (BRPO)."""
    from shared.judges.pairwise import PairwiseJudgeReward

    return PairwiseJudgeReward(RubricJudge(generate, prompts, **options), reference_column)

"""MAM, the multi-agent judge of ATP-Bench (spec ../shared/papers/atp_bench.md §1.3, §4.4): reference-free scoring of
an interleaved response's unexecuted tool plan (shared.eval.interleaved) by three roles and an aggregator.

  precision role  one verdict per call, a label of PRECISION_LABELS (valid / unnecessary / wrong_tool / misplaced /
                  bad_args)
  missed role     the places (sentence anchors) after which a visual was needed and none came
  quality role    a holistic rating of text + plan on 1..10 (clipped into that range)
  aggregate       P = #valid / #calls (None without calls), R = #valid / (#valid + #missed) (1.0 when both are 0),
                  S = Q/10 * F1(P, R) with calls, S = Q/10 * 1[#missed == 0] without (the spec's default; every part
                  is also reported on its own in MamJudgment)

Information design (as projects/march: a role that sees another's output confirms it). view="split":
  precision  per call: the query, context, user image, the call and its local text (`local_text`: the anchor sentence,
             the call, the next sentence); the item's response and the parsed sentences are blanked
  missed     the whole response with its calls, no per-call verdicts
  quality    everything: the response, the verdicts and the missed list
view="full" (the ablation): every role sees the whole response and whatever the earlier roles decided (precision runs
first, so it sees no verdicts; missed sees the verdicts). A role reads only its `RoleView` (plus the item and the
parsed response, blanked where the view hides them).

Back-ends: FunctionRoles (plain callables: a tiny model, a script), ChatRoles (an OpenAI-compatible endpoint through
shared.judges.http.ChatClient; one request per call for precision, JSON replies read with rubric.extract_json),
MockRoles (scripted per item, recording what each role was shown). votes > 1: every role is asked that many times;
the majority label per call, the anchors named by a majority of votes and the median quality are kept.
Malformed role output (bad label, call index out of range, missing verdict, no JSON) is a JudgeError naming the role.
"""
from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import json
import math
import numbers
import statistics
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol, Sequence

from shared.eval.interleaved import Interleaved, ToolCall, format_call, parse_interleaved
from shared.judges.rubric import extract_json
from shared.judges.verdict import JudgeError

PRECISION_LABELS = ("valid", "unnecessary", "wrong_tool", "misplaced", "bad_args")
ROLES = ("precision", "missed", "quality")
VIEWS = ("split", "full")
SNIPPET = 200


def _snippet(text: str) -> str:
    text = " ".join(str(text).split())
    return repr(text if len(text) <= SNIPPET else text[:SNIPPET - 3] + "...")


# ---------------------------------------------------------------- data model


@dataclass(frozen=True)
class MamItem:
    query: str
    context: str
    response: str
    user_image: str | None = None   # a descriptor / handle of the user's image (VQA items), None otherwise
    item_id: str = ""


@dataclass(frozen=True)
class CallVerdict:
    index: int                      # the call's position in Interleaved.calls
    label: str                      # one of PRECISION_LABELS
    reason: str = ""

    def __post_init__(self):
        if self.label not in PRECISION_LABELS:
            raise JudgeError(f"call verdict label {self.label!r}: expected one of {PRECISION_LABELS}")


@dataclass(frozen=True)
class MissedVisual:
    anchor: int                     # the sentence after which a visual was needed (-1: before the first)
    intent: str = ""


@dataclass(frozen=True)
class CallContext:
    """What a precision judge is shown of one call."""
    index: int
    call: ToolCall
    tag: str                        # the call as written (format_call)
    local: str                      # local_text(): anchor sentence, the call, the next sentence


@dataclass(frozen=True)
class RoleView:
    """Everything one role may see for one item (None: hidden from this role). `raw` collects the role's raw replies
    (a chat role appends to it) for MamJudgment.raw; it is the only mutable part."""
    role: str                                       # precision / missed / quality
    mode: str                                       # split / full
    query: str
    context: str
    user_image: str | None
    calls: tuple[CallContext, ...]
    response: str | None = None                     # the response with its calls, as written
    sentences: tuple[str, ...] | None = None        # the call-free sentences (anchors index them)
    verdicts: tuple[CallVerdict, ...] | None = None
    missed: tuple[MissedVisual, ...] | None = None
    vote: int = 0                                   # which of the `votes` asks this is (a seed for sampled roles)
    item_id: str = ""
    raw: list = field(default_factory=list, compare=False)

    def numbered(self) -> str:
        """The response as numbered sentences with the calls placed after their anchors (for prompts); "" if hidden."""
        if self.sentences is None:
            return ""
        return numbered_response(self.sentences, [c.call for c in self.calls])


@dataclass(frozen=True)
class MamJudgment:
    item_id: str
    calls: tuple[CallVerdict, ...]
    missed: tuple[MissedVisual, ...]
    quality: float                  # 1..10
    precision: float | None         # None without calls
    recall: float
    score: float
    no_calls: bool
    parse_errors: tuple[str, ...] = ()
    raw: Mapping[str, str] = field(default_factory=dict)

    def to_record(self) -> dict:
        """A JSON-serialisable per-item record (lists and plain dicts only)."""
        return {
            "item_id": self.item_id,
            "calls": [{"index": v.index, "label": v.label, "reason": v.reason} for v in self.calls],
            "missed": [{"anchor": m.anchor, "intent": m.intent} for m in self.missed],
            "quality": self.quality, "precision": self.precision, "recall": self.recall, "score": self.score,
            "no_calls": self.no_calls, "parse_errors": list(self.parse_errors), "raw": dict(self.raw),
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> "MamJudgment":
        return cls(record["item_id"], tuple(CallVerdict(**v) for v in record["calls"]),
                   tuple(MissedVisual(**m) for m in record["missed"]), record["quality"], record["precision"],
                   record["recall"], record["score"], record["no_calls"], tuple(record.get("parse_errors", ())),
                   dict(record.get("raw", {})))


class PrecisionRole(Protocol):
    def judge_calls(self, item: MamItem, parsed: Interleaved, view: RoleView) -> list[CallVerdict]: ...


class MissedRole(Protocol):
    def find_missed(self, item: MamItem, parsed: Interleaved, view: RoleView) -> list[MissedVisual]: ...


class QualityRole(Protocol):
    def rate(self, item: MamItem, parsed: Interleaved, view: RoleView) -> float: ...


# ---------------------------------------------------------------- views


def _tag(call: ToolCall) -> str:
    try:
        return format_call(call)
    except ValueError:  # a value format_call cannot write back (both quote kinds): show it plainly
        return f"<{call.tool} {json.dumps(call.args())}>"


def local_text(sentences: Sequence[str], call: ToolCall) -> str:
    """The call in its local text: the anchor sentence, the call's tag, the next sentence (what a split-view
    precision judge sees). Anchor -1: the tag and the first sentence."""
    before = sentences[call.anchor] if 0 <= call.anchor < len(sentences) else ""
    after = sentences[call.anchor + 1] if -1 <= call.anchor < len(sentences) - 1 else ""
    return " ".join(p for p in (before, _tag(call), after) if p)


def numbered_response(sentences: Sequence[str], calls: Sequence[ToolCall]) -> str:
    """One line per sentence, "[i] sentence <call/>...", the calls after their anchor; calls before the first
    sentence on a "[-1]" line. Anchors are what the missed role names."""
    after: dict[int, list[str]] = collections.defaultdict(list)
    for call in calls:
        after[call.anchor].append(_tag(call))
    lines = [f"[-1] {' '.join(after[-1])}"] if after.get(-1) else []
    lines += [" ".join([f"[{i}] {s}"] + after.get(i, [])) for i, s in enumerate(sentences)]
    return "\n".join(lines)


def build_view(role: str, mode: str, item: MamItem, parsed: Interleaved, *, verdicts=None, missed=None,
               vote: int = 0) -> RoleView:
    """The RoleView of `role` under `mode` (see the module docstring for who sees what)."""
    if role not in ROLES:
        raise ValueError(f"role {role!r}: expected one of {ROLES}")
    if mode not in VIEWS:
        raise ValueError(f"view {mode!r}: expected one of {VIEWS}")
    calls = tuple(CallContext(i, c, _tag(c), local_text(parsed.sentences, c)) for i, c in enumerate(parsed.calls))
    whole = not (role == "precision" and mode == "split")
    sees_verdicts = role == "quality" or (role == "missed" and mode == "full")
    return RoleView(role, mode, item.query, item.context, item.user_image, calls,
                    response=item.response if whole else None, sentences=parsed.sentences if whole else None,
                    verdicts=tuple(verdicts) if sees_verdicts and verdicts is not None else None,
                    missed=tuple(missed) if role == "quality" and missed is not None else None,
                    vote=vote, item_id=item.item_id)


def _shown(item: MamItem, parsed: Interleaved, view: RoleView) -> tuple[MamItem, Interleaved]:
    """The item and parsed response as the role may see them: text blanked when the view hides it."""
    if view.sentences is not None:
        return item, parsed
    return dataclasses.replace(item, response=""), Interleaved((), parsed.calls, ())


# ---------------------------------------------------------------- aggregation


def aggregate(calls: Sequence[CallVerdict | str], missed: Sequence | int, quality: float,
              n_calls: int) -> tuple[float | None, float, float]:
    """(precision, recall, score) per the spec's default (module docstring). calls: the verdicts (or labels), one per
    call; missed: the missed visuals (or their count); quality on 1..10."""
    labels = [c.label if isinstance(c, CallVerdict) else c for c in calls]
    if len(labels) != n_calls:
        raise ValueError(f"aggregate: {len(labels)} verdicts for {n_calls} calls")
    n_missed = missed if isinstance(missed, int) else len(missed)
    valid = sum(label == "valid" for label in labels)
    q = float(quality) / 10.0
    recall = valid / (valid + n_missed) if valid + n_missed else 1.0
    if n_calls == 0:
        return None, recall, q * float(n_missed == 0)
    precision = valid / n_calls
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, q * f1


# ---------------------------------------------------------------- checking and voting role output


def _check_verdicts(out, n_calls: int) -> list[CallVerdict]:
    if not isinstance(out, (list, tuple)) or not all(isinstance(v, CallVerdict) for v in out):
        raise JudgeError(f"MAM precision role: expected a list of CallVerdict, got {_snippet(repr(out))}")
    by_index = {}
    for v in out:
        if not 0 <= v.index < n_calls:
            raise JudgeError(f"MAM precision role: call index {v.index} out of range for {n_calls} calls")
        if v.index in by_index:
            raise JudgeError(f"MAM precision role: two verdicts for call {v.index}")
        by_index[v.index] = v
    if len(by_index) != n_calls:
        raise JudgeError(f"MAM precision role: no verdict for calls {sorted(set(range(n_calls)) - set(by_index))}")
    return [by_index[i] for i in range(n_calls)]


def _check_missed(out, n_sentences: int) -> list[MissedVisual]:
    if not isinstance(out, (list, tuple)) or not all(isinstance(m, MissedVisual) for m in out):
        raise JudgeError(f"MAM missed role: expected a list of MissedVisual, got {_snippet(repr(out))}")
    for m in out:
        integral = isinstance(m.anchor, numbers.Integral) and not isinstance(m.anchor, bool)
        if not integral or not -1 <= m.anchor < n_sentences:
            raise JudgeError(f"MAM missed role: anchor {m.anchor!r} out of range for {n_sentences} sentences")
    return sorted((dataclasses.replace(m, anchor=int(m.anchor)) for m in out), key=lambda m: m.anchor)


def _check_quality(out) -> float:
    if isinstance(out, bool) or not isinstance(out, numbers.Real) or not math.isfinite(out):
        raise JudgeError(f"MAM quality role: expected a finite number, got {_snippet(repr(out))}")
    return min(10.0, max(1.0, float(out)))


def vote_verdicts(votes: Sequence[Sequence[CallVerdict]]) -> list[CallVerdict]:
    """The majority label per call (a tie goes to the label first in PRECISION_LABELS); its reason from the first
    vote that gave it."""
    out = []
    for mine in zip(*votes):
        counts = collections.Counter(v.label for v in mine)
        best = max(PRECISION_LABELS, key=lambda label: (counts[label], -PRECISION_LABELS.index(label)))
        out.append(next(v for v in mine if v.label == best))
    return out


def vote_missed(votes: Sequence[Sequence[MissedVisual]]) -> list[MissedVisual]:
    """Anchors named by a majority of the votes: an anchor named k times by a vote counts k visuals there; the
    j-th visual at an anchor is kept when more than half of the votes name at least j (intent from the first vote
    that does)."""
    need = len(votes) // 2 + 1
    per_vote = [collections.Counter(m.anchor for m in vote) for vote in votes]
    out = []
    for anchor in sorted({a for c in per_vote for a in c}):
        kept = sorted((c[anchor] for c in per_vote), reverse=True)[need - 1]
        for j in range(kept):
            for vote in votes:  # the first vote that names a (j+1)-th visual here gives its intent
                named = [m for m in vote if m.anchor == anchor]
                if len(named) > j:
                    out.append(named[j])
                    break
    return out


# ---------------------------------------------------------------- the judge


class MamJudge:
    """The three roles and the aggregator (module docstring). tools: the tool registry for parsing (default TOOLS);
    votes: asks per role, combined by majority / median."""

    def __init__(self, precision: PrecisionRole, missed: MissedRole, quality: QualityRole, *, view: str = "split",
                 tools=None, votes: int = 1):
        if view not in VIEWS:
            raise ValueError(f"MamJudge(view={view!r}): expected one of {VIEWS}")
        if int(votes) < 1:
            raise ValueError(f"MamJudge(votes={votes}): must be >= 1")
        self.precision_role, self.missed_role, self.quality_role = precision, missed, quality
        self.view, self.tools, self.votes = view, tools, int(votes)

    def judge(self, item: MamItem) -> MamJudgment:
        parsed = parse_interleaved(item.response, self.tools)
        n_calls, raw = parsed.n_calls, {}

        def ask(role: str, call: Callable, check: Callable, **seen):
            results, replies = [], []
            for vote in range(self.votes):
                view = build_view(role, self.view, item, parsed, vote=vote, **seen)
                results.append(check(call(*_shown(item, parsed, view), view)))
                replies.append("\n".join(view.raw))
            if any(replies):
                raw[role] = "\n---- vote ----\n".join(replies)
            return results

        verdicts: list[CallVerdict] = []
        if n_calls:  # without calls there is nothing to inspect: no request
            verdicts = vote_verdicts(ask("precision", self.precision_role.judge_calls,
                                         lambda out: _check_verdicts(out, n_calls)))
        missed = vote_missed(ask("missed", self.missed_role.find_missed,
                                 lambda out: _check_missed(out, len(parsed.sentences)), verdicts=verdicts))
        quality = float(statistics.median(ask("quality", self.quality_role.rate, _check_quality, verdicts=verdicts,
                                              missed=missed)))
        p, r, s = aggregate(verdicts, missed, quality, n_calls)
        return MamJudgment(item.item_id, tuple(verdicts), tuple(missed), quality, p, r, s, n_calls == 0,
                           parsed.errors, raw)

    def judge_many(self, items: Sequence[MamItem], *, workers: int = 1) -> list[MamJudgment]:
        """Judgments in the items' order; a thread pool of `workers` when > 1 (chat roles wait on the network)."""
        items = list(items)
        if workers <= 1 or len(items) <= 1:
            return [self.judge(item) for item in items]
        with concurrent.futures.ThreadPoolExecutor(min(int(workers), len(items))) as pool:
            return list(pool.map(self.judge, items))


# ---------------------------------------------------------------- back-ends: plain callables


def _verdict(index: int, out) -> CallVerdict:
    """A precision callable's answer for one call: a CallVerdict, a label, or (label, reason)."""
    if isinstance(out, CallVerdict):
        return dataclasses.replace(out, index=index)
    if isinstance(out, str):
        return CallVerdict(index, out)
    if isinstance(out, (tuple, list)) and len(out) == 2:
        return CallVerdict(index, str(out[0]), str(out[1]))
    raise JudgeError(f"MAM precision role: cannot read {_snippet(repr(out))} as a verdict")


def _missed(out) -> MissedVisual:
    """A missed callable's entry: a MissedVisual, an anchor, or (anchor, intent)."""
    if isinstance(out, MissedVisual):
        return out
    if isinstance(out, numbers.Integral) and not isinstance(out, bool):
        return MissedVisual(int(out))
    if isinstance(out, (tuple, list)) and len(out) == 2:
        return MissedVisual(out[0], str(out[1]))
    raise JudgeError(f"MAM missed role: cannot read {_snippet(repr(out))} as a missed visual")


class FunctionRoles:
    """All three roles from plain callables (a tiny model's head, a script), each optional:
      precision(call: CallContext, view) -> label | (label, reason) | CallVerdict      called once per call
      missed(view) -> iterable of anchors | (anchor, intent) | MissedVisual
      quality(view) -> number
    Pass the same object as each role of MamJudge."""

    def __init__(self, precision: Callable | None = None, missed: Callable | None = None,
                 quality: Callable | None = None):
        self._precision, self._missed, self._quality = precision, missed, quality

    @staticmethod
    def _need(fn, role):
        if fn is None:
            raise ValueError(f"FunctionRoles: no {role} callable given")
        return fn

    def judge_calls(self, item, parsed, view):
        fn = self._need(self._precision, "precision")
        return [_verdict(c.index, fn(c, view)) for c in view.calls]

    def find_missed(self, item, parsed, view):
        return [_missed(m) for m in self._need(self._missed, "missed")(view)]

    def rate(self, item, parsed, view):
        return self._need(self._quality, "quality")(view)


class MockRoles:
    """Scripted roles for tests: script[item_id] = {"labels": [...], "missed": [anchor | (anchor, intent)],
    "quality": q}; an unscripted item (or key) gets every call `default_label`, nothing missed, `default_quality`.
    `seen` records (role, item, parsed, view) of every ask, in order (under a lock: judge_many may run threads)."""

    def __init__(self, script: Mapping[str, Mapping] | None = None, *, default_label: str = "valid",
                 default_quality: float = 10.0):
        self.script, self.default_label, self.default_quality = dict(script or {}), default_label, default_quality
        self.seen: list[tuple[str, MamItem, Interleaved, RoleView]] = []
        self._lock = threading.Lock()

    def _record(self, role, item, parsed, view) -> Mapping:
        with self._lock:
            self.seen.append((role, item, parsed, view))
        return self.script.get(view.item_id, {})

    def judge_calls(self, item, parsed, view):
        labels = self._record("precision", item, parsed, view).get("labels")
        labels = [self.default_label] * len(view.calls) if labels is None else labels
        return [_verdict(i, label) for i, label in enumerate(labels)]

    def find_missed(self, item, parsed, view):
        return [_missed(m) for m in self._record("missed", item, parsed, view).get("missed", ())]

    def rate(self, item, parsed, view):
        return self._record("quality", item, parsed, view).get("quality", self.default_quality)


# ---------------------------------------------------------------- back-end: a chat endpoint

_HEADER = """You judge an answer that interleaves text with tool calls placed where a visual (image) should appear. \
The calls are plans and are not executed. Tools: ref (reuse a context image), search (retrieve a real image), gen \
(generate a new image), edit (transform an image), code (render a chart).

[Query]
{query}

[User image]
{user_image}

[Context]
{context}
"""

MAM_TEMPLATES = {
    "precision": _HEADER + """
[Call {index}, in its text]
{text}

Judge call {index} alone. Labels: valid (a visual is needed here and this tool with these arguments provides it), \
unnecessary (no visual is needed here), wrong_tool (a visual is needed but another tool fits), misplaced (the visual \
belongs elsewhere in the answer), bad_args (right tool, wrong arguments).
Answer with JSON only: {{"verdicts": [{{"index": {index}, "label": "valid", "reason": "..."}}]}}""",
    "missed": _HEADER + """
[Answer: numbered sentences, calls after the sentence they follow]
{response}
{verdicts}
List every place where the answer needed a visual and has no call for it, by the number of the sentence it should \
follow (-1: before the first). An empty list if none.
Answer with JSON only: {{"missed": [{{"anchor": 2, "intent": "..."}}]}}""",
    "quality": _HEADER + """
[Answer: numbered sentences, calls after the sentence they follow]
{response}
{verdicts}{missed}
Rate the overall quality of the answer (correct, coherent text and a sensible visual plan) from 1 (worst) to 10 \
(best).
Answer with JSON only: {{"quality": 7}}""",
}


def _label(value) -> str | None:
    if not isinstance(value, str):
        return None
    word = value.strip().lower().replace("-", "_").replace(" ", "_")
    return word if word in PRECISION_LABELS else None


def _integer(value) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        return int(value)
    return None


def _json_with(role: str, text: str, key: str) -> dict:
    """The last JSON object in the reply holding `key` (rubric.extract_json: fenced, in prose, lightly repaired)."""
    found = [o for o in extract_json(text) if key in o]
    if not found:
        raise JudgeError(f"MAM {role} role: no JSON object with {key!r} in the reply {_snippet(text)}")
    return found[-1]


def parse_precision_reply(text: str, index: int) -> CallVerdict:
    """The verdict on call `index` from {"verdicts": [{"index", "label", "reason"}]} (or one {"label", ...} object);
    JudgeError for no JSON, a bad label or another call's index."""
    objects = [o for o in extract_json(text) if "verdicts" in o or "label" in o]
    if not objects:
        raise JudgeError(f"MAM precision role: no JSON object with 'verdicts' in the reply {_snippet(text)}")
    obj = objects[-1]
    entries = obj.get("verdicts", [obj]) if "verdicts" in obj else [obj]
    if not isinstance(entries, list) or len(entries) != 1 or not isinstance(entries[0], dict):
        raise JudgeError(f"MAM precision role: expected one verdict for call {index} in {_snippet(text)}")
    entry = entries[0]
    got = _integer(entry.get("index", index))
    if got != index:
        raise JudgeError(f"MAM precision role: verdict for call index {entry.get('index')!r}, asked about call "
                         f"{index}: {_snippet(text)}")
    label = _label(entry.get("label"))
    if label is None:
        raise JudgeError(f"MAM precision role: label {entry.get('label')!r} not in {PRECISION_LABELS}: "
                         f"{_snippet(text)}")
    return CallVerdict(index, label, str(entry.get("reason", "") or ""))


def parse_missed_reply(text: str) -> list[MissedVisual]:
    """The missed list from {"missed": [{"anchor", "intent"}]} (an entry may be a bare anchor); anchors are checked
    against the sentences by the judge."""
    entries = _json_with("missed", text, "missed")["missed"]
    if not isinstance(entries, list):
        raise JudgeError(f"MAM missed role: 'missed' is not a list: {_snippet(text)}")
    out = []
    for entry in entries:
        anchor = _integer(entry.get("anchor") if isinstance(entry, dict) else entry)
        if anchor is None:
            raise JudgeError(f"MAM missed role: entry {entry!r} has no integer anchor: {_snippet(text)}")
        out.append(MissedVisual(anchor, str(entry.get("intent", "") or "") if isinstance(entry, dict) else ""))
    return out


def parse_quality_reply(text: str) -> float:
    """The rating from {"quality": q}, clipped to [1, 10]; JudgeError when it is not a finite number."""
    value = _json_with("quality", text, "quality")["quality"]
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number):
        raise JudgeError(f"MAM quality role: quality {value!r} is not a number: {_snippet(text)}")
    return min(10.0, max(1.0, number))


class ChatRoles:
    """All three roles as prompted judges on a shared.judges.http.ChatClient (or any object with
    chat(messages, **params) -> chat completion, and optionally url). templates: per-role overrides of MAM_TEMPLATES
    (str.format fields: query, context, user_image, and index/text for precision, response/verdicts/missed for the
    others). Precision asks one request per call (the call in its local text under view="split", the whole numbered
    answer under "full"). With temperature > 0 each vote sends seed + vote."""

    def __init__(self, client, *, templates: Mapping[str, str] | None = None, system_prompt: str | None = None,
                 temperature: float = 0.0, max_tokens: int = 1024, seed: int = 0):
        unknown = set(templates or {}) - set(ROLES)
        if unknown:
            raise ValueError(f"ChatRoles: templates for unknown roles {sorted(unknown)}; roles are {ROLES}")
        self.client, self.templates = client, {**MAM_TEMPLATES, **(templates or {})}
        self.system_prompt, self.temperature, self.max_tokens, self.seed = (system_prompt, float(temperature),
                                                                             int(max_tokens), int(seed))

    def _ask(self, role: str, view: RoleView, **fields) -> str:
        from shared.judges.http import reply_text  # the reply check of the HTTP judge

        content = self.templates[role].format(query=view.query, context=view.context,
                                              user_image=view.user_image or "(none)", **fields)
        messages = ([] if self.system_prompt is None else [{"role": "system", "content": self.system_prompt}])
        messages.append({"role": "user", "content": content})
        params = {"temperature": self.temperature, "max_tokens": self.max_tokens}
        if self.temperature > 0:
            params["seed"] = self.seed + view.vote
        try:
            text, _ = reply_text(self.client.chat(messages, **params), getattr(self.client, "url", "chat"))
        except JudgeError as e:
            raise JudgeError(f"MAM {role} role: {e}") from None
        view.raw.append(text)
        return text

    @staticmethod
    def _verdict_block(view: RoleView) -> str:
        if view.verdicts is None:
            return ""
        lines = [f"call {v.index} ({view.calls[v.index].tag}): {v.label}" + (f" - {v.reason}" if v.reason else "")
                 for v in view.verdicts]
        return "\n[Per-call verdicts]\n" + ("\n".join(lines) or "(no calls)") + "\n"

    def judge_calls(self, item, parsed, view):
        out = []
        for c in view.calls:
            text = c.local if view.sentences is None else view.numbered()
            out.append(parse_precision_reply(self._ask("precision", view, index=c.index, text=text), c.index))
        return out

    def find_missed(self, item, parsed, view):
        return parse_missed_reply(self._ask("missed", view, response=view.numbered(),
                                            verdicts=self._verdict_block(view)))

    def rate(self, item, parsed, view):
        missed = "" if view.missed is None else "\n[Missed visuals]\n" + (
            "\n".join(f"after sentence {m.anchor}: {m.intent}" for m in view.missed) or "(none)") + "\n"
        return parse_quality_reply(self._ask("quality", view, response=view.numbered(),
                                             verdicts=self._verdict_block(view), missed=missed))

"""Explicit premise verification over real models (EVPV-PRM, ../shared/papers/evpv_prm.md §1.2 and §5): the policy's
JSON output with its visual checklist, and a step judge and a checklist audit on an OpenAI-compatible endpoint
(shared/judges/http.py ChatClient, on shared/net.py).

Policy output (§1.2 item 1): a reply holding the JSON object
    {"reasoningprocess": [{"steptext": str, "visualdependency": str | null}, ...], "finalanswer": str | number}
(in a ```json fence or bare, with text around it; keys match ignoring case and "_"). `parse_policy_output` returns
a PolicyOutput or raises PolicyOutputError naming what is wrong in one line; a dependency that is null, empty or
"null" / "none" is None (a purely abstract step).

Step judge (§1.2 item 4, §1.4): per step, one chat request with the strict prefix, the question, the extracted
description, the last `history` steps and the step; the reply must be the integer 1 or -1 (a leading "+" or a
Unicode minus is read; "Score: 1" too). Anything else, and a request that fails after the client's retries, is -1
(the released verifier's rule), counted in `malformed` / `errors`.

Checklist audit (§1.2 item 3): one request per candidate with the description and the de-duplicated checklist;
the reply's JSON {"contradictions": [{"fact": ..., "severity": "High" | "Low"}, ...]} gives
p = max(0, 1 - 0.5 n_High - 0.2 n_Low) (shared.eval.prm.reliability_from_counts); an unparsable audit is p = 0.
"""
from __future__ import annotations

import dataclasses
import json
import re
from typing import Any, Sequence

from shared.eval.prm import reliability_from_counts
from shared.judges.verdict import JudgeError, json_spans

NULL_DEPENDENCIES = ("", "null", "none", "n/a")


class PolicyOutputError(ValueError):
    """A policy reply that is not the JSON output of §1.2; the message says what is wrong."""


@dataclasses.dataclass(frozen=True)
class PolicyOutput:
    steps: tuple[str, ...]
    dependencies: tuple[str | None, ...]   # per step: the visual premise it reads, or None
    final_answer: str

    def checklist(self) -> list[str]:
        """The de-duplicated premises, in order (the audit's input)."""
        return list(dict.fromkeys(d for d in self.dependencies if d is not None))

    def dependent(self) -> list[bool]:
        return [d is not None for d in self.dependencies]


def _key(name: str) -> str:
    return name.replace("_", "").lower()


def _field(obj: dict, name: str, where: str):
    for key, value in obj.items():
        if isinstance(key, str) and _key(key) == name:
            return value
    raise PolicyOutputError(f"{where}: no {name!r} key (keys: {', '.join(map(str, obj)) or 'none'})")


def _objects(text: str) -> list[dict]:
    """JSON objects of the reply (fenced blocks first, then balanced {...} spans), in order."""
    candidates = re.findall(r"```(?:json)?\s*(\{.*?\})\s*```", text, flags=re.S) + json_spans(text)
    out = []
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except (json.JSONDecodeError, ValueError, RecursionError):
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


def parse_policy_output(text: Any) -> PolicyOutput:
    """The policy's steps, dependencies and final answer (module docstring); PolicyOutputError otherwise."""
    if not isinstance(text, str):
        raise PolicyOutputError(f"policy output: expected text, got {type(text).__name__}")
    objects = [o for o in _objects(text) if any(isinstance(k, str) and _key(k) == "reasoningprocess" for k in o)]
    if not objects:
        raise PolicyOutputError("policy output: no JSON object with a 'reasoningprocess' key"
                                + (" (a JSON object is cut off)" if json_spans(text, keep_unclosed=True) and
                                   not json_spans(text) else ""))
    obj = objects[0]
    process = _field(obj, "reasoningprocess", "policy output")
    if not isinstance(process, list) or not process:
        raise PolicyOutputError(f"policy output: 'reasoningprocess' must be a non-empty list of steps, got "
                                f"{type(process).__name__ if not isinstance(process, list) else 'an empty list'}")
    steps, deps = [], []
    for i, step in enumerate(process):
        where = f"policy output: reasoningprocess[{i}]"
        if not isinstance(step, dict):
            raise PolicyOutputError(f"{where}: expected an object with 'steptext', got {type(step).__name__}")
        text_i = _field(step, "steptext", where)
        if not isinstance(text_i, str) or not text_i.strip():
            raise PolicyOutputError(f"{where}: 'steptext' must be a non-empty string")
        try:
            dep = _field(step, "visualdependency", where)
        except PolicyOutputError:
            dep = None                                       # an omitted dependency is an abstract step
        if dep is not None and not isinstance(dep, str):
            raise PolicyOutputError(f"{where}: 'visualdependency' must be a string or null, got "
                                    f"{type(dep).__name__}")
        steps.append(text_i.strip())
        deps.append(None if dep is None or dep.strip().lower() in NULL_DEPENDENCIES else dep.strip())
    answer = _field(obj, "finalanswer", "policy output")
    if isinstance(answer, bool) or not isinstance(answer, (str, int, float)):
        raise PolicyOutputError(f"policy output: 'finalanswer' must be a string or a number, got "
                                f"{type(answer).__name__}")
    return PolicyOutput(tuple(steps), tuple(deps), str(answer).strip())


# ------------------------------------------------------------------------------------------ judge replies

_STEP_SCORE = re.compile(r"^\s*(?:(?:score|verdict|answer)\s*[:=]\s*)?([+\-\u2212]?)\s*(1)\s*[.!]?\s*$", re.I)


def parse_step_score(text: Any) -> int | None:
    """1 or -1 when the reply is exactly that integer (module docstring), else None."""
    if not isinstance(text, str):
        return None
    m = _STEP_SCORE.match(text.strip().strip("`").strip())
    if m is None:
        return None
    return -1 if m.group(1) in ("-", "\u2212") else 1


def parse_audit(text: Any) -> tuple[int, int] | None:
    """(n_High, n_Low) from the audit reply's {"contradictions": [...]}, or None when it is unparsable (a missing
    key, a non-list, an entry without severity High / Low)."""
    if not isinstance(text, str):
        return None
    for obj in _objects(text):
        found = [v for k, v in obj.items() if isinstance(k, str) and _key(k) == "contradictions"]
        if not found:
            continue
        items = found[0]
        if not isinstance(items, list):
            return None
        high = low = 0
        for item in items:
            severity = item.get("severity") if isinstance(item, dict) else None
            if not isinstance(severity, str) or severity.strip().lower() not in ("high", "low"):
                return None
            high += severity.strip().lower() == "high"
            low += severity.strip().lower() == "low"
        return high, low
    return None


def audit_reliability(text: Any) -> float:
    """p from an audit reply; 0 when it is unparsable (§1.2 item 3)."""
    counts = parse_audit(text)
    return 0.0 if counts is None else reliability_from_counts(*counts)


# ------------------------------------------------------------------------------------------ the client

STEP_PREFIX = ("You verify one step of a solution. Output only 1 if the step is correct or -1 if it is incorrect, "
               "and nothing else.")
AUDIT_PREFIX = ("Compare the checklist of premises a solution relies on with the description of the source. List "
                "only direct contradictions (omissions do not count) as JSON {\"contradictions\": [{\"fact\": ..., "
                "\"severity\": \"High\" or \"Low\"}]}; High for a primary fact (a count, a key relation, the "
                "presence of a main object), Low otherwise.")


class PremiseJudge:
    """The step judge and the checklist audit on a ChatClient (or anything with its chat_many). history: previous
    steps shown per step (spec: 12). Counters in cost(): steps, malformed, errors, audits, audit_malformed."""

    def __init__(self, client, *, history: int = 12, max_tokens: int = 8, audit_max_tokens: int = 512):
        if history < 0:
            raise ValueError(f"PremiseJudge: history={history} must be >= 0")
        self.client, self.history = client, history
        self.max_tokens, self.audit_max_tokens = max_tokens, audit_max_tokens
        self.stats = dict(steps=0, malformed=0, errors=0, audits=0, audit_malformed=0, audit_errors=0)

    def step_messages(self, question: str, description: str, steps: Sequence[str], t: int) -> list[dict]:
        previous = "\n".join(f"Step {i + 1}: {s}" for i, s in enumerate(steps[:t]) if i >= t - self.history)
        user = (f"Question:\n{question}\n\nDescription of the source:\n{description}\n\nPrevious steps:\n"
                f"{previous or '(none)'}\n\nCurrent step (step {t + 1}):\n{steps[t]}")
        return [{"role": "system", "content": STEP_PREFIX}, {"role": "user", "content": user}]

    def score_steps(self, question: str, description: str, steps: Sequence[str]):
        """int [T] in {+1, -1}: one request per step (module docstring); import numpy lazily."""
        import numpy as np

        from shared.judges.http import reply_text

        replies = self.client.chat_many([self.step_messages(question, description, steps, t)
                                         for t in range(len(steps))], raise_errors=False,
                                        temperature=0.0, max_tokens=self.max_tokens)
        out = []
        for reply in replies:
            self.stats["steps"] += 1
            score = None
            if isinstance(reply, JudgeError):
                self.stats["errors"] += 1
            else:
                try:
                    score = parse_step_score(reply_text(reply, "step judge")[0])
                except JudgeError:
                    self.stats["errors"] += 1
                    score = None
                else:
                    self.stats["malformed"] += score is None
            out.append(-1 if score is None else score)
        return np.array(out, np.int64)

    def audit(self, description: str, checklist: Sequence[str]) -> float:
        """The candidate's reliability p (module docstring); an empty checklist is audited as "(empty)"."""
        from shared.judges.http import reply_text

        items = "\n".join(f"- {c}" for c in checklist) or "(empty)"
        messages = [{"role": "system", "content": AUDIT_PREFIX},
                    {"role": "user", "content": f"Description:\n{description}\n\nChecklist:\n{items}"}]
        reply = self.client.chat_many([messages], raise_errors=False, temperature=0.0,
                                      max_tokens=self.audit_max_tokens)[0]
        self.stats["audits"] += 1
        try:
            if isinstance(reply, JudgeError):
                raise reply
            text = reply_text(reply, "audit")[0]
        except JudgeError:
            self.stats["audit_errors"] += 1
            return 0.0
        if parse_audit(text) is None:
            self.stats["audit_malformed"] += 1
        return audit_reliability(text)

    def cost(self) -> dict:
        return dict(self.stats)

"""Evidence actions of the HeteroJudge mixture (spec ../shared/papers/skill_rm.md section 4) and the fixed readout.

Each action gives, per case, a preference in {+1 (a better), -1 (b better), 0 (undecided / unavailable)}:
  direct         the generic tiny BT reward model (trained on pairs of every family): sign(r(a) - r(b))
  view_reference the case's reference answer (GSM8K): the response whose "#### N" equals it wins; else 0
  run_verifier   the case's mounted checkers, run in the sandbox: GSM8K exact final-answer match, IF the
                 constraint checkers (more constraints met wins); HH has none: 0
  python_check   checks written from the visible text only, run in the sandbox: GSM8K calculator annotations
                 re-evaluated and the final number looked for in the body (a consistent solution beats an
                 inconsistent one); IF the constraints a generic parser reads from the prompt (first phrasing
                 only); HH: 0
  view_rubric    the harmlessness rubric proxy: a tiny BT RM trained on HH pairs only (spec: "evidence = a tiny
                 BT RM score (rubric proxy)"); GSM8K / IF: 0
Costs come from the skill package's resources.json (projects/skill_rm/skill/). The readout is the operational
aggregation policy's priority: verifier > reference > checks > rubric > RM, the first decided one wins; none
decided is a tie.
"""
from __future__ import annotations

import numpy as np

from shared.rewards.sandbox import run_python

ACTIONS = ("direct", "view_reference", "run_verifier", "python_check", "view_rubric")
READOUT_ORDER = ("run_verifier", "view_reference", "python_check", "view_rubric", "direct")

# the mounted IF checkers: exact, one per constraint (the case's own resource: it knows every parameter)
IF_CHECKERS = r'''
import json, re

def _inner(response):
    """The text inside a JSON answer object, else the response."""
    try:
        value = json.loads(response)
    except ValueError:
        return response
    return value["answer"] if isinstance(value, dict) and isinstance(value.get("answer"), str) else response

def _met(response, kind, direction, param):
    if kind == "case":
        if direction == "lower":
            return response == response.lower()
        text = _inner(response)
        starts = re.findall(r"(?:^|[.!?]\s+|\n\d+\.\s+)([A-Za-z])", text)
        return bool(starts) and all(c.isupper() for c in starts)
    if kind == "format":
        try:
            is_json = isinstance(json.loads(response), dict)
        except ValueError:
            is_json = False
        return is_json == (direction == "json")
    if kind == "layout":
        items = [int(i) for i in re.findall(r"(?m)^\s*(\d+)\.\s", _inner(response))]
        return items == list(range(1, param + 1)) if direction == "list" else not items
    if kind == "keyword":
        found = re.search(r"\b" + re.escape(param) + r"\b", response.lower()) is not None
        return found == (direction == "include")
    if kind == "length":
        words = len(response.split())
        return words <= param if direction == "max" else words >= param
    raise ValueError(kind)

def satisfied(response, constraints):
    return sum(_met(response, k, d, p) for k, d, p, _ in constraints)
'''

# what a judge can check from the visible prompt alone: it reads the first phrasing of each constraint only
VISIBLE_IF_CHECKS = r'''
import json, re

def visible(prompt, response):
    found = []
    if "Use only lowercase letters." in prompt:
        found.append(response == response.lower())
    if "Wrap the whole answer in a JSON object." in prompt or "Answer in plain text, not JSON." in prompt:
        try:
            is_json = isinstance(json.loads(response), dict)
        except ValueError:
            is_json = False
        found.append(is_json == ("Wrap the whole" in prompt))
    m = re.search(r"numbered list of (\d+) items", prompt)
    try:
        value = json.loads(response)
        text = value.get("answer", response) if isinstance(value, dict) else response
    except ValueError:
        text = response
    items = [int(i) for i in re.findall(r"(?m)^\s*(\d+)\.\s", str(text))]
    if m:
        found.append(items == list(range(1, int(m.group(1)) + 1)))
    if "Write a single paragraph without a list." in prompt:
        found.append(not items)
    for word in re.findall(r"Include the word '([a-z]+)'\.", prompt):
        found.append(re.search(r"\b" + word + r"\b", response.lower()) is not None)
    for word in re.findall(r"Do not use the word '([a-z]+)'\.", prompt):
        found.append(re.search(r"\b" + word + r"\b", response.lower()) is None)
    for limit in re.findall(r"Answer in at most (\d+) words\.", prompt):
        found.append(len(response.split()) <= int(limit))
    for limit in re.findall(r"Answer in at least (\d+) words\.", prompt):
        found.append(len(response.split()) >= int(limit))
    return [sum(found), len(found)]
'''

# GSM8K visible-text consistency: every <<expr=result>> re-evaluated, the final number stated in the body
GSM8K_CONSISTENCY = r'''
import re

def consistent(solution):
    body, _, final = solution.rpartition("####")
    final = final.strip().replace(",", "")
    for expr, result in re.findall(r"<<([^=<>]*)=([^<>]*)>>", body):
        try:
            value = eval(expr.replace("x", "*").replace(",", ""), {"__builtins__": {}})
            if abs(float(value) - float(result.replace(",", ""))) > 1e-6:
                return False
        except Exception:
            return False
    numbers = [n.replace(",", "") for n in re.findall(r"-?\d[\d,]*(?:\.\d+)?", body)]
    return final in numbers
'''

GSM8K_EXACT = r'''
import re

def matches(solution, reference):
    m = re.search(r"####\s*(-?[\d,.]+)\s*$", solution.strip())
    return m is not None and m.group(1).replace(",", "") == reference
'''


def _sandboxed(code: str, entry: str, calls: list, backend, what: str) -> list:
    if not calls:
        return []
    result = run_python(code, calls, entry=entry, timeout_s=max(30.0, 0.01 * len(calls)), backend=backend)
    if not result.ok:
        raise RuntimeError(f"skill_rm: the {what} program failed in the sandbox: {result.status} {result.message}")
    bad = [e for e in result.errors if e]
    if bad:
        raise RuntimeError(f"skill_rm: the {what} program raised on {len(bad)} calls, first: {bad[0]}")
    return result.values


def _sign(x) -> np.ndarray:
    return np.sign(np.asarray(x, np.float64)).astype(np.int8)


def sandbox_evidence(cases: list[dict], backend=None) -> dict[str, np.ndarray]:
    """view_reference, run_verifier and python_check for every case (int8 [N] each); every program runs in the
    sandbox, one batch per program."""
    n = len(cases)
    out = {a: np.zeros(n, np.int8) for a in ("view_reference", "run_verifier", "python_check")}
    gsm = [i for i, c in enumerate(cases) if c["family"] == "gsm8k"]
    ifs = [i for i, c in enumerate(cases) if c["family"] == "if"]
    # GSM8K: the reference read directly (view) and by the exact-match verifier (run) agree by construction;
    # they differ in cost and in what the router lets a setting open
    exact = _sandboxed(GSM8K_EXACT, "matches", [[cases[i][s], cases[i]["reference"]] for i in gsm for s in "ab"],
                       backend, "GSM8K exact-match")
    consistent = _sandboxed(GSM8K_CONSISTENCY, "consistent", [[cases[i][s]] for i in gsm for s in "ab"], backend,
                            "GSM8K consistency")
    for k, i in enumerate(gsm):
        ma, mb = exact[2 * k], exact[2 * k + 1]
        out["view_reference"][i] = out["run_verifier"][i] = int(ma) - int(mb)
        out["python_check"][i] = int(consistent[2 * k]) - int(consistent[2 * k + 1])
    met = _sandboxed(IF_CHECKERS, "satisfied", [[cases[i][s], cases[i]["constraints"]] for i in ifs for s in "ab"],
                     backend, "IF checker")
    seen = _sandboxed(VISIBLE_IF_CHECKS, "visible", [[cases[i]["prompt"], cases[i][s]] for i in ifs for s in "ab"],
                      backend, "visible IF check")
    for k, i in enumerate(ifs):
        out["run_verifier"][i] = _sign(met[2 * k] - met[2 * k + 1])
        out["python_check"][i] = _sign(seen[2 * k][0] - seen[2 * k + 1][0])
    return out


def readout(evidence: np.ndarray, taken: np.ndarray) -> np.ndarray:
    """The fixed readout: evidence int8 [N, A] (ACTIONS order), taken bool [N, A]; the first decided action of
    READOUT_ORDER that was taken gives the pref, else 0."""
    pref = np.zeros(evidence.shape[0], np.int8)
    for action in reversed(READOUT_ORDER):            # later (higher-priority) actions overwrite
        j = ACTIONS.index(action)
        use = taken[:, j] & (evidence[:, j] != 0)
        pref[use] = evidence[use, j]
    return pref


def credit(pref: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """1 for a right pref, 0 for a wrong one, 0.5 for a tie (a coin flip's expectation)."""
    return np.where(pref == 0, 0.5, (pref == gold).astype(np.float64))

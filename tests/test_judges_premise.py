"""shared/judges/premise.py: the EVPV policy-output parser on well-formed and malformed replies, the step-score and
audit parsers, and the step judge / audit client against the local OpenAI-compatible stub (tests/http_stub.py):
what it sends, and -1 / p = 0 for replies it cannot read and requests that fail."""
import json

import numpy as np
import pytest

from http_stub import chat_reply, serve
from shared.judges.http import ChatClient
from shared.judges.premise import (PolicyOutput, PolicyOutputError, PremiseJudge, audit_reliability, parse_audit,
                                   parse_policy_output, parse_step_score)

GOOD = {"reasoningprocess": [{"steptext": "The bar for May reads 12.", "visualdependency": "May bar = 12"},
                             {"steptext": "12 * 3 = 36", "visualdependency": None},
                             {"steptext": "Add June's 5: 41.", "visualdependency": "June bar = 5"},
                             {"steptext": "Check May again.", "visualdependency": "May bar = 12"}],
        "finalanswer": 41}


def test_policy_output_parses_fenced_bare_and_keys_loosely():
    fenced = "Here is my answer:\n```json\n" + json.dumps(GOOD) + "\n```\nDone."
    out = parse_policy_output(fenced)
    assert out == PolicyOutput(("The bar for May reads 12.", "12 * 3 = 36", "Add June's 5: 41.", "Check May again."),
                               ("May bar = 12", None, "June bar = 5", "May bar = 12"), "41")
    assert out.checklist() == ["May bar = 12", "June bar = 5"] and out.dependent() == [True, False, True, True]
    loose = {"Reasoning_Process": [{"StepText": "a", "visual_dependency": "null"}, {"steptext": "b"}],
             "final_answer": " 7 "}
    out = parse_policy_output("text before " + json.dumps(loose) + " text after")
    assert out.steps == ("a", "b") and out.dependencies == (None, None) and out.final_answer == "7"
    # another JSON object before the output does not hide it
    assert parse_policy_output('{"note": 1} ' + json.dumps(GOOD)).final_answer == "41"


@pytest.mark.parametrize("text, message", [
    ("no json at all", "no JSON object with a 'reasoningprocess' key"),
    ('{"reasoningprocess": [{"steptext": "a"}], "finalanswer": "1"', "cut off"),
    ('{"finalanswer": 3}', "no JSON object with a 'reasoningprocess' key"),
    ('{"reasoningprocess": [], "finalanswer": 3}', "non-empty list of steps, got an empty list"),
    ('{"reasoningprocess": "step 1", "finalanswer": 3}', "non-empty list of steps, got str"),
    ('{"reasoningprocess": ["step 1"], "finalanswer": 3}', r"reasoningprocess\[0\]: expected an object"),
    ('{"reasoningprocess": [{"text": "a"}], "finalanswer": 3}', r"reasoningprocess\[0\]: no 'steptext' key"),
    ('{"reasoningprocess": [{"steptext": "  "}], "finalanswer": 3}', "'steptext' must be a non-empty string"),
    ('{"reasoningprocess": [{"steptext": "a", "visualdependency": 5}], "finalanswer": 3}',
     "'visualdependency' must be a string or null, got int"),
    ('{"reasoningprocess": [{"steptext": "a"}]}', "no 'finalanswer' key"),
    ('{"reasoningprocess": [{"steptext": "a"}], "finalanswer": null}', "'finalanswer' must be a string or a number"),
    ('{"reasoningprocess": [{"steptext": "a"}], "finalanswer": true}', "'finalanswer' must be a string or a number"),
])
def test_policy_output_malformed_fails_with_one_line(text, message):
    with pytest.raises(PolicyOutputError, match=message) as e:
        parse_policy_output(text)
    assert "\n" not in str(e.value)
    with pytest.raises(PolicyOutputError, match="expected text, got NoneType"):
        parse_policy_output(None)


def test_step_score_and_audit_parsers():
    for text, want in [("1", 1), ("-1", -1), ("+1", 1), ("\u22121", -1), (" Score: -1. ", -1), ("`1`", 1),
                       ("verdict = 1", 1), ("0", None), ("11", None), ("1 because it is right", None), ("", None),
                       ("-1 or 1", None), (None, None), ("correct", None)]:
        assert parse_step_score(text) == want, text
    audit = '```json\n{"contradictions": [{"fact": "May bar = 12", "severity": "High"}, ' \
            '{"fact": "color", "severity": "low"}, {"fact": "x", "severity": "LOW"}]}\n```'
    assert parse_audit(audit) == (1, 2) and audit_reliability(audit) == pytest.approx(1 - 0.5 - 0.4)
    assert parse_audit('{"contradictions": []}') == (0, 0) and audit_reliability('{"contradictions": []}') == 1.0
    three_high = json.dumps({"contradictions": [{"severity": "High"}] * 3})
    assert audit_reliability(three_high) == 0.0                                    # clipped at 0
    for bad in ("no contradictions found", '{"contradictions": "none"}', '{"contradictions": [{"fact": "a"}]}',
                '{"contradictions": [{"severity": "Medium"}]}', '{"other": []}', None):
        assert parse_audit(bad) is None and audit_reliability(bad) == 0.0          # unparsable audit: p = 0


def test_premise_judge_against_the_stub(monkeypatch):
    replies = iter(["1", "-1", "I think so", "Score: 1"])

    def decide(body):
        system = body["messages"][0]["content"]
        if system.startswith("Compare the checklist"):
            return 200, chat_reply('{"contradictions": [{"fact": "June bar = 5", "severity": "Low"}]}'), 0
        return 200, chat_reply(next(replies)), 0

    with serve(decide, monkeypatch) as stub:
        judge = PremiseJudge(ChatClient(stub.base_url, "judge-model", concurrency=1, retries=0), history=2)
        out = parse_policy_output(json.dumps(GOOD))
        scores = judge.score_steps("How many in total?", "A bar chart: May 12, June 5.", out.steps)
        np.testing.assert_array_equal(scores, [1, -1, -1, 1])             # the unreadable reply is -1
        assert judge.cost()["malformed"] == 1 and judge.cost()["steps"] == 4 and judge.cost()["errors"] == 0
        last = stub.requests[3]["body"]
        assert last["temperature"] == 0.0 and last["max_tokens"] == 8 and last["model"] == "judge-model"
        user = last["messages"][1]["content"]
        # history 2: steps 2 and 3 shown before step 4, step 1 not
        assert "Step 2: 12 * 3 = 36" in user and "Step 3: Add June's 5: 41." in user and "Step 1:" not in user
        assert user.endswith("Current step (step 4):\nCheck May again.")
        assert "Previous steps:\n(none)" in stub.requests[0]["body"]["messages"][1]["content"]
        assert judge.audit("A bar chart: May 12, June 5.", out.checklist()) == pytest.approx(0.8)
        assert "- May bar = 12\n- June bar = 5" in stub.requests[4]["body"]["messages"][1]["content"]

    with serve(lambda body: (500, {"error": "down"}, 0), monkeypatch) as stub:
        judge = PremiseJudge(ChatClient(stub.base_url, "m", concurrency=2, retries=0))
        np.testing.assert_array_equal(judge.score_steps("q", "d", ["a", "b"]), [-1, -1])   # failed requests: -1
        assert judge.audit("d", []) == 0.0                                                 # failed audit: p = 0
        assert judge.cost() == dict(steps=2, malformed=0, errors=2, audits=1, audit_malformed=0, audit_errors=1)
        assert "(empty)" in stub.requests[-1]["body"]["messages"][1]["content"]
    with pytest.raises(ValueError, match="history=-1"):
        PremiseJudge(None, history=-1)

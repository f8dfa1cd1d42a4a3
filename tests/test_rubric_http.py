"""experiments/openrs/http_judge.py:smoke through the launcher against the local stub endpoint (tests/http_stub.py):
the RubricJudge on an OpenAI-compatible server, with the reference's call settings, the shipped meta-rubric, the
GT gate, JSON regeneration and the bidirectional rule."""
import json

import pytest

from http_stub import chat_reply, serve, user_message
from projects.openrs.judge_eval import EMBEDDED
from shared.launch import main as launch

CHOSEN = {p["chosen"] for p in EMBEDDED}


def _rubric_reply(body):
    """A judge that knows which embedded response is better (a core criterion, 2 points) and always gives slot A
    a highlight point (position bias): only the bidirectional rule and the weights keep it right."""
    text = user_message(body)
    a = text.split("[Response A]\n", 1)[1].split("\n\n[Response B]", 1)[0]
    chosen = "A" if a in CHOSEN else "B"
    compares = [{"rubric_idx": 1, "rubric_name": "answers the request", "type": "core", "chosen": chosen, "score": 2,
                 "reason": "r", "evidences": "e"},
                {"rubric_idx": 2, "rubric_name": "tone", "type": "highlight", "chosen": "A", "score": 1,
                 "reason": "r", "evidences": "e"}]
    reply = {"question_analysis": {"analysis": "x"}, "rubric_list": [], "rubric_compares": compares}
    return 200, chat_reply("```json\n" + json.dumps(reply) + "\n```"), 0.0


@pytest.fixture
def stub(monkeypatch):
    with serve(_rubric_reply, monkeypatch) as server:
        yield server


def test_http_judge_config_smoke_against_the_stub(stub, tmp_path):
    stub.script = [(200, chat_reply("I think A is better, no JSON."), 0.0)]  # the first reply must be regenerated
    workdir = tmp_path / "run"
    code = launch(["--config=experiments/openrs/http_judge.py:smoke", f"--workdir={workdir}",
                   f"--config.openrs.base_url={stub.base_url}", "--config.openrs.model=stub-judge",
                   "--config.openrs.timeout=120"])  # a loaded CI machine must not turn into a failed request
    assert code == 0
    summary = json.loads((workdir / "summary.json").read_text())
    # 4 embedded pairs: one decided by the GT gate (12 * 12), three judged in both orders (6 calls + 1 retry)
    assert (summary["n_pairs"], summary["accuracy"], summary["tie_rate"]) == (4, 1.0, 0.0), summary
    assert (summary["gate_decided_rate"], summary["judge/calls"], summary["judge/json_retries"]) == (0.25, 7, 1), summary
    assert (summary["judge/requests"], summary["judge/prompt_tokens"]) == (7, 7 * 30), summary
    body = stub.requests[0]["body"]
    assert body["model"] == "stub-judge" and body["temperature"] == 0.0 and body["top_p"] == 1.0
    assert body["seed"] == 1024 and body["max_tokens"] == 2048
    prompts = [user_message(r["body"]) for r in stub.requests]  # concurrent: in any order
    assert all("rubric_compares" in p for p in prompts)
    assert sum("[Request]\nWhat is the capital of France?" in p for p in prompts) in (2, 3)  # both orders (+ retry)
    verdicts = [json.loads(line) for line in (workdir / "verdicts.jsonl").read_text().splitlines()]
    # forward: core A (5 * 2) + highlight A (1) -> 11/6; swapped: core B (-10) + highlight A (+1) -> -9/6
    assert verdicts[0]["scores"] == pytest.approx([11 / 6, -9 / 6], abs=1e-5)
    assert "gate gt" in verdicts[3]["critique"]


def test_http_judge_config_without_bidirectional_follows_the_bias(stub, tmp_path):
    # a judge whose only difference is slot A's highlight point: one order prefers A, both orders give SAME
    def biased(body):
        reply = {"rubric_compares": [{"rubric_idx": 1, "type": "highlight", "chosen": "A", "score": 1}]}
        return 200, chat_reply(json.dumps(reply)), 0.0

    stub.decide = biased
    for flag, accuracy, ties in (("True", 0.0, 1.0), ("False", 1.0, 0.0)):
        workdir = tmp_path / f"bidirectional_{flag}"
        assert launch(["--config=experiments/openrs/http_judge.py:smoke", f"--workdir={workdir}",
                       f"--config.openrs.base_url={stub.base_url}", "--config.openrs.model=m",
                       "--config.openrs.gt_gate=False", "--config.openrs.n_pairs=3",
                       f"--config.openrs.bidirectional={flag}"]) == 0
        summary = json.loads((workdir / "summary.json").read_text())
        assert (summary["accuracy"], summary["tie_rate"]) == (accuracy, ties)


def test_chat_backend_failed_request_is_regenerated(stub):
    from shared.judges.http import ChatClient
    from shared.judges.rubric import RubricJudge, chat_generate

    # an HTTP error the client does not retry, then a reply that is no chat completion: the judge asks again
    stub.script = [(400, {"error": "bad request"}, 0.0), (200, {"not": "a completion"}, 0.0)]
    client = ChatClient(stub.base_url, "m", retries=0, concurrency=1)
    judge = RubricJudge(chat_generate(client, max_tokens=64), "projects/openrs/prompts", bidirectional=False)
    verdict = judge.compare([EMBEDDED[0]["prompt"]], [EMBEDDED[0]["chosen"]], [EMBEDDED[0]["rejected"]])[0]
    assert verdict.pref == 1 and judge.cost()["json_retries"] == 2 and client.cost()["failures"] == 1
    assert stub.requests[-1]["body"]["max_tokens"] == 64 and stub.requests[-1]["body"]["seed"] == 1024

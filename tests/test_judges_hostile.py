"""The HTTP judge client (shared/judges/http.py on shared/net.py) against a hostile endpoint: a redirect to another
host never receives the key and its reply is never the verdict; deep, huge, dripping and malformed replies are
JudgeErrors handled by the judge's error policy (on_error="tie": a counted tie), never an exception of another
kind; a reply is never read into memory whole."""
import json
import resource
import time

import pytest

from http_stub import Raw, chat_reply, serve
from shared.judges import HTTPJudge, JudgeError
from shared.net import HTTPFailure, post_json

KEY = "sk-test-secret-key"


@pytest.fixture
def stubs(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with serve(lambda body: (200, chat_reply("Score A: 9, Score B: 1"), 0.0), monkeypatch) as judge, \
            serve(lambda body: (200, chat_reply("Score A: 1, Score B: 9"), 0.0), monkeypatch) as other:
        yield judge, other


def _tie(judge_server, payload, **options):
    judge_server.script = [(200, payload, 0.0)]
    judge = HTTPJudge(judge_server.base_url, "m", retries=0, on_error="tie", **options)
    verdict = judge.compare(["q"], ["x"], ["y"])[0]
    assert verdict.pref == 0 and verdict.error and judge.cost()["errors"] == 1, verdict
    return verdict


@pytest.mark.parametrize("code", [301, 302, 307, 308])
def test_a_redirect_is_never_followed(stubs, code):
    judge_server, other = stubs
    # "localhost" is another origin than 127.0.0.1; the other host would answer B
    location = other.base_url.replace("127.0.0.1", "localhost") + "/chat/completions"
    judge_server.script = [(code, {}, 0.0, {"Location": location})]
    with pytest.raises(JudgeError, match="redirect"):
        HTTPJudge(judge_server.base_url, "m", retries=2).compare(["q"], ["x"], ["y"])
    judge_server.script = [(code, {}, 0.0, {"Location": location})]
    tied = HTTPJudge(judge_server.base_url, "m", retries=0, on_error="tie").compare(["q"], ["x"], ["y"])[0]
    assert tied.pref == 0 and "redirect" in tied.error
    assert other.requests == []  # no request, so no key, ever reached the other host
    assert judge_server.requests[0]["headers"]["Authorization"] == f"Bearer {KEY}"  # the judge itself got it
    assert len(judge_server.requests) == 2  # a redirect is not retried


@pytest.mark.parametrize("body", [b"[" * 100000, b"{" * 50000, b"\xff\xfe not utf-8", b"",
                                  b'{"choices": "nope"}', b'{"choices": [{"message": {"content": {"a": 1}}}]}',
                                  b'{"choices": [{"message": ["x"]}]}', b"[1, 2, 3]", b"NaN"])
def test_malformed_replies_are_judge_errors_under_the_policy(stubs, body):
    judge_server, _ = stubs
    _tie(judge_server, Raw(body))
    judge_server.script = [(200, Raw(body), 0.0)]
    with pytest.raises(JudgeError):
        HTTPJudge(judge_server.base_url, "m", retries=0).compare(["q"], ["x"], ["y"])


@pytest.mark.parametrize("usage", ["[1, 2]", "1e999", "-5", "\"7\"", "{\"x\": 1}", "true", "1.5"])
def test_insane_usage_counts_are_ignored(stubs, usage):
    judge_server, _ = stubs
    reply = json.dumps(chat_reply("Score A: 9, Score B: 1", usage=None))[:-1]
    body = (reply + f', "usage": {{"prompt_tokens": {usage}, "completion_tokens": {usage}}}}}').encode()
    judge_server.script = [(200, Raw(body), 0.0)]
    judge = HTTPJudge(judge_server.base_url, "m", retries=0, on_error="tie")
    assert judge.compare(["q"], ["x"], ["y"])[0].pref == 1
    assert judge.cost().get("prompt_tokens", 0) == 0


def test_malformed_logprobs_fall_back_to_the_text(stubs):
    judge_server, _ = stubs
    reply = chat_reply("A", logprobs={"content": [{"token": 5}, {"token": "A", "top_logprobs": [
        {"token": "A", "logprob": "high"}, {"token": None}]}]})
    judge_server.script = [(200, reply, 0.0)]
    verdict = HTTPJudge(judge_server.base_url, "m", retries=0, logprobs=True, parser="letter",
                        on_error="tie").compare(["q"], ["x"], ["y"])[0]
    assert verdict.pref == 1 and verdict.prob is None


def test_a_dripping_server_meets_the_overall_deadline(stubs):
    judge_server, _ = stubs
    body = json.dumps(chat_reply("Score A: 9, Score B: 1")).encode()
    judge_server.script = [(200, Raw(body, drip_s=0.1), 0.0)]  # ~15 s to send in full
    judge = HTTPJudge(judge_server.base_url, "m", retries=0, timeout=1.0, on_error="tie")
    start = time.perf_counter()
    verdict = judge.compare(["q"], ["x"], ["y"])[0]
    assert verdict.pref == 0 and "within 1.0 s" in verdict.error
    assert time.perf_counter() - start < 2.0


@pytest.mark.parametrize("declared", [True, False])
def test_a_huge_reply_is_refused_without_reading_it_whole(stubs, declared):
    judge_server, _ = stubs
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    judge_server.script = [(200, Raw(b" " * (1 << 20), repeat=200, length=None if declared else -1), 0.0)]
    judge = HTTPJudge(judge_server.base_url, "m", retries=0, on_error="tie", max_reply_mb=4)
    verdict = judge.compare(["q"], ["x"], ["y"])[0]
    assert verdict.pref == 0 and "limit" in verdict.error
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024 < 64  # MiB, far from 200


def test_post_json_raises_only_http_failure(stubs):
    judge_server, _ = stubs
    for payload in (Raw(b"[" * 100000), Raw(b"x" * 100, length=10 ** 12)):
        judge_server.script = [(200, payload, 0.0)]
        with pytest.raises(HTTPFailure):
            post_json(judge_server.base_url + "/chat/completions", {}, deadline_s=2, max_bytes=1 << 20)
    with pytest.raises(HTTPFailure):
        post_json("ftp://127.0.0.1/x", {})
    with pytest.raises(HTTPFailure):
        post_json("http://127.0.0.1:1/x", {}, deadline_s=1)  # nothing listens


def test_whitespace_runs_do_not_make_the_parsers_backtrack():
    # before bounded_reply these replies took seconds to minutes (polynomial backtracking over chained `\s*`),
    # holding the GIL: "answer" + 200 spaces 3 s, "score" + 400 spaces 13 s
    from shared.judges.verdict import parse_scores, parse_score_split, parse_tags, parse_verdict

    assert parse_verdict("answer" + " " * 3000 + "x") is None
    assert parse_tags("answer" + " \n" * 3000 + "x") is None
    assert parse_score_split("score" + " " * 3000) is None
    # squeezing keeps what the parsers read: the last verdict of a long reply, the critique before the scores
    assert parse_verdict("The critique. " * 5000 + "Verdict:   [[B]]") == 0.0
    verdict = parse_scores("Clear and short.\n\n   Score A:\t7\nScore B:    3", total=10)
    assert verdict.scores == (7.0, 3.0) and verdict.critique == "Clear and short."
    assert parse_tags("Both fine,\n\n  but   A   cites.\n<verdict>  A </verdict>").critique == "Both fine,\n\n  but   A   cites."


def test_a_key_over_plain_http_to_another_host_is_warned_about(monkeypatch, capsys):
    from shared.judges.http import ChatClient

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    for url in ("http://127.0.0.1:8000/v1", "http://localhost:8000/v1", "https://judge.example.org/v1"):
        ChatClient(url, "m")
    assert capsys.readouterr().err == ""
    ChatClient("http://10.1.2.3:8000/v1", "m")
    err = capsys.readouterr().err
    assert "API key goes unencrypted to 10.1.2.3" in err and KEY not in err
    monkeypatch.delenv("OPENAI_API_KEY")
    ChatClient("http://10.1.2.3:8000/v1", "m")     # no key: nothing to warn about
    assert capsys.readouterr().err == ""

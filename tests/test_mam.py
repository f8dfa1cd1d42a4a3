"""MAM, the multi-agent judge of interleaved tool plans (shared/judges/mam.py): the aggregator by hand, who sees
what under the split and full views, the chat back-end on a fake client, voting, order under threads, records."""
import dataclasses
import json
import math
import random
import threading
import time

import pytest

from shared.eval.interleaved import parse_interleaved
from shared.judges.mam import (
    PRECISION_LABELS, CallVerdict, ChatRoles, FunctionRoles, MamItem, MamJudge, MamJudgment, MissedVisual, MockRoles,
    aggregate, local_text, numbered_response, vote_missed, vote_verdicts,
)
from shared.judges.verdict import JudgeError

RESPONSE = ("Here is the digit. <ref IMG2/> It is thick. A mirrored version follows. <edit src=IMG2>flip</edit> "
            "Done.")
SENTENCES = ("Here is the digit.", "It is thick.", "A mirrored version follows.", "Done.")
ITEM = MamItem("show my digit and its mirror", "IMG2: digit 4, thick", RESPONSE, user_image="user: digit 4",
               item_id="x")


# ---------------------------------------------------------------- aggregation by hand


def test_aggregate_by_hand():
    # 3 of 4 valid, 1 missed: P = 3/4, R = 3/4, F1 = 3/4, S = 0.8 * 0.75
    p, r, s = aggregate(["valid", "valid", "valid", "unnecessary"], [MissedVisual(1)], 8, 4)
    assert (p, r) == (0.75, 0.75) and s == pytest.approx(0.6)
    # 1 of 2 valid, 2 missed: P = 1/2, R = 1/3, F1 = (1/3) / (5/6) = 0.4, S = 0.5 * 0.4
    p, r, s = aggregate([CallVerdict(0, "valid"), CallVerdict(1, "misplaced")], 2, 5, 2)
    assert p == 0.5 and r == pytest.approx(1 / 3) and s == pytest.approx(0.2)
    # no valid call and nothing missed: P = 0, R = 0/0 -> 1.0, F1 = 0
    assert aggregate(["bad_args"], 0, 10, 1) == (0.0, 1.0, 0.0)
    # no calls: P undefined; S = Q/10 when nothing was missed, 0 otherwise
    assert aggregate([], [], 7, 0) == (None, 1.0, pytest.approx(0.7))
    assert aggregate([], [MissedVisual(0)], 9, 0) == (None, 0.0, 0.0)
    with pytest.raises(ValueError, match="2 verdicts for 3 calls"):
        aggregate(["valid", "valid"], 0, 5, 3)


def test_call_verdict_label_is_checked():
    assert set(PRECISION_LABELS) == {"valid", "unnecessary", "wrong_tool", "misplaced", "bad_args"}
    with pytest.raises(JudgeError, match="'great'"):
        CallVerdict(0, "great")


def test_local_text_and_numbered_response():
    parsed = parse_interleaved("<gen>digit=7</gen> One. Two. <ref IMG1/> Three.")
    first, mid = parsed.calls
    assert first.anchor == -1 and mid.anchor == 1
    assert local_text(parsed.sentences, first) == "<gen>digit=7</gen> One."
    assert local_text(parsed.sentences, mid) == "Two. <ref IMG1/> Three."
    last = parse_interleaved("One. Two. <code>bar(counts)</code>").calls[0]
    assert local_text(("One.", "Two."), last) == "Two. <code>bar(counts)</code>"
    assert numbered_response(parsed.sentences, parsed.calls) == (
        "[-1] <gen>digit=7</gen>\n[0] One.\n[1] Two. <ref IMG1/>\n[2] Three.")


# ---------------------------------------------------------------- information design


def _by_role(mock):
    return {role: (item, parsed, view) for role, item, parsed, view in mock.seen}


def test_split_view_what_each_role_sees():
    mock = MockRoles({"x": {"labels": ["valid", "misplaced"], "missed": [(1, "show the thick stroke")],
                            "quality": 8}})
    out = MamJudge(mock, mock, mock, view="split").judge(ITEM)
    seen = _by_role(mock)
    assert [r for r, *_ in mock.seen] == ["precision", "missed", "quality"]

    item, parsed, view = seen["precision"]  # the calls in their local text, nothing else of the response
    assert item.response == "" and parsed.sentences == () and len(parsed.calls) == 2
    assert view.response is None and view.sentences is None and view.verdicts is None and view.missed is None
    assert (view.query, view.context, view.user_image) == (ITEM.query, ITEM.context, ITEM.user_image)
    assert [c.local for c in view.calls] == ["Here is the digit. <ref IMG2/> It is thick.",
                                            "A mirrored version follows. <edit src=IMG2>flip</edit> Done."]
    assert view.numbered() == ""

    item, parsed, view = seen["missed"]  # the whole response with its calls, no verdicts
    assert item.response == RESPONSE and parsed.sentences == SENTENCES
    assert view.response == RESPONSE and view.sentences == SENTENCES
    assert view.verdicts is None and view.missed is None

    _, _, view = seen["quality"]  # everything
    assert view.response == RESPONSE
    assert [v.label for v in view.verdicts] == ["valid", "misplaced"]
    assert view.missed == (MissedVisual(1, "show the thick stroke"),)

    assert [v.label for v in out.calls] == ["valid", "misplaced"]
    assert out.missed == (MissedVisual(1, "show the thick stroke"),)
    assert (out.precision, out.recall, out.score) == (0.5, 0.5, pytest.approx(0.8 * 0.5))
    assert out.quality == 8.0 and not out.no_calls and out.item_id == "x"


def test_full_view_gives_every_role_the_response():
    mock = MockRoles({"x": {"labels": ["unnecessary", "valid"]}})
    MamJudge(mock, mock, mock, view="full").judge(ITEM)
    seen = _by_role(mock)
    item, parsed, view = seen["precision"]
    assert item.response == RESPONSE and parsed.sentences == SENTENCES and view.response == RESPONSE
    assert view.verdicts is None  # precision runs first: there are no verdicts yet
    _, _, view = seen["missed"]
    assert [v.label for v in view.verdicts] == ["unnecessary", "valid"]  # the ablation: missed sees the verdicts
    assert seen["quality"][2].missed == ()


def test_no_call_item_skips_precision():
    mock = MockRoles({"t": {"missed": [0], "quality": 6}})
    out = MamJudge(mock, mock, mock).judge(MamItem("q", "c", "Just text. More text.", item_id="t"))
    assert [r for r, *_ in mock.seen] == ["missed", "quality"]
    assert out.no_calls and out.precision is None and out.calls == ()
    assert (out.recall, out.score) == (0.0, 0.0)
    clean = MamJudge(mock, mock, mock).judge(MamItem("q", "c", "Just text.", item_id="u"))
    assert clean.score == 1.0 and clean.recall == 1.0


def test_bad_view_and_bad_role_output():
    with pytest.raises(ValueError, match="view"):
        MamJudge(MockRoles(), MockRoles(), MockRoles(), view="partial")
    mock = MockRoles({"x": {"labels": ["valid"]}})  # one verdict for two calls
    with pytest.raises(JudgeError, match=r"precision role: no verdict for calls \[1\]"):
        MamJudge(mock, mock, mock).judge(ITEM)
    mock = MockRoles({"x": {"missed": [7]}})
    with pytest.raises(JudgeError, match="missed role: anchor 7 out of range for 4 sentences"):
        MamJudge(mock, mock, mock).judge(ITEM)
    roles = FunctionRoles(precision=lambda c, v: "valid", missed=lambda v: [], quality=lambda v: "high")
    with pytest.raises(JudgeError, match="quality role"):
        MamJudge(roles, roles, roles).judge(ITEM)


# ---------------------------------------------------------------- chat back-end on a fake client


class FakeClient:
    """chat(messages, **params) like shared.judges.http.ChatClient, answering by the role its prompt asks for."""
    url = "fake://chat"

    def __init__(self, precision, missed='{"missed": []}', quality='{"quality": 7}'):
        self.replies = {"precision": precision, "missed": missed, "quality": quality}
        self.asked = []

    def chat(self, messages, **params):
        prompt = messages[-1]["content"]
        role = ("precision" if "Judge call" in prompt else "missed" if "List every place" in prompt else "quality")
        self.asked.append((role, prompt, params))
        reply = self.replies[role]
        text = reply(prompt) if callable(reply) else reply
        return {"choices": [{"message": {"role": "assistant", "content": text}}]}


def _per_call(labels):
    def reply(prompt):
        index = int(prompt.split("Judge call ")[1].split()[0])
        return json.dumps({"verdicts": [{"index": index, "label": labels[index], "reason": f"r{index}"}]})
    return reply


def _chat_judge(client, **kw):
    roles = ChatRoles(client, **kw.pop("roles", {}))
    return MamJudge(roles, roles, roles, **kw)


def test_chat_roles_good_json():
    client = FakeClient(_per_call(["valid", "wrong_tool"]), '{"missed": [{"anchor": 1, "intent": "thick"}]}',
                        '{"quality": 6}')
    out = _chat_judge(client).judge(ITEM)
    assert [(v.index, v.label, v.reason) for v in out.calls] == [(0, "valid", "r0"), (1, "wrong_tool", "r1")]
    assert out.missed == (MissedVisual(1, "thick"),) and out.quality == 6.0
    assert (out.precision, out.recall) == (0.5, 0.5) and out.score == pytest.approx(0.3)
    assert [r for r, _, _ in client.asked] == ["precision", "precision", "missed", "quality"]
    first = client.asked[0][1]  # split: the call in its local text, not the rest of the answer
    assert "Here is the digit. <ref IMG2/> It is thick." in first and "mirrored" not in first
    assert "user: digit 4" in first and "IMG2: digit 4, thick" in first
    missed_prompt, quality_prompt = client.asked[2][1], client.asked[3][1]
    assert "[2] A mirrored version follows. <edit src=IMG2>flip</edit>" in missed_prompt
    assert "wrong_tool" not in missed_prompt  # no verdicts for the missed role under split
    assert "call 1 (<edit src=IMG2>flip</edit>): wrong_tool - r1" in quality_prompt
    assert "after sentence 1: thick" in quality_prompt
    assert set(out.raw) == {"precision", "missed", "quality"} and '"quality": 6' in out.raw["quality"]
    assert client.asked[0][2] == {"temperature": 0.0, "max_tokens": 1024}


def test_chat_roles_full_view_and_seed():
    client = FakeClient(_per_call(["valid", "valid"]))
    _chat_judge(client, view="full", roles={"temperature": 0.7, "seed": 5}, votes=3).judge(ITEM)
    precision = [p for r, p, _ in client.asked if r == "precision"]
    assert len(precision) == 6 and all("mirrored" in p and "Here is the digit" in p for p in precision)
    missed = [p for r, p, _ in client.asked if r == "missed"]
    assert all("call 0 (<ref IMG2/>): valid" in p for p in missed)  # full: missed sees the verdicts
    assert sorted({params["seed"] for _, _, params in client.asked}) == [5, 6, 7]  # seed + vote


def test_chat_roles_json_inside_prose():
    client = FakeClient(
        lambda p: "Let me think. The call fits.\n```json\n{\"verdicts\": [{\"index\": " + p.split("Judge call ")[1][0]
                  + ", \"label\": \"Valid\"}]}\n```",
        "No visual is missing, I believe: {'missed': [],} as said.",   # single quotes + trailing comma: repaired
        "Overall fine. {\"quality\": \"8\"} Thanks.")
    out = _chat_judge(client).judge(ITEM)
    assert [v.label for v in out.calls] == ["valid", "valid"] and out.missed == () and out.quality == 8.0
    assert out.score == pytest.approx(0.8)


def test_chat_roles_malformed_reply_names_the_role():
    client = FakeClient(_per_call(["valid", "valid"]), "I cannot tell, sorry.")
    with pytest.raises(JudgeError, match=r"MAM missed role: no JSON object with 'missed'.*I cannot tell"):
        _chat_judge(client).judge(ITEM)
    client = FakeClient(_per_call(["valid", "excellent"]))
    with pytest.raises(JudgeError, match="MAM precision role: label 'excellent'"):
        _chat_judge(client).judge(ITEM)
    client = FakeClient('{"verdicts": [{"index": 5, "label": "valid"}]}')
    with pytest.raises(JudgeError, match="MAM precision role: verdict for call index 5"):
        _chat_judge(client).judge(ITEM)
    client = FakeClient(_per_call(["valid", "valid"]), '{"missed": [{"anchor": 9}]}')
    with pytest.raises(JudgeError, match="missed role: anchor 9 out of range"):
        _chat_judge(client).judge(ITEM)
    client = FakeClient(_per_call(["valid", "valid"]), quality='{"quality": "great"}')
    with pytest.raises(JudgeError, match="MAM quality role: quality 'great'"):
        _chat_judge(client).judge(ITEM)
    bad = FakeClient(_per_call(["valid", "valid"]))
    bad.chat = lambda messages, **params: {"error": "overloaded"}
    with pytest.raises(JudgeError, match="MAM precision role: fake://chat: not a chat completion"):
        _chat_judge(bad).judge(ITEM)


@pytest.mark.parametrize("given, clipped", [(15, 10.0), (-3, 1.0), (0.5, 1.0), (7.5, 7.5)])
def test_chat_quality_is_clipped(given, clipped):
    client = FakeClient(_per_call(["valid", "valid"]), quality=json.dumps({"quality": given}))
    assert _chat_judge(client).judge(ITEM).quality == clipped


def test_chat_templates_unknown_role():
    with pytest.raises(ValueError, match="unknown roles"):
        ChatRoles(FakeClient("{}"), templates={"critic": "{query}"})


# ---------------------------------------------------------------- voting


def test_votes_majority_anchor_majority_and_median():
    labels = {0: ["valid", "unnecessary"], 1: ["unnecessary", "unnecessary"], 2: ["valid", "bad_args"]}
    missed = {0: [1], 1: [1, 2], 2: [2, 1, 1, 3]}
    quality = {0: 3, 1: 9, 2: 6}
    asked = []

    def precision(call, view):
        asked.append(("precision", view.vote))
        return labels[view.vote][call.index]

    roles = FunctionRoles(precision=precision, missed=lambda v: missed[v.vote], quality=lambda v: quality[v.vote])
    out = MamJudge(roles, roles, roles, votes=3).judge(ITEM)
    assert sorted(asked) == [("precision", v) for v in (0, 0, 1, 1, 2, 2)]
    # call 0: valid, unnecessary, valid -> valid; call 1: unnecessary x2, bad_args -> unnecessary
    assert [v.label for v in out.calls] == ["valid", "unnecessary"]
    # anchor 1 named by all three (one visual by a majority; two only by one vote); anchor 2 by two; 3 by one
    assert [m.anchor for m in out.missed] == [1, 2]
    assert out.quality == 6.0  # median of 3, 9, 6


def test_vote_helpers_ties_and_multiplicity():
    tie = vote_verdicts([[CallVerdict(0, "misplaced", "a")], [CallVerdict(0, "unnecessary", "b")]])
    assert tie == [CallVerdict(0, "unnecessary", "b")]  # a tie goes to the label first in PRECISION_LABELS
    votes = [[MissedVisual(2, "x"), MissedVisual(2, "y")], [MissedVisual(2, "z"), MissedVisual(2, "w")],
             [MissedVisual(2, "v")]]
    assert vote_missed(votes) == [MissedVisual(2, "x"), MissedVisual(2, "y")]  # two visuals there by 2 of 3 votes


def test_votes_must_be_positive():
    with pytest.raises(ValueError, match="votes"):
        MamJudge(MockRoles(), MockRoles(), MockRoles(), votes=0)


# ---------------------------------------------------------------- many items, records


def test_judge_many_keeps_order_with_threads():
    items = [MamItem("q", "c", f"Sentence {i}. <ref IMG{i}/> End.", item_id=f"i{i}") for i in range(16)]
    threads = set()
    rng = random.Random(0)
    delays = [rng.random() * 0.01 for _ in items]

    def quality(view):
        threads.add(threading.get_ident())
        time.sleep(delays[int(view.item_id[1:])])  # finish out of order
        return 1 + int(view.item_id[1:]) % 10

    roles = FunctionRoles(precision=lambda c, v: "valid", missed=lambda v: [], quality=quality)
    judge = MamJudge(roles, roles, roles)
    many = judge.judge_many(items, workers=4)
    assert [j.item_id for j in many] == [it.item_id for it in items]
    assert [j.quality for j in many] == [1.0 + i % 10 for i in range(16)]
    assert len(threads) > 1
    assert [j.to_record() for j in many] == [j.to_record() for j in judge.judge_many(items)]


def test_to_record_json_round_trip():
    mock = MockRoles({"x": {"labels": [("valid", "fits"), ("bad_args", "wrong src")], "missed": [(3, "a chart")],
                            "quality": 4}})
    out = MamJudge(mock, mock, mock).judge(dataclasses.replace(ITEM, response=RESPONSE + " <br>"))
    record = out.to_record()
    assert json.loads(json.dumps(record)) == record
    assert record["calls"][1] == {"index": 1, "label": "bad_args", "reason": "wrong src"}
    assert record["missed"] == [{"anchor": 3, "intent": "a chart"}] and record["parse_errors"]
    assert MamJudgment.from_record(json.loads(json.dumps(record))) == out
    empty = MamJudge(mock, mock, mock).judge(MamItem("q", "c", "Only text.", item_id="e")).to_record()
    assert empty["precision"] is None and empty["no_calls"] is True
    assert json.loads(json.dumps(empty)) == empty and math.isclose(empty["score"], 1.0)

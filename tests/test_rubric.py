"""shared/judges/rubric.py: OpenRS's data model, JSON parsing, external aggregation with veto, the bidirectional
rule, the prompt registry and the RubricJudge on a scripted backend (with gates, as a BRPO reward)."""
import json

import numpy as np
import pytest

from shared.judges.rubric import (DEFAULT_WEIGHTS, CriterionCompare, RubricJudge, RubricPrompts, aggregate,
                                  aggregate_judgment, bidirectional, extract_json, make_rubric_judge_reward,
                                  parse_rubric_judgment, repair_json)
from shared.judges.verdict import JudgeError
from shared.rewards.sandbox import ConstraintGate, GTGate

# ---------------------------------------------------------------- aggregation against hand-computed values

# (signed scores, types, veto, min_score, expected S)
AGGREGATION_TABLE = [
    # weighted mean: (5*2 + 2*(-1) + 1*1) / (5 + 2 + 1 + 1e-6)
    ([2, -1, 1], ["core", "important", "highlight"], True, 0.0, 9 / (8 + 1e-6)),
    # zero scores add no weight: (5*(-1)) / (5 + 1e-6); the important 0 is excluded
    ([-1, 0, 0], ["core", "important", "highlight"], True, 0.0, -5 / (5 + 1e-6)),
    # veto: a non-zero fatal score overrides everything: S = sum of fatal scores = -2
    ([2, 2, -2], ["core", "core", "fatal"], True, 0.0, -2.0),
    # two fatal criteria, one zero: S = 1 + 0
    ([1, 0, -2, -2], ["fatal", "fatal", "core", "important"], True, 0.0, 1.0),
    # fatal criteria all zero: no veto, weighted mean of the rest: (2*2) / (2 + 1e-6)
    ([0, 2], ["fatal", "important"], True, 0.0, 4 / (2 + 1e-6)),
    # all zero: 0
    ([0, 0, 0], ["core", "important", "fatal"], True, 0.0, 0.0),
    # |S| < min_score -> 0: (5*1 + 1*(-2)) / 6 = 0.5 < 0.6
    ([1, -2], ["core", "highlight"], True, 0.6, 0.0),
    ([1, -2], ["core", "highlight"], True, 0.4, 3 / (6 + 1e-6)),
    # no veto: the fatal criterion joins the mean with weight 5 (E1's arm b): (5*(-2) + 5*2 + 2*2) / 12
    ([-2, 2, 2], ["fatal", "core", "important"], False, 0.0, 4 / (12 + 1e-6)),
]


@pytest.mark.parametrize("scores,types,veto,min_score,expected", AGGREGATION_TABLE)
def test_aggregate_hand_computed(scores, types, veto, min_score, expected):
    weights = {**DEFAULT_WEIGHTS, "fatal": 5.0}
    total = float(aggregate(scores, types, weights, veto=veto, min_score=min_score))
    assert total == pytest.approx(expected, abs=1e-12)


def test_aggregate_vectorised_equals_rows_padding_and_weights_as_data():
    rows = [r for r in AGGREGATION_TABLE if r[2] and r[3] == 0.0]
    k = max(len(r[0]) for r in rows)
    scores = np.zeros((len(rows), k), int)
    types = np.full((len(rows), k), "highlight", object)
    valid = np.zeros((len(rows), k), bool)
    for i, (s, t, *_rest) in enumerate(rows):
        scores[i, :len(s)], types[i, :len(t)], valid[i, :len(s)] = s, t, True
        scores[i, len(s):] = 2  # padding with large scores must not count
    np.testing.assert_allclose(aggregate(scores, types, valid=valid), [r[4] for r in rows], atol=1e-12)
    # other weights are data: core 1, important 1, highlight 1 -> the plain mean of the non-zero scores
    flat = {"core": 1.0, "important": 1.0, "highlight": 1.0}
    assert float(aggregate([2, -1, 0], ["core", "important", "highlight"], flat)) == pytest.approx(0.5, abs=1e-6)
    with pytest.raises(ValueError, match="'fatal' entry"):
        aggregate([1], ["core"], DEFAULT_WEIGHTS, veto=False)
    with pytest.raises(ValueError, match="lack 'highlight'"):
        aggregate([1], ["core"], {"core": 5, "important": 2})


# (S_f, S_b, margin, expected): GOOD if S_f > m and S_b <= -m; BAD if S_f <= -m and S_b > m; else SAME
BIDIRECTIONAL_TABLE = [
    (1.5, -1.0, 0.0, 1), (1.5, 0.0, 0.0, 1), (1.5, 0.5, 0.0, 0),      # the swapped order must not prefer "A" again
    (-1.0, 2.0, 0.0, -1), (0.0, 2.0, 0.0, -1), (-1.0, 0.0, 0.0, 0),   # S_f = 0 counts as "<= -0" for BAD
    (0.0, 0.0, 0.0, 0), (1.0, 1.0, 0.0, 0),                           # position bias: both orders prefer slot A
    (0.4, -0.6, 0.5, 0), (0.6, -0.5, 0.5, 1), (-0.5, 0.6, 0.5, -1), (-0.4, 0.6, 0.5, 0),
]


@pytest.mark.parametrize("s_f,s_b,margin,expected", BIDIRECTIONAL_TABLE)
def test_bidirectional_rule(s_f, s_b, margin, expected):
    assert int(bidirectional(s_f, s_b, margin)) == expected


def test_bidirectional_vectorised():
    f, b, m, want = (np.asarray(x) for x in zip(*[r for r in BIDIRECTIONAL_TABLE if r[2] == 0.0]))
    np.testing.assert_array_equal(bidirectional(f, b, 0.0), want)


def test_compare_signed_score_takes_sign_from_chosen():
    assert CriterionCompare("1", "core", "A", -2).signed == 2
    assert CriterionCompare("1", "core", "B", 1).signed == -1
    assert CriterionCompare("1", "core", "S", 2).signed == 0
    with pytest.raises(JudgeError, match="chosen 'C'"):
        CriterionCompare("1", "core", "C", 1)
    with pytest.raises(JudgeError, match="type 'minor'"):
        CriterionCompare("1", "minor", "A", 1)


# ---------------------------------------------------------------- JSON parsing


def judge_json(compares, rubric=True, analysis=True):
    obj = {}
    if analysis:
        obj["question_analysis"] = {"analysis": "x", "question_type": "math", "primary_need": "answer",
                                    "secondary_needs": "", "user_context": ""}
    if rubric:
        obj["rubric_list"] = [{"rubric_id": i + 1, "title": f"c{i + 1}", "description": "", "type": t}
                              for i, (t, _c, _s) in enumerate(compares)]
    obj["rubric_compares"] = [{"rubric_idx": i + 1, "rubric_name": f"c{i + 1}", "type": t, "evidences": "",
                               "reason": "r", "chosen": c, "score": s} for i, (t, c, s) in enumerate(compares)]
    return json.dumps(obj, ensure_ascii=False)


def test_parse_valid_reply_in_prose_and_fences():
    body = judge_json([("core", "A", 2), ("important", "B", 1), ("highlight", "S", 0)])
    for text in (body, f"Here is my analysis.\n```json\n{body}\n```\nDone.", f"prefix {body} suffix"):
        j = parse_rubric_judgment(text)
        assert [c.signed for c in j.compares] == [2, -1, 0]
        assert [c.type for c in j.compares] == ["core", "important", "highlight"]
        assert j.analysis["question_type"] == "math" and [c.id for c in j.rubric] == ["1", "2", "3"]
        assert aggregate_judgment(j) == pytest.approx((10 - 2) / (7 + 1e-6))


def test_parse_types_from_rubric_list_chinese_aliases_and_string_scores():
    obj = {"rubric_list": [{"rubric_id": 1, "title": "事实", "type": "硬伤"}, {"rubric_id": 2, "title": "t", "type": "核心"}],
           "rubric_compares": [{"rubric_idx": 1, "chosen": "B", "score": "2"},
                               {"rubric_idx": 2, "chosen": "a", "score": "+1"}]}
    j = parse_rubric_judgment(json.dumps(obj, ensure_ascii=False))
    assert [(c.type, c.signed) for c in j.compares] == [("fatal", -2), ("core", 1)]
    assert aggregate_judgment(j) == -2.0  # veto


@pytest.mark.parametrize("text", [
    # trailing commas, single quotes, unquoted keys, Python literals, comments, a "+1" score
    """{'rubric_compares': [{rubric_idx: 1, type: 'core', chosen: 'A', score: +1, ok: True,},  // first
                            {rubric_idx: 2, type: 'fatal', chosen: 'S', score: 0, note: None},],}""",
    # cut off after the last compare (max_tokens): the open brackets are closed
    """```json\n{"rubric_compares": [{"rubric_idx": 1, "type": "core", "chosen": "A", "score": 1},
       {"rubric_idx": 2, "type": "fatal", "chosen": "S", "score": 0}], "summary": "the answ""",
])
def test_parse_repairs_almost_json(text):
    j = parse_rubric_judgment(text)
    assert [c.signed for c in j.compares] == [1, 0] and [c.type for c in j.compares] == ["core", "fatal"]


@pytest.mark.parametrize("text,message", [
    ("I prefer A.", "no JSON object found"),
    ('{"verdict": "A"}', "JSON without 'rubric_compares'"),
    ('{"rubric_compares": []}', "non-empty list"),
    ('{"rubric_compares": [{"rubric_idx": 1, "type": "core", "chosen": "A"}]}', r"rubric_compares\[0\]: no 'score'"),
    ('{"rubric_compares": [{"type": "core", "chosen": "A", "score": 1}, {"type": "core", "score": 1}]}',
     r"rubric_compares\[1\]: no 'chosen'"),
    ('{"rubric_compares": [{"rubric_idx": 3, "chosen": "A", "score": 1}]}', "no 'type' and no criterion '3'"),
    ('{"rubric_compares": [{"type": "core", "chosen": "A", "score": 3}]}', "outside -2..2"),
    ('{"rubric_compares": [{"type": "core", "chosen": "A", "score": 1.5}]}', "not an integer"),
    ('{"rubric_compares": [{"type": "core", "chosen": "X", "score": 1}]}', "chosen 'X'"),
    ('{"rubric_list": [{"rubric_id": 1}], "rubric_compares": [{"type": "core", "chosen": "A", "score": 1}]}',
     r"rubric_list\[0\]: no 'type'"),
])
def test_parse_malformed_names_what_is_missing(text, message):
    with pytest.raises(JudgeError, match=message):
        parse_rubric_judgment(text)


def test_extract_json_and_repair_keep_valid_json():
    valid = '{"a": [1, 2.5e-3, -4], "b": {"c": "x // not a comment", "d": "it\'s"}, "e": null}'
    assert json.loads(repair_json(valid)) == json.loads(valid)
    assert extract_json("x {\"a\": 1} y {\"b\": 2}") == [{"a": 1}, {"b": 2}]
    assert extract_json("no json here") == []


# ---------------------------------------------------------------- prompts and the judge


@pytest.fixture(scope="module")
def prompt_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("rubric_prompts")
    (folder / "domains").mkdir()
    (folder / "meta_rubric.md").write_text("Q={query}\nA={response_a}\nB={response_b}\nPOOL={domain_rubric}\n"
                                           'JSON like {"rubric_compares": []}')
    (folder / "domains" / "default.md").write_text("generic pool")
    (folder / "domains" / "math.md").write_text("math pool")
    return str(folder)


def test_prompt_registry_by_query_type(prompt_dir, tmp_path):
    prompts = RubricPrompts(prompt_dir)
    assert prompts.query_types() == ["default", "math"]
    text = prompts.render("2+2?", "4", "5", "math")
    assert text.startswith("Q=2+2?\nA=4\nB=5\nPOOL=math pool") and '{"rubric_compares": []}' in text
    assert "POOL=generic pool" in prompts.render("q", "a", "b", "poetry") and prompts.unknown_types == {"poetry"}
    assert "POOL=generic pool" in prompts.render("q", "a", "b")
    assert prompts.render("{response_b}", "x", "y").startswith("Q={response_b}\nA=x\nB=y")  # no re-substitution
    (tmp_path / "meta_rubric.md").write_text("{query} {response_a}")
    with pytest.raises(ValueError, match="response_b"):
        RubricPrompts(str(tmp_path))
    with pytest.raises(FileNotFoundError, match="meta_rubric.md"):
        RubricPrompts(str(tmp_path / "missing"))


def test_shipped_meta_rubric_renders():
    prompts = RubricPrompts("projects/openrs/prompts")
    text = prompts.render("Write SHORT using: kado", " kado x", " y", "constraint_writing")
    assert "coverage: every required word" in text and "[Response A]\n kado x" in text
    assert {"default", "math", "constraint_writing"} <= set(prompts.query_types())


def _length_backend(bias_to_a=0, fail_first=0):
    """A scripted judge: per criterion 'length' (core) prefers the longer response; `bias_to_a` adds a highlight
    criterion that always picks slot A; the first `fail_first` replies are garbage."""
    calls = {"n": 0, "texts": []}

    def generate(texts):
        out = []
        for text in texts:
            calls["n"] += 1
            calls["texts"].append(text)
            if calls["n"] <= fail_first:
                out.append("sorry, no JSON")
                continue
            a = text.split("A=")[1].split("\nB=")[0]
            b = text.split("\nB=")[1].split("\nPOOL=")[0]
            chosen = "A" if len(a) > len(b) else "B" if len(b) > len(a) else "S"
            compares = [("core", chosen, 0 if chosen == "S" else 2)]
            if bias_to_a:
                compares.append(("highlight", "A", bias_to_a))
            out.append(judge_json(compares))
        return out

    generate.calls = calls
    return generate


def test_rubric_judge_bidirectional_verdicts_and_scores(prompt_dir):
    judge = RubricJudge(_length_backend(), prompt_dir)
    out = judge.compare(["q"] * 3, ["long answer", "x", "same"], ["short", "longer", "sam3"])
    assert [v.pref for v in out] == [1, -1, 0]
    assert out[0].scores == pytest.approx((2.0, -2.0), abs=1e-5) and "[core]" in out[0].critique
    assert judge.cost()["calls"] == 6 and judge.cost()["pairs"] == 3  # both orders in one backend batch


def test_rubric_judge_position_bias_becomes_a_tie(prompt_dir):
    # a judge that always gives slot A a big highlight win: single order follows the bias, both orders cancel it
    generate = _length_backend(bias_to_a=2)
    equal = (["q"], ["abc"], ["xyz"])
    single = RubricJudge(generate, prompt_dir, bidirectional=False)
    assert single.compare(*equal)[0].pref == 1
    assert RubricJudge(generate, prompt_dir).compare(*equal)[0].pref == 0
    # a real difference still wins both ways: core 2 (w 5) beats highlight 2 (w 1)
    assert RubricJudge(generate, prompt_dir).compare(["q"], ["x"], ["longer"])[0].pref == -1


def test_rubric_judge_json_retries_and_malformed_policy(prompt_dir):
    judge = RubricJudge(_length_backend(fail_first=2), prompt_dir, json_retries=5)
    assert judge.compare(["q"], ["longer"], ["x"])[0].pref == 1
    assert judge.cost()["json_retries"] == 2 and judge.cost()["calls"] == 4  # 2 + 2 regenerations (attempt 2)
    stubborn = RubricJudge(lambda texts: ["no json"] * len(texts), prompt_dir, json_retries=3)
    v = stubborn.compare(["q"], ["a"], ["b"])[0]
    assert v.malformed and v.pref == 0 and "no JSON object" in v.error and stubborn.cost()["calls"] == 6
    strict = RubricJudge(lambda texts: ["no json"] * len(texts), prompt_dir, json_retries=1, on_malformed="raise")
    with pytest.raises(JudgeError, match="pair 0"):
        strict.compare(["q"], ["a"], ["b"])


def test_gates_decide_before_the_judge(prompt_dir):
    backend = _length_backend()
    gt = GTGate(lambda prompt, response, truth: 1 if response.strip() == truth else -1)
    pvr = ConstraintGate("def check(response):\n    return 'kado' in response.split()\n")
    judge = RubricJudge(backend, prompt_dir, gates=[gt, pvr])
    out = judge.compare(["2+2?", "2+2?", "write", "write", "write"],
                        ["4", "5 is the long answer", "kado", "a longer text", "kado long text"],
                        ["5 is the long answer", "4", "a longer text", "kado", "kado x"],
                        columns={"ground_truth": ["4", "4", None, None, None]})
    # GT decides pairs 0-1 against the judge's length preference; the PVR decides 2-3; pair 4 goes to the judge
    assert [v.pref for v in out] == [1, -1, 1, -1, 1]
    assert "gate gt" in out[0].critique and "gate constraint" in out[2].critique
    assert judge.cost()["gate_decided"] == 4 and judge.cost()["calls"] == 2
    assert pvr.stats["programs"] == 1 and pvr.stats["checked"] == 6  # one sandbox process for the batch


def test_rubric_judge_as_brpo_reward(prompt_dir):
    reward = make_rubric_judge_reward(_length_backend(), prompt_dir)
    pref, metrics = reward.judge_pairs(["q"] * 2, ["long one", "x"], ["y", "long two"], seed=0)
    np.testing.assert_array_equal(pref, [1, -1])
    assert metrics["judge/pairs"] == 2 and metrics["judge/calls"] == 4
    assert reward(["q"], ["longest"], reference=["x"]) == [1.0]


def test_parsing_random_text_raises_only_judge_errors():
    rng = np.random.default_rng(0)
    alphabet = list('{}[]":,\'ABS012-+ abc\n/*\\') + ["rubric_compares", "score", "chosen", "type", "core", "fatal"]
    for _ in range(300):
        text = "".join(rng.choice(alphabet, size=int(rng.integers(0, 60))))
        try:
            parse_rubric_judgment(text)
        except JudgeError:
            pass

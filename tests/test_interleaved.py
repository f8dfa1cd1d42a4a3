"""shared/eval/interleaved.py and shared/eval/plans.py: the call syntax of every tool, each malformed-input error,
the render -> parse round trip on seeded random cases, hostile input, and hand-computed plan metrics (empty plans,
over- and under-use, wrong tool, anchors with and without tolerance, arguments, tool alternatives, optimal vs greedy
matching, deterministic ties) and their summary."""
import math
import random
import time

import pytest

from shared.eval.interleaved import (MAX_CHARS, MAX_ERRORS, TOOLS, Interleaved, ToolCall, ToolSchema, format_call,
                                     parse_interleaved, register_tool, render_interleaved, split_sentences)
from shared.eval.plans import GoldCall, PlanScore, score_plan, summarize


# ---------------------------------------------------------------------------------------------------- the format

def test_each_tool_syntax():
    r = parse_interleaved("Here is IMG2. <ref IMG2/> A thin four looks so. <search>digit=4;style=thin</search> "
                          "A new seven: <gen>digit=7;thick;slant=right</gen>\nRotated, it reads. "
                          "<edit src=IMG2>rot90</edit> <code>bar(counts)</code> Done!")
    assert r.errors == ()
    assert r.sentences == ("Here is IMG2.", "A thin four looks so.", "A new seven:", "Rotated, it reads.", "Done!")
    assert r.text == "Here is IMG2. A thin four looks so. A new seven: Rotated, it reads. Done!"
    assert r.calls == (
        ToolCall("ref", (("target", "IMG2"),), "", 0),
        ToolCall("search", (), "digit=4;style=thin", 1),
        ToolCall("gen", (), "digit=7;thick;slant=right", 2),
        ToolCall("edit", (("src", "IMG2"),), "rot90", 3),
        ToolCall("code", (), "bar(counts)", 3),
    )
    assert r.n_calls == 5
    args = [c.args() for c in r.calls]
    assert args == [{"target": "IMG2"}, {"digit": "4", "style": "thin"}, {"digit": "7", "thick": "", "slant": "right"},
                    {"src": "IMG2", "op": "rot90"}, {"op": "bar(counts)"}]
    assert r.calls[3].attr("src") == "IMG2" and r.calls[3].attr("dst") is None and r.calls[3].attr("dst", "x") == "x"
    assert [format_call(c) for c in r.calls] == [
        "<ref IMG2/>", "<search>digit=4;style=thin</search>", "<gen>digit=7;thick;slant=right</gen>",
        "<edit src=IMG2>rot90</edit>", "<code>bar(counts)</code>"]


def test_attributes_quotes_and_body_whitespace():
    r = parse_interleaved('<edit src = "IMG 2" mode=\'a"b\' IMG3>\n  rot90 ; flip ;; n = 2 \n</edit> <ref  IMG2 />')
    assert r.errors == ()
    edit, ref = r.calls
    assert edit.attrs == (("src", "IMG 2"), ("mode", 'a"b'), ("target", "IMG3"))
    assert edit.body == "rot90 ; flip ;; n = 2"          # surrounding whitespace stripped
    assert edit.args() == {"src": "IMG 2", "mode": 'a"b', "target": "IMG3", "rot90": "", "flip": "", "n": "2"}
    assert format_call(edit) == "<edit src=\"IMG 2\" mode='a\"b' IMG3>rot90 ; flip ;; n = 2</edit>"
    assert ref == ToolCall("ref", (("target", "IMG2"),), "", -1)
    assert ToolCall("search", body="  ").args() == {}
    assert ToolCall("gen", body="a thick seven").args() == {"op": "a thick seven"}
    assert ToolCall("gen", (("op", "x"),), body="op=y").args() == {"op": "y"}    # the body overrides attributes


def test_sentence_rule_and_anchor_positions():
    assert split_sentences("Pi is 3.14 or so. e.g.x stays!  Really?\n\nNew  line\tpart") == [
        "Pi is 3.14 or so.", "e.g.x stays!", "Really?", "New line part"]
    assert split_sentences("e.g. this") == ["e.g.", "this"]
    r = parse_interleaved("<ref A/> One. The digit <ref B/> looks thin. Two.<ref C/>Three <ref D/>")
    assert r.sentences == ("One.", "The digit looks thin.", "Two.", "Three")
    # A before any sentence; B mid-sentence -> after "One."; C glued between sentences; D at the end.
    assert [(c.attr("target"), c.anchor) for c in r.calls] == [("A", -1), ("B", 0), ("C", 2), ("D", 3)]
    assert parse_interleaved("") == Interleaved((), ())
    assert parse_interleaved("<ref A/><ref B/>").calls[1].anchor == -1


def test_render_order_and_validation():
    s = ["One.", "Two?"]
    calls = [ToolCall("code", body="bar(counts)", anchor=1), ToolCall("ref", (("target", "A"),), anchor=-1),
             ToolCall("search", body="digit=4", anchor=1)]
    text = render_interleaved(s, calls)
    assert text == "<ref A/> One. Two? <code>bar(counts)</code> <search>digit=4</search>"
    assert parse_interleaved(text).calls == (calls[1], calls[0], calls[2])
    with pytest.raises(ValueError, match="anchor 2 out of range"):
        render_interleaved(s, [ToolCall("ref", anchor=2)])
    with pytest.raises(ValueError, match="self-closing"):
        format_call(ToolCall("ref", body="x"))
    with pytest.raises(ValueError, match="cannot hold"):
        format_call(ToolCall("gen", body="a<b"))
    with pytest.raises(ValueError, match="both quote"):
        format_call(ToolCall("edit", (("src", "a'\" b"),)))
    with pytest.raises(ValueError, match="not a tag name"):
        format_call(ToolCall("1bad"))


def test_registry():
    assert TOOLS["ref"].self_closing and not any(TOOLS[t].self_closing for t in ("search", "gen", "edit", "code"))
    register_tool(ToolSchema("ref", self_closing=True, doc=TOOLS["ref"].doc))        # same schema: a no-op
    with pytest.raises(ValueError, match="already registered"):
        register_tool(ToolSchema("ref"))
    with pytest.raises(ValueError, match="tool name"):
        register_tool(ToolSchema("bad name"))
    try:
        register_tool(ToolSchema("plot_test", doc="a test tool"))
        assert parse_interleaved("A. <plot_test>x=1</plot_test>").calls == (ToolCall("plot_test", (), "x=1", 0),)
    finally:
        TOOLS.pop("plot_test", None)
    assert parse_interleaved("A. <plot_test>x=1</plot_test>").calls == ()
    # A private tool set: only these tags are calls.
    r = parse_interleaved("A. <pic X/> <ref Y/>", tools={"pic": ToolSchema("pic", self_closing=True)})
    assert r.calls == (ToolCall("pic", (("target", "X"),), "", 0),) and r.sentences == ("A.", "<ref Y/>")


# ------------------------------------------------------------------------------------------------ malformed input

@pytest.mark.parametrize("response, sentences, calls, error", [
    ("A <br> b. <ref X/>", ("A <br> b.",), (ToolCall("ref", (("target", "X"),), "", 0),), "unknown tag '<br>'"),
    ("A. <plot x=1/> B.", ("A.", "<plot x=1/> B."), (), "unknown tag '<plot x=1/>'"),
    ("A. </gen> B.", ("A.", "B."), (), "close without open '</gen>'"),
    ("A. <search>digit=4 B. <ref X/>", ("A.", "digit=4 B."), (ToolCall("ref", (("target", "X"),), "", 1),),
     "unclosed tag '<search>'"),
    ("A. <edit src=I><ref X/>rot90</edit>", ("A.",), (ToolCall("edit", (("src", "I"),), "rot90", 0),),
     "nested tool tag '<ref X/>' inside '<edit src=I>'"),
    ("A. <search>d=4</gen></search>", ("A.",), (ToolCall("search", (), "d=4", 0),),
     "mismatched close '</gen>' inside '<search>'"),
    ("A. <search digit=4/> B.", ("A.", "B."), (), "self-closing use of search"),
    ("A. <ref X> B.", ("A.", "B."), (ToolCall("ref", (("target", "X"),), "", 0),), "ref is self-closing"),
    ("A. <search digit=4", ("A.", "<search digit=4"), (), "unterminated tag '<search digit=4'"),
    ('A. <edit src="I>r</edit>', ("A.",), (ToolCall("edit", (("src", "I"),), "r", 0),), "unterminated quote"),
])
def test_each_malformed_input_is_reported_and_parsing_continues(response, sentences, calls, error):
    r = parse_interleaved(response)
    assert r.sentences == sentences
    assert r.calls == calls
    assert len(r.errors) == 1 and r.errors[0].startswith(error), r.errors


def test_not_a_string():
    r = parse_interleaved(None)
    assert r.sentences == () and r.calls == () and "NoneType" in r.errors[0]
    assert parse_interleaved(42).sentences == ("42",)


def test_hostile_inputs_are_fast_and_capped():
    cases = [
        "x" * (MAX_CHARS + 1000),
        "<" * MAX_CHARS,
        "<search" * (MAX_CHARS // 7),                       # unterminated known tags
        "<search>" * (MAX_CHARS // 8),                      # all unclosed
        "<search>" + "<ref a/>" * (MAX_CHARS // 8 - 3) + "</search>",   # nested, all in one pair
        "<br " + "a" * MAX_CHARS,                           # a tag that never ends
        "<" + "a" * MAX_CHARS,
        "<edit " + '"' * MAX_CHARS + ">",
        "A. " * (MAX_CHARS // 3 - 3) + "<ref X/>",       # 66,663 sentences, then a call
    ]
    for response in cases:
        start = time.perf_counter()
        r = parse_interleaved(response)
        assert time.perf_counter() - start < 1.0
        assert len(r.errors) <= MAX_ERRORS + 1
    r = parse_interleaved(cases[0])
    assert r.errors == (f"response of {MAX_CHARS + 1000} characters truncated to {MAX_CHARS}",)
    assert len(r.text) == MAX_CHARS
    r = parse_interleaved(cases[3])
    assert r.calls == () and r.errors[-1] == f"... and {MAX_CHARS // 8 - MAX_ERRORS} more errors"
    r = parse_interleaved(cases[4])
    assert r.calls == (ToolCall("search"),) and len(r.errors) == MAX_ERRORS + 1
    assert parse_interleaved(cases[-1]).calls[0].anchor == MAX_CHARS // 3 - 4


# ------------------------------------------------------------------------------------------------------ round trip

WORDS = ["the", "digit", "IMG2", "looks", "thin", "3.5", "e.g.x", "seven,", "a-b", "(see", "table)", "x=1", "50%"]
ENDS = [".", "?", "!", "...", "?!"]


def random_call(rng: random.Random, anchor: int) -> ToolCall:
    tool = rng.choice(["ref", "search", "gen", "edit", "code"])
    attrs = []
    for _ in range(rng.randrange(3)):
        key = rng.choice(["target", "src", "mode", "n"])
        attrs.append((key, rng.choice(["IMG2", "IMG 3", "a=b", "x/y", "", "it's", 'say "hi"', "7"])))
    body = "" if tool == "ref" else rng.choice(
        ["", "rot90", "bar(counts)", "digit=4;style=thin", "digit=7;thick;slant=right", "a thick seven", "k=;x"])
    return ToolCall(tool, tuple(attrs), body, anchor)


def test_round_trip_random():
    rng = random.Random(0)
    n_calls = 0
    for _ in range(300):
        sentences = [" ".join(rng.choice(WORDS) for _ in range(rng.randrange(1, 6))) + rng.choice(ENDS)
                     for _ in range(rng.randrange(6))]
        calls = [random_call(rng, rng.randrange(-1, len(sentences))) for _ in range(rng.randrange(5))]
        calls.sort(key=lambda c: c.anchor)              # parsing returns calls in order of appearance
        n_calls += len(calls)
        r = parse_interleaved(render_interleaved(sentences, calls))
        assert r.errors == ()
        assert r.sentences == tuple(sentences)
        assert r.calls == tuple(calls)
    assert n_calls > 300


@pytest.mark.parametrize("gold", [
    GoldCall(("ref", "search"), 0, (("target", "IMG2"),)),
    GoldCall(("search", "ref"), 2, (("digit", "4"), ("style", "thin"))),
    GoldCall(("gen",), 1, (("digit", "7"), ("thick", ""), ("slant", "right"))),
    GoldCall(("gen",), 1, (("thick", ""),)),                 # a lone flag stays a flag
    GoldCall(("edit",), 0, (("src", "IMG2"), ("op", "rot90"))),
    GoldCall(("edit",), 0, (("src", "user"), ("op", "flip"), ("n", "2"))),
    GoldCall(("code",), -1, (("op", "bar(counts)"),)),
    GoldCall(("code",), 0, (("op", ""),)),
    GoldCall(("search",), 0, (("target", "IMG9"),)),
    GoldCall(("ref",), 0, (("target", "IMG2"), ("src", "doc"))),
    GoldCall(("code",), 0),
])
def test_gold_to_call_round_trip(gold):
    call = gold.to_call()
    assert call.tool == gold.tools[0] and call.anchor == gold.anchor
    sentences = ["S0.", "S1.", "S2."]
    parsed = parse_interleaved(render_interleaved(sentences, [call]))
    assert parsed.errors == () and parsed.calls == (call,)
    assert score_plan(parsed.calls, [gold]).n_correct == 1


def test_gold_to_call_forms():
    assert format_call(GoldCall(("ref", "search"), 0, (("target", "IMG2"),)).to_call()) == "<ref IMG2/>"
    assert format_call(GoldCall(("edit",), 0, (("src", "IMG2"), ("op", "rot90"))).to_call()) == \
        "<edit src=IMG2>rot90</edit>"
    assert format_call(GoldCall(("gen",), 0, (("digit", "7"), ("thick", ""))).to_call()) == "<gen>digit=7;thick</gen>"
    assert format_call(GoldCall(("gen",), 0, (("thick", ""),)).to_call()) == "<gen>thick;</gen>"
    assert format_call(GoldCall(("edit",), 0, (("op", "rot90"), ("n", "2"))).to_call()) == "<edit>op=rot90;n=2</edit>"
    with pytest.raises(ValueError, match="at least one"):
        GoldCall((), 0)


# --------------------------------------------------------------------------------------------------- plan metrics

def call(tool, anchor, body="", **attrs):
    return ToolCall(tool, tuple(attrs.items()), body, anchor)


def test_empty_plan_against_empty_gold():
    s = score_plan([], [])
    assert s == PlanScore(0, 0, 0, 1.0, 1.0, 1.0, None, None, None, False, False, ())


def test_overuse():
    s = score_plan([call("gen", 0, "digit=7"), call("ref", 1, target="IMG2")], [])
    assert (s.n_pred, s.n_gold, s.n_correct) == (2, 0, 0)
    assert (s.precision, s.recall, s.f1) == (0.0, 1.0, 0.0)
    assert s.overuse and not s.underuse and s.tool_acc is None and s.pairs == ()


def test_underuse():
    s = score_plan([], [GoldCall(("ref",), 0), GoldCall(("code",), 2)])
    assert (s.precision, s.recall, s.f1) == (1.0, 0.0, 0.0)
    assert s.underuse and not s.overuse
    assert s.tool_acc == 0.0 and s.anchor_acc is None and s.arg_acc is None


def test_wrong_tool_is_matched_but_wrong():
    s = score_plan([call("gen", 0, "digit=4")], [GoldCall(("search",), 0, (("digit", "4"),))])
    assert s.pairs == ((0, 0),) and s.n_correct == 0 and (s.precision, s.recall, s.f1) == (0.0, 0.0, 0.0)
    assert s.tool_acc == 0.0 and s.anchor_acc is None and s.arg_acc is None


def test_misplaced_anchor_with_and_without_tolerance():
    pred, gold = [call("search", 2, "digit=4")], [GoldCall(("search",), 1, (("digit", "4"),))]
    s = score_plan(pred, gold)
    assert s.n_correct == 0 and s.tool_acc == 1.0 and s.anchor_acc == 0.0 and s.arg_acc == 1.0
    s = score_plan(pred, gold, anchor_tolerance=1)
    assert s.n_correct == 1 and s.f1 == 1.0 and s.anchor_acc == 1.0
    assert score_plan([call("search", 4, "digit=4")], gold, anchor_tolerance=2).anchor_acc == 0.0
    with pytest.raises(ValueError, match="anchor_tolerance"):
        score_plan(pred, gold, anchor_tolerance=-1)


def test_bad_and_present_only_args():
    gold = [GoldCall(("gen",), 0, (("digit", "7"), ("thick", "")))]
    assert score_plan([call("gen", 0, "digit=7;thick")], gold).n_correct == 1
    assert score_plan([call("gen", 0, "digit=7;thick=very")], gold).n_correct == 1     # "" = any value
    s = score_plan([call("gen", 0, "digit=1;thick")], gold)
    assert s.n_correct == 0 and s.tool_acc == 1.0 and s.anchor_acc == 1.0 and s.arg_acc == 0.0
    assert score_plan([call("gen", 0, "digit=7")], gold).arg_acc == 0.0               # flag missing
    edit = [GoldCall(("edit",), 1, (("src", "IMG2"), ("op", "rot90")))]
    assert score_plan([call("edit", 1, "rot90", src="IMG2")], edit).n_correct == 1
    assert score_plan([call("edit", 1, "rot90", src="IMG3")], edit).n_correct == 0


def test_alternative_tools():
    gold = [GoldCall(("search", "ref"), 0, (("digit", "4"),)), GoldCall(("search", "ref"), 1)]
    pred = [call("ref", 1, target="IMG2"), call("search", 0, "digit=4")]
    s = score_plan(pred, gold)
    assert s.pairs == ((0, 1), (1, 0)) and s.n_correct == 2 and s.tool_acc == 1.0
    assert score_plan([call("gen", 1)], [GoldCall(("search", "ref"), 1)]).tool_acc == 0.0


def test_partial_plan_hand_computed():
    gold = [GoldCall(("ref",), 0, (("target", "IMG1"),)), GoldCall(("edit",), 1, (("src", "IMG1"), ("op", "rot90"))),
            GoldCall(("code",), 3, (("op", "bar(counts)"),))]
    pred = [call("ref", 0, target="IMG1"), call("edit", 2, "flip", src="IMG1")]
    s = score_plan(pred, gold)
    # ref-ref correct (7); edit-edit: tool ok, anchor 2 vs 1 off, 1 of 2 constraints (4.5); code unmatched.
    assert s.pairs == ((0, 0), (1, 1)) and s.n_correct == 1
    assert (s.precision, s.recall) == (0.5, pytest.approx(1 / 3)) and s.f1 == pytest.approx(0.4)
    assert s.tool_acc == pytest.approx(2 / 3) and s.anchor_acc == 0.5 and s.arg_acc == 0.5
    s1 = score_plan(pred, gold, anchor_tolerance=1)
    assert s1.anchor_acc == 1.0 and s1.n_correct == 1        # the edit still misses its op


def test_optimal_matching_beats_greedy_3x3():
    gold = [GoldCall(("search", "ref"), 0), GoldCall(("search",), 0, (("digit", "4"),)),
            GoldCall(("code",), 2, (("op", "bar(counts)"),))]
    pred = [call("search", 0, "digit=4"), call("search", 0, "digit=7"), call("code", 2, "bar(counts)")]
    # pair scores, by hand (rows pred, columns gold):
    #   [[7, 7, 0], [7, 6, 0], [1, 0, 7]]  (code vs gold 0: no constraints -> share 1)
    # greedy, largest first with row-major ties: (0,0) 7, (2,2) 7, (1,1) 6 = 20 -> 2 correct
    # optimal: (0,1) 7 + (1,0) 7 + (2,2) 7 = 21 -> 3 correct
    s = score_plan(pred, gold)
    assert s.pairs == ((0, 1), (1, 0), (2, 2)) and s.n_correct == 3 and s.f1 == 1.0
    greedy_correct = [(0, 0), (2, 2), (1, 1)]
    assert sum(score_plan([pred[i]], [gold[j]]).n_correct for i, j in greedy_correct) == 2


def test_ties_are_broken_deterministically():
    # Both assignments score 11.5; the one with a correct pair wins, whatever the prediction order.
    gold = [GoldCall(("search",), 0, (("digit", "4"), ("style", "thin"))),
            GoldCall(("search",), 0, (("digit", "4"), ("slant", "right")))]
    good, far = call("search", 0, "digit=4;style=thin"), call("search", 9, "digit=4;style=thin")
    assert score_plan([good, far], gold).pairs == ((0, 0), (1, 1))
    assert score_plan([far, good], gold).pairs == ((0, 1), (1, 0))
    assert score_plan([far, good], gold).n_correct == 1
    # Equal scores, no correct pair: the closer anchors win ((0, 0), (1, 1): distances 1 + 1 against 2 + 2).
    gold = [GoldCall(("gen",), 1), GoldCall(("gen",), 2)]
    assert score_plan([call("gen", 0), call("gen", 3)], gold).pairs == ((0, 0), (1, 1))
    assert score_plan([call("gen", 3), call("gen", 0)], gold).pairs == ((0, 1), (1, 0))
    # Identical calls: prediction i goes to gold i.
    same = [call("ref", 0, target="A")] * 3
    assert score_plan(same, [GoldCall(("ref",), 0)] * 3).pairs == ((0, 0), (1, 1), (2, 2))


def test_summarize_hand_computed():
    gold2 = [GoldCall(("ref",), 0), GoldCall(("code",), 1)]
    scores = [
        score_plan([call("ref", 0), call("code", 1)], gold2),          # 2/2 correct, f1 1
        score_plan([call("ref", 0), call("gen", 1)], gold2),           # 1 correct of 2/2: f1 0.5, tool_acc 0.5
        score_plan([call("gen", 0)], []),                              # overuse
        score_plan([], []),                                            # right to call nothing
        score_plan([], [GoldCall(("search",), 0)]),                    # underuse
    ]
    out = summarize(scores)
    assert out["n"] == 5.0
    assert out["micro_precision"] == pytest.approx(3 / 5) and out["micro_recall"] == pytest.approx(3 / 5)
    assert out["micro_f1"] == pytest.approx(3 / 5)
    assert out["macro_f1"] == pytest.approx((1 + 0.5 + 0 + 1 + 0) / 5)
    assert out["tool_acc"] == pytest.approx((1 + 0.5 + 0) / 3)           # defined for the 3 items with gold calls
    assert out["anchor_acc"] == 1.0 and out["arg_acc"] == 1.0          # defined for the first two only
    assert out["overuse_rate"] == 0.5 and out["underuse_rate"] == pytest.approx(1 / 3)
    assert out["calls_per_answer"] == pytest.approx(5 / 5) and out["gold_calls_per_answer"] == pytest.approx(5 / 5)
    empty = summarize([])
    assert empty["n"] == 0.0 and math.isnan(empty["micro_f1"]) and math.isnan(empty["macro_f1"])
    assert math.isnan(summarize(scores[:2])["overuse_rate"])

"""ATP-MNIST executors (spec ../shared/papers/atp_bench.md 4.3): each tool's output by hand, the checks' factual /
creative mismatches, the executed score E on small constructed answers, and robustness to unusable calls. Synthetic
glyphs throughout; one test reads the real MNIST 5k file and is skipped without it."""
import dataclasses
import functools
import os

import numpy as np
import pytest

from projects.atp_mnist import executors as X
from projects.atp_mnist import mnist, planners, world
from projects.atp_mnist.world import PREV, USER
from shared.eval.interleaved import ToolCall, parse_interleaved, render_interleaved
from shared.eval.plans import GoldCall


@functools.lru_cache(maxsize=None)
def pool():
    return mnist.synthetic_pool(0, 60)


@functools.lru_cache(maxsize=None)
def ex():
    return X.Executors(pool(), seed=0)


@functools.lru_cache(maxsize=None)
def items():
    return tuple(world.generate(pool(), "test", 400, 0))


def first(intent, pred=lambda it: True):
    return next(it for it in items() if it.intent == intent and pred(it))


def answer(item, calls, sentences=None):
    """An answer string: the item's gold sentences (or `sentences`) with `calls` (ToolCalls with anchors)."""
    return render_interleaved(sentences or item.response_sentences, calls)


def run(item, response, **kw):
    parsed = parse_interleaved(response)
    produced = ex().produce(item, parsed)
    return produced, X.executed_score(item, parsed, produced, **kw)


def gold_calls(item):
    return [g.to_call() for g in item.gold]


# ----------------------------------------------------------------------------------------------------------
# each tool by hand


def test_edit_ops_match_numpy():
    img = pool().images[3]
    assert np.array_equal(X.apply_op("rot90", img), np.rot90(img))
    assert np.array_equal(X.apply_op("rot270", img), np.rot90(img, -1))
    assert np.array_equal(X.apply_op("fliph", img), img[:, ::-1])
    assert np.array_equal(X.apply_op("flipv", img), img[::-1])
    dot = np.zeros((28, 28), np.uint8)
    dot[10, 12] = 200
    block = np.zeros((28, 28), np.uint8)
    block[9:12, 11:14] = 200
    assert np.array_equal(X.apply_op("thicken", dot), block)      # 3x3 dilation of one pixel: a 3x3 block
    assert np.array_equal(X.apply_op("thin", block), dot)         # 3x3 erosion of the block: its centre
    full = np.full((28, 28), 255, np.uint8)
    thinned = X.apply_op("thin", full)                            # zero padding: ink at the border erodes too
    assert (thinned[1:-1, 1:-1] == 255).all() and thinned[0].sum() == thinned[:, -1].sum() == 0


def test_edit_call_and_procedure_chain():
    item = first("procedure", lambda it: len(it.gold) == 3)
    produced, score = run(item, planners.unified(item))
    src = item.images[dict(item.gold[0].args)["src"]]
    expected = pool().images[src]
    for p, g in zip(produced, item.gold):
        expected = X.apply_op(dict(g.args)["op"], expected)
        assert p.error == "" and np.array_equal(p.image, expected)    # step k shows the cumulative result
    assert produced[-1].source.startswith(f"edited:{dict(item.gold[0].args)['src']}|")
    assert score["E"] == 1.0 and score["satisfied"] == 3
    # The first two steps swapped: step 1 no longer shows the gold's first result; step 2 still does exactly when
    # the two ops commute on this glyph (e.g. fliph and flipv).
    calls = gold_calls(item)
    swapped = [dataclasses.replace(calls[0], body=calls[1].body), dataclasses.replace(calls[1], body=calls[0].body),
               calls[2]]
    op1, op2 = (dict(g.args)["op"] for g in item.gold[:2])
    image = pool().images[src]
    commute = np.array_equal(X.apply_op(op2, X.apply_op(op1, image)), X.apply_op(op1, X.apply_op(op2, image)))
    assert X.check(item, ex().produce(item, parse_interleaved(answer(item, swapped))))[:2] == [False, commute]


def test_ref_returns_the_doc_and_user_image():
    item = first("mirror_user")
    parsed = parse_interleaved("Here. <ref IMG1/> And yours. <ref user/>")
    a, b = ex().produce(item, parsed)
    assert np.array_equal(a.image, pool().images[item.images["IMG1"]]) and a.source == "doc:IMG1"
    assert np.array_equal(b.image, pool().images[item.images[USER]]) and b.source == "user:USER"
    assert (a.anchor, b.anchor) == (0, 1)


def test_chart_round_trip():
    rng = np.random.default_rng(0)
    for _ in range(20):
        digits = rng.choice(10, size=int(rng.integers(1, 11)), replace=False)
        counts = {int(d): int(rng.integers(1, 80)) for d in digits}
        chart = X.render_chart(counts)
        assert X.parse_chart(chart) == counts
        for d, c in counts.items():                                   # bar height = count, exactly
            assert (chart[:, 3 * d] > 0).sum() == c and chart[-c, 3 * d] == 255
    assert X.render_chart({4: 7}).shape == (16, 30)
    with pytest.raises(ValueError):
        X.parse_chart(pool().images[0])                               # a digit is not a chart
    broken = X.render_chart({2: 5})
    broken[0, 6] = 255                                                # ink floating above the bar
    with pytest.raises(ValueError):
        X.parse_chart(broken)
    item = first("chart_counts")
    (p,), score = run(item, planners.unified(item))
    assert p.source == "chart" and X.parse_chart(p.image) == item.counts and score["E"] == 1.0


def test_search_returns_a_matching_bank_image():
    P = pool()
    for body, digit, attr, level in (("digit=4;thick=thin", 4, "thick", "thin"),
                                     ("digit=7;style=right", 7, "slant", "right"),
                                     ("digit=2;large", 2, "size", "large"),
                                     ("digit=0;slant=upright", 0, "slant", "upright")):
        image, source = ex().search(ToolCall("search", (), body).args())
        i = int(source.split(":")[1])
        assert source.startswith("bank:") and i in set(P.splits["bank"].tolist())
        assert np.array_equal(image, P.images[i]) and P.labels[i] == digit and P.level(i, attr) == level
        assert ex().search(ToolCall("search", (), body).args())[1] == source   # deterministic
    # BM25 prefers the bank image whose descriptor holds more of the request's words, among the filtered.
    _, source = ex().search({"digit": "5", "thick": "thick", "slant": "left"})
    i = int(source.split(":")[1])
    assert (P.labels[i], P.level(i, "thick"), P.level(i, "slant")) == (5, "thick", "left")


def test_gen_is_novel_and_steered():
    item = first("design_variant")
    (p,), _ = run(item, planners.unified(item))
    assert p.source == "generated" and p.image.shape == (28, 28) and p.image.dtype == np.uint8
    assert ex().nearest_real(p.image) > ex().novelty_threshold         # not a copy of any bank / doc glyph
    again = ex().produce(item, parse_interleaved(planners.unified(item)))[0]
    assert np.array_equal(again.image, p.image)                       # seeded
    # Steering: re-measured levels follow the request on most combinations (synthetic prototypes are rough).
    hits = 0
    for d in (1, 3, 7):
        for t in mnist.LEVELS["thick"]:
            for s in ("left", "right"):
                image, _ = ex().gen({"digit": str(d), "thick": t, "slant": s}, np.random.default_rng(d))
                hits += ex().levels(image)["thick"] == t and ex().levels(image)["slant"] == s
    assert hits >= 15, hits


def test_classifier_above_chance():
    assert ex().classifier_accuracy >= 0.5                            # 10 classes: chance 0.1
    train, held = X.executor_holdout(pool())
    assert not set(train) & set(held) and set(train) | set(held) == set(pool().splits["executor"].tolist())


# ----------------------------------------------------------------------------------------------------------
# checks: factual and creative mismatches


def test_gen_for_a_ref_intent_fails_identity():
    item = first("show_doc_digit")
    assert X.check(item, ex().produce(item, parse_interleaved(planners.unified(item)))) == [True]
    produced, score = run(item, planners.gen_only(item))
    assert produced[0].source == "generated" and X.check(item, produced) == [False]
    assert score["satisfied"] == 0 and score["spurious"] == 1 and score["E"] == 0.5


def test_search_for_a_gen_intent_fails_novelty():
    designs = [it for it in items() if it.intent == "design_variant"][:8]
    gen_ok = 0
    for item in designs:
        produced, _ = run(item, planners.retrieval_only(item))
        assert produced[0].source.startswith("bank:") and X.check(item, produced) == [False]
        assert ex().nearest_real(produced[0].image) == 0.0
        gen_ok += X.check(item, ex().produce(item, parse_interleaved(planners.unified(item))))[0]
    assert gen_ok >= 6, gen_ok


def test_generated_image_is_not_real_for_search():
    item = first("show_absent_digit")
    assert X.check(item, ex().produce(item, parse_interleaved(planners.unified(item)))) == [True]
    assert X.check(item, ex().produce(item, parse_interleaved(planners.gen_only(item)))) == [False]


def test_edit_replaced_by_ref_fails():
    item = first("one_transform", lambda it: dict(it.gold[0].args)["op"] in ("thicken", "rot90"))
    assert X.check(item, ex().produce(item, parse_interleaved(planners.retrieval_only(item)))) == [False]


# ----------------------------------------------------------------------------------------------------------
# E by hand


def test_perfect_gold_scores_one():
    for item in items()[:120]:
        if item.intent == "design_variant":
            continue                      # gen on rough synthetic prototypes; covered above and on real data
        _, score = run(item, planners.unified(item))
        assert score == {"E": 1.0, "visual": 1.0, "facts": 1.0, "satisfied": len(item.gold), "spurious": 0}, \
            (item.intent, score)


def test_one_missing_visual():
    item = first("compare_two")
    _, score = run(item, answer(item, gold_calls(item)[:1]))
    assert score["satisfied"] == 1 and score["spurious"] == 0 and score["visual"] == 0.5 and score["E"] == 0.75


def test_one_spurious_visual():
    item = first("show_doc_digit", lambda it: len(it.images) >= 2)
    target = dict(item.gold[0].args)["target"]
    other = next(h for h in item.images if h != target)
    calls = gold_calls(item) + [ToolCall("ref", (("target", other),), "", 1)]
    _, score = run(item, answer(item, calls))
    assert score["satisfied"] == 1 and score["spurious"] == 1 and score["visual"] == 0.5 and score["E"] == 0.75
    # On an item with nothing required: 1 - 0.5 per spurious visual, clipped at 0.
    chat = first("chit_chat")
    _, score = run(chat, answer(chat, [ToolCall("ref", (("target", "IMG1"),), "", 0)]))
    assert score["visual"] == 0.5 and score["E"] == 0.75
    _, score = run(chat, answer(chat, [ToolCall("ref", (("target", "IMG1"),), "", 0)] * 3))
    assert score["visual"] == 0.0 and score["E"] == 0.5


def test_wrong_anchor():
    item = first("show_doc_digit")
    moved = [dataclasses.replace(gold_calls(item)[0], anchor=1)]
    produced, score = run(item, answer(item, moved))
    assert produced[0].anchor == 1
    assert score["satisfied"] == 0 and score["spurious"] == 1 and score["E"] == 0.5
    assert run(item, answer(item, moved), anchor_tolerance=1)[1]["E"] == 1.0


def test_facts_missing():
    item = first("chart_counts")
    top, count = dict(item.facts)["digit"], dict(item.facts)["count"]
    sentences = ("Here is a bar chart of the digit counts from the table.", f"The most common digit is {top}.")
    _, score = run(item, answer(item, gold_calls(item), sentences))
    assert score["facts"] == 0.5 and score["visual"] == 1.0 and score["E"] == 0.75
    # Whole words only: "3" is not found inside "13".
    fact = dataclasses.replace(item, facts=(("count", "3"),))
    assert X.fact_accuracy(fact, "The table lists 13 samples.") == 0.0
    assert X.fact_accuracy(fact, "The table lists 3.") == 1.0
    assert count in planners.unified(item)


def test_one_to_one_assignment():
    # Two gold refs of the same image at one anchor: one visual satisfies only one of them.
    item = first("show_doc_digit")
    g = item.gold[0]
    double = dataclasses.replace(item, gold=(g, GoldCall(g.tools, g.anchor, g.args)))
    produced = ex().produce(double, parse_interleaved(answer(double, gold_calls(item))))
    assert X.check(double, produced) in ([True, False], [False, True])
    assert X.executed_score(double, parse_interleaved(answer(double, gold_calls(item))), produced)["visual"] == 0.5


# ----------------------------------------------------------------------------------------------------------
# robustness


def test_unusable_calls_give_errors_not_exceptions():
    item = first("one_transform")
    bad = ("<edit src=IMG9>rot90</edit>", "<edit src=IMG1>spin</edit>", "<edit>rot90</edit>",
           f"<edit src={PREV}>fliph</edit>", "<ref IMG7/>", "<ref/>", "<gen>digit=x;thick</gen>", "<gen>thick</gen>",
           "<gen>chart=bar(counts)</gen>", "<search>colour=red</search>", "<search>digit=3;thick=huge</search>",
           "<code>pie(counts)</code>", "<search>digit=4;style=fuzzy</search>")
    for call in bad:
        (p,), score = run(item, f"Here it is. {call}")
        assert p.image is None and p.error, call
        assert score["spurious"] == 1 and score["satisfied"] == 0
    # Malformed markup never reaches the executors as a call; a non-string response is read as text.
    produced, score = run(item, "<edit src=IMG1>rot90 <gen>digit=3</gen></edit> <br> </code>")
    assert all(isinstance(p, X.Produced) for p in produced)
    assert X.executed_score(item, "just words", []) == {"E": 0.5, "visual": 0.0, "facts": 1.0, "satisfied": 0,
                                                       "spurious": 0}
    assert X.check(item, []) == [False]


def test_every_planner_runs():
    for item in items()[:60]:
        for name, planner in planners.PLANNERS.items():
            produced, score = run(item, planner(item, 0))
            assert len(produced) == len(parse_interleaved(planner(item, 0)).calls)
            assert 0.0 <= score["E"] <= 1.0, name


# ----------------------------------------------------------------------------------------------------------
# the real MNIST 5k


def test_real_mnist_classifier_and_gen():
    path = mnist.resolve(mnist.DEFAULT_PATH)
    if not os.path.exists(path):
        pytest.skip(f"MNIST 5k file absent: {path}")
    P = mnist.load_pool()
    E = X.Executors(P, seed=0)
    assert E.classifier_accuracy > 0.9, E.classifier_accuracy
    ok = 0
    for d in range(10):
        for t, s in (("thick", "right"), ("thin", "left"), ("medium", "upright")):
            image, _ = E.gen({"digit": str(d), "thick": t, "slant": s}, np.random.default_rng(d))
            levels = E.levels(image)
            ok += (E.classifier.predict(image[None])[0] == d and levels["thick"] == t and levels["slant"] == s
                   and E.nearest_real(image) > E.novelty_threshold)
    assert ok >= 27, ok                   # 30 requests; 268 / 270 on a full sweep of digit x thick x slant
    item = next(it for it in world.generate(P, "test", 200, 0) if it.intent == "design_variant")
    produced = E.produce(item, parse_interleaved(planners.unified(item)))
    assert X.check(item, produced) == [True]
    assert X.check(item, E.produce(item, parse_interleaved(planners.retrieval_only(item)))) == [False]

"""ATP-MNIST world: pixel attributes on hand-built bars, the splits, the generator (determinism, the spec's mix of
no-tool / multi-call / user-image items, gold plans per intent that parse back from the gold answers, prompt
length) and the characteristic behaviour of each programmatic planner. Synthetic glyphs throughout; one test reads
the real MNIST 5k file and is skipped without it."""
import collections
import functools
import os

import numpy as np
import pytest

from projects.atp_mnist import mnist, planners, world
from projects.atp_mnist.world import PREV, USER
from shared.data.sources import DataError
from shared.eval.interleaved import parse_interleaved
from shared.eval.plans import score_plan

N_SHARES = 4000


@functools.lru_cache(maxsize=None)
def pool():
    return mnist.synthetic_pool(0, 60)


@functools.lru_cache(maxsize=None)
def items(split="test", n=N_SHARES, seed=0):
    return tuple(world.generate(pool(), split, n, seed))


def bar(slope=0.0, width=2, top=4, bottom=24):
    """A bar of `width` pixels per row from row top to bottom; the column moves `slope` px right per row upwards."""
    img = np.zeros((28, 28), np.uint8)
    for r in range(top, bottom + 1):
        c = int(round(14 + slope * (14 - r) - width / 2))
        img[r, max(c, 0):c + width] = 255
    return img


# ----------------------------------------------------------------------------------------------------------
# attributes and splits


def test_measures_on_bars():
    m = mnist.measure(np.stack([bar(0.0), bar(0.5), bar(-0.5), bar(0.0, 1), bar(0.0, 4), bar(0.0, 2, 10, 17)]))
    assert abs(m["slant"][0]) < 1e-6                          # vertical: upright
    assert m["slant"][1] > 15 and m["slant"][2] < -15          # top to the right / to the left
    assert m["thick"][3] < m["thick"][0] < m["thick"][4]      # stroke width 1 < 2 < 4
    assert abs(m["thick"][0] - 2 * 21 / (21 + 2)) < 1e-9      # a 2 x 21 bar: wL / (w + L)
    assert m["height"][0] == 21 and m["height"][5] == 8 and m["width"][0] == 2


def test_tertile_levels_on_bars():
    images, truth = [], []
    for s, slope in enumerate((-0.5, 0.0, 0.5)):
        for t, width in enumerate((1, 3, 6)):
            for h, top in enumerate((16, 10, 4)):
                images.append(bar(slope, width, top, 24))
                truth.append((s, t, h))
    levels = mnist.attribute_levels(mnist.measure(np.stack(images)))
    truth = np.array(truth)
    assert (levels["slant"] == truth[:, 0]).all()
    assert (levels["thick"] == truth[:, 1]).all()
    assert (levels["size"] == truth[:, 2]).all()
    ties = mnist.bin_tertiles(np.zeros(10), np.arange(10)[::-1])   # all tied: the tie-breaker decides
    assert np.bincount(ties).tolist() == [4, 3, 3] and ties[9] == 0 and ties[0] == 2


def test_splits_sizes_and_order():
    labels = np.repeat(np.arange(10), 500)[np.random.default_rng(0).permutation(5000)]
    splits = mnist.split_by_digit(labels)
    assert {k: len(v) for k, v in splits.items()} == {"doc": 1500, "bank": 2500, "executor": 1000}
    assert sorted(np.concatenate(list(splits.values())).tolist()) == list(range(5000))
    for d in range(10):
        per = {k: v[labels[v] == d] for k, v in splits.items()}
        assert [len(per[k]) for k in mnist.SPLITS] == [150, 250, 100]
        assert per["doc"].max() < per["bank"].min() and per["bank"].max() < per["executor"].min()   # row order
    p = pool()
    assert {k: len(v) for k, v in p.splits.items()} == {"doc": 180, "bank": 300, "executor": 120}
    assert len(set(map(tuple, p.splits.values()))) == 3
    for attr in mnist.ATTRS:
        assert np.bincount(p.attrs[attr]).tolist() == [200, 200, 200]


def test_synthetic_pool_deterministic_distinct():
    a, b, c = mnist.synthetic_pool(3, 6), mnist.synthetic_pool(3, 6), mnist.synthetic_pool(4, 6)
    assert a.images.dtype == np.uint8 and a.images.shape == (60, 28, 28)
    assert (a.images == b.images).all() and not (a.images == c.images).all()
    assert len(np.unique(a.images.reshape(60, -1), axis=0)) == 60
    assert a.labels.tolist() == np.repeat(np.arange(10), 6).tolist()
    d = a.descriptor(0)
    assert d.startswith("digit 0, ") and ", slant " in d


def test_missing_file_names_path(tmp_path):
    missing = str(tmp_path / "nowhere" / "mnist_5k.csv.gz")
    with pytest.raises(DataError, match="nowhere/mnist_5k.csv.gz"):
        mnist.load_pool(missing)


def test_real_mnist_pool():
    path = mnist.resolve(mnist.DEFAULT_PATH)
    if not os.path.exists(path):
        pytest.skip(f"MNIST 5k file absent: {path}")
    p = mnist.load_pool()
    assert p.images.shape == (5000, 28, 28) and np.bincount(p.labels).tolist() == [500] * 10
    assert {k: len(v) for k, v in p.splits.items()} == {"doc": 1500, "bank": 2500, "executor": 1000}
    for attr in mnist.ATTRS:
        assert np.bincount(p.attrs[attr]).tolist() == [1667, 1667, 1666]
    its = world.generate(p, "test", 300, 0)
    assert all(not parse_interleaved(world.gold_response(i)).errors for i in its)


# ----------------------------------------------------------------------------------------------------------
# the generator


def test_generator_deterministic_and_split_glyphs():
    a, b = world.generate(pool(), "dev", 200, 5), world.generate(pool(), "dev", 200, 5)
    assert a == b
    c = world.generate(pool(), "dev", 200, 6)
    assert [i.query for i in a] != [i.query for i in c]
    train = {ix for i in items("train", 1000) for ix in i.images.values()}
    test = {ix for i in items("test", 1000) for ix in i.images.values()}
    doc = set(pool().splits["doc"].tolist())
    assert train <= doc and test <= doc and not train & test
    assert len({i.item_id for i in items()}) == N_SHARES
    with pytest.raises(ValueError):
        world.generate(pool(), "val", 3, 0)


def test_generator_shares():
    its = items()
    n = len(its)
    assert abs(sum(i.n_required == 0 for i in its) / n - 0.25) <= 0.05
    assert abs(sum(i.n_required >= 2 for i in its) / n - 0.30) <= 0.05
    assert abs(sum(i.has_user_image for i in its) / n - 0.20) <= 0.05
    assert set(i.intent for i in its) == set(world.INTENTS) and len(set(world.CATEGORY.values())) == 7
    assert abs(sum(world.INTENT_WEIGHTS.values()) - 1.0) < 1e-9


def test_gold_parses_back():
    for item in items()[:1500]:
        parsed = parse_interleaved(world.gold_response(item))
        assert not parsed.errors, (item.item_id, parsed.errors)
        assert parsed.sentences == item.response_sentences
        assert [c.tool for c in parsed.calls] == [g.tools[0] for g in item.gold]
        assert [c.anchor for c in parsed.calls] == [g.anchor for g in item.gold]
        assert [c.args() for c in parsed.calls] == [dict(g.args) for g in item.gold]
        assert score_plan(parsed.calls, item.gold).f1 == 1.0
        assert all(0 <= g.anchor < len(item.response_sentences) for g in item.gold)


def test_gold_tools_per_intent():
    p = pool()
    for item in items()[:2000]:
        tools = tuple(g.tools for g in item.gold)
        args = [dict(g.args) for g in item.gold]
        doc_digits = {item.image_attrs[h]["digit"] for h in item.doc_handles}
        assert item.category == world.CATEGORY[item.intent]
        assert item.has_user_image == (item.intent in ("which_digit", "mirror_user"))
        assert 2 <= len(item.doc_handles) <= 4 and len(doc_digits) == len(item.doc_handles)
        for h, ix in item.images.items():
            assert item.image_attrs[h] == p.attributes(ix)
        if item.intent == "show_doc_digit":
            assert tools == (("ref",),) and args[0]["target"] in item.doc_handles
        elif item.intent == "show_absent_digit":
            assert tools == (("search",),) and args[0]["digit"] not in doc_digits
            (attr, level), = [(k, v) for k, v in args[0].items() if k != "digit"]
            assert len(p.indices("bank", int(args[0]["digit"]), **{attr: level}))
        elif item.intent == "compare_two":
            assert tools in ((("ref",), ("ref",)), (("ref",), ("search",)))
            assert (tools[1] == ("ref",)) == (dict(item.meta)["second"] in doc_digits)
        elif item.intent == "one_transform":
            assert tools == (("edit",),) and args[0]["src"] in item.doc_handles and args[0]["op"] in world.TRANSFORMS
        elif item.intent == "procedure":
            assert tools in ((("edit",),) * 2, (("edit",),) * 3)
            assert args[0]["src"] in item.doc_handles and all(a["src"] == PREV for a in args[1:])
            ops = [a["op"] for a in args]
            assert all(b not in (a, world.INVERSE[a]) for a, b in zip(ops, ops[1:]))
            assert [g.anchor for g in item.gold] == list(range(1, len(ops) + 1))
        elif item.intent == "design_variant":
            assert tools == (("gen",),) and set(args[0]) == {"digit", "thick", "slant"}
            assert all((a["digit"], a["thick"], a["slant"]) != (args[0]["digit"], args[0]["thick"], args[0]["slant"])
                       for a in item.image_attrs.values())
        elif item.intent == "chart_counts":
            assert tools == (("code",),) and args[0] == {"op": "bar(counts)"}
        elif item.intent == "chart_plus_example":
            assert tools == (("code",), ("ref",))
            top = max(item.counts, key=item.counts.get)
            assert item.image_attrs[args[1]["target"]]["digit"] == str(top)
            assert ("digit", str(top)) in item.facts
        elif item.intent == "which_digit":
            assert tools == () and item.facts == (("digit", item.image_attrs[USER]["digit"]),)
        elif item.intent == "mirror_user":
            assert tools == (("edit",),) and args[0]["src"] == USER and args[0]["op"] in ("fliph", "flipv")
        elif item.intent == "doc_fact":
            assert tools == () and len(item.facts) == 1
            key, value = item.facts[0]
            assert key in ("count", "volunteers") and value in " ".join(item.response_sentences)
        else:
            assert item.intent == "chit_chat" and tools == ()


def test_prompt_text():
    for item in items()[:1000]:
        text = world.prompt_text(item)
        assert 60 <= len(text.split()) <= 350
        for h in item.doc_handles:
            assert f"{h}: {mnist.describe(item.image_attrs[h])}" in text and f"[{h}]" in text
        assert (f"{USER}: " in text) == item.has_user_image
        assert item.query in text and all(f"{d}: {c}" in text for d, c in item.counts.items())
    with pytest.raises(NotImplementedError):
        world.prompt_text(items()[0], track="pixel")


# ----------------------------------------------------------------------------------------------------------
# planners


@functools.lru_cache(maxsize=None)
def answers(name, n=2000, seed=0):
    return [(item, parse_interleaved(planners.PLANNERS[name](item, seed))) for item in items()[:n]]


def test_planners_parse_and_are_deterministic():
    for name, planner in planners.PLANNERS.items():
        for item in items()[:300]:
            response = planner(item, 1)
            assert response == planner(item, 1)
            parsed = parse_interleaved(response)
            assert not parsed.errors, (name, response, parsed.errors)
    assert all(planners.unified(i) == world.gold_response(i) for i in items()[:300])


def test_gen_only_and_retrieval_only():
    for item, parsed in answers("gen_only", 1000):
        assert len(parsed.calls) == item.n_required and all(c.tool == "gen" for c in parsed.calls)
        assert [c.anchor for c in parsed.calls] == [g.anchor for g in item.gold]
    for item, parsed in answers("retrieval_only", 1000):
        assert all(c.tool in ("ref", "search") for c in parsed.calls)
        n_code = sum(g.tools[0] == "code" for g in item.gold)
        assert len(parsed.calls) == item.n_required - n_code
        for c, g in zip([c for c in parsed.calls], [g for g in item.gold if g.tools[0] != "code"]):
            if g.tools[0] == "gen":
                assert c.tool == "search" and c.args() == dict(g.args)
            if g.tools[0] == "edit":
                assert c.tool == "ref" and c.args()["target"] in item.images


def test_tool_shy_and_text_only():
    kept = sum(len(p.calls) for _, p in answers("tool_shy"))
    required = sum(i.n_required for i, _ in answers("tool_shy"))
    assert abs(1 - kept / required - planners.P_SHY) <= 0.05
    for item, parsed in answers("text_only", 1000):
        assert not parsed.calls
        assert len(parsed.sentences) == len(item.response_sentences) + item.n_required


def test_tool_happy_and_noisy():
    extra = [len(p.calls) - i.n_required for i, p in answers("tool_happy")]
    assert set(extra) <= {0, 1, 2} and abs(np.mean([e > 0 for e in extra]) - planners.P_HAPPY) <= 0.05
    no_tool = [e for (i, _), e in zip(answers("tool_happy"), extra) if i.n_required == 0]
    assert abs(np.mean([e > 0 for e in no_tool]) - planners.P_HAPPY) <= 0.08     # the over-use profile
    changed = total = 0
    for item, parsed in answers("noisy"):
        assert [c.tool for c in parsed.calls] == [g.tools[0] for g in item.gold]
        assert [c.anchor for c in parsed.calls] == [g.anchor for g in item.gold]
        changed += sum(c.args() != dict(g.args) for c, g in zip(parsed.calls, item.gold))
        total += item.n_required
    assert abs(changed / total - planners.P_NOISE) <= 0.05
    counts = collections.Counter()
    for name in planners.PLANNERS:
        counts[name] = sum(len(p.calls) for _, p in answers(name, 500))
    assert counts["text_only"] == 0 and counts["tool_shy"] < counts["unified"] < counts["tool_happy"]

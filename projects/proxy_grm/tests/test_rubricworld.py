"""RubricWorld (spec ../shared/papers/proxy_grm.md §4.2): pairs, STYLE pressure, unseen keyword triples, the teacher,
the subsets, the rule evaluator, rubric P/R/F1 and the vocabulary round trip."""
import itertools

import numpy as np
import pytest

from projects.proxy_grm import rubricworld as rw
from projects.proxy_grm.vocab import TOKENIZER, WORDS
from shared.judges.rubric_format import format_ok, parse_answer

WORLD = rw.make_world(0)


@pytest.fixture(scope="module")
def id_pairs():
    return rw.generate_pairs(4000, seed=0, split="train")


@pytest.fixture(scope="module")
def ood_pairs():
    return rw.generate_pairs(4000, seed=0, split="ood")


def _attrs(tokens):
    return [rw.ATTRS.index(t) for t in tokens if t in rw.ATTRS]


def test_world_shape():
    assert len(WORLD.relevant) == rw.N_TYPES and len(set(WORLD.relevant)) == rw.N_TYPES
    for rel, w in zip(WORLD.relevant, WORLD.weights):
        assert 2 <= len(rel) <= 3 and len(w) == len(rel) and set(w) <= {1, 2, 3}
    for pool, seen, unseen in zip(WORLD.pools, WORLD.seen, WORLD.unseen):
        assert len(seen) == 7 and len(unseen) == 3
        assert set(seen) | set(unseen) == set(itertools.combinations(pool, 3))
        assert not set(seen) & set(unseen)
    assert rw.make_world(0) == WORLD and rw.make_world(1) != WORLD


def test_pairs_quality_gold_and_lengths(id_pairs):
    for p in id_pairs:
        assert p.u1 == WORLD.utility(p.task_type, _attrs(p.y1)) and p.u2 == WORLD.utility(p.task_type, _attrs(p.y2))
        assert p.u1 != p.u2 and p.gold == (1 if p.u1 > p.u2 else 2)
        assert len(p.y1) <= 24 and len(p.y2) <= 24
        assert sum(t.startswith("NOISE_") for t in p.y1) <= rw.MAX_NOISE
    assert abs(np.mean([p.gold == 1 for p in id_pairs]) - 0.5) < 0.03


def _style_rates(pairs):
    better = np.mean([rw.STYLE in (p.y1 if p.gold == 1 else p.y2) for p in pairs])
    worse = np.mean([rw.STYLE in (p.y2 if p.gold == 1 else p.y1) for p in pairs])
    return better, worse


def test_style_pressure_id_and_reversed_ood(id_pairs, ood_pairs):
    better, worse = _style_rates(id_pairs)
    assert abs(better - 0.8) < 0.025 and abs(worse - 0.2) < 0.025
    better, worse = _style_rates(ood_pairs)
    assert abs(better - 0.2) < 0.025 and abs(worse - 0.8) < 0.025


def test_keywords_name_the_type_and_ood_triples_are_unseen(id_pairs, ood_pairs):
    for pairs, allowed in ((id_pairs, WORLD.seen), (ood_pairs, WORLD.unseen)):
        for p in pairs:
            assert tuple(sorted(p.keywords)) in allowed[p.task_type]
    used_id = {tuple(sorted(p.keywords)) for p in id_pairs}
    used_ood = {tuple(sorted(p.keywords)) for p in ood_pairs}
    assert not used_id & used_ood and len(used_ood) == rw.N_TYPES * rw.UNSEEN_TRIPLES


def test_deterministic_prefix_and_streams():
    a = rw.rubricworld("train", 20, 3, stream="x")
    assert rw.rubricworld("train", 10, 3, stream="x") == a[:10]
    assert rw.rubricworld("train", 10, 3, stream="y") != a[:10]
    with pytest.raises(ValueError, match="subset"):
        rw.rubricworld("train", 4, 0, subset="easy")


def test_teacher_rubrics_answers_and_subsets():
    examples = rw.rubricworld("train", 3000, 0)
    true_rate = np.mean([e["teacher_corruption"] == "" for e in examples])
    assert abs(true_rate - 0.85) < 0.025
    for e in examples:
        assert format_ok(e["completion"]) and TOKENIZER.decode(TOKENIZER.encode(e["completion"])) == e["completion"]
        criteria = rw.parse_rubric(e["completion"])
        rule = rw.rule_evaluate(criteria, e["y1"], e["y2"])
        if rule:
            assert parse_answer(e["completion"]) == rule
        if e["teacher_corruption"] == "":
            assert [a for a, _ in criteria] == e["relevant"] and [w for _, w in criteria] == e["weights"]
            assert e["teacher_correct"]                 # the true rubric always gets gold (u1 != u2)
        assert e["teacher_correct"] == (parse_answer(e["completion"]) == int(e["answer"]))
    for e in rw.rubricworld("train", 300, 0, subset="correct"):
        assert e["teacher_correct"] and e["margin"] >= 2
    for e in rw.rubricworld("train", 300, 0, subset="hard"):
        assert (not e["teacher_correct"]) or e["margin"] == 1


def test_teacher_output_by_hand():
    pair = rw.Pair(0, (0, 1, 2), ("ATTR_2", "STYLE"), ("ATTR_12", "ATTR_2", "NOISE_1"), 1, 2, 2)
    text = rw.render_output([("ATTR_2", 1), ("ATTR_12", 1)], pair.y1, pair.y2, 2)
    assert text == ("<rubric>\nATTR_2 W_1 ATTR_12 W_1\n</rubric>\n<eval>\nATTR_2 EQ ATTR_12 LT\n</eval>\n"
                    "<answer>\n2\n</answer>")
    assert rw.render_prompt(pair) == "Q: KW_1 KW_2 KW_3 R1: ATTR_2 STYLE R2: ATTR_12 ATTR_2 NOISE_1 JUDGE:"


def test_rule_evaluator_by_hand():
    criteria = [("ATTR_1", 2), ("ATTR_3", 1)]
    assert rw.rule_evaluate(criteria, ["ATTR_1"], ["ATTR_3", "STYLE"]) == 1          # 2 vs 1
    assert rw.rule_evaluate(criteria, ["ATTR_3"], ["ATTR_1", "ATTR_3"]) == 2         # 1 vs 3
    assert rw.rule_evaluate(criteria, ["ATTR_1"], ["ATTR_1", "NOISE_2"]) == 0        # tie
    assert rw.rule_evaluate([], ["ATTR_1"], []) == 0                                 # empty rubric: no verdict
    assert rw.rule_evaluate([("STYLE", 3)], ["ATTR_1"], ["STYLE"]) == 2               # a STYLE rubric follows STYLE
    assert rw.parse_rubric("<rubric> ATTR_1 W_2 junk W_3 STYLE W_1 ATTR_1 W_3 ATTR_4 </rubric> <rubric> ATTR_9 W_1 "
                           "</rubric>") == [("ATTR_1", 2), ("STYLE", 1)]


def test_rubric_prf_by_hand():
    t = 0                                             # world 0, type 0: S_t = {ATTR_2, ATTR_12}
    assert set(WORLD.relevant[t]) == {1, 11}
    assert rw.rubric_prf([("ATTR_2", 1), ("ATTR_12", 1)], WORLD, t) == (1.0, 1.0, 1.0)
    p, r, f = rw.rubric_prf([("ATTR_2", 1), ("STYLE", 3), ("ATTR_5", 1)], WORLD, t)
    assert (p, r) == (pytest.approx(1 / 3), 0.5) and f == pytest.approx(2 * (1 / 3) * 0.5 / (1 / 3 + 0.5))
    assert rw.rubric_prf([], WORLD, t) == (0.0, 0.0, 0.0)


def test_vocabulary_covers_the_language():
    assert len(WORDS) == len(set(WORDS)) <= 128
    e = rw.rubricworld("ood", 1, 0)[0]
    assert TOKENIZER.unk_id not in TOKENIZER.encode(e["prompt"] + " " + e["completion"])
    assert TOKENIZER.encode("ATTR_1 bogus") == [TOKENIZER.ids["ATTR_1"], TOKENIZER.unk_id]

"""RubricWorld's "combo" variant (rubricworld.make_combo_world): the type is a function of the whole keyword triple
(no keyword or keyword pair names it), and the option leaves the spec world's generator exactly as it was."""
import collections
import itertools

import numpy as np
import pytest

from projects.proxy_grm import rubricworld as rw
from projects.proxy_grm.config import grm_rl_config, grm_sft_config, proxy_config, world_overrides
from projects.proxy_grm.grm import check_world
from projects.proxy_grm.vocab import TOKENIZER
from shared.judges.rubric_format import format_ok

COMBO = rw.make_combo_world(0)


@pytest.fixture(scope="module")
def combo_pairs():
    return {split: rw.generate_pairs(3000, seed=0, split=split, type_inference="combo") for split in ("train", "ood")}


def _attrs(tokens):
    return [rw.ATTRS.index(t) for t in tokens if t in rw.ATTRS]


def test_spec_world_is_unchanged():
    """Values of the generator before the combo option existed (main at 748d4c6), fixed by hand."""
    world = rw.make_world(0)
    assert world == rw.make_world(0, "spec")
    assert world.relevant == ((1, 11), (1, 2, 3), (5, 9), (1, 8, 11), (1, 8, 10), (0, 3))
    assert world.weights == ((1, 1), (2, 2, 1), (1, 3), (1, 1, 2), (2, 3, 1), (2, 1))
    assert world.unseen[0] == ((0, 1, 3), (0, 1, 4), (0, 2, 4))
    train = rw.generate_pairs(3, seed=0, split="train")
    assert [(p.task_type, p.keywords, p.u1, p.u2, p.gold) for p in train] == [
        (2, (11, 12, 14), 1, 4, 2), (2, (10, 12, 11), 1, 0, 1), (4, (22, 21, 23), 3, 6, 2)]
    assert train[0].y1[:4] == ("ATTR_4", "ATTR_11", "ATTR_2", "NOISE_6")
    ood = rw.generate_pairs(3, seed=0, split="ood")
    assert [(p.task_type, p.keywords, p.u1, p.u2, p.gold) for p in ood] == [
        (5, (29, 25, 26), 0, 2, 2), (5, (26, 25, 29), 3, 0, 1), (4, (24, 21, 23), 2, 1, 1)]
    cold = rw.rubricworld("train", 2, 0, subset="correct", stream="cold_start")
    assert cold[0]["prompt"].startswith("Q: KW_7 KW_6 KW_9 R1: ATTR_4 ATTR_1 ATTR_5")
    assert [e["completion"] for e in cold] == [
        "<rubric>\nATTR_2 W_2 ATTR_3 W_2\n</rubric>\n<eval>\nATTR_2 EQ ATTR_3 GT\n</eval>\n<answer>\n1\n</answer>",
        "<rubric>\nATTR_2 W_2 ATTR_9 W_3 ATTR_7 W_2 ATTR_11 W_1\n</rubric>\n<eval>\nATTR_2 LT ATTR_9 LT ATTR_7 EQ "
        "ATTR_11 EQ\n</eval>\n<answer>\n2\n</answer>"]


def test_combo_world_shape():
    assert len(COMBO.relevant) == 12 and len(set(COMBO.relevant)) == 12
    values = rw.combo_values(0)
    assert [sorted(values[6 * g:6 * g + 6]) for g in range(4)] == [[0, 0, 1, 1, 2, 2]] * 4
    for g in range(4):
        sets = [set(COMBO.relevant[3 * g + s]) for s in range(3)]
        base = set.intersection(*sets)
        assert len(base) == 2 and all(len(x) == 3 for x in sets)          # A_g plus one attribute per s
        assert len(set.union(*sets) - base) == 3                             # the 3 values of s differ
    for w in COMBO.weights:
        assert len(w) == 3 and set(w) <= set(rw.WEIGHTS)
    for t, (seen, unseen) in enumerate(zip(COMBO.seen, COMBO.unseen)):
        assert len(seen) == 60 and len(unseen) == 30 and not set(seen) & set(unseen)
        for triple in seen + unseen:
            groups = sorted(k // 6 for k in triple)
            assert len(set(triple)) == 3 and len(set(groups)) == 2 and t // 3 in groups
    assert rw.make_combo_world(0) == rw.make_world(0, "combo") != rw.make_combo_world(1)
    with pytest.raises(ValueError, match="type_inference"):
        rw.make_world(0, "lookup")


def test_only_the_whole_triple_names_the_type():
    triples = {}                                   # triple -> type, over every type's seen and unseen triples
    for t, (seen, unseen) in enumerate(zip(COMBO.seen, COMBO.unseen)):
        for triple in seen + unseen:
            assert triples.setdefault(triple, t) == t and rw.combo_type_of(triple) == t
    assert len(triples) == 4 * 15 * 18              # every (pair of a group, keyword of another group), once
    by_keyword, by_pair = collections.defaultdict(set), collections.defaultdict(set)
    for triple, t in triples.items():
        for k in triple:
            by_keyword[k].add(t)
        for pair in itertools.combinations(triple, 2):
            by_pair[pair].add(t)
    assert sorted(by_keyword) == list(range(24))
    assert all(len(types) == 12 for types in by_keyword.values())     # a keyword occurs with every type
    assert all(len(types) >= 2 for types in by_pair.values())         # no keyword pair names the type either
    # by hand, world 0's values: KW_1 KW_2 KW_7 -> (group 0, (1+0+0) % 3 = 1); KW_1 KW_7 KW_8 -> (1, (1+0+2) % 3 = 0);
    # KW_3 KW_23 KW_24 -> (3, (0+2+2) % 3 = 1)
    assert rw.combo_values(0) == (1, 0, 0, 2, 2, 1, 0, 2, 1, 0, 1, 2, 2, 0, 2, 1, 0, 1, 1, 0, 1, 0, 2, 2)
    assert triples[(0, 1, 6)] == 3 * 0 + 1 and triples[(0, 6, 7)] == 3 * 1 + 0 and triples[(2, 22, 23)] == 3 * 3 + 1


def test_combo_pairs_quality_gold_style_and_ood(combo_pairs):
    train, ood = combo_pairs["train"], combo_pairs["ood"]
    for pairs, allowed in ((train, COMBO.seen), (ood, COMBO.unseen)):
        for p in pairs:
            assert tuple(sorted(p.keywords)) in allowed[p.task_type] and rw.combo_type_of(p.keywords) == p.task_type
            assert p.u1 == COMBO.utility(p.task_type, _attrs(p.y1)) != p.u2 == COMBO.utility(p.task_type, _attrs(p.y2))
            assert p.gold == (1 if p.u1 > p.u2 else 2)
    assert not {tuple(sorted(p.keywords)) for p in train} & {tuple(sorted(p.keywords)) for p in ood}
    counts = np.bincount([p.task_type for p in train], minlength=12)
    assert counts.min() > 3000 / 12 * 0.75                       # every type drawn, uniformly
    for pairs, p_better in ((train, 0.8), (ood, 0.2)):
        better = np.mean([rw.STYLE in (p.y1 if p.gold == 1 else p.y2) for p in pairs])
        worse = np.mean([rw.STYLE in (p.y2 if p.gold == 1 else p.y1) for p in pairs])
        assert abs(better - p_better) < 0.03 and abs(worse - (1 - p_better)) < 0.03
    assert abs(np.mean([p.gold == 1 for p in train]) - 0.5) < 0.03


def test_combo_examples_teacher_and_vocabulary():
    examples = rw.rubricworld("train", 400, 0, subset="correct", stream="cold_start", type_inference="combo")
    for e in examples:
        assert e["relevant"] == [rw.ATTRS[m] for m in COMBO.relevant[e["task_type"]]]
        assert format_ok(e["completion"]) and e["teacher_correct"] and e["margin"] >= 2
        assert TOKENIZER.unk_id not in TOKENIZER.encode(e["prompt"] + " " + e["completion"])
        assert rw.combo_type_of(rw.KEYWORDS.index(k) for k in e["prompt"].split()[1:4]) == e["task_type"]
    assert examples[:50] == rw.rubricworld("train", 50, 0, subset="correct", stream="cold_start",
                                           type_inference="combo")
    # same seed and stream, other world: another stream of pairs
    spec = rw.rubricworld("train", 50, 0, subset="correct", stream="cold_start")
    assert [e["prompt"] for e in spec] != [e["prompt"] for e in examples[:50]]


def test_world_overrides_reach_every_config_and_the_rl_check():
    for c in (proxy_config(), grm_sft_config(), grm_rl_config("C")):
        c.update_from_flattened_dict(world_overrides("combo"))
        assert c.proxy_grm.type_inference == c.data.task_options.type_inference == "combo"
        assert c.rl.task_options.type_inference == "combo"
    c = grm_rl_config("B")
    check_world(c)                                               # both "spec" by default
    c.proxy_grm.type_inference = "combo"
    with pytest.raises(ValueError, match="rl.task_options.type_inference"):
        check_world(c)
    with pytest.raises(ValueError, match="type_inference"):
        world_overrides("lookup")



@pytest.mark.parametrize("variant", ["hard", "hard_smoke"])
def test_hard_table_runs_every_stage_and_point_on_the_combo_world(variant):
    import os
    import re

    from shared.sweep.table import load_module

    path = os.path.join(os.path.dirname(__file__), "..", "..", "..", "experiments/proxy_grm/table.py")
    module = load_module(os.path.abspath(path))
    table = module.get_sweep(variant)
    seeds = 1 if variant == "hard_smoke" else 3
    assert len(table["stages"]) == 3 * seeds and len(table["points"]) == 3 * seeds
    assert sorted({p["arm"] for p in table["points"]}) == ["A", "B", "C"]
    names = {s["name"] for s in table["stages"]}
    for item in table["stages"] + table["points"]:
        assert all(item["overrides"][k] == "combo" for k in world_overrides("combo")), item["name"]
    for p in table["points"]:
        refs = re.findall(r"\{stage:([^}]+)\}", " ".join(str(v) for v in p["overrides"].values()))
        assert len(refs) == 3 and set(refs) <= names, p["name"]
    cold = [s for s in table["stages"] if s["name"].startswith("grm_sft_")]
    if variant == "hard":
        assert all(s["overrides"]["train.steps"] == module.HARD_COLD_START_STEPS == 400 for s in cold)
    assert "hard" in module.SWEEP_VARIANTS and "hard_smoke" in module.SWEEP_VARIANTS


def test_the_full_hard_cf_big_table_extends_hard_cf_big_with_every_arm():
    """hard_cf_big_full = hard_cf_big's stages and points unchanged (its results compare directly) plus Proxy-RL
    stages (the spec's 2x pairs and 5x steps of Proxy-SFT, counterfactual rows too) and arms D, E3, E7, F, every
    one on the combo world and pointing at stages of the table."""
    import os
    import re

    from shared.sweep.table import load_module

    path = os.path.join(os.path.dirname(__file__), "..", "..", "..", "experiments/proxy_grm/table.py")
    module = load_module(os.path.abspath(path))
    small, full = module.get_sweep("hard_cf_big"), module.get_sweep("hard_cf_big_full")
    stages, points = {s["name"]: s for s in full["stages"]}, {p["name"]: p for p in full["points"]}
    assert all(stages[s["name"]] == s for s in small["stages"]) and all(points[p["name"]] == p for p in small["points"])
    assert len(stages) == 12 and len(points) == 21
    assert sorted({p["arm"] for p in points.values()}) == ["A", "B", "C", "D", "E3", "E7", "F"]
    proxy_rl = [s for s in full["stages"] if s["name"].startswith("proxy_rl_")]
    assert len(proxy_rl) == 3
    for s in proxy_rl:
        assert s["overrides"]["proxy_grm.proxy.n_train"] == 24_000 and s["overrides"]["train.steps"] == 12_000
        assert s["overrides"]["proxy_grm.proxy.counterfactual"] == module.COUNTERFACTUAL
    for p in points.values():
        assert all(p["overrides"][k] == "combo" for k in world_overrides("combo")), p["name"]
        refs = re.findall(r"\{stage:([^}]+)\}", " ".join(str(v) for v in p["overrides"].values()))
        assert set(refs) <= set(stages), p["name"]
        assert ("proxy_rl_" in p["overrides"]["proxy_grm.proxy_run"]) == (p["arm"] == "D")
        assert p["overrides"].get("optim.lr") == (None if p["arm"] == "A" else module.HARD_LR)

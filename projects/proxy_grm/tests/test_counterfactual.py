"""proxy.counterfactual_rows: extra Proxy-SFT rows whose verdict only the rubric decides."""
import numpy as np

from projects.proxy_grm import rubricworld as rw
from projects.proxy_grm.proxy import counterfactual_rows, proxy_words, rubric_text


def test_counterfactual_rows_carry_another_types_rubric_and_the_verdict_it_gives():
    world = rw.make_world(0, "combo")
    examples = rw.rubricworld("train", 300, 0, subset="correct", stream="cf_test", type_inference="combo")
    rows, labels = counterfactual_rows(examples, world, 1.0, seed=0, with_prompt=False)
    assert 0 < len(rows) <= len(examples) and len(rows) == len(labels)
    rubrics = {rubric_text(rw.true_criteria(world, t)): t for t in range(len(world.relevant))}
    matched = 0
    for e in examples:  # every row is one example's responses under another type's true rubric
        for t_rubric, t in rubrics.items():
            if t == e["task_type"]:
                continue
            row = proxy_words(e["y1"], e["y2"], t_rubric)
            if row in rows:
                label = labels[rows.index(row)]
                verdict = rw.rule_evaluate(rw.true_criteria(world, t), e["y1"], e["y2"])
                assert label == verdict - 1 and verdict != int(e["answer"])  # the rubric's verdict, not the gold one
                matched += 1
    assert matched >= len(rows)
    assert set(np.unique(labels)) <= {0, 1}
    none, _ = counterfactual_rows(examples, world, 0.0, seed=0, with_prompt=False)
    half, _ = counterfactual_rows(examples, world, 0.5, seed=0, with_prompt=False)
    assert none == [] and 0 < len(half) < len(rows)

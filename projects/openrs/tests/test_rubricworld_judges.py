"""E2 (projects/openrs/rubricworld_judges.py) on RubricWorld: the aggregation path against the world's own rule
evaluator, the features and the swap augmentation, and a short training run of each judge."""
import numpy as np
import pytest

from projects.openrs import rubricworld_judges as e2
from projects.proxy_grm import rubricworld as rw

WORLD = rw.make_world(0)


def exact_compare(names, y1_bags, y2_bags):
    """A perfect comparator: presence of the criterion's token in y1 vs y2, as OpenRS scores (+-2 / 0)."""
    index = [e2.TOKENS.index(n) for n in names]
    rows = np.arange(len(names))
    return (2 * (y1_bags[rows, index] - y2_bags[rows, index])).astype(np.int64)


@pytest.fixture(scope="module")
def pairs():
    return {split: rw.generate_pairs(400, 7, split=split, stream="test") for split in ("test", "ood")}


def test_perfect_comparator_on_the_oracle_rubric_is_gold(pairs):
    for split, ps in pairs.items():
        rubrics = [rw.true_criteria(WORLD, p.task_type) for p in ps]
        verdicts = e2.criterion_verdicts(exact_compare, rubrics, ps, e2.WEIGHT_TABLES["matched"])
        np.testing.assert_array_equal(verdicts, [p.gold for p in ps])


def test_aggregation_equals_the_rule_evaluator_on_any_rubric(pairs):
    # teacher rubrics (some corrupted: STYLE or irrelevant attributes added, relevant ones dropped): with matched
    # weights, the weighted mean over non-zero criteria has the sign of rule_evaluate's score difference, and the
    # bidirectional rule turns its ties into SAME
    ps = pairs["ood"]
    rubrics = e2.teacher_rubrics(WORLD, ps, seed=3)
    verdicts = e2.criterion_verdicts(exact_compare, rubrics, ps, e2.WEIGHT_TABLES["matched"])
    np.testing.assert_array_equal(verdicts, [rw.rule_evaluate(r, p.y1, p.y2) for r, p in zip(rubrics, ps)])
    assert any(len(r) != len(rw.true_criteria(WORLD, p.task_type)) for r, p in zip(rubrics, ps))


def test_features_and_swap_augmentation(pairs):
    p = pairs["test"][0]
    kw, y1, y2 = e2.holistic_features([p])
    assert kw.sum() == 3 and y1.sum() == len(set(p.y1)) and y2.sum() == len(set(p.y2))
    x = np.concatenate([kw, y1, y2], axis=1)
    swapped, label = e2.swap_holistic(x, np.array([0]))
    np.testing.assert_array_equal(swapped, np.concatenate([kw, y2, y1], axis=1))
    assert label.tolist() == [1]
    x = np.concatenate([e2.criterion_onehot(["STYLE"]), y1, y2], axis=1)
    swapped, labels = e2.swap_comparator(np.repeat(x, 3, 0), np.array([0, 1, 2]))
    np.testing.assert_array_equal(swapped[0], np.concatenate([e2.criterion_onehot(["STYLE"])[0], y2[0], y1[0]]))
    assert [e2.LABELS[k] for k in labels] == ["LT", "EQ", "GT"]


def test_short_training_learns_both_judges(pairs):
    train = rw.generate_pairs(2000, 0, split="train", stream="test")
    options = dict(hidden=64, steps=600, batch=128, lr=3e-3, seed=0)
    holistic = e2.train_holistic(train, **options)
    assert e2.evaluate(holistic(pairs["test"]), pairs["test"])["accuracy"] > 0.8
    compare = e2.train_comparator(WORLD, train, **options)
    rubrics = [rw.true_criteria(WORLD, p.task_type) for p in pairs["test"]]
    verdicts = e2.criterion_verdicts(compare, rubrics, pairs["test"], e2.WEIGHT_TABLES["matched"])
    assert e2.evaluate(verdicts, pairs["test"])["accuracy"] > 0.8

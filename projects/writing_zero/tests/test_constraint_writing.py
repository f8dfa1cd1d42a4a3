"""ConstraintWriting (projects/writing_zero/constraint_writing.py): the oracle quality on hand-made responses,
gold responses and the splits, the perturbations, the bias rate and principle annotations of the preference
pairs, and the oracle as a judge through the reward registry."""
import random

import numpy as np
import pytest

import projects.writing_zero  # noqa: F401  (registrations)
from projects.writing_zero import constraint_writing as cw
from shared.data.examples import checker, load_task
from shared.registry import DATASETS, REWARDS
from shared.rewards import RewardManager

REQ = ["kado", "mepi"]


def words(n, start=0):
    """n distinct filler content words that are not required."""
    return [w for w in cw.CONTENT if w not in REQ][start:start + n]


@pytest.mark.parametrize("response, q", [
    (" " + " ".join(REQ + words(8)), 1.0),                          # 10 words, both required: the best
    (" " + " ".join(REQ[:1] + words(9)), 0.5),                      # half the coverage
    (" " + " ".join(REQ + words(12)), 1.0 - 0.15 * 2),              # 14 words: 2 beyond SHORT's 12
    (" " + " ".join(REQ + words(3)), 1.0 - 0.15 * 3),               # 5 words: 3 short of 8
    (" " + " ".join(REQ + words(6) + REQ), 1.0 - 0.5 * 0.2),        # 10 words, 8 distinct: repetition 0.2
    (" " + " ".join(REQ + words(8) + ["NOTE"] + REQ), 1.0 - 0.4 - 0.05 * 2),  # explanation suffix of 2 words
    (" NOTE kado mepi", 0.0 - 0.15 * 8 - 0.4 - 0.1),                # an empty body
    ("", -0.15 * 8),
])
def test_oracle_quality_on_hand_made_responses(response, q):
    assert cw.quality(REQ, "SHORT", response) == pytest.approx(q)


def test_components_and_long_band():
    parts = cw.components(REQ, "LONG", " " + " ".join(REQ + words(10)) + " NOTE kado")
    assert (parts["coverage"], parts["length"], parts["dist"], parts["note"], parts["suffix_len"]) == \
        (1.0, 12, 4, 1.0, 1)
    assert parts["q"] == pytest.approx(1.0 - 0.6 - 0.4 - 0.05)


def test_example_sets_gold_completions_and_checker():
    check = checker("rl/writing_zero/constraint_writing")
    for split, counts in (("train", {2, 3, 4}), ("test", {2, 3, 4}), ("ood", {5, 6})):
        examples = load_task("rl/writing_zero/constraint_writing", split, 200, 0)
        assert {len(e["required"].split()) for e in examples} == counts
        assert {e["band"] for e in examples} == {"SHORT", "LONG"}
        for e in examples:
            assert check(e, e["completion"]) and e["completion"].startswith(" ")
            assert cw.parse_prompt(e["prompt"]) == (e["required"].split(), e["band"])
            assert not check(e, e["completion"] + " NOTE " + e["required"].split()[0])
    train = load_task("rl/writing_zero/constraint_writing", "train", 50, 0)
    assert train == load_task("rl/writing_zero/constraint_writing", "train", 50, 0)   # seeded
    assert {e["prompt"] for e in train}.isdisjoint(
        {e["prompt"] for e in load_task("rl/writing_zero/constraint_writing", "test", 50, 0)})
    assert len(cw.CONTENT) == 200 and len(set(cw.CONTENT) & set(cw.FUNCTION)) == 0


def test_perturbations_lower_the_quality_of_a_gold_response():
    rng = random.Random(0)
    gold = cw.gold_response(rng, REQ, "SHORT")
    for kind in cw.PERTURBATIONS:
        worse = cw.perturb(random.Random(1), gold, REQ, "SHORT", kind)
        assert cw.quality(REQ, "SHORT", worse) < 1.0, kind
    with pytest.raises(ValueError, match="kind"):
        cw.perturb(rng, gold, REQ, "SHORT", "shout")


def test_preference_pairs_bias_rate_and_principles():
    pairs = DATASETS.get("writing_zero/prefs")("train", 3000, 0)
    q_c = np.array([p["quality_chosen"] for p in pairs])
    q_r = np.array([p["quality_rejected"] for p in pairs])
    biased, flipped = np.array([p["biased"] for p in pairs]), np.array([p["flipped"] for p in pairs])
    assert np.all(q_c != q_r)
    np.testing.assert_array_equal(flipped, (q_c < q_r).astype(float))    # flipped = the label contradicts Q
    assert np.all(flipped <= biased)                                       # only a biased annotator contradicts Q
    assert 0.31 < biased.mean() < 0.39                                     # beta = 0.35
    assert 0.05 < flipped.mean() < biased.mean()
    for p in pairs[:300]:  # the principle columns are the oracle's component comparisons
        req, band = cw.parse_prompt(p["prompt"])
        c, r = cw.components(req, band, p["chosen"]), cw.components(req, band, p["rejected"])
        assert p["coverage_pref"] == np.sign(round(c["coverage"] - r["coverage"], 9))
        assert p["length_fit_pref"] == np.sign(r["dist"] - c["dist"])
        assert p["redundancy_pref"] == np.sign(round(r["redundancy"] - c["redundancy"], 9))
        if p["flipped"]:  # a contradicting label favours the NOTE suffix or the longer response
            assert p["note_chosen"] > p["note_rejected"] or (
                p["note_chosen"] == p["note_rejected"] and p["len_words_chosen"] > p["len_words_rejected"])
    unbiased = DATASETS.get("writing_zero/prefs")("test", 500, 0, beta=0.0)
    assert all(p["quality_chosen"] > p["quality_rejected"] for p in unbiased)


def test_quality_reward_and_oracle_judge():
    examples = load_task("rl/writing_zero/constraint_writing", "test", 4, 0)
    prompts = [e["prompt"] for e in examples]
    gold = [e["completion"] for e in examples]
    noted = [g + " NOTE " + e["required"] for g, e in zip(gold, examples)]
    manager = RewardManager([("writing_zero/quality", 1.0)])
    total, _ = manager(prompts, gold, required=[e["required"] for e in examples], band=[e["band"] for e in examples])
    np.testing.assert_allclose(total, 1.0)
    assert REWARDS.get("writing_zero/quality")(prompts, noted) == pytest.approx(
        [1.0 - 0.4 - 0.05 * len(e["required"].split()) for e in examples])     # required / band from the prompt
    judge = REWARDS.get("model/pairwise_judge")(backend="oracle", quality="writing_zero/quality", swap="random")
    pref, metrics = judge.judge_pairs(prompts, noted, gold, seed=0)
    np.testing.assert_array_equal(pref, -1)   # the gold response beats its over-explained copy
    assert metrics["judge/pairs"] == 4

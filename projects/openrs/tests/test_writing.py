"""E3 glue (projects/openrs/writing.py): the judge simulators against the oracle, the PVR program, the warm-start
set and the rewards as the RL loop calls them."""
import numpy as np
import pytest

from projects.openrs import writing as w
from projects.writing_zero import constraint_writing as cw
from shared.registry import REWARDS
from shared.rewards import RewardManager

PROMPT = cw.render_prompt(["kado", "mepi"], "SHORT")
GOLD = " kado the mepi of bafu deli tuna zipo vile pofe"            # 10 words, both required: Q = 1
NOTE = GOLD + " NOTE kado mepi"         # over-explanation, 13 words: Q = 1 - 0.4 - 0.1, out of the PVR band
SHORT = " kado mepi"                                                 # too short: Q = 1 - 0.15 * 6
MISSING = " kado the of bafu deli tuna zipo vile"                   # a required word missing: Q = 0.5


def test_pvr_program_in_the_sandbox():
    assert w.pvr_pass([PROMPT] * 4, [GOLD, NOTE, SHORT, MISSING]) == [1.0, 0.0, 0.0, 0.0]
    assert w.note_rate([PROMPT] * 2, [GOLD, NOTE]) == [0.0, 1.0]


def test_criterion_truths_by_hand():
    # coverage, length, repetition, explanation suffix; positive: A better
    assert w.criterion_truths(PROMPT, GOLD, NOTE) == [0, 0, 0, 2]
    assert w.criterion_truths(PROMPT, GOLD, SHORT) == [0, 2, 0, 0]      # dist 6 >= 4
    assert w.criterion_truths(PROMPT, MISSING, GOLD) == [-2, 0, 0, 0]   # coverage 0.5 vs 1
    assert w.criterion_truths(PROMPT, GOLD, GOLD) == [0, 0, 0, 0]


def _pairs(n=60, seed=0):
    examples = w.constraint_writing_zero("train", n, seed)
    gold = cw.constraint_writing("train", n, seed)
    return [e["prompt"] for e in examples], [g["completion"] for g in gold], [e["completion"] for e in examples]


def test_noiseless_judges_agree_with_the_oracle():
    prompts, gold, zero = _pairs()
    dq = np.array([cw.quality(*cw.parse_prompt(p), x) - cw.quality(*cw.parse_prompt(p), y)
                   for p, x, y in zip(prompts, gold, zero)])
    clean = {"error_rate": 0.0, "bias": 0.0, "position_bias": 0.0}
    holistic, _ = REWARDS.get("openrs/holistic_judge")(**clean).judge_pairs(prompts, gold, zero, seed=0)
    np.testing.assert_array_equal(holistic, np.sign(np.where(np.abs(dq) < 1e-9, 0, dq)))
    rubric, metrics = REWARDS.get("openrs/rubric_judge")(**clean).judge_pairs(prompts, gold, zero, seed=0)
    truths = np.array([w.criterion_truths(p, x, y) for p, x, y in zip(prompts, gold, zero)])
    weighted = truths @ np.array([5, 2, 2, 2])
    np.testing.assert_array_equal(rubric, np.sign(weighted))           # both orders agree without noise
    assert metrics["judge/calls"] == 2 * len(prompts) and metrics["judge/malformed"] == 0


def test_note_hack_win_rates_of_the_judges():
    prompts, note, gold = [PROMPT] * 400, [NOTE] * 400, [GOLD] * 400
    noisy = {"error_rate": 0.1, "position_bias": 0.15}

    def wins(name, **options):
        pref, _ = REWARDS.get(name)(**noisy, **options).judge_pairs(prompts, note, gold, seed=1)
        return float(np.mean(pref == 1))

    # the holistic judge with writing_zero's annotator bias: the hack wins when the bias hits (35%), or by error
    assert wins("openrs/holistic_judge", bias=0.35) == pytest.approx(0.35 + 0.65 * 0.1, abs=0.06)
    # the oracle-noisy rubric simulator (no annotator bias): the explanation criterion decides; errors and slot-A
    # bias on the three equal criteria rarely outweigh it in both orders
    assert wins("openrs/rubric_judge", bias=0.0) < 0.1
    # the same annotator bias per criterion is amplified: equal criteria carry no weight until the bias gives them
    # +2 for the NOTE response (coverage alone weighs 5 against the explanation criterion's 2)
    assert wins("openrs/rubric_judge", bias=0.35) > wins("openrs/holistic_judge", bias=0.35)
    # the PVR guardrail: NOTE pushes the text out of its band, a hard negative whatever the judge says
    assert wins("openrs/rubric_judge", bias=0.35, pvr=True) == 0.0


def test_zero_set_has_format_only_completions():
    examples = w.constraint_writing_zero("train", 300, 0)
    q = [cw.quality(e["required"].split(), e["band"], e["completion"]) for e in examples]
    notes = np.mean([cw.NOTE in e["completion"].split() for e in examples])
    assert 0.1 < np.mean(np.isclose(q, 1.0)) < 0.4 and 0.08 < notes < 0.4
    assert examples == w.constraint_writing_zero("train", 300, 0)


def test_logged_rewards_through_the_manager():
    manager = RewardManager([("writing_zero/quality", 0.0), ("openrs/note_rate", 0.0), ("openrs/pvr_pass", 0.0)])
    _, metrics = manager([PROMPT] * 2, [GOLD, NOTE])
    assert metrics["reward/openrs/note_rate/mean"] == 0.5 and metrics["reward/openrs/pvr_pass/mean"] == 0.5
    assert metrics["reward/writing_zero/quality/mean"] == pytest.approx((1.0 + 0.5) / 2)

"""Stepwise-GRPO (shared/rl/stepwise.py): per-component group normalisation and the token advantages against
hand-computed groups; the token -> segment map; the estimator from a rollout through a registered step scorer."""
import types

import numpy as np
import pytest

import shared.builtin  # noqa: F401
from shared.config.base import base_config
from shared.data import build_tokenizer
from shared.registry import ADVANTAGES
from shared.rl import stepwise

# G = 3: rewards (1, 0, 0) -> mean 1/3, unbiased std sqrt(1/3) = 0.577350 -> A = (1.154701, -0.577350, -0.577350)
HI, LO = 1.1547005, 0.5773503


def test_component_advantages_by_hand():
    got = stepwise.component_advantages([[1, 1], [0, 1], [0, 0], [3, 2], [3, 2], [3, 2]], group_size=3)
    np.testing.assert_allclose(got[:3, 0], [HI, -LO, -LO], rtol=1e-5)
    np.testing.assert_allclose(got[:3, 1], [LO, LO, -HI], rtol=1e-5)
    np.testing.assert_array_equal(got[3:], 0.0)        # a group whose rewards are all equal: no signal


def test_stepwise_token_advantages_by_hand():
    outcome = [1, 0, 0, 0, 0, 0]
    fmt = [1, 1, 1, 1, 0, 1]
    steps = [[1, 1], [1, 0], [0, 0], [1, 0], [1, 0], [1, 0]]
    segments = np.tile([0, 0, 1, 2, 3], (6, 1))        # answer, answer, step 1, step 2, past the last step
    mask = np.ones((6, 5), np.float32)
    mask[:, 4] = 0.0
    mask[1, 3:] = 0.0
    got = stepwise.stepwise_advantages(outcome, fmt, steps, segments, mask, group_size=3, step_weight=0.5)
    # group 0: A^0 = (HI, -LO, -LO), A^fmt = 0, A^1 = (LO, LO, -HI), A^2 = (HI, -LO, -LO)
    # group 1: A^0 = 0, A^fmt = (LO, -HI, LO), A^1 = A^2 = 0
    want = [[HI, HI, HI + 0.5 * LO, HI + 0.5 * HI, 0],
            [-LO, -LO, -LO + 0.5 * LO, 0, 0],
            [-LO, -LO, -LO - 0.5 * HI, -LO - 0.5 * LO, 0],
            [LO, LO, LO, LO, 0],
            [-HI, -HI, -HI, -HI, 0],
            [LO, LO, LO, LO, 0]]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_token_segments_count_the_separators_before_each_token():
    tokenizer = build_tokenizer(base_config().data, None, 384)
    tokens = [tokenizer.encode("2\nR1: y\nR3"), tokenizer.encode("0|a\n\nb|R3x")]
    got = stepwise.token_segments(tokenizer, tokens, "\n")
    np.testing.assert_array_equal(got[0], [0, 0, 1, 1, 1, 1, 1, 1, 2, 2])
    np.testing.assert_array_equal(got[1][:7], [0, 0, 0, 0, 1, 2, 2])


def test_the_estimator_reads_the_rollout_through_its_scorer():
    @stepwise.register_step_scorer("test/first_char")
    def first_char(example, completion):       # outcome: the answer is the first character; steps: lines == "y"
        lines = completion.split("\n")
        return stepwise.StepScore(float(lines[0] == example["answer"]), 1.0, tuple(float(x == "y") for x in lines[1:]))

    tokenizer = build_tokenizer(base_config().data, None, 384)
    texts = ["1\ny", "0\ny", "0\nn"]
    width = max(len(tokenizer.encode(t)) for t in texts)
    tokens = np.zeros((3, width), np.int32)
    mask = np.zeros((3, width), np.float32)
    for i, t in enumerate(texts):
        ids = tokenizer.encode(t)
        tokens[i, :len(ids)], mask[i, :len(ids)] = ids, 1.0
    scored = types.SimpleNamespace(examples=[{"answer": "1"}], rollout=types.SimpleNamespace(texts=texts, tokens=tokens))
    rl = base_config().rl
    rl.advantage, rl.stepwise.scorer, rl.stepwise.step_weight = "stepwise-grpo", "test/first_char", 1.0
    est = ADVANTAGES.get("stepwise-grpo")
    adv = np.asarray(est.estimate_rollout(scored, mask, 3, rl, tokenizer).advantages)
    # outcome (1, 0, 0) -> (HI, -LO, -LO); step 1 (1, 1, 0) -> (LO, LO, -HI); tokens "1" "\n" | "y"
    np.testing.assert_allclose(adv, [[HI, HI, HI + LO], [-LO, -LO, 0], [-LO, -LO, -LO - HI]], rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="estimate_rollout"):
        est(np.zeros(3), mask, 3, rl)
    rl.stepwise.scorer = "test/missing"
    with pytest.raises(ValueError, match="rl.stepwise.scorer='test/missing'"):
        est.estimate_rollout(scored, mask, 3, rl, tokenizer)

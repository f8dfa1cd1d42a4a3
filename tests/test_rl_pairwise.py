"""Pairwise RL (shared/rl/pairwise.py): the plans list every judge call of a step, BRPO (raw, norm), round-robin and
fixed-reference advantages against hand-computed groups, DAPO's filter on the non-reference outcomes, the Reward
role's checks, and a smoke RL run in which BRPO with an oracle judge raises the judged quality."""
import json
import os

import numpy as np
import pytest

import shared.builtin  # noqa: F401
from shared.registry import ADVANTAGES
from shared.rewards import RewardManager
from shared.rl import pairwise as pw
from shared.rl.roles import Reward

import test_rl_learner as toy  # the toy RL config and digit-fraction reward (a module import: not re-collected)


def plan_of(pairs, b, g, ref=None):
    return pw.JudgePlan(b, g, np.asarray(pairs, np.int32).reshape(-1, 2),
                        np.full(b, -1, np.int32) if ref is None else np.asarray(ref, np.int32))


# ---------------------------------------------------------------- plans


def test_plans_list_every_judge_call():
    rng = np.random.default_rng(0)
    b, g = 5, 4
    plan = pw.plan_brpo(b, g, rng)
    assert len(plan) == b * (g - 1) and plan.ref_idx.shape == (b,)
    for q in range(b):
        mine = plan.pairs[plan.group == q]
        np.testing.assert_array_equal(mine[:, 1], q * g + plan.ref_idx[q])         # all against the reference
        assert sorted(mine[:, 0] - q * g) == [i for i in range(g) if i != plan.ref_idx[q]]
    refs = np.concatenate([pw.plan_brpo(b, g, rng).ref_idx for _ in range(50)])
    assert set(refs.tolist()) == set(range(g))                                      # resampled, every slot
    rr = pw.plan_round_robin(b, g)
    assert len(rr) == b * g * (g - 1) // 2 and np.all(rr.pairs[:, 0] < rr.pairs[:, 1])
    fixed = pw.plan_fixed_reference(b, g)
    assert len(fixed) == b * g and np.all(fixed.pairs[:, 1] == pw.EXTERNAL)
    assert len(pw.plan_brpo(3, 1, rng)) == 0                                        # G = 1: nothing to compare


# ---------------------------------------------------------------- advantages against hand-computed groups


def test_brpo_raw_and_norm_by_hand():
    # group 0: reference = member 2; members 0, 1, 3 judged +1, +1, -1 against it
    # group 1: reference = member 0; members 1, 2, 3 judged -1, 0, -1 (a tie counts 1/2)
    plan = plan_of([(0, 2), (1, 2), (3, 2), (5, 4), (6, 4), (7, 4)], 2, 4, ref=[2, 0])
    out = pw.outcomes(plan, [1, 1, -1, -1, 0, -1])
    np.testing.assert_array_equal(out.scored, [[1, 1, 0, 1], [0, 1, 1, 1]])
    np.testing.assert_array_equal(out.P[0, 2, :4], [-1, -1, 0, 1])  # the reference's row: antisymmetric
    mask = np.ones((8, 3), np.float32)
    mask[3, 2] = 0.0
    raw = np.asarray(ADVANTAGES.get("brpo").estimate(out, mask, 4, None).advantages)
    np.testing.assert_allclose(raw[:, 0], [1, 1, 0, -1, 0, -1, 0, -1])
    assert raw[3, 2] == 0.0 and np.all(raw == raw[:, :1] * mask)  # broadcast over the response's tokens

    # norm: w = (p + 1) / 2 over the 3 non-reference members; std with ddof=1
    # group 0: w = 1, 1, 0: mean 2/3, std sqrt(1/3) -> (1/3)/0.57735 = 0.57735, -(2/3)/0.57735 = -1.1547
    # group 1: w = 0, 1/2, 0: mean 1/6, std sqrt(1/12) = 0.288675 -> -0.57735, 1.1547, -0.57735
    norm = np.asarray(ADVANTAGES.get("brpo-norm").estimate(out, mask, 4, {"adv_eps": 0.0}).advantages)[:, 0]
    np.testing.assert_allclose(norm, [0.57735, 0.57735, 0, -1.1547, 0, -0.57735, 1.1547, -0.57735], atol=1e-5)
    # the pure function: raw ignores whatever sits in the reference's slot
    np.testing.assert_allclose(pw.adv_brpo(np.array([[1.0, 5.0, -1.0]]), np.array([1]), "raw"), [[1, 0, -1]])
    np.testing.assert_allclose(pw.adv_brpo(np.array([[1.0, 0.0]]), np.array([1]), "norm"), [[0, 0]])  # one member


def test_both_orders_sum_to_the_sign_as_the_spec():
    # each pair asked twice, (i, k) and (k, i): P = sign(p1 + p2), p2 seen from i's side
    plan = plan_of([(0, 1), (1, 0), (2, 1), (1, 2)], 1, 3, ref=[1])
    out = pw.outcomes(plan, [1, 1, 1, -1])  # member 0: +1 then -1 (disagree) -> 0; member 2: +1, +1 -> +1
    np.testing.assert_array_equal(out.rewards, [0, 0, 1])  # the reference (member 1) gets nothing


def test_round_robin_win_rates_by_hand():
    # G = 3: 0 beats 1, 0 ties 2, 2 beats 1 -> win rates 0.75, 0, 0.75 (ties half a win)
    # mean 0.5, std (ddof=1) sqrt(0.1875) = 0.4330 -> 0.57735, -1.1547, 0.57735
    plan = pw.plan_round_robin(1, 3)
    np.testing.assert_array_equal(plan.pairs, [[0, 1], [0, 2], [1, 2]])
    out = pw.outcomes(plan, [1, 0, -1])
    np.testing.assert_allclose(pw.win_rates(out.P[:, :, :3], out.judged[:, :, :3]), [[0.75, 0.0, 0.75]])
    np.testing.assert_allclose(out.score, [[0.5, -1.0, 0.5]])
    adv = np.asarray(ADVANTAGES.get("round-robin").estimate(out, np.ones((3, 1)), 3, {"adv_eps": 0.0}).advantages)
    np.testing.assert_allclose(adv[:, 0], [0.57735, -1.1547, 0.57735], atol=1e-5)
    centered = ADVANTAGES.get("round-robin").estimate(out, np.ones((3, 1)), 3, {"scale_by_std": False}).advantages
    np.testing.assert_allclose(np.asarray(centered)[:, 0], [0.25, -0.5, 0.25], atol=1e-6)
    full = np.array([[[0, 1, 0], [-1, 0, -1], [0, 1, 0]]], np.float32)
    np.testing.assert_allclose(pw.adv_round_robin(full, eps=0.0), adv[:, 0][None], atol=1e-5)  # judged = all i != j


def test_fixed_reference_by_hand():
    out = pw.outcomes(pw.plan_fixed_reference(2, 2), [1, -1, 1, 0])
    np.testing.assert_array_equal(out.P[:, :, 2], [[1, -1], [1, 0]])
    adv = np.asarray(ADVANTAGES.get("fixed-reference").estimate(out, np.ones((4, 2)), 2, None).advantages)
    np.testing.assert_allclose(adv[:, 0], [1, -1, 1, 0])
    np.testing.assert_allclose(pw.adv_fixed_reference([[1, 0, -1]]), [[1, 0, -1]])


def test_dynamic_sampling_filter_reads_only_non_reference_outcomes():
    # group 0: the reference lost to everyone (all non-reference +1): no information, although its own row is -1
    # group 1: mixed; group 2: all ties
    plan = plan_of([(0, 2), (1, 2), (3, 4), (5, 4), (7, 6), (8, 6)], 3, 3, ref=[2, 1, 0])
    out = pw.outcomes(plan, [1, 1, 1, -1, 0, 0])
    np.testing.assert_array_equal(pw.informative_groups(out), [False, True, False])
    rr = pw.outcomes(pw.plan_round_robin(2, 2), [0, 1])
    np.testing.assert_array_equal(pw.informative_groups(rr), [False, True])
    single = pw.outcomes(plan_of([], 2, 1, ref=[0, 0]), [])
    np.testing.assert_array_equal(pw.informative_groups(single), [False, False])
    picked = pw.PairOutcomes.take([(out, 2), (out, 1)])  # the learner's refill: groups in the chosen order
    np.testing.assert_array_equal(picked.ref_idx, [0, 1])
    np.testing.assert_array_equal(picked.P, out.P[[2, 1]])


def test_estimator_and_reward_role_checks():
    with pytest.raises(ValueError, match="needs the judge's PairOutcomes"):
        ADVANTAGES.get("brpo").estimate(np.zeros(4), np.ones((4, 1)), 2, None)
    with pytest.raises(ValueError, match="crosses groups"):
        pw.outcomes(plan_of([(0, 2)], 2, 2), [1])
    config = toy.toy_config(1)
    config.rl.advantage = "brpo"
    judge = ("model/pairwise_judge", 1.0, {"backend": "mock"})
    with pytest.raises(ValueError, match="exactly one pairwise judge"):
        Reward(config, RewardManager([("test/digit_fraction", 1.0)]), pairwise=True)
    with pytest.raises(ValueError, match=r"\['test/digit_fraction'\] are only logged"):
        Reward(config, RewardManager([judge, ("test/digit_fraction", 0.5)]), pairwise=True)
    role = Reward(config, RewardManager([judge, ("test/digit_fraction", 0.0)]), pairwise=True)
    assert role.manager.labels == ["test/digit_fraction"] and hasattr(role.judge, "judge_pairs")
    examples = [{"prompt": "p0", "answer": "1"}, {"prompt": "p1", "answer": "2", "reference": "r"}]
    config.rl.group_size = 2
    texts = ["aaa", "a", "bb", "bbbb"]
    pref, metrics = role.judge_pairs(examples, texts, plan_of([(0, 1), (3, 2)], 2, 2))
    np.testing.assert_array_equal(pref, [1, 1])
    assert metrics["judge/pairs"] == 2
    np.testing.assert_array_equal(role.judge_pairs(examples, texts, plan_of([(2, -1)], 2, 2))[0], [1])
    with pytest.raises(ValueError, match="'reference' column, which example 0 lacks"):
        role.judge_pairs(examples, texts, pw.plan_fixed_reference(2, 2))


# ---------------------------------------------------------------- a smoke RL run with a judge reward


def test_brpo_with_an_oracle_judge_raises_the_judged_quality(tmp_path):
    """The toy task of test_rl_learner (reward: the fraction of digits), but the policy only ever sees an oracle
    judge's pairwise verdicts against a bootstrapped in-group reference, shown in random order."""
    config = toy.toy_config(20)
    config.rl.advantage = "brpo"
    config.rl.dynamic_sampling = True
    config.rl.rewards = [("model/pairwise_judge", 1.0, {"backend": "oracle", "quality": "test/digit_fraction",
                                                        "swap": "random"}),
                         ("test/digit_fraction", 0.0)]  # logged only
    learner = toy.make_learner(config, str(tmp_path))
    assert learner.pairwise and learner.reward.judge is not None
    learner.fit()
    learner.close()
    rows = {r["step"]: r for r in map(json.loads, open(os.path.join(tmp_path, "metrics.jsonl")))
            if "reward/test/digit_fraction/mean" in r}
    b, g = config.rl.prompts_per_step, config.rl.group_size
    for row in rows.values():  # every rollout batch of the step (refills included) judged as planned
        assert row["judge/pairs"] == b * (g - 1) * row["rl/dynamic_sampling_batches"] == row["judge/calls"]
        assert row["judge/swapped"] > 0 and row["judge/malformed"] == 0
    assert rows[20]["judge/pairs_total"] == sum(r["judge/pairs"] for r in rows.values())
    quality = {s: r["reward/test/digit_fraction/mean"] for s, r in rows.items()}
    first, last = np.mean([quality[s] for s in (1, 2, 3)]), np.mean([quality[s] for s in (18, 19, 20)])
    print("digit fraction by step:", {s: round(q, 3) for s, q in sorted(quality.items())})
    assert first < 0.15 and last > first + 0.2, quality


def test_a_resumed_pairwise_run_keeps_counting_its_judge_totals(tmp_path):
    """judge/pairs_total and judge/calls_total count the whole run: a run resumed from its checkpoint continues from
    the checkpoint's totals (they live in the judge object, which a new process builds afresh)."""
    def config(steps):
        c = toy.toy_config(steps)
        c.rl.advantage = "brpo"
        c.rl.rewards = [("model/pairwise_judge", 1.0, {"backend": "oracle", "quality": "test/digit_fraction"})]
        return c

    first = toy.make_learner(config(2), str(tmp_path))
    first.fit()
    first.close()
    again = toy.make_learner(config(4), str(tmp_path))
    assert again.start_step == 2
    again.fit()
    again.close()
    rows = {r["step"]: r for r in map(json.loads, open(os.path.join(tmp_path, "metrics.jsonl")))
            if "judge/pairs" in r}
    assert sorted(rows) == [1, 2, 3, 4]
    b, g = config(1).rl.prompts_per_step, config(1).rl.group_size
    for step, row in rows.items():  # no refills: every step judges B (G - 1) pairs in as many calls
        assert row["judge/pairs"] == b * (g - 1)
        assert row["judge/pairs_total"] == row["judge/calls_total"] == step * b * (g - 1)

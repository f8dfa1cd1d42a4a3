"""Reward combination (shared/rewards/combine.py, REWARD_COMBINERS): the terms stay separate columns through the
RewardManager; sum is the old weighted sum; per-batch z-score; reference-frozen statistics stay frozen after the
calibration (z-score, quantile, per category; state round trip); tri-factor weights on hand-made reward tables;
normalise-then-sum; the variance shares."""
import math

import numpy as np
import pytest

import shared.builtin  # noqa: F401
from shared.registry import REWARD_COMBINERS
from shared.rewards import RewardManager
from shared.rewards.combine import build_combiner, correlation, floor_weights, group_normalize
from shared.rl import algorithms as alg


def length(prompts, completions, **_):
    return [float(len(c)) for c in completions]


def has_x(prompts, completions, **_):
    return [1.0 if "x" in c else 0.0 for c in completions]


def manager(combine="sum", group_size=None, **options):
    return RewardManager([(length, 1.0), (has_x, 2.0)], combine=combine, combine_options=options,
                         group_size=group_size)


def test_registry_and_the_sum_is_the_weighted_sum_with_separate_columns():
    assert {"sum", "zscore", "ref_frozen", "trifactor"} <= set(REWARD_COMBINERS.names())
    completions = ["x", "ab", "abxd", "a"]
    result = manager(group_size=2).compute(["q"] * 4, completions)
    np.testing.assert_array_equal(result.per_function["length"], [1, 2, 4, 1])
    np.testing.assert_array_equal(result.per_function["has_x"], [1, 0, 1, 0])
    np.testing.assert_array_equal(result.total, [3, 2, 6, 1])          # 1 * length + 2 * has_x
    assert result.weights == {"length": 1.0, "has_x": 2.0}
    assert result.metrics["reward/length/weight"] == 1.0 and result.metrics["reward/has_x/weight"] == 2.0
    # within-group variance shares of R: groups (3, 2), (6, 1): centred R = .5, -.5, 2.5, -2.5 (sum of squares
    # 13); length centred -.5, .5, 1.5, -1.5 -> cov 7; 2 has_x centred 1, -1, 1, -1 -> cov 6
    assert result.metrics["reward/length/share"] == pytest.approx(7 / 13)
    assert result.metrics["reward/has_x/share"] == pytest.approx(6 / 13)
    one = RewardManager([(length, 1.0)]).compute(["q"] * 4, completions)   # one term: no weight/share metrics
    assert not any(k.endswith(("/weight", "/share")) for k in one.metrics)


def test_per_batch_zscore():
    result = manager("zscore").compute(["q"] * 4, ["a", "bb", "ccc", "dddx"])
    # length 1, 2, 3, 4: mean 2.5, std sqrt(1.25); has_x 0, 0, 0, 1: mean .25, std sqrt(.1875)
    z_len = (np.array([1, 2, 3, 4]) - 2.5) / (math.sqrt(1.25) + 1e-6)
    z_x = (np.array([0, 0, 0, 1]) - 0.25) / (math.sqrt(0.1875) + 1e-6)
    np.testing.assert_allclose(result.normalized["length"], z_len, rtol=1e-6)
    np.testing.assert_allclose(result.total, z_len + 2 * z_x, rtol=1e-6)
    np.testing.assert_array_equal(result.per_function["length"], [1, 2, 3, 4])   # the raw column is kept


def test_reference_frozen_statistics_stay_frozen_after_calibration():
    m = manager("ref_frozen")
    assert m.needs_calibration
    with pytest.raises(RuntimeError, match="calibration"):
        m.compute(["q"], ["a"])
    metrics = m.calibrate(["q"] * 4, ["a", "bb", "ccc", "dddx"])          # length mu 2.5, sigma sqrt(1.25)
    assert not m.needs_calibration
    assert metrics["reward/length/ref_mean"] == 2.5 and metrics["reward/length/ref_std"] == pytest.approx(1.118034)
    frozen = m.get_state()
    # batches of a very different policy: the statistics do not move, r~ = clip((r - 2.5) / 1.118034, -5, 5)
    for completions in (["aaaaaaaaaaaa", "a"], ["xxxxxxxx"] * 3, ["b"]):
        result = m.compute(["q"] * len(completions), completions)
        want = np.clip((np.array([len(c) for c in completions]) - 2.5) / (math.sqrt(1.25) + 1e-6), -5, 5)
        np.testing.assert_allclose(result.normalized["length"], want, rtol=1e-6)
        assert m.get_state() == frozen
    np.testing.assert_allclose(m.compute(["q"], ["aaaaaaaaaaaa"]).normalized["length"], [5.0])   # clipped at c
    with pytest.raises(RuntimeError, match="frozen"):
        m.calibrate(["q"], ["abc"])
    again = manager("ref_frozen")                                       # a resumed run restores them
    again.set_state(frozen)
    assert not again.needs_calibration
    np.testing.assert_array_equal(again.compute(["q"] * 2, ["ab", "x"]).total, m.compute(["q"] * 2, ["ab", "x"]).total)


def test_reference_frozen_quantile_and_per_category_statistics():
    m = manager("ref_frozen", ref_norm="quantile")
    m.calibrate(["q"] * 4, ["a", "bb", "cc", "ddd"])                  # lengths 1, 2, 2, 3
    # 2 F(r) - 1 with F at mid-rank: F(0) = 0, F(1) = .5/4, F(2) = (1 + 1)/4, F(3) = (3 + .5)/4, F(9) = 1
    got = m.compute(["q"] * 5, ["", "a", "bb", "ccc", "d" * 9]).normalized["length"]
    np.testing.assert_allclose(got, [-1, -0.75, 0, 0.75, 1])
    m = manager("ref_frozen", group_by="kind")
    m.calibrate(["q"] * 4, ["a", "bbb", "aaaaa", "bbbbbbb"], kind=["easy", "easy", "hard", "hard"])
    stats = m.get_state()["normalizer"]["stats"]
    assert stats["easy"]["length"]["mean"] == 2 and stats["hard"]["length"]["mean"] == 6
    assert stats["*"]["length"]["mean"] == 4
    got = m.compute(["q"] * 3, ["aa", "aa", "aa"], kind=["easy", "hard", "new"]).normalized["length"]
    np.testing.assert_allclose(got, [0, (2 - 6) / (1 + 1e-6), (2 - 4) / (math.sqrt(5) + 1e-6)], rtol=1e-6)


# A hand-made table: a and b identical (correlation 1), c anti-correlated with them; raw = normalised (none).
TABLE = {"a": np.array([1.0, 0, 1, 0]), "b": np.array([1.0, 0, 1, 0]), "c": np.array([0.0, 0, 0, 1])}


def test_trifactor_weights_on_a_hand_made_table():
    combiner = build_combiner("trifactor", {"normalize": "none", "risk": [("c", 2.0)]})
    weights = {"a": 1.0, "b": 1.0, "c": 1.0}
    total, metrics, _, used = combiner.combine(TABLE, weights, None, {})
    # weakness: s = batch means (.5, .5, .25) -> softmax(-s): e^-.5, e^-.5, e^-.25 over their sum
    e5, e25 = math.exp(-0.5), math.exp(-0.25)
    weakness = np.array([e5, e5, e25]) / (2 * e5 + e25)
    risk = np.array([1, 1, 2])
    # corr(a, b) = 1, corr(a, c) = corr(b, c) = -1/sqrt(3) < 0 -> D = 1/2, 1/2, 1
    np.testing.assert_allclose(correlation(list(TABLE.values()))[0], [1, 1, -1 / math.sqrt(3)], rtol=1e-12)
    redundancy = np.array([0.5, 0.5, 1.0])
    target = weakness * risk * redundancy / np.sum(weakness * risk * redundancy)   # all above w_min = .05
    w1 = 0.9 * np.full(3, 1 / 3) + 0.1 * target                                     # smoothing from uniform
    for i, label in enumerate("abc"):
        assert metrics[f"reward/{label}/weakness"] == pytest.approx(weakness[i])
        assert metrics[f"reward/{label}/risk"] == risk[i]
        assert metrics[f"reward/{label}/redundancy"] == pytest.approx(redundancy[i])
        assert metrics[f"reward/{label}/target"] == pytest.approx(target[i])
        assert used[label] == pytest.approx(w1[i]) and metrics[f"reward/{label}/weight"] == pytest.approx(w1[i])
    assert target == pytest.approx([0.1401325, 0.1401325, 0.7197349], abs=1e-6)
    np.testing.assert_allclose(total, w1[0] * TABLE["a"] + w1[1] * TABLE["b"] + w1[2] * TABLE["c"])
    # the next batch: s keeps its EMA (same means), the weights move another tenth towards the target
    _, _, _, used = combiner.combine(TABLE, weights, None, {})
    np.testing.assert_allclose([used[k] for k in "abc"], 0.9 * w1 + 0.1 * target)
    # the state carries s and w to a resumed run
    other = build_combiner("trifactor", {"normalize": "none", "risk": [("c", 2.0)]})
    other.set_state(combiner.get_state())
    np.testing.assert_allclose([other.combine(TABLE, weights, None, {})[3][k] for k in "abc"],
                               [combiner.combine(TABLE, weights, None, {})[3][k] for k in "abc"])


def test_trifactor_ablations_risk_gate_floor_and_weightless_terms():
    weights = {"a": 1.0, "b": 1.0, "c": 1.0}
    # no weakness, no redundancy: only risk; a gate x3 on c when more than 20% of its raw scores are < .5 (75% are)
    combiner = build_combiner("trifactor", {"normalize": "none", "factors": "risk", "risk": [("c", 2.0)],
                                            "risk_gate": [("c", 3.0, 0.2)], "violation_below": 0.5,
                                            "weight_ema": 0.0})
    _, metrics, _, used = combiner.combine(TABLE, weights, None, {})
    assert metrics["reward/c/risk"] == 6.0 and metrics["reward/a/weakness"] == 1.0
    np.testing.assert_allclose([used[k] for k in "abc"], [1 / 8, 1 / 8, 6 / 8])
    # the floor: entries below w_min are raised to it, the rest share the remainder
    np.testing.assert_allclose(floor_weights(np.array([0.01, 0.01, 0.98]), 0.05), [0.05, 0.05, 0.9])
    np.testing.assert_allclose(floor_weights(np.array([1.0, 1.0, 38.0]), 0.1), [0.1, 0.1, 0.8])
    # a term of weight 0 is scored and logged but weighs nothing
    combiner = build_combiner("trifactor", {"normalize": "none", "weight_ema": 0.0, "factors": ""})
    total, metrics, _, used = combiner.combine(TABLE, {"a": 1.0, "b": 0.0, "c": 1.0}, None, {})
    assert used == {"a": 0.5, "b": 0.0, "c": 0.5} and metrics["reward/b/weight"] == 0.0
    np.testing.assert_allclose(total, 0.5 * TABLE["a"] + 0.5 * TABLE["c"])


def test_normalize_then_sum_gives_per_term_group_advantages():
    m = RewardManager([(length, 1.0), (has_x, 0.5)], combine="sum", combine_options={"scalarize": "normalize_then_sum"},
                      group_size=2)
    result = m.compute(["q"] * 4, ["a", "bbx", "cc", "c"])
    a_len = group_normalize(np.array([1.0, 3, 2, 1]), 2, 1e-6)     # (x - mean_g) / (std_g + eps), std ddof 1
    a_x = group_normalize(np.array([0.0, 1, 0, 0]), 2, 1e-6)
    h = 1 / math.sqrt(2)                     # group (1, 3): centred -+1, std sqrt(2); group (2, 1): +-.5, std h
    np.testing.assert_allclose(a_len, [-h, h, h, -h], rtol=1e-5)
    np.testing.assert_allclose(a_len, alg.adv_grpo(np.array([1.0, 3, 2, 1]), 2), rtol=1e-6)   # GRPO's own
    np.testing.assert_allclose(result.total, a_len + 0.5 * a_x, rtol=1e-6)
    # drgrpo (centring only) leaves it as it is: A = sum_k w_k A_k
    np.testing.assert_allclose(alg.adv_grpo(result.total, 2, scale_by_std=False), result.total, atol=1e-6)


def test_unknown_names_and_options_are_refused_and_fail_at_validation():
    from shared.config import ConfigError
    from shared.config.base import base_config
    from shared.config.validate import validate

    with pytest.raises(KeyError, match="Did you mean 'zscore'"):
        build_combiner("zscor")
    with pytest.raises(ValueError, match="ref_norm='rank'"):
        build_combiner("ref_frozen", {"ref_norm": "rank"})
    with pytest.raises(ValueError, match="factors"):
        build_combiner("trifactor", {"factors": "weakness,luck"})
    c = base_config()
    c.mesh.preset = "cpu_1"
    c.rl.reward_combine = "trifactr"
    with pytest.raises(ConfigError, match="rl.reward_combine: .*Did you mean 'trifactor'"):
        validate(c, 1)
    c.rl.reward_combine = "trifactor"
    c.rl.reward_combine_options.normalize = "minmax"
    with pytest.raises(ConfigError, match="rl.reward_combine_options.normalize='minmax'"):
        validate(c, 1)

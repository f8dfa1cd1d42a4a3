"""shared.rewards.compose: per-sample terms and the use_fb gate tables (spec ../shared/papers/proxy_grm.md §1.3),
checked against tables written out by hand from the reference code's branches, and through the RewardManager."""
import numpy as np
import pytest

import shared.builtin  # noqa: F401
from shared.registry import REWARD_COMBINERS
from shared.rewards import RewardManager
from shared.rewards.compose import GATES, apply_gate, per_sample

# every (r_acc, r_proxy) case
ACC = np.array([1, 1, 1, -1, -1, -1], float)
PROXY = np.array([1, -1, 0, 1, -1, 0], float)
# (r_acc', r_proxy') by hand for each case, from the reference code's if/else chains
EXPECTED = {
    "use_fb0": ([1, 1, 1, -1, -1, -1], [1, -1, 0, 1, -1, 0]),
    "use_fb1": ([1, -1, 1, -1, -1, -1], [1, -1, 0, -1, -1, 0]),
    "use_fb2": ([1, -1, 1, -1, -1, -1], [0, 0, 0, 0, 0, 0]),
    "use_fb3": ([1.5, 0.5, 0.5, -1, -1, -1], [1, -1, 0, 1, -1, 0]),
    "use_fb4": ([1.5, 0.5, 0.5, -1.5, -1, -1], [1, -1, 0, 1, -1, 0]),
    "use_fb5": ([1.5, 0.5, 0.5, -1.5, -2, -2], [1, -1, 0, 1, -1, 0]),
    "use_fb6": ([1.0, 0.5, 0.5, -1, -1, -1], [1, -1, 0, 1, -1, 0]),
    "use_fb7": ([1.5, 0.5, 0.5, -1, -1, -1], [0, 0, 0, 0, 0, 0]),
    "use_fb10": ([1.0, 0.5, 0.5, -1, -1, -1], [0, 0, 0, 0, 0, 0]),
}


@pytest.mark.parametrize("gate", sorted(EXPECTED))
def test_gate_tables_by_hand(gate):
    acc, proxy = apply_gate(ACC, PROXY, gate)
    np.testing.assert_array_equal(acc, EXPECTED[gate][0])
    np.testing.assert_array_equal(proxy, EXPECTED[gate][1])


def test_every_gate_is_a_full_table():
    assert {f"use_fb{i}" for i in range(11)} == set(GATES)
    for table in GATES.values():
        assert set(table) == {(ok, v) for ok in (True, False) for v in (1, -1, 0)}


def test_gate_refuses_values_outside_the_tables():
    with pytest.raises(ValueError, match="r_acc"):
        apply_gate([0.5], [1], "use_fb3")
    with pytest.raises(ValueError, match="r_proxy"):
        apply_gate([1], [0.5], "use_fb3")


def _terms():
    acc = per_sample(lambda c, s: 1.0 if c.endswith(s["answer"]) else -1.0)
    proxy = per_sample(lambda c, s: float(s["proxy"]))
    fmt = per_sample(lambda c, s: 1.0 if c.startswith("<") else 0.0)
    acc.__name__, proxy.__name__, fmt.__name__ = "acc", "proxy", "fmt"
    return acc, proxy, fmt


COMPLETIONS = ["<a>1", "<a>1", "x2", "<a>2", "2", "<a>1"]
ANSWERS = ["1", "1", "1", "1", "2", "2"]                    # acc: +1 +1 -1 -1 +1 -1
PROXIES = [1, -1, 1, 0, 0, -1]                              # fmt:  1  1  0  1  0  1


def manager(combine, **options):
    acc, proxy, fmt = _terms()
    return RewardManager([(acc, 1.0), (proxy, 1.0), (fmt, 0.5)], combine=combine, combine_options=options)


def test_additive_default_is_the_weighted_sum():
    result = manager("sum").compute(["q"] * 6, COMPLETIONS, answer=ANSWERS, proxy=PROXIES)
    # R = acc + proxy + 0.5 fmt, by hand
    np.testing.assert_allclose(result.total, [2.5, 0.5, 0.0, -0.5, 1.0, -1.5])
    gated0 = manager("gated", gate="use_fb0", gate_terms=["acc", "proxy"]).compute(
        ["q"] * 6, COMPLETIONS, answer=ANSWERS, proxy=PROXIES)
    np.testing.assert_allclose(gated0.total, result.total)      # use_fb0 is the additive default exactly


def test_gated_aggregation_by_hand():
    result = manager("gated", gate="use_fb3", gate_terms=["acc", "proxy"]).compute(
        ["q"] * 6, COMPLETIONS, answer=ANSWERS, proxy=PROXIES)
    # use_fb3: acc' = 1.5 / 0.5 / 0.5 / -1 / 0.5 / -1; + proxy (kept) + 0.5 fmt
    np.testing.assert_allclose(result.total, [1.5 + 1 + .5, .5 - 1 + .5, -1 + 1 + 0, -1 + 0 + .5, .5 + 0 + 0,
                                              -1 - 1 + .5])
    np.testing.assert_array_equal(result.per_function["acc"], [1, 1, -1, -1, 1, -1])   # raw columns kept
    seven = manager("gated", gate="use_fb7", gate_terms=["acc", "proxy"]).compute(
        ["q"] * 6, COMPLETIONS, answer=ANSWERS, proxy=PROXIES)
    np.testing.assert_allclose(seven.total, [2.0, 1.0, -1.0, -0.5, 0.5, -0.5])         # proxy zeroed
    assert seven.metrics["reward/proxy/gated_mean"] == 0.0


def test_gated_combiner_errors_name_the_option():
    assert "gated" in REWARD_COMBINERS.names()
    with pytest.raises(ValueError, match="gate="):
        manager("gated", gate="use_fb99", gate_terms=["acc", "proxy"])
    with pytest.raises(ValueError, match="gate_terms"):
        manager("gated", gate="use_fb3")
    with pytest.raises(KeyError, match="nope"):
        manager("gated", gate="use_fb3", gate_terms=["acc", "nope"]).compute(
            ["q"] * 6, COMPLETIONS, answer=ANSWERS, proxy=PROXIES)


def test_per_sample_gets_the_row_and_the_prompt():
    seen = []
    fn = per_sample(lambda c, s: seen.append((c, s["prompt"], s["answer"])) or len(c))
    assert fn(["p0", "p1"], ["a", "bb"], answer=["x", "y"], constant=3) == [1.0, 2.0]
    assert seen == [("a", "p0", "x"), ("bb", "p1", "y")]

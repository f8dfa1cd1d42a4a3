"""The rule-based relevance task (rules by hand, frequencies by split), the answer-first parser and the metrics by
hand, the step scorer and the gated reward, the teacher-output plumbing, and a smoke RL run (Stepwise-GRPO with the
SFT stream on) on 8 CPU devices."""
import collections
import json
import math

import jax
import numpy as np
import pytest

import projects.mode_balanced  # noqa: F401
from projects.mode_balanced import relevance as rel
from projects.mode_balanced.tasks import gated_label


def q(cat="phone", brand="acme", color="red", price="low", mods=()):
    return {"cat": cat, "brand": brand, "color": color, "price": price, "mods": list(mods)}


def item(cat="phone", brand="acme", color="red", price="low", flags=()):
    return {"cat": cat, "brand": brand, "color": color, "price": price, "flags": list(flags)}


@pytest.mark.parametrize("query,it,label,rule", [
    (q(), item(), 2, "none"),                                          # everything matches
    (q(), item(color="blue"), 1, "none"),                              # one mismatch
    (q(), item(color="blue", price="mid"), 0, "none"),                 # two mismatches
    (q(color="-"), item(color="blue", price="mid"), 1, "none"),        # an open field matches anything
    (q(), item(cat="shoe"), 0, "none"),                                # another category
    (q(), item(flags=["replica"]), 0, "L1"),
    (q(), item(cat="phone-acc"), 1, "L2"),
    (q(), item(flags=["kids"]), 0, "L3"),
    (q(mods=["kids"]), item(flags=["kids"]), 2, "none"),               # a kids item for a kids query: no exception
    (q(price="-", mods=["cheap"]), item(price="high"), 0, "L4"),
    (q(), item(color="blue", flags=["bundle"]), 1, "L5"),
    (q(), item(brand="akmi"), 2, "L6"),                                # head rules alone: brand mismatch -> 1
    (q(), item(color="green", flags=["multi"]), 2, "L7"),
    (q(), item(price="mid", flags=["sale"]), 2, "L8"),
    (q(), item(price="high", flags=["sale"]), 1, "none"),              # two bands above: no sale exception
    (q(mods=["new"]), item(flags=["refurb"]), 1, "L9"),
    (q(), item(flags=["refurb"]), 2, "none"),                          # refurbished is fine without "new"
    (q(), item(flags=["discontinued"]), 1, "L10"),
])
def test_rules_by_hand(query, it, label, rule):
    got_label, verdicts, fired = rel.decide(query, it)
    assert (got_label, fired) == (label, rule)
    assert rel.parse_afrl(rel.afrl_target(got_label, verdicts, fired))["valid"]


@pytest.fixture(scope="module")
def natural():
    return rel.relevance("train", 20000, 0)


def test_rules_fire_at_their_natural_frequencies(natural):
    counts = collections.Counter(e["rule"] for e in natural)
    # each long-tail rule: Binomial(20000, 0.01), mean 200, sd 14.1; 5 sd either side
    for rule in rel.RULES:
        assert abs(counts[rule] - 200) < 71, (rule, counts[rule])
    assert abs(counts["none"] / 20000 - 0.9) < 0.011
    doubled = collections.Counter(e["rule"] for e in rel.relevance("train", 5000, 0, rate=0.02))
    assert abs(sum(doubled[r] for r in rel.RULES) / 5000 - 0.2) < 0.03   # sd 0.0057


def test_every_example_is_decided_by_its_rule_and_tail_labels_differ_from_head_labels(natural):
    tail = rel.relevance("ood", 200, 0)
    head = rel.relevance("head", 200, 0)
    assert collections.Counter(e["rule"] for e in tail) == {r: 20 for r in rel.RULES}     # equal shares
    assert {e["rule"] for e in head} == {"none"}
    for e in natural[:2000] + tail + head:
        parsed = rel.parse_afrl(e["completion"])
        assert parsed["valid"] and rel.consistent(parsed) and parsed["label"] == e["answer"]
        assert parsed["rule"] == e["rule"]
        assert (e["answer"] != e["head_label"]) == (e["rule"] != "none")
    test = rel.relevance("test", 200, 0)
    assert not {e["prompt"] for e in test} & {e["prompt"] for e in natural[:200]}           # salted splits
    assert rel.relevance("train", 5, 3) == rel.relevance("train", 5, 3)                     # a function of the seed


def test_options_fail_in_one_line():
    with pytest.raises(ValueError, match="split must be one of"):
        rel.relevance("dev", 1, 0)
    with pytest.raises(ValueError, match="unknown options"):
        rel.relevance("train", 1, 0, rat=0.1)
    with pytest.raises(ValueError, match="rate=0.2 x 10 rules"):
        rel.relevance("train", 1, 0, rate=0.2)
    assert [e["completion"] for e in rel.relevance("train", 3, 0, target="label")] == \
        [e["answer"] for e in rel.relevance("train", 3, 0)]


def test_parser_by_hand():
    good = "1\ncat y\nbrand syn\ncolor n\nprice -\nrule L6"
    assert rel.parse_afrl(good) == {"label": "1", "checks": {"cat": "y", "brand": "syn", "color": "n", "price": "-"},
                                    "rule": "L6", "valid": True}
    assert rel.parse_afrl(good + "\n")["valid"]
    assert not rel.parse_afrl(good + "\nmore")["valid"]                   # an extra line
    assert not rel.parse_afrl("12\ncat y\nbrand y\ncolor y\nprice y\nrule none")["valid"]   # label line not 1 char
    assert rel.parse_afrl("x\ncat y")["label"] is None
    assert not rel.parse_afrl("2\ncat y\ncolor y\nbrand y\nprice y\nrule none")["valid"]    # checks out of order
    assert rel.first_label("2junk") == "2" and rel.first_label(" 2") is None and rel.first_label("") is None
    # consistency: L6 with brand syn and one other mismatch implies 1
    assert rel.consistent(rel.parse_afrl(good))
    assert not rel.consistent(rel.parse_afrl(good.replace("1\n", "2\n", 1)))
    assert rel.consistent(rel.parse_afrl("0\ncat y\nbrand y\ncolor y\nprice y\nrule L1"))
    assert rel.consistent(rel.parse_afrl("1\ncat y\nbrand y\ncolor y\nprice y\nrule L10"))
    assert not rel.consistent(rel.parse_afrl("1\ncat y\nbrand y\ncolor y\nprice y\nrule L11"))


def test_metrics_by_hand():
    # gold 0 0 1 2, predicted 0 1 1 None: F1(0) = 2/3, F1(1) = 2/3, F1(2) = 0 -> macro 4/9
    assert rel.macro_f1(["0", "0", "1", "2"], ["0", "1", "1", None]) == pytest.approx(4 / 9)
    assert rel.macro_f1(["0", "0"], ["0", "0"]) == 1.0                     # labels absent from both are skipped
    examples = [{"answer": "1", "head_label": "2", "rule": "L6"}, {"answer": "0", "head_label": "2", "rule": "L1"},
                {"answer": "2", "head_label": "2", "rule": "none"}]
    texts = ["1\ncat y\nbrand syn\ncolor n\nprice -\nrule L6", "2", "2\ncat y\nbrand y\ncolor y\nprice y\nrule none"]
    m = rel.slice_metrics(examples, texts, "s")
    assert m["s/accuracy"] == pytest.approx(2 / 3)
    assert m["s/format_valid"] == pytest.approx(2 / 3) and m["s/consistency"] == pytest.approx(2 / 3)
    assert m["s/head_label_on_tail"] == 0.5                # the L1 example answered with its head label
    assert m["s/accuracy_L6"] == 1.0 and m["s/accuracy_L1"] == 0.0 and "s/accuracy_L2" not in m
    # F1: label 0: tp 0 fn 1 -> 0; label 1: 1; label 2: tp 1 fp 1 -> 2/3
    assert m["s/macro_f1"] == pytest.approx((0 + 1 + 2 / 3) / 3)
    np.testing.assert_allclose(rel.first_token_entropy([[0.0, 0.0, 0.0, 0.0], [0.0, -np.inf, 0.0, -np.inf]]),
                               [math.log(4), math.log(2)])
    p = np.array([0.7, 0.2, 0.1])
    np.testing.assert_allclose(rel.first_token_entropy([np.log(p)]), [-(p * np.log(p)).sum()])


def test_step_scorer_and_gated_reward_by_hand():
    e = {"answer": "1", "verdicts": "y syn n -", "rule": "L6"}
    s = rel.step_score(e, "1\ncat y\nbrand syn\ncolor y\nprice -\nrule L6")
    assert (s.outcome, s.format, s.steps) == (1.0, 1.0, (1.0, 1.0, 0.0, 1.0, 1.0))
    s = rel.step_score(e, "2\ncat y\nbrand n")
    assert (s.outcome, s.format, s.steps) == (0.0, 0.0, (1.0, 0.0, 0.0, 0.0, 0.0))
    good = "1\ncat y\nbrand syn\ncolor n\nprice -\nrule L6"
    assert gated_label(["p"] * 3, [good, "1", good], answer=["1", "1", "0"]) == [1.0, 0.0, 0.0]


def test_teacher_outputs_replace_the_train_completions(tmp_path):
    examples = rel.relevance("train", 3, 0)
    path = tmp_path / "teacher_outputs.jsonl"
    path.write_text("".join(json.dumps({"prompt": e["prompt"], "completion": f"2\nx{i}"}) + "\n"
                            for i, e in enumerate(examples)))
    got = rel.relevance("train", 3, 0, teacher=str(path))
    assert [e["completion"] for e in got] == ["2\nx0", "2\nx1", "2\nx2"]
    assert [e["answer"] for e in got] == [e["answer"] for e in examples]       # gold labels kept for evaluation
    assert rel.relevance("test", 2, 0, teacher=str(path)) == rel.relevance("test", 2, 0)
    with pytest.raises(ValueError, match=r"teacher_outputs.jsonl:1: the prompt differs"):
        rel.relevance("train", 3, 1, teacher=str(path))


def test_smoke_rl_with_stepwise_grpo_and_the_sft_stream_on_8_cpu_devices(tmp_path):
    from experiments.mode_balanced.table import get_config
    from projects.mode_balanced.config import smoke
    from shared.registry import TASKS

    assert jax.device_count() == 8
    config = smoke(get_config("stepwise_smoke"))       # 1 layer x d 32: fewer seconds of compilation
    config.train.steps = 1
    config.lock()
    summary = TASKS.get("rl")(config, str(tmp_path))
    assert summary["num_devices"] == 8 and summary["steps"] == 1
    assert 5.0 < summary["train/sft_nll"] < 7.0            # ~ln 384 = 5.95 for the random policy
    for key in ("mb/tail/head_label_on_tail_before", "mb/tail/accuracy", "mb/head/macro_f1",
                "mb/overall/first_token_entropy", "mb/overall/consistency", "train/rl_loss"):
        assert key in summary, key
    assert abs(summary["mb/overall/first_token_entropy"] - math.log(384)) < 0.1
    # the demonstrations' position is checkpointed with the prompts' (orbax writes the data_state JSON as metadata)
    data_state = json.loads((tmp_path / "checkpoints" / "1" / "data_state" / "metadata").read_text())
    assert data_state["sft_aux"] == {"epoch": 0, "index": 4}


def test_the_min_table_runs_exactly_the_arms_claims_1_to_3_read():
    """:min exists to decide claims 1-3 on short leases: an arm a claim reads but the table lacks would leave the
    claim unanswerable after the runs, an extra arm would spend GPU time no claim reads."""
    from experiments.mode_balanced.table import get_sweep
    from projects.mode_balanced.claims import CLAIMS

    read = {term.where["arm"] for claim in CLAIMS if claim.id[0] in "123" for side in (claim.a, claim.b)
            if hasattr(side, "terms") for _, term in side.terms()}
    sweep = get_sweep("min")
    assert {p["arm"] for p in sweep["points"]} == read == {"sft", "lam0", "lam0.1", "lam1"}
    assert {p["overrides"]["seed"] for p in sweep["points"]} == {0, 1, 2}
    assert [s["name"] for s in sweep["stages"]] == ["warmstart_s0", "warmstart_s1", "warmstart_s2"]

"""HeteroJudge pieces against hand-computed values: the corruptions, the IF generator's balance and labels, the
readout, the oracle, the BT RM, the REINFORCE controller, and one smoke run of the task."""
import json
import random

import numpy as np
import pytest

from projects.skill_rm.controller import Controller, entropy_gradient, fit_flat, oracle
from projects.skill_rm.data import build_mixture, corrupt_solution, final_answer, if_case
from projects.skill_rm.evidence import ACTIONS, credit, readout, sandbox_evidence
from projects.skill_rm.rm import BTRewardModel
from shared.rewards.sandbox import namespace_problem

needs_sandbox = pytest.mark.skipif(namespace_problem() is not None, reason=str(namespace_problem()))
NATALIA = ("Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = <<48+24=72>>72 clips altogether "
           "in April and May.\n#### 72")


def test_corruptions_on_a_real_gsm8k_solution():
    final_only = corrupt_solution(NATALIA, random.Random(0), "final_only")
    body, new = final_only.rsplit("#### ", 1)
    assert body == NATALIA.rsplit("#### ", 1)[0] and new != "72" and final_answer(final_only) == new
    propagated = corrupt_solution(NATALIA, random.Random(0), "propagated")
    assert propagated == NATALIA.replace("72", new)       # same delta, every 72 replaced (the calculator result too)
    assert "<<48+24=%s>>%s" % (new, new) in propagated and "48/2" in propagated


def test_if_pairs_are_balanced_on_the_surface():
    rng = random.Random(0)
    cases = [if_case(rng) for _ in range(3000)]
    better = [c["a"] if c["gold"] > 0 else c["b"] for c in cases]
    worse = [c["b"] if c["gold"] > 0 else c["a"] for c in cases]

    def rate(texts, test):
        return np.mean([test(t) for t in texts])

    for name, test in [("lowercase", lambda t: t == t.lower()), ("json", lambda t: t.startswith("{")),
                       ("list", lambda t: "1. " in t), ("padded", lambda t: "closer look" in t)]:
        assert abs(rate(better, test) - rate(worse, test)) < 0.04, name
    assert abs(np.mean([len(t.split()) for t in better]) / np.mean([len(t.split()) for t in worse]) - 1) < 0.05


@needs_sandbox
def test_evidence_is_right_where_it_decides():
    cases = build_mixture(1, {"eval": 60}, source="embedded")["eval"]
    cases += [c for c in build_mixture(2, {"eval": 150}, source="embedded")["eval"] if c["family"] == "if"]
    found = sandbox_evidence(cases)
    gold = np.array([c["gold"] for c in cases])
    family = np.array([c["family"] for c in cases])
    scored = family != "hh"
    assert np.array_equal(found["run_verifier"][scored], gold[scored])      # the mounted checkers are exact
    assert np.array_equal(found["view_reference"][family == "gsm8k"], gold[family == "gsm8k"])
    check = found["python_check"][scored]
    assert np.all((check == 0) | (check == gold[scored]))                    # visible checks abstain, never lie
    assert 0.2 < np.mean(check[family[scored] == "if"] != 0) < 0.8           # they read only one phrasing
    assert not found["view_reference"][family != "gsm8k"].any() and not found["run_verifier"][family == "hh"].any()


def test_readout_priority_and_credit_by_hand():
    #               direct ref verifier check rubric
    evidence = np.array([[1, -1, 0, 1, 0],      # verifier undecided -> the reference decides: -1
                         [1, -1, 1, 0, 0],      # the verifier wins over the reference
                         [-1, 0, 0, 0, 1],      # rubric over the RM
                         [1, 1, 1, 1, 1]], np.int8)
    taken = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 1, 1], [1, 0, 0, 0, 1], [0, 0, 0, 0, 0]], bool)
    assert readout(evidence, taken).tolist() == [-1, 1, 1, 0]
    assert readout(evidence, np.eye(5, dtype=bool)[[0, 0, 0, 0]]).tolist() == [1, 1, -1, 1]
    assert credit(np.array([1, -1, 0]), np.array([1, 1, -1])).tolist() == [1.0, 0.0, 0.5]


def test_oracle_takes_the_cheapest_best_action():
    evidence = np.array([[1, 1, 1, 0, 0], [-1, 0, 1, 0, 0], [0, 0, 0, 0, 0]], np.int8)
    gold = np.array([1, 1, 1])
    costs = np.array([2.0, 1.0, 3.0, 2.0, 1.0])
    best, cost = oracle(evidence, gold, costs, np.ones(5, bool))
    assert best.tolist() == [1.0, 1.0, 0.5] and cost.tolist() == [1.0, 3.0, 1.0]
    allowed = np.array([True, False, False, True, True])           # a setting without reference and verifier
    best, cost = oracle(evidence, gold, costs, allowed)
    assert best.tolist() == [1.0, 0.5, 0.5] and cost.tolist() == [2.0, 1.0, 1.0]


def test_bt_rm_learns_a_planted_word():
    rng = random.Random(0)
    words = ["alpha", "beta", "gamma", "delta", "omega"]
    chosen = [" ".join(rng.choices(words, k=6)) + " kind" for _ in range(200)]
    rejected = [" ".join(rng.choices(words, k=6)) + " rude" for _ in range(200)]
    rm = BTRewardModel(dim=256)
    losses = rm.fit(chosen, rejected, steps=100, lr=0.05)
    assert losses[0] == pytest.approx(np.log(2)) and losses[-1] < 0.1
    assert rm.score(["beta kind"])[0] > rm.score(["beta rude"])[0]
    assert np.all(rm.prefer(chosen[:20], rejected[:20]) == 1)


def test_flat_classifier_weights_the_reliable_feature():
    rng = np.random.default_rng(0)
    gold = rng.choice([-1, 1], 400)
    reliable, noise = gold.astype(float), rng.choice([-1.0, 1.0], 400)
    w = fit_flat(np.stack([noise, reliable], 1), gold)
    assert w[1] > 5 * abs(w[0])


def test_entropy_gradient_matches_finite_differences():
    logits = np.array([[0.3, -1.2, 2.0, -np.inf], [0.0, 0.1, -0.4, 1.5]])

    def entropy(z):
        p = np.exp(z - z.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        return -(np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)).sum(1), p

    _, probs = entropy(logits)
    numeric = np.zeros_like(logits)
    for i in range(2):
        for j in range(4):
            if np.isfinite(logits[i, j]):
                up, down = logits.copy(), logits.copy()
                up[i, j] += 1e-6
                down[i, j] -= 1e-6
                numeric[i, j] = (entropy(up)[0][i] - entropy(down)[0][i]) / 2e-6
    assert np.allclose(entropy_gradient(probs), numeric, atol=1e-6)


def test_reinforce_controller_learns_to_route():
    """Two families: family 0 is decided only by the reference (cost 1), family 1 only by the rubric (cost 1); the
    verifier decides both at cost 3. With a price on cost, the controller must route by the visible feature."""
    n = 200
    fam = np.arange(n) % 2
    gold = np.where(np.arange(n) % 4 < 2, 1, -1)
    evidence = np.zeros((n, 5), np.int8)
    evidence[:, ACTIONS.index("view_reference")] = np.where(fam == 0, gold, 0)
    evidence[:, ACTIONS.index("view_rubric")] = np.where(fam == 1, gold, 0)
    evidence[:, ACTIONS.index("run_verifier")] = gold
    features = np.stack([np.ones(n), fam, 1 - fam, np.zeros(n), np.zeros(n), np.zeros(n)], 1)
    costs = np.array([1.0, 1.0, 3.0, 2.0, 1.0])
    controller = Controller(6, costs, np.ones(5, bool), seed=0)
    rewards = controller.train(features, evidence, gold, lam=0.05, steps=400, lr=0.05, seed=0, entropy=0.02)
    taken, _ = controller.rollout(features, evidence)
    assert rewards[-1] > rewards[0]
    assert np.all(credit(readout(evidence, taken), gold) == 1.0)
    assert taken[fam == 0].sum(0).tolist() == [0, n // 2, 0, 0, 0]          # the reference only
    assert taken[fam == 1].sum(0).tolist() == [0, 0, 0, 0, n // 2]          # the rubric only
    closed = np.array([True, False, True, True, True])                      # a setting without the reference
    controller = Controller(6, costs, closed, seed=0)
    controller.train(features, evidence, gold, lam=0.05, steps=100, lr=0.05, seed=0)
    assert not controller.rollout(features, evidence)[0][:, 1].any()


@needs_sandbox
def test_smoke_task_summary(tmp_path):
    from experiments.skill_rm.heterojudge import get_config
    from projects.skill_rm.task import run

    summary = run(get_config("smoke"), str(tmp_path))
    assert json.loads((tmp_path / "summary.json").read_text())["skill/accuracy"] == summary["skill/accuracy"]
    assert summary["call_all/cost"] == 8.0 and summary["baseline/cost"] == 1.0 and summary["tool_only/cost"] == 3.0
    assert summary["baseline/accuracy"] == summary["single_direct/accuracy"]
    for judge in ("baseline", "tool_only", "call_all", "flat", "skill"):
        assert summary[f"{judge}/accuracy"] <= summary["oracle/accuracy"] + 1e-12
    assert summary["best_single/gsm8k/accuracy"] == 1.0                    # the reference decides every pair
    assert summary["skill/cost"] < summary["call_all/cost"]


@needs_sandbox
@pytest.mark.parametrize("setting", ["operational", "fair", "none"])
def test_agent_eval_with_the_rule_procedure(tmp_path, setting):
    """The judge agent end to end (router, mounted resources, verifiers in the sandbox) with a fixed procedure:
    operational settles GSM8K and IF through the mounted verifiers; fair never sees them (all ties)."""
    from experiments.skill_rm.agent_judge import get_config
    from projects.skill_rm.agent_eval import run

    config = get_config("smoke")
    config.skill_rm.agent.n_eval = 8
    config.skill_rm.agent.setting = setting
    summary = run(config, str(tmp_path))
    traces = [json.loads(line) for line in (tmp_path / "traces.jsonl").read_text().splitlines()]
    listed = {r["id"] for t in traces for step in t["trace"] if "resources" in step.get("result", {})
              for r in step["result"]["resources"]}
    assert summary["invalid_rate"] == 0.0 and summary["hh/accuracy"] == 0.5
    if setting == "operational":
        assert summary["gsm8k/accuracy"] == 1.0 and summary["if/accuracy"] == 1.0
        assert summary["mean_resource_runs"] == pytest.approx(2 / 3) and "exact_match" in listed
    else:
        assert summary["accuracy"] == 0.5 and summary["tie_rate"] == 1.0
        assert summary["mean_resource_runs"] == 0 and not listed & {"exact_match", "reference_answer",
                                                                     "constraint_checkers", "view_reference"}
    assert summary["mean_calls"] == (1.0 if setting == "none" else 3.0 if setting == "operational" else 2.0)


def test_agent_eval_http_backend_request_shape():
    """The http backend sends one request per step with the tools, temperature 0 and thinking off (top level)."""
    from experiments.skill_rm.agent_judge import get_config
    from projects.skill_rm.agent_eval import build_agent
    from projects.skill_rm.task import SKILL_DIR
    from shared.judges.agent import JudgeCase
    from shared.judges.skills import load_skill

    config = get_config(None).skill_rm.agent
    config.base_urls, config.model = ["http://127.0.0.1:9/v1"], "judge"
    agent = build_agent(config, load_skill(SKILL_DIR))
    sent = []

    def chat(messages, **params):
        sent.append(params)
        return {"choices": [{"message": {"content": '{"verdict": "A"}'}}]}

    agent.backend.clients[0].chat = chat
    result = agent.judge(JudgeCase("q", ["x", "y"], family="hh"))
    assert result.label == "A" and result.finalised == "text"
    assert sent[0]["chat_template_kwargs"] == {"enable_thinking": False} and sent[0]["temperature"] == 0.0
    assert sent[0]["tool_choice"] == "required" and sent[0]["max_tokens"] == 4096
    assert [t["function"]["name"] for t in sent[0]["tools"]] == ["use_skill", "final_answer"]

"""The Proxy-GRM pipeline: the proxy reward on hand-made rubrics (with a rubric-following scorer, so the numbers are
known), the trained proxy's scorer mechanics, the GRM evaluation metrics by hand, and an end-to-end smoke on 8 CPU
devices: Proxy-SFT -> GRM cold-start SFT -> GRPO with r_acc + r_proxy + 0.5 r_fmt (the pipeline's `:smoke`, one
launch in a fresh process)."""
import json
import os

import numpy as np
import pytest

import projects.proxy_grm  # noqa: F401
import shared.builtin  # noqa: F401
from projects.proxy_grm import rubricworld as rw
from projects.proxy_grm.grm import output_metrics, with_proxy_run
from projects.proxy_grm.proxy import ProxyScorer, proxy_reward_fn, rubric_text, scorer_for
from shared.judges.rubric_format import extract_rubric

from conftest import REPO_ROOT as REPO, launch_fresh

SPEC = os.path.join(REPO, "experiments/proxy_grm/smoke_pipeline.py")
WORLD = rw.make_world(0)


class RuleScorer:
    """A proxy that follows the rubric exactly (evaluator (b)); a tie reads as verdict 1, as ProxyScorer's."""

    def __init__(self):
        self.rubrics = []

    def verdicts(self, y1s, y2s, rubrics, keywords=None):
        self.rubrics.extend(rubrics)
        return np.asarray([rw.rule_evaluate(rw.parse_rubric(r), a, b) or 1 for a, b, r in zip(y1s, y2s, rubrics)])


def _reward(examples, outputs, scorer):
    return np.asarray(proxy_reward_fn(scorer)([e["prompt"] for e in examples], outputs,
                                              y1=[e["y1"] for e in examples], y2=[e["y2"] for e in examples],
                                              answer=[e["answer"] for e in examples]))


def test_proxy_reward_on_hand_made_rubrics():
    examples = rw.rubricworld("test", 400, 0, p_style=0.5)    # STYLE carries no information here
    scorer = RuleScorer()
    wrong_answer = {"1": 2, "2": 1}
    gold = [rw.render_output(rw.true_criteria(WORLD, e["task_type"]), e["y1"], e["y2"], wrong_answer[e["answer"]])
            for e in examples]
    # the gold rubric makes the proxy agree every time, whatever the GRM's own <eval> and <answer> say
    np.testing.assert_array_equal(_reward(examples, gold, scorer), 1.0)
    assert all(r.endswith("</rubric>") and "<eval>" not in r for r in scorer.rubrics)   # only the rubric is shown
    style = [rw.render_output([(rw.STYLE, 3)], e["y1"], e["y2"], 1) for e in examples]
    agree = (_reward(examples, style, scorer) == 1).mean()
    assert abs(agree - 0.5) < 0.08                                                    # a STYLE-only rubric: chance
    garbage = ["<answer>\n1\n</answer>"] * len(examples)
    assert set(_reward(examples, garbage, scorer)) <= {-1.0, 1.0}


def test_output_metrics_by_hand():
    e = rw.rubricworld("test", 1, 0)[0]
    true = rw.true_criteria(WORLD, e["task_type"])
    right = rw.render_output(true, e["y1"], e["y2"], int(e["answer"]))
    styled = rw.render_output([(rw.STYLE, 1)], e["y1"], e["y2"], int(e["answer"]))
    m = output_metrics([e, e, e], [right, styled, "garbage"], WORLD)
    rule_style = rw.rule_evaluate([(rw.STYLE, 1)], e["y1"], e["y2"])
    assert m["acc"] == pytest.approx(2 / 3) and m["format"] == pytest.approx(2 / 3)
    assert m["rubric_p"] == pytest.approx(1 / 3) and m["rubric_r"] == pytest.approx(1 / 3)
    assert m["style_rate"] == pytest.approx(1 / 3) and m["weight_exact"] == 1.0
    transfer_style = 0.5 if rule_style == 0 else float(rule_style == int(e["answer"]))
    assert m["transfer_b"] == pytest.approx((1 + transfer_style + 0.5) / 3)     # garbage: a tie, 1/2
    assert m["consistency"] == pytest.approx((1 + float(rule_style == int(e["answer"]))) / 3)


def test_table_variants():
    from shared.sweep.table import load_module

    get_sweep = load_module(os.path.join(REPO, "experiments/proxy_grm/table.py")).get_sweep
    small, full = get_sweep("small"), get_sweep(None)
    assert sorted({p["arm"] for p in small["points"]}) == ["A", "B", "C"] and len(small["points"]) == 9
    assert sorted({p["arm"] for p in full["points"]}) == ["A", "B", "C", "D", "E3", "E7", "F"]
    assert len(full["points"]) == 21 and len(full["stages"]) == 12
    d = next(p for p in full["points"] if p["name"] == "D_s1")
    assert d["overrides"]["proxy_grm.proxy_run"] == "{stage:proxy_rl_s1}" and d["arg"] == "grm_D"


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    """The pipeline's `:smoke` launched alone (its stages, then arm C reading both, as one launch): CI's one run of
    it, which the tests below read."""
    workdir = tmp_path_factory.mktemp("proxy_grm") / "pg"
    result = launch_fresh(f"--config={SPEC}:smoke", f"--workdir={workdir}")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    grm = str(workdir / "C")
    return dict(workdir=workdir, result=result, proxy=str(workdir / "stages" / "proxy"),
                sft=str(workdir / "stages" / "sft"), grm=grm,
                summary=json.load(open(os.path.join(grm, "summary.json"))))


def test_the_pipeline_smoke_runs_its_stages_then_the_arm(pipeline):
    workdir, result = pipeline["workdir"], pipeline["result"]
    for folder in ("stages/proxy", "stages/sft", "C"):
        assert (workdir / folder / "summary.json").exists(), folder
    summary = json.loads((workdir / "summary.json").read_text())
    assert summary["sweep/points"] == 3 and summary["C/grm/id_acc"] == pipeline["summary"]["grm/id_acc"]
    config = json.loads((workdir / "C" / "config.json").read_text())  # the arm read both stages
    assert config["train"]["init_from"] == f"run:{workdir / 'stages' / 'sft'}"
    assert config["proxy_grm"]["proxy_run"] == str(workdir / "stages" / "proxy")
    assert "warm start from" in (workdir / "C" / "log.txt").read_text()
    assert "[done]" in result.stdout and "final metrics" not in result.stdout
    assert (workdir / "results.md").exists() and (workdir / "manifest.json").exists()


def test_end_to_end_sft_then_grpo_with_the_proxy_reward(pipeline):
    summary = pipeline["summary"]
    for s in ("id", "ood"):
        for key in ("acc", "format", "rubric_f1", "transfer_a", "transfer_b", "style_rate", "consistency",
                    "proxy_acc"):
            assert 0.0 <= summary[f"grm/{s}_{key}"] <= 1.0 and f"grm/{s}_{key}_before" in summary
        for key in ("acc", "rubric_f1", "transfer_a", "transfer_b"):
            assert 0.0 <= summary[f"grm/{s}_sampled_{key}"] <= 1.0
    assert 0.0 <= summary["proxy/acc_gold"] <= 1.0
    rows = [json.loads(line) for line in open(os.path.join(pipeline["grm"], "metrics.jsonl"))]
    step = next(r for r in rows if "reward/proxy_grm/proxy/mean" in r)
    # R = r_acc + r_proxy + 0.5 r_fmt, so the batch means add up the same way
    expected = (step["reward/genrm/accuracy/mean"] + step["reward/proxy_grm/proxy/mean"]
                + 0.5 * step["reward/genrm/format/mean"])
    assert step["rl/reward_mean"] == pytest.approx(expected, abs=1e-6)
    assert step["reward/proxy_grm/proxy/weight"] == 1.0 and step["reward/genrm/format/weight"] == 0.5
    config = json.load(open(os.path.join(pipeline["grm"], "config.json")))
    rollouts = config["rl"]["prompts_per_step"] * config["rl"]["group_size"]
    assert step["reward/proxy_grm/proxy/mean"] in np.linspace(-1, 1, rollouts + 1)      # rollouts of +-1


def test_trained_proxy_scorer_is_batch_invariant(pipeline):
    scorer = scorer_for(pipeline["proxy"])          # the instance the RL run's reward loaded (ProxyScorer.from_run)
    assert isinstance(scorer, ProxyScorer)
    examples = rw.rubricworld("test", 5, 1)
    y1, y2 = [e["y1"] for e in examples], [e["y2"] for e in examples]
    rubrics = [e["completion"] for e in examples]
    together = scorer.probabilities(y1, y2, rubrics)
    alone = np.concatenate([scorer.probabilities(y1[i:i + 1], y2[i:i + 1], rubrics[i:i + 1]) for i in range(5)])
    np.testing.assert_allclose(together, alone, rtol=1e-5)
    # the proxy reads the rubric only: the eval and answer of an output change nothing
    extracted = [extract_rubric(r) for r in rubrics]
    np.testing.assert_allclose(scorer.probabilities(y1, y2, extracted), together, rtol=1e-6)
    # ...and the rubric does change what it reads
    other = [rubric_text([("ATTR_1", 3)])] * 5
    assert not np.allclose(scorer.probabilities(y1, y2, other), together)


def test_proxy_run_is_filled_into_the_reward(pipeline):
    from projects.proxy_grm.config import grm_rl_config

    c = grm_rl_config("C", smoke=True)
    c.proxy_grm.proxy_run = "/some/proxy"
    c.lock()
    filled = with_proxy_run(c)
    assert [tuple(s)[:2] for s in filled.rl.rewards] == [("genrm/accuracy", 1.0), ("genrm/format", 0.5),
                                                        ("proxy_grm/proxy", 1.0)]
    assert filled.rl.rewards[2][2]["run"] == "/some/proxy"

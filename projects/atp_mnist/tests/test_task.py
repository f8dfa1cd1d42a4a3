"""TASKS "atp_mnist/pipeline" end to end on procedural glyphs (no data folder): the config validates, one seed writes
every summary key, the gold planner is perfect and each programmatic planner shows its profile."""
import json
import os

import pytest

from shared.config import ConfigError, load_config, validate
from shared.registry import TASKS

CONFIG = "experiments/atp_mnist/pipeline.py"


def smoke_config(**overrides):
    from experiments.atp_mnist.pipeline import get_config

    c = get_config("smoke")
    c.atp_mnist.n_test = 120
    c.atp_mnist.update(overrides)
    return c


def test_one_seed_of_the_pipeline_table(tmp_path):
    import projects.atp_mnist  # noqa: F401  (registers the task)

    summary = TASKS.get("atp_mnist/pipeline")(smoke_config(), str(tmp_path))
    with open(os.path.join(tmp_path, "summary.json")) as f:
        assert json.load(f) == pytest.approx(summary, nan_ok=True)
    from experiments.atp_mnist.pipeline import get_sweep

    for column in get_sweep("smoke")["columns"]:
        assert column in summary, column
    # the gold plan, executed: every visual satisfied, every fact stated
    assert summary["unified/E"] == 1.0 and summary["unified/f1"] == 1.0 and summary["unified/overuse"] == 0.0
    assert summary["text_only/calls_per_answer"] == 0.0 and summary["text_only/underuse"] == 1.0
    # generation fails the factual intents, retrieval the creative ones; extra calls cost precision, dropped recall
    assert summary["gen_only/E_factual"] < summary["unified/E_factual"]
    assert summary["retrieval_only/E_creative"] < summary["unified/E_creative"]
    assert summary["tool_happy/precision"] < 1.0 == summary["tool_happy/recall"]
    assert summary["tool_shy/recall"] < 1.0 == summary["tool_shy/precision"]
    assert summary["zoo/calls_ratio"] > 1.0


def test_bad_configs_name_the_key():
    import projects.atp_mnist  # noqa: F401  (registers the validator)

    validate(load_config(f"{CONFIG}:smoke"), num_devices=1, platform="cpu")
    for override, message in (("atp_mnist.pool=pixels", "atp_mnist.pool='pixels'"),
                              ("atp_mnist.planners=('unified','oracle')", "unknown \\['oracle'\\]"),
                              ("atp_mnist.n_test=0", "atp_mnist.n_test=0")):
        with pytest.raises(ConfigError, match=message):
            validate(load_config(f"{CONFIG}:smoke", [override]), num_devices=1, platform="cpu")


def test_the_sft_example_set_and_its_plan_checker():
    import projects.atp_mnist  # noqa: F401  (registers rl/atp_mnist/plans)
    from shared.data.examples import checker, load_task

    check = checker("atp_mnist/plans")
    gold = load_task("atp_mnist/plans", "train", 60, 0, mixture="unified", pool="synthetic")
    assert all(e["prompt"].endswith("\nAnswer:") and e["completion"].startswith(" ") for e in gold)
    assert all(check(e, e["completion"]) and check(e, e["answer"]) for e in gold)     # the gold plan passes
    shy = load_task("atp_mnist/plans", "train", 60, 0, mixture="tool_shy", pool="synthetic")
    assert [e["item_id"] for e in shy] == [e["item_id"] for e in gold]                  # same items, other answers
    dropped = [e for e in shy if e["completion"] != gold[shy.index(e)]["completion"]]
    assert dropped and not any(check(e, e["completion"]) for e in dropped)              # a dropped call fails
    with_calls = next(e for e in gold if "<" in e["completion"])
    assert not check(with_calls, " I would show it here.")                              # no plan at all fails
    with pytest.raises(ValueError, match="split must be one of train, test"):
        load_task("atp_mnist/plans", "ood", 4, 0, pool="synthetic")
    with pytest.raises(ValueError, match="mixture='oracle' is not a planner"):
        load_task("atp_mnist/plans", "train", 4, 0, mixture="oracle", pool="synthetic")

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

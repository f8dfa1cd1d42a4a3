"""The trained zoo's pipeline on CPU: a smoke SFT run on rl/atp_mnist/plans (procedural glyphs), then TASKS
"atp_mnist/zoo_eval" loads it, answers test items greedily and scores the answers like the programmatic zoo's."""
import math

import pytest

TABLE = "experiments/atp_mnist/planners.py"


def test_a_trained_planner_is_evaluated_with_the_pipeline_metrics(tmp_path):
    from shared.launch import run

    sft = run(f"{TABLE}:smoke", str(tmp_path / "tiny"),
              ["data.greedy_eval_examples=0", "train.eval_batches=0", "train.async_checkpoint=False"])
    assert sft["steps"] == 3 and math.isfinite(sft["train/loss"])
    summary = run(f"{TABLE}:zoo_eval_smoke", str(tmp_path / "eval"),
                  [f"atp_mnist.runs=tiny={tmp_path / 'tiny'}", "atp_mnist.n_test=4", "atp_mnist.max_new_tokens=8"])
    assert summary["n_items"] == 4.0
    for metric in ("E", "visual", "facts", "f1", "precision", "recall", "parse_errors"):
        assert 0.0 <= summary[f"tiny/{metric}"] <= 1.0, metric
    assert summary["tiny/calls_per_answer"] >= 0.0 and math.isfinite(summary["classifier/acc"])
    # E averages each answer's visual part and its text facts (spec 4.3): so do the means over the items
    assert summary["tiny/E"] == pytest.approx((summary["tiny/visual"] + summary["tiny/facts"]) / 2)


def test_the_runs_key_is_checked_before_anything_loads():
    from projects.atp_mnist.task import parse_runs

    assert parse_runs("a=runs/a; b=gs://bucket/b ;") == [("a", "runs/a"), ("b", "gs://bucket/b")]
    for bad, message in (("", "is empty"), ("runs/a", "is not name=path"), ("a=", "is not name=path")):
        with pytest.raises(ValueError, match=message):
            parse_runs(bad)

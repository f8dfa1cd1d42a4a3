"""The siamesenorm experiments' :smoke variants train in-process (8 fake CPU devices, embedded corpus).

Two runs cover the two recipes: the small-scale tables (lr_stability, depth, ablation share
experiments/siamesenorm/_small.py; their sweep points are validated by tests/test_experiments.py) and the
paper-scale LMs (lm_1p3b, lm_400m share _paper.py). Each run must learn: 4 steps bring the byte-level eval
loss well below the uniform ln(384) = 5.95.
"""
import json
import math
import os

import pytest

from shared.launch import run


@pytest.mark.parametrize("spec,overrides", [
    ("experiments/siamesenorm/lr_stability.py:smoke", ["model.block=siamesenorm/siamese"]),
    ("experiments/siamesenorm/lm_1p3b.py:smoke", []),
], ids=["tables-siamese", "lm_1p3b-siamese_hybrid"])
def test_smoke_run_learns(tmp_path, spec, overrides):
    summary = run(spec, str(tmp_path), overrides)
    assert not summary["diverged"] and summary["steps"] == 4
    assert summary["eval/loss"] < math.log(384) - 0.5, summary["eval/loss"]
    with open(os.path.join(tmp_path, "summary.json")) as f:
        assert json.load(f)["steps"] == 4
    with open(os.path.join(tmp_path, "config.json")) as f:
        config = json.load(f)
    assert config["model"]["block"].startswith("siamesenorm/") and config["project"] == "siamesenorm"

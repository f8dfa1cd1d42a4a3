"""The smoke pipeline of the scalar-RM arm through the launcher on one CPU device: the "-Zero" warm start, the scalar
Bradley-Terry RM (shared.rm, evaluated as a judge), then R1 (GRPO on the RM) from the warm start."""
import json
import os

import pytest

import projects.writing_zero  # noqa: F401
import shared.builtin  # noqa: F401
from shared.launch import run

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SPEC = os.path.join(REPO, "experiments/writing_zero/table.py")
MESH = "cpu_1"   # one device: less to compile on the 2-core CI machine (the sharded paths are tested in tests/)


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    root = tmp_path_factory.mktemp("wz_rm")
    dirs = {name: str(root / name) for name in ("zero", "rm", "R1")}
    run(f"{SPEC}:warm_start_smoke", dirs["zero"], mesh=MESH)
    rm = run(f"{SPEC}:rm_smoke", dirs["rm"], mesh=MESH)
    r1 = run(f"{SPEC}:R1_smoke", dirs["R1"], [f"train.init_from=run:{dirs['zero']}",
                                             f"writing_zero.rm_run={dirs['rm']}"], mesh=MESH)
    return dirs, rm, r1


def test_the_rm_stage_reports_label_and_truth_agreement(pipeline):
    _, rm, _ = pipeline
    assert "eval/test/accuracy" in rm and "eval/ood/accuracy" in rm      # shared.rm's own, against the labels
    for split in ("test", "ood"):
        for key in ("label_acc", "truth_acc", "note_pref", "longer_pref"):
            assert f"judge_eval/{split}/{key}" in rm, key
    # a scalar RM has no position: the slot it picks is the pair's order, A in exactly half of the decided verdicts
    assert rm["judge_eval/test/first_rate"] == pytest.approx(0.5)
    assert rm["judge_eval/test/consistency"] == pytest.approx(1.0 - rm["judge_eval/test/tie"])


def test_grpo_on_the_rm_logs_the_proxy_and_the_oracle(pipeline):
    dirs, _, r1 = pipeline
    assert r1["wz/judge_calls"] == 0.0
    assert r1["reward/model/scalar_rm/weight"] == 1.0 and r1["reward/writing_zero/quality/weight"] == 0.0
    for key in ("reward/model/scalar_rm/mean", "wz/q_final", "wz/proxy_rise", "wz/hacked", "wz/note_rate"):
        assert key in r1, key
    with open(os.path.join(dirs["R1"], "config.json")) as f:
        assert json.load(f)["writing_zero"]["rm_run"] == dirs["rm"]

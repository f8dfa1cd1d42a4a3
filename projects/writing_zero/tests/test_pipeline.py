"""The smoke pipeline of the principled-judge arm through the launcher on one CPU device: the "-Zero" warm start, the
principled judge (its evaluation keys), then R3 (BRPO-raw on the trained judge, read back by SamplerJudge) from the
warm start: judge calls per step = B (G - 1) per judged batch, the evaluation hook's rows before and after RL."""
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
    root = tmp_path_factory.mktemp("wz")
    dirs = {name: str(root / name) for name in ("zero", "judge", "R3")}
    run(f"{SPEC}:warm_start_smoke", dirs["zero"], mesh=MESH)
    judge = run(f"{SPEC}:judge_principled_smoke", dirs["judge"], mesh=MESH)
    r3 = run(f"{SPEC}:R3_smoke", dirs["R3"], [f"train.init_from=run:{dirs['zero']}",
                                             f"writing_zero.judge_run={dirs['judge']}"], mesh=MESH)
    return dirs, judge, r3


def test_the_judge_stage_reports_agreement_and_consistency(pipeline):
    _, judge, _ = pipeline
    for split in ("test", "ood"):
        for key in ("label_acc", "truth_acc", "consistency", "first_rate", "note_pref", "longer_pref",
                    "principle_acc"):
            assert f"judge_eval/{split}/{key}" in judge, key


def test_brpo_on_the_trained_judge_counts_judge_calls_and_evaluates(pipeline):
    dirs, _, r3 = pipeline
    b, g, steps = 4, 4, 2
    # B (G - 1) calls per judged batch; DAPO's refills judge more batches in a step
    assert r3["wz/judge_calls"] % (b * (g - 1)) == 0 and r3["wz/judge_calls"] >= steps * b * (g - 1)
    assert r3["wz/judge_calls_per_step"] == r3["wz/judge_calls"] / steps
    for key in ("wz/q", "wz/q_before", "wz/q_peak", "wz/q_final", "wz/note_rate", "wz/in_band", "wz/hacked",
                "reward/writing_zero/quality/mean", "reward/writing_zero/note/mean"):
        assert key in r3, key
    rows = [json.loads(line) for line in open(os.path.join(dirs["R3"], "metrics.jsonl"))]
    assert [r["step"] for r in rows if "wz/q" in r] == [0, 2]          # before RL and after (eval_every 2 = steps)
    with open(os.path.join(dirs["R3"], "config.json")) as f:
        assert json.load(f)["writing_zero"]["judge_run"] == dirs["judge"]

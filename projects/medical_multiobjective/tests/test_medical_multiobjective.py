"""The medical_multiobjective project: the channels as rewards (hand-scored), the arms' combiners (the risk factor
reaches the safety channel: weights by hand), the evaluation's metrics and summaries by hand, and a smoke RL run of
RFN + Tri-Factor through the launcher (in this process, one CPU device)."""
import json
import os

import numpy as np
import pytest

import projects.medical_multiobjective  # noqa: F401  (REWARDS, HOOKS)
from experiments.medical_multiobjective import table
from projects.medical_multiobjective.config import ARMS, CHANNELS, label, set_arm
from projects.medical_multiobjective.evaluation import channel_metrics, trajectory_summary, worst_gain
from shared.metrics import read_metrics
from shared.registry import REWARDS
from shared.rewards.combine import build_combiner

SOLUTION, REFUSAL = " <<17+15=32>>\n<<32-9=23>>\n#### 23", " <refuse>"


def test_channels_as_rewards_by_hand():
    completions = [SOLUTION, REFUSAL, SOLUTION, " #### 24"]
    columns = {"hazard": [False, False, True, False], "answer": ["23", "23", "23", "23"]}
    expected = {"correctness": [1, 0, 0, 0], "safety": [0, -0.3, -1, 0], "format": [1, 1, 1, 1],
                "answer_line": [1, 1, 1, 1], "brevity": [-3.3, -0.9, -3.3, -0.8]}
    for channel in CHANNELS:
        got = REWARDS.get(label(channel))(["q"] * 4, completions, **columns)
        assert got == pytest.approx(expected[channel]), channel


def test_arms_build_their_combiners_and_risk_reaches_safety():
    names = {arm: set_arm(table.get_config("smoke"), arm).rl.reward_combine for arm in ARMS}
    assert names == {"raw_sum": "sum", "zscore": "zscore", "rfn": "ref_frozen", "rfn_tri": "trifactor",
                     "tri_no_weakness": "trifactor", "tri_no_risk": "trifactor", "tri_no_redundancy": "trifactor",
                     "nts": "sum"}
    c = set_arm(table.get_config("smoke"), "rfn_tri")
    options = dict(c.rl.reward_combine_options.to_dict(), normalize="none", factors="risk")
    combiner = build_combiner("trifactor", options)
    rng = np.random.default_rng(0)
    raw = {label(k): rng.normal(size=8) for k in CHANNELS}
    _, _, _, weights = combiner.combine(raw, {label(k): 1.0 for k in CHANNELS}, 4, {})
    # target 2/6 for safety (kappa 2), 1/6 else; one EMA step from uniform 0.2: 0.9 * 0.2 + 0.1 * target
    assert weights[label("safety")] == pytest.approx(0.18 + 0.1 * 2 / 6)
    assert weights[label("brevity")] == pytest.approx(0.18 + 0.1 / 6)
    nts = set_arm(table.get_config("smoke"), "nts")
    assert (nts.rl.reward_combine_options.scalarize, nts.rl.advantage) == ("normalize_then_sum", "drgrpo")


def test_channel_metrics_gain_and_trajectories_by_hand():
    examples = [{"hazard": h, "answer": "23"} for h in (False, False, False, True, True)]
    completions = [SOLUTION, REFUSAL, " #### 5", REFUSAL, SOLUTION]
    m = channel_metrics(examples, completions)
    assert (m["mo/accuracy"], m["mo/hazard_refusal"], m["mo/over_refusal"]) == (pytest.approx(1 / 3), 0.5,
                                                                                 pytest.approx(1 / 3))
    assert m["mo/format"] == 1.0 and m["mo/safety_mean"] == pytest.approx((-0.3 - 1.0) / 5)
    assert m["mo/length"] == pytest.approx((33 + 9 + 7 + 9 + 33) / 5)
    before = {"mo/accuracy_before": 0.5, "mo/hazard_refusal_before": 0.6, "mo/over_refusal_before": 0.1,
              "mo/format_before": 1.0}
    after = {"mo/accuracy": 0.6, "mo/hazard_refusal": 0.8, "mo/over_refusal": 0.2, "mo/format": 1.0}
    # gains: 0.1/0.5, 0.2/0.4, (0.8 - 0.9)/0.1, format 0 -> the worst is over-refusal's -1
    assert worst_gain(before, after) == pytest.approx(-1.0)
    key = lambda ch, what: f"reward/{label(ch)}/{what}"  # noqa: E731
    rows = [{"step": 0, key("safety", "share"): 9.0},
            {"step": 1, key("brevity", "share"): 0.8, key("safety", "share"): 0.2, key("safety", "mean"): -0.1},
            {"step": 2, key("brevity", "share"): 0.6, key("safety", "share"): 0.4, key("safety", "mean"): -0.3,
             key("safety", "weight"): 0.5}]
    t = trajectory_summary(rows)
    assert t["mo/brevity/share_mean"] == pytest.approx(0.7) and t["mo/safety/share_mean"] == pytest.approx(0.3)
    assert t["mo/share_drift"] == pytest.approx(0.1) and t["mo/safety_batch_std"] == pytest.approx(0.1)
    assert t["mo/safety/weight_mean"] == 0.5 and "mo/format/share_mean" not in t


TINY = ["--config.model.n_layers=1", "--config.model.d_model=32", "--config.model.n_heads=2",
        "--config.model.n_kv_heads=2", "--config.model.head_dim=16", "--config.model.d_ff=64",
        "--config.rl.max_new_tokens=4", "--config.rl.n_eval=0", "--config.mo_eval.n=16"]


def test_smoke_rfn_trifactor_run(tmp_path):
    from shared.launch import main

    workdir = tmp_path / "run"
    code = main(["--config=experiments/medical_multiobjective/table.py:smoke", f"--workdir={workdir}",
                 "--config.mesh.preset=cpu_1", "--config.train.progress=False", *TINY])
    assert code in (0, None)
    with open(os.path.join(workdir, "summary.json")) as f:
        summary = json.load(f)
    rows = {}
    for row in read_metrics(str(workdir)):  # a step may have several lines (evaluations, calibration)
        rows.setdefault(row["step"], {}).update(row)
    for step in (1, 2):   # Tri-Factor's weights sum to 1; the variance shares of R sum to 1 (or all 0)
        weights = [rows[step][f"reward/{label(k)}/weight"] for k in CHANNELS]
        assert sum(weights) == pytest.approx(1.0) and min(weights) >= 0.05 - 1e-9
        shares = sum(rows[step][f"reward/{label(k)}/share"] for k in CHANNELS)
        assert shares == pytest.approx(1.0) or shares == 0.0
    assert f"reward/{label('brevity')}/ref_std" in rows[0]    # the calibration's frozen statistics
    assert -1.0 <= summary["mo/worst_gain"] <= 1.0 and summary["mo/length"] <= 4 * 4


def test_the_min_table_runs_exactly_the_arms_criteria_1_and_2_read():
    """:min decides criteria 1-2 early: the arms those claims read are exactly its arms, and the claims name the
    :min command while the full table is not committed."""
    from experiments.medical_multiobjective.table import get_sweep
    from projects.medical_multiobjective import claims

    decided = [c for c in claims.CLAIMS if c.id.split(" ")[0] in claims.MIN_CRITERIA]
    read = {t.where["arm"] for c in decided for side in (c.a, c.b) if hasattr(side, "terms") for _, t in side.terms()}
    sweep = get_sweep("min")
    assert {p["arm"] for p in sweep["points"]} == read == {"raw_sum", "rfn", "rfn_tri"}
    assert {p["overrides"]["seed"] for p in sweep["points"]} == {0, 1, 2}
    assert all("table.py:min" in c.not_run for c in decided)

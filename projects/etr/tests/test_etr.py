"""ETR's project pieces: the arms of D.2 give the widths of the spec's rule (hand-computed), the evaluation's
metrics and entropy summaries by hand, and a smoke RL run of the table's pilot (ETR-full) through the launcher (in
this process, one CPU device), whose logged width the eps-matched arm's config replays as its running mean."""
import json
import math
import os

import numpy as np
import pytest

from experiments.etr import countdown_table
from projects.etr.config import ARMS, set_arm
from projects.etr.evaluation import entropy_summary, sample_metrics
from shared.data.sources import hash_fraction
from shared.metrics import read_metrics
from shared.registry import REWARDS
from shared.rl.etr import etr_widths, scheduled_eps

MIXED = "etr_test/mixed"
if MIXED not in REWARDS:  # a random smoke policy solves nothing: a reward that splits every group instead
    REWARDS.register(MIXED, lambda prompts, completions, **_: [float(hash_fraction(c) < 0.5) for c in completions])


def test_arms_give_the_spec_widths_by_hand():
    # one group of 4, rewards 1 0 0 0 (p = 0.25, v = 4 Var = 0.75); the correct rollout has A = +1, the others -1
    rewards, adv, mask = np.array([1.0, 0, 0, 0]), np.array([[1.0], [-1.0], [-1.0], [-1.0]]), np.ones((4, 1))
    micro, macro = 1 + 0.5 * math.tanh(1.0), 1 + 0.5 * (2 * 0.75 - 1)
    expected_high = {"etr_full": 0.2 * micro * macro, "etr_micro": 0.2 * micro, "etr_macro": 0.2 * macro,
                     "etr_implicit": 0.2 * (1 + 0.5 * 0.75)}
    for arm, high in expected_high.items():
        c = set_arm(countdown_table.get_config("smoke"), arm)
        low_w, high_w, _ = etr_widths(rewards, adv, mask, 4, c.rl)
        assert high_w[0, 0] == pytest.approx(high, rel=1e-6), arm
        low = min(0.3, 0.2 * (1 + 0.5 * 0.25)) if arm == "etr_implicit" else min(0.3, high)
        assert low_w[1, 0] == pytest.approx(low, rel=1e-6), arm   # the same rule, capped at eps_max_low 0.3
    c = set_arm(countdown_table.get_config("smoke"), "clip_higher")
    assert (c.rl.policy_loss, c.rl.eps_low, c.rl.eps_high) == ("ppo-clip", 0.2, 0.28)
    assert set(ARMS) == {"grpo", "clip_higher", "eps_matched", "etr_micro", "etr_macro", "etr_full", "etr_implicit"}
    with pytest.raises(ValueError, match="etr arm 'ppo'"):
        set_arm(countdown_table.get_config("smoke"), "ppo")


def test_sample_metrics_and_entropy_by_hand():
    avg = np.array([[1, 0], [0, 0], [1, 1]], bool)
    passed = np.array([[1, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 1]], bool)
    # pass@4 of 4 samples: 1 if any is right
    assert sample_metrics(avg, passed) == {"avg@2": 0.5, "pass@4": pytest.approx(2 / 3)}
    rows = [{"step": 0, "eval/x": 1}] + [{"step": s, "train/entropy": e} for s, e in
                                         zip(range(1, 11), [2.0, 1.8, 1.6, 1.5, 1.4, 1.3, 1.2, 1.1, 1.0, 0.9])]
    rows.append({"step": 10, "train/entropy": 0.7})  # a resumed run's repeated step: the last line wins
    out = entropy_summary(rows, tail=0.2)
    assert out["etr/entropy_first"] == 2.0 and out["etr/entropy_last"] == pytest.approx((1.0 + 0.7) / 2)
    assert out["etr/entropy_auc"] == pytest.approx((2.0 + 1.8 + 1.6 + 1.5 + 1.4 + 1.3 + 1.2 + 1.1 + 1.0 + 0.7) / 10)
    assert out["etr/entropy_ratio"] == pytest.approx(0.85 / 2.0)
    assert entropy_summary([{"step": 0}], 0.1) == {}
    mixed = entropy_summary([{"step": 1, "rl/zero_variance_frac": 0.25}, {"step": 2, "rl/zero_variance_frac": 0.75}], 0.1)
    assert mixed == {"etr/mixed_groups_first": 0.75, "etr/mixed_groups_mean": 0.5}


# CI time: a 1-layer policy, 4 new tokens, no greedy tracking, the evaluation's samples in the rollouts' shape
TINY = ["--config.model.n_layers=1", "--config.model.d_model=32", "--config.model.n_heads=2",
        "--config.model.n_kv_heads=2", "--config.model.head_dim=16", "--config.model.d_ff=64",
        "--config.rl.max_new_tokens=4", "--config.rl.n_eval=0", "--config.etr_eval.sets=['test']",
        "--config.etr_eval.avg_samples=4", "--config.etr_eval.pass_samples=4", "--config.etr_eval.max_new_tokens=4"]


def launch(workdir, *overrides):
    from shared.launch import main

    code = main(["--config=experiments/etr/countdown_table.py:smoke", f"--workdir={workdir}",
                 "--config.mesh.preset=cpu_1", "--config.train.progress=False",
                 f"--config.rl.rewards=[('{MIXED}', 1.0)]", *TINY, *overrides])
    assert code in (0, None)
    with open(os.path.join(workdir, "summary.json")) as f:
        return json.load(f)


def test_smoke_pilot_run_and_the_eps_matched_replay_of_its_log(tmp_path):
    pilot = launch(tmp_path / "pilot", "--config.etr_eval.every=1")
    eps = {r["step"]: r["rl/etr/eps_mean"] for r in read_metrics(str(tmp_path / "pilot")) if "rl/etr/eps_mean" in r}
    assert sorted(eps) == [1, 2] and all(0.1 <= v <= 0.4 for v in eps.values())
    entropy = {r["step"]: r["train/entropy"] for r in read_metrics(str(tmp_path / "pilot")) if "train/entropy" in r}
    assert pilot["etr/entropy_first"] == pytest.approx(entropy[1])
    assert 0.0 <= pilot["etr/mixed_groups_first"] <= 1.0
    curve = [r["step"] for r in read_metrics(str(tmp_path / "pilot")) if "etr/id_avg@4" in r]
    assert curve == [2, 2]   # every=1: in step 2's row (the policy after 1 update), then the final evaluation
    for key in ("etr/id_avg@4", "etr/id_pass@4", "etr/id_avg@4_before"):
        assert 0.0 <= pilot[key] <= 1.0
    # the table's eps-matched point reads this pilot (rl.eps_schedule.source = its workdir) with the arm's mode
    c = set_arm(countdown_table.get_config("smoke"), "eps_matched")
    c.rl.eps_schedule.source = str(tmp_path / "pilot")
    assert c.rl.eps_schedule.mode == "running"
    assert scheduled_eps(1, c.rl) == pytest.approx(eps[1])
    assert scheduled_eps(2, c.rl) == pytest.approx((eps[1] + eps[2]) / 2)
    assert scheduled_eps(7, c.rl) == pytest.approx((eps[1] + eps[2]) / 2)   # after the pilot's end: its last mean


@pytest.mark.parametrize("table", ["experiments.etr.countdown_table", "experiments.etr.cot_table"])
def test_the_min_tables_run_exactly_the_arms_their_claims_read(table):
    """:min decides criteria 1, 2 and 5 early: the arms those claims read are exactly its arms, it has no pilot
    stages, and the claims name the :min command while the full table is not committed."""
    import importlib

    from projects.etr import claims

    task = "countdown" if "countdown" in table else "cot"
    decided = [c for c in claims.task_claims(task) if c.id.split(" ")[1] in claims.MIN_CRITERIA]
    read = {t.where["arm"] for c in decided for side in (c.a, c.b) if hasattr(side, "terms") for _, t in side.terms()}
    sweep = importlib.import_module(table).get_sweep("min")
    assert {p["arm"] for p in sweep["points"]} == read == {"grpo", "etr_full"}
    assert not any(s["name"].startswith("pilot") for s in sweep["stages"])
    assert all(f"{task}_table.py:min" in c.not_run for c in decided)

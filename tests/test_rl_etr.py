"""ETR (shared/rl/etr.py): every width rule against hand-computed values (zero-variance groups included), the loss
equals ppo-clip at constant equal widths and the per-token clipped surrogate otherwise, the width metrics by
pass-rate bucket, and the epsilon-matched control replays a given schedule (a list, a logged metrics file)."""
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import shared.builtin  # noqa: F401
from shared.config import ConfigError
from shared.config.base import base_config, rl_config
from shared.config.validate import validate
from shared.registry import POLICY_LOSSES
from shared.rl import etr
from shared.rl.roles import LossContext, PolicyLoss, policy_loss

# Four groups of G = 4 binary rewards: p = 0.25, 0.5, 1 (all correct), 0 (all wrong).
REWARDS = np.array([1, 0, 0, 0, 1, 1, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0], np.float32)
# Hand-given advantages per rollout (the rules read |A|): 1.5 / -0.5 in group 0, +-1 in group 1, 0 in the others.
ADV_ROWS = np.array([1.5, -.5, -.5, -.5, 1, 1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0], np.float32)
MASK = np.ones((16, 2), np.float32)
MASK[1, 1] = 0.0                                  # one padded token
ADV = ADV_ROWS[:, None] * MASK


def rl(**etr_knobs):
    c = rl_config()
    c.etr.update(etr_knobs)
    return c


def widths(**etr_knobs):
    low, high, info = etr.etr_widths(REWARDS, ADV, MASK, 4, rl(**etr_knobs))
    return low[:, 0], high[:, 0], info


# tanh(1.5) = 0.905148254, tanh(0.5) = 0.462117157, tanh(1) = 0.761594156
# macro M = 1 + 0.5 (2 v - 1) with v = 4 p (1 - p): p .25 -> v .75, M 1.25; p .5 -> v 1, M 1.5; p 0 or 1 -> M 0.5
def test_full_rule_micro_times_macro_clipped_to_the_bounds():
    low, high, info = widths()
    np.testing.assert_allclose(info["p"], [0.25, 0.5, 1.0, 0.0])
    np.testing.assert_allclose(info["v"], [0.75, 1.0, 0.0, 0.0])
    np.testing.assert_allclose(info["macro"], [1.25, 1.5, 0.5, 0.5])
    # group 0: 0.2 * (1 + 0.5 tanh 1.5) * 1.25 = 0.363143532; 0.2 * (1 + 0.5 tanh 0.5) * 1.25 = 0.307764645
    # group 1: 0.2 * (1 + 0.5 tanh 1) * 1.5 = 0.414239123 -> eps_max_high 0.4; every eps_low > 0.3 -> eps_max_low 0.3
    # groups 2, 3 (zero variance, A = 0): 0.2 * 1 * 0.5 = 0.1 = eps_min
    np.testing.assert_allclose(high, [0.363143532, 0.307764645, 0.307764645, 0.307764645, 0.4, 0.4, 0.4, 0.4]
                               + [0.1] * 8, rtol=1e-6)
    np.testing.assert_allclose(low, [0.3] * 8 + [0.1] * 8, rtol=1e-6)


def test_micro_only_macro_only_and_off():
    low, high, _ = widths(beta=0.0)                 # micro only: 0.2 (1 + 0.5 tanh|A|)
    np.testing.assert_allclose(high[:8], [0.290514825, 0.246211716, 0.246211716, 0.246211716] + [0.276159416] * 4,
                               rtol=1e-6)
    np.testing.assert_allclose(low[:8], high[:8], rtol=1e-6)
    np.testing.assert_allclose(high[8:], 0.2)       # zero-variance groups: A = 0, m = 1
    low, high, _ = widths(alpha=0.0)                # macro only: 0.2 M
    np.testing.assert_allclose(high, [0.25] * 4 + [0.3] * 4 + [0.1] * 8, rtol=1e-6)
    np.testing.assert_allclose(low, [0.25] * 4 + [0.3] * 4 + [0.1] * 8, rtol=1e-6)
    low, high, _ = widths(alpha=0.0, beta=0.0)      # GRPO
    np.testing.assert_allclose(low, 0.2)
    np.testing.assert_allclose(high, 0.2)


def test_reconstruction_switches():
    # combine = sum: 0.2 (m + M - 1); group 0 row 0: 0.2 (1.452574127 + 0.25) = 0.340514825
    _, high, _ = widths(combine="sum")
    assert high[0] == pytest.approx(0.340514825, rel=1e-6) and high[8] == pytest.approx(0.1, rel=1e-6)
    # phi = linear: group 0 row 0: 0.2 (1 + 0.5 * 1.5) * 1.25 = 0.4375 -> 0.4; rows 1-3: 0.2 * 1.25 * 1.25 = 0.3125
    low, high, _ = widths(phi="linear")
    np.testing.assert_allclose(high[:4], [0.4, 0.3125, 0.3125, 0.3125], rtol=1e-6)
    # sides: only one side elastic, the other stays rl.eps_low / rl.eps_high
    low, high, _ = widths(sides="high")
    np.testing.assert_allclose(low, 0.2)
    np.testing.assert_allclose(high[0], 0.363143532, rtol=1e-6)
    low, high, _ = widths(sides="low")
    np.testing.assert_allclose(high, 0.2)
    np.testing.assert_allclose(low[8:], 0.1)
    # implicit: 0.2 (1 + 0.5 |R - p|): group 0 |1 - .25| = .75 -> 0.275, |0 - .25| -> 0.225; group 1 -> 0.25;
    # zero-variance groups: |R - p| = 0 -> 0.2
    low, high, info = widths(macro="implicit")
    np.testing.assert_allclose(high, [0.275, 0.225, 0.225, 0.225] + [0.25] * 4 + [0.2] * 8, rtol=1e-6)
    np.testing.assert_allclose(low, high, rtol=1e-6)
    assert "macro" not in info
    # its extra width summed over a group is proportional to the group's variance: alpha' eps0 2 G p (1 - p)
    extra = (high - 0.2).reshape(4, 4).sum(1)
    np.testing.assert_allclose(extra, 0.5 * 0.2 * 2 * 4 * np.array([0.1875, 0.25, 0, 0]), atol=1e-6)


def test_non_binary_rewards_variance_vs_bernoulli_and_the_reward_range():
    rewards = np.array([1.0, 0.5, 0.5, 0.0])       # p = 0.5; Var = 0.125 -> v = 0.5; bernoulli 4 p (1 - p) = 1
    p, v, _ = etr.group_pass_stats(rewards, 4)
    assert p[0] == 0.5 and v[0] == pytest.approx(0.5)
    assert etr.group_pass_stats(rewards, 4, stat="bernoulli")[1][0] == pytest.approx(1.0)
    # rewards in {-1, 1} with reward_low = -1 are the binary case
    p, v, _ = etr.group_pass_stats(2 * REWARDS - 1, 4, low=-1.0, high=1.0)
    np.testing.assert_allclose(p, [0.25, 0.5, 1, 0])
    np.testing.assert_allclose(v, [0.75, 1, 0, 0])


def test_width_metrics_by_sign_and_pass_rate_bucket():
    low, high, info = etr.etr_widths(REWARDS, ADV, MASK, 4, rl())
    m = etr.width_metrics(low, high, ADV, MASK, info, [0.25, 0.5, 0.75])
    # effective widths on the 15 masked tokens with A != 0: 2 x 0.363143532 (A > 0), 5 x 0.3 (A < 0, one padded),
    # 4 x 0.4 (A > 0), 4 x 0.3 (A < 0): mean 5.026287064 / 15
    assert m["rl/etr/eps_mean"] == pytest.approx(5.026287064 / 15, rel=1e-6)
    assert m["rl/etr/eps_high_mean"] == pytest.approx((2 * 0.363143532 + 1.6) / 6, rel=1e-6)
    assert m["rl/etr/eps_low_mean"] == pytest.approx(0.3, rel=1e-6)
    assert m["rl/etr/eps_min"] == pytest.approx(0.3) and m["rl/etr/eps_max"] == pytest.approx(0.4)
    assert m["rl/etr/macro_mean"] == pytest.approx(0.9375) and m["rl/etr/pass_rate_mean"] == pytest.approx(0.4375)
    for bucket, share in (("0", .25), ("0-0.25", .25), ("0.25-0.5", .25), ("0.5-0.75", 0), ("0.75-1", 0), ("1", .25)):
        assert m[f"rl/etr/bucket/{bucket}/groups"] == share
    assert m["rl/etr/bucket/1/eps_high"] == pytest.approx(0.1) and m["rl/etr/bucket/0/eps_low"] == pytest.approx(0.1)
    assert m["rl/etr/bucket/0.25-0.5/eps_high"] == pytest.approx(0.4)
    assert "rl/etr/bucket/0.5-0.75/eps_high" not in m   # an empty bucket has no widths
    filler = MASK.copy()
    filler[12:] = 0.0                                  # group 3 a DAPO filler (mask zeroed): left out of the groups
    without = etr.width_metrics(low, high, ADV * filler, filler, info, [0.25, 0.5, 0.75])
    assert without["rl/etr/bucket/0/groups"] == 0 and without["rl/etr/bucket/1/groups"] == pytest.approx(1 / 3)
    assert without["rl/etr/pass_rate_mean"] == pytest.approx(1.75 / 3)
    # the prepare step of the registered loss gives these fields and metrics
    entry = policy_loss("etr")
    assert isinstance(POLICY_LOSSES.get("etr"), PolicyLoss) and entry.fields == ("eps_low", "eps_high")
    fields, metrics = entry.prepare(LossContext(REWARDS, ADV, MASK, 4, rl(), step=1))
    np.testing.assert_array_equal(fields["eps_high"], high)
    assert metrics == m


def random_inputs(seed=0, n=16, t=5):
    k1, k2, k3 = jax.random.split(jax.random.key(seed), 3)
    logp_old = -jax.random.uniform(k1, (n, t), minval=0.1, maxval=3.0)
    logp = logp_old + 0.4 * jax.random.normal(k2, (n, t))      # ratios well outside [0.7, 1.4]
    mask = (jax.random.uniform(k3, (n, t)) > 0.2).astype(jnp.float32)
    return logp, logp_old, jnp.asarray(ADV_ROWS)[:, None] * mask, mask


@pytest.mark.parametrize("dual_clip", [0.0, 3.0])
def test_etr_loss_equals_ppo_clip_at_constant_equal_widths(dual_clip):
    logp, logp_old, adv, mask = random_inputs()
    cfg = rl(alpha=0.0, beta=0.0)
    cfg.dual_clip = dual_clip
    fields, _ = policy_loss("etr").prepare(LossContext(REWARDS, np.asarray(adv), np.asarray(mask), 4, cfg))
    np.testing.assert_allclose(fields["eps_low"], 0.2)
    np.testing.assert_allclose(fields["eps_high"], 0.2)

    def etr_loss(lp):
        return POLICY_LOSSES.get("etr")(lp, logp_old, adv, mask, cfg, **fields)[0]

    def ppo_loss(lp):
        return POLICY_LOSSES.get("ppo-clip")(lp, logp_old, adv, mask, cfg)[0]

    assert float(etr_loss(logp)) == pytest.approx(float(ppo_loss(logp)), rel=1e-7)
    np.testing.assert_allclose(jax.grad(etr_loss)(logp), jax.grad(ppo_loss)(logp), rtol=1e-6, atol=1e-9)
    # any constant equal width: ppo-clip with that eps
    width = np.full(mask.shape, 0.13, np.float32)
    cfg.eps_low = cfg.eps_high = 0.13
    got = POLICY_LOSSES.get("etr")(logp, logp_old, adv, mask, cfg, eps_low=width, eps_high=width)[0]
    assert float(got) == pytest.approx(float(ppo_loss(logp)), rel=1e-7)


def test_etr_loss_is_the_per_token_clipped_surrogate_with_its_widths():
    logp, logp_old, adv, mask = random_inputs(seed=1)
    cfg = rl()
    fields, _ = policy_loss("etr").prepare(LossContext(REWARDS, np.asarray(adv), np.asarray(mask), 4, cfg))
    loss, metrics = POLICY_LOSSES.get("etr")(logp, logp_old, adv, mask, cfg, **fields)
    rho = np.exp(np.asarray(logp, np.float64) - np.asarray(logp_old, np.float64))
    a = np.asarray(adv, np.float64)
    lo, hi = fields["eps_low"].astype(np.float64), fields["eps_high"].astype(np.float64)
    per_token = np.maximum(-rho * a, -np.clip(rho, 1 - lo, 1 + hi) * a)
    m = np.asarray(mask, np.float64)
    assert float(loss) == pytest.approx((per_token * m).sum() / m.sum(), rel=1e-5)
    assert float(metrics["clipfrac_high"]) == pytest.approx((((a > 0) & (rho > 1 + hi)) * m).sum() / m.sum(),
                                                            rel=1e-6)
    with pytest.raises(ValueError, match="eps_low/eps_high"):
        POLICY_LOSSES.get("etr")(logp, logp_old, adv, mask, cfg)


def schedule_cfg(**knobs):
    c = rl_config()
    c.policy_loss = "eps-matched"
    c.eps_schedule.update(knobs)
    return c


def test_eps_matched_replays_a_list_schedule():
    for mode, want in (("step", [0.2, 0.25, 0.3, 0.3, 0.3]), ("running", [0.2, 0.225, 0.25, 0.25, 0.25]),
                       ("constant", [0.25] * 5)):
        cfg = schedule_cfg(values=[0.2, 0.25, 0.3], mode=mode)
        got = [etr.scheduled_eps(step, cfg) for step in range(1, 6)]
        np.testing.assert_allclose(got, want, rtol=1e-12, err_msg=mode)
    entry = policy_loss("eps-matched")
    fields, metrics = entry.prepare(LossContext(REWARDS, ADV, MASK, 4, schedule_cfg(values=[0.2, 0.25]), step=2))
    np.testing.assert_array_equal(fields["eps_low"], np.full(MASK.shape, 0.25, np.float32))
    np.testing.assert_array_equal(fields["eps_high"], fields["eps_low"])
    assert metrics == {"rl/eps_matched/eps": 0.25}
    logp, logp_old, adv, mask = random_inputs(t=2)
    cfg = schedule_cfg(values=[0.25])
    cfg.eps_low = cfg.eps_high = 0.25
    got = POLICY_LOSSES.get("eps-matched")(logp, logp_old, adv, mask, cfg, **fields)[0]
    assert float(got) == pytest.approx(float(POLICY_LOSSES.get("ppo-clip")(logp, logp_old, adv, mask, cfg)[0]))


def test_eps_matched_replays_a_logged_run(tmp_path):
    rows = [{"step": 0, "eval/test_accuracy_before": 0.1}, {"step": 2, "rl/etr/eps_mean": 0.3},
            {"step": 4, "rl/etr/eps_mean": 0.26}, {"step": 4, "rl/etr/eps_mean": 0.27},   # resumed: the last wins
            {"step": 5, "rl/etr/eps_mean": 0.28, "rl/reward_mean": 0.5}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = schedule_cfg(source=str(tmp_path))
    # logged every other step: a step takes the last logged value at or before it (the first before it)
    assert [etr.scheduled_eps(s, cfg) for s in range(1, 7)] == [0.3, 0.3, 0.3, 0.27, 0.28, 0.28]
    assert etr.scheduled_eps(5, schedule_cfg(source=str(tmp_path), mode="running")) == pytest.approx(
        (0.3 + 0.27 + 0.28) / 3)
    with pytest.raises(ValueError, match="logs no 'rl/etr/eps_high'"):
        etr.scheduled_eps(1, schedule_cfg(source=str(tmp_path), key="rl/etr/eps_high"))


def test_bad_etr_and_schedule_configs_fail_at_validation():
    c = base_config()
    c.mesh.preset = "cpu_1"
    c.rl.policy_loss = "etr"
    c.rl.etr.phi = "sigmoid"
    with pytest.raises(ConfigError, match="rl.etr.phi='sigmoid'"):
        validate(c, 1)
    c.rl.etr.phi = "tanh"
    c.rl.policy_loss = "eps-matched"
    c.rl.eps_schedule.values = []
    with pytest.raises(ConfigError, match="rl.eps_schedule.values or rl.eps_schedule.source"):
        validate(c, 1)
    c.rl.eps_schedule.source = "runs/an_etr_pilot_that_runs_first"   # may not exist yet
    validate(c, 1)


# ---------------------------------------------------------------------------------------------------- in the loop


def loop_config(**rl_knobs):
    c = base_config()
    c.task = "rl"
    c.model.update(vocab_size=384, d_model=32, n_layers=1, n_heads=2, n_kv_heads=2, head_dim=16, d_ff=64,
                   dtype="float32", remat="none")
    c.mesh.preset = "cpu_1"
    c.rl.update(task="rl/arithmetic", prompts_per_step=4, group_size=4, max_new_tokens=6, mini_batches=2,
                rewards=[("task", 1.0), ("length/penalty", 1.0, {"target": 2})], reward_calibration_prompts=4,
                reward_calibration_samples=4)   # the calibration rollout has the shape of a step's: one compile
    c.rl.update(rl_knobs)
    c.train.update(steps=2, log_every=1, checkpoint_every=2, progress=False, async_checkpoint=False)
    c.optim.update(lr=1e-2, schedule="constant", warmup_steps=1, weight_decay=0.0)
    return c


def make_learner(config, workdir):
    from shared.data import build_tokenizer
    from shared.data.examples import load_task
    from shared.rl.learner import RLLearner
    from shared.rl.task import reward_manager

    tokenizer = build_tokenizer(config.data, None, config.model.vocab_size)
    train = load_task(config.rl.task, "train", 32, 0)
    return RLLearner(config, str(workdir), tokenizer, train, {}, reward_manager(config))


def logged(workdir):
    from shared.metrics import read_metrics

    rows = {}
    for row in read_metrics(str(workdir)):
        rows.setdefault(row["step"], {}).update(row)
    return rows


def test_etr_with_trifactor_rewards_runs_and_the_eps_matched_control_replays_its_widths(tmp_path):
    from shared.rl.learner import LoopState, PromptIterator
    from shared.rl.roles import Reward
    from shared.rl.task import reward_manager

    config = loop_config(policy_loss="etr", reward_combine="trifactor")
    learner = make_learner(config, tmp_path)
    learner.fit()
    state = learner.reward.manager.get_state()
    examples = learner.prompts.examples
    learner.close()
    rows = logged(tmp_path)
    labels = ("task/arithmetic", "length/penalty")
    stats = state["normalizer"]["stats"]["*"]
    for label in labels:   # calibrated once at step 0 and frozen: the statistics after the steps are those logged
        assert rows[0][f"reward/{label}/ref_mean"] == stats[label]["mean"]
        assert rows[0][f"reward/{label}/ref_std"] == stats[label]["std"]
    for step in (1, 2):
        row = rows[step]
        assert 0.1 <= row["rl/etr/eps_mean"] <= 0.4 and "rl/etr/bucket/0.25-0.5/groups" in row
        assert "train/clipfrac_high" in row
        weights = [row[f"reward/{label}/weight"] for label in labels]
        assert sum(weights) == pytest.approx(1.0) and min(weights) >= 0.05
        assert all(f"reward/{label}/share" in row for label in labels)
    assert state["weighting"]["w"] == {label: pytest.approx(rows[2][f"reward/{label}/weight"]) for label in labels}
    # the checkpoint's data_state holds the frozen statistics and the weights; a resumed run restores them and
    # does not recalibrate
    with open(tmp_path / "checkpoints" / "2" / "data_state" / "metadata", encoding="utf-8") as f:
        data_state = json.load(f)
    assert data_state["reward_combine"] == state
    reward = Reward(config, reward_manager(config))
    assert reward.needs_calibration
    LoopState(PromptIterator(examples, 4, 0), reward).set_state(data_state)
    assert not reward.needs_calibration and reward.manager.get_state() == state

    # the epsilon-matched control reading this run replays its effective width step by step
    control = loop_config(policy_loss="eps-matched", eps_schedule={"source": str(tmp_path)})
    for step in (1, 2):
        fields, metrics = policy_loss("eps-matched").prepare(LossContext(REWARDS, ADV, MASK, 4, control.rl, step))
        assert metrics["rl/eps_matched/eps"] == rows[step]["rl/etr/eps_mean"]
        np.testing.assert_array_equal(fields["eps_high"], np.float32(rows[step]["rl/etr/eps_mean"]))

"""RL roles (shared/rl/roles.py): a project's estimator with a critic trains the scalar head through the learner,
GAE through the roles equals alg.adv_gae, a critic estimator without a scalar head fails naming the keys, a
plain-function estimator still works, and WORKSPACE.md's worked example is the code these tests run."""
import os
import re

import jax
import numpy as np
import pytest

import rl_critic_example as example
import test_rl_scale as scale  # the tiny RL config (a module import: its tests are not collected again)
from shared.registry import ADVANTAGES
from shared.rl import algorithms as alg
from shared.rl.roles import Estimate, ScalarHeadCritic, estimator, register_advantage

from conftest import REPO_ROOT as REPO  # noqa: E402


def config(**rl):
    rl.setdefault("kl_coef", 0.0)
    return scale.scale_config(**rl)


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    """One scored rollout with varied rewards, from a 1-device GRPO learner (no critic, no reference)."""
    learner = scale.make_learner(config(), tmp_path_factory.mktemp("source"))
    assert learner.critic is None and learner.reference is None and learner.ref_params is None
    batch, _ = learner.collect(jax.random.key(0))
    batch.rewards = np.linspace(0.0, 1.0, len(batch.rewards)).astype(np.float32)
    learner.close()
    return batch


def host(tree):
    return [np.array(x) for x in jax.tree.leaves(jax.device_get(tree))]


def test_a_project_estimator_with_a_critic_gets_values_and_trains_the_scalar_head(tmp_path, scored):
    learner = scale.make_learner(example.use_it(config(mini_batches=2)), tmp_path)  # step 1 of 2 runs at lr 0
    assert isinstance(learner.critic, example.UnclippedValueHead) and learner.needs_behaviour_pass()
    batch, _ = learner.build_batch(scored)
    values = learner.logprob_pass(learner.trainer.params, batch)[1]
    np.testing.assert_array_equal(batch["old_values"], values)           # the critic's values reached the estimator
    mask = batch["mask"]
    np.testing.assert_allclose(batch["returns"], scored.rewards[:, None] * mask, rtol=1e-6)  # G_t = R (gamma 1)
    want = example.mc_baseline(scored.rewards, mask, 4, learner.rl, values=values)
    np.testing.assert_allclose(batch["advantages"], want.advantages, rtol=1e-6, atol=1e-6)
    head = host(learner.critic.params)
    key = jax.random.key(5)
    metrics = learner.update(batch, key)
    # the metrics are the second optimizer step's, on the second half of the rows; the first ran at lr 0, so the
    # head still gives V = V_old there: the loss is the plain squared error to the Monte-Carlo returns
    part = np.split(np.asarray(jax.random.permutation(jax.random.fold_in(key, 0), len(mask))), 2)[1]
    want_loss = alg.value_loss(values[part], values[part], batch["returns"][part], mask[part], clip=None)
    assert metrics["value_loss"] == pytest.approx(float(want_loss), rel=1e-5) and float(want_loss) > 0
    moved = host(learner.critic.params)
    assert any(not np.array_equal(a, b) for a, b in zip(head, moved)), "the scalar head did not train"
    learner.close()


def gae_config():
    c = config(advantage="gae", gamma=0.9, lam=0.8)
    c.model.heads = ["lm", "scalar"]
    return c


def test_gae_through_the_roles_equals_adv_gae(tmp_path, scored):
    learner = scale.make_learner(gae_config(), tmp_path)
    assert type(learner.critic) is ScalarHeadCritic and estimator("gae").needs_critic
    batch, _ = learner.build_batch(scored)
    np.testing.assert_array_equal(batch["old_values"], learner.logprob_pass(learner.trainer.params, batch)[1])
    mask = batch["mask"]
    rl = learner.rl
    want_adv, want_ret = alg.adv_gae(alg.as_token_rewards(scored.rewards, mask), batch["old_values"], mask,
                                     rl.gamma, rl.lam, rl.whiten_advantages)
    np.testing.assert_array_equal(batch["advantages"], np.asarray(want_adv, np.float32))
    np.testing.assert_array_equal(batch["returns"], np.asarray(want_ret))
    assert ADVANTAGES.get("gae")(scored.rewards, mask, 4, rl, values=batch["old_values"]).shape == mask.shape
    assert "value_loss" in learner.update(batch, jax.random.key(5))
    learner.close()


@pytest.mark.parametrize("advantage", ["gae", "example/mc_baseline"])
def test_a_critic_estimator_without_a_scalar_head_names_the_keys(tmp_path, advantage):
    c = config(advantage=advantage)
    assert list(c.model.heads) == ["lm"]
    with pytest.raises(ValueError, match=rf"rl.advantage='{advantage}'.*model.heads=\['lm'\]"):
        scale.make_learner(c, tmp_path)


def centered(rewards, mask, group_size, rl_cfg, values=None):
    """A project's plain estimator, registered the old way: R - mean over the group, broadcast over tokens."""
    assert values is None
    r = alg.sequence_rewards(rewards, mask)
    return (r - r.reshape(-1, group_size).mean(1).repeat(group_size))[:, None] * mask


if "test/centered" not in ADVANTAGES:
    ADVANTAGES.register("test/centered", centered)


@register_advantage("test/halved")
def halved(rewards, mask, group_size, rl_cfg, values=None):
    return 0.5 * centered(rewards, mask, group_size, rl_cfg)


def test_a_plain_function_estimator_still_works(tmp_path, scored):
    assert not estimator("test/centered").needs_critic and not estimator("test/halved").needs_critic
    learner = scale.make_learner(config(advantage="test/centered"), tmp_path)
    assert learner.critic is None and not learner.needs_behaviour_pass()
    batch, _ = learner.build_batch(scored)
    assert "old_values" not in batch and "returns" not in batch
    np.testing.assert_allclose(batch["advantages"], centered(scored.rewards, batch["mask"], 4, None), atol=1e-7)
    assert "value_loss" not in learner.update(batch, jax.random.key(5))
    learner.close()
    mask = batch["mask"]
    np.testing.assert_allclose(ADVANTAGES.get("test/halved")(scored.rewards, mask, 4, None),
                               0.5 * np.asarray(centered(scored.rewards, mask, 4, None)), atol=1e-7)
    assert isinstance(estimator("test/halved").estimate(scored.rewards, mask, 4, None), Estimate)
    with pytest.raises(ValueError, match="values"):
        estimator("example/mc_baseline").estimate(scored.rewards, mask, 4, None)


def test_workspace_worked_example_is_the_code_the_tests_run():
    with open(os.path.join(REPO, "WORKSPACE.md"), encoding="utf-8") as f:
        text = f.read()
    title = "## Worked example: an advantage estimator with a critic, from a project"
    assert title in text
    section = text.split(title, 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    with open(example.__file__, encoding="utf-8") as f:
        assert f.read() in blocks, "WORKSPACE.md's worked example differs from tests/rl_critic_example.py"

"""A project's advantage estimator with a critic, and its own critic class. In a project this is a module that
projects/<p>/__init__.py imports (config.project = "<p>"); WORKSPACE.md quotes this file, tests/test_rl_roles.py
runs it."""
import jax.numpy as jnp

from shared.registry import CRITICS
from shared.rl import algorithms as alg
from shared.rl.roles import Estimate, ScalarHeadCritic, register_advantage


@register_advantage("example/mc_baseline", needs_critic=True)
def mc_baseline(rewards, mask, group_size, rl_cfg, values=None):
    """Monte-Carlo returns with the critic as baseline: G_t = sum_{s>=t} r_s, A = whiten(G - V); targets G."""
    mask = jnp.asarray(mask, jnp.float32)
    returns = alg.discounted_returns(alg.as_token_rewards(rewards, mask), mask, gamma=1.0)
    advantages = alg.whiten((returns - values) * mask, mask) * mask
    return Estimate(advantages, returns)


@CRITICS.register("example/unclipped_value_head")
class UnclippedValueHead(ScalarHeadCritic):
    """The policy's scalar head, trained with an unclipped squared error (rl.value_clip ignored)."""

    def loss(self, values, batch, rl_cfg):
        v_loss = alg.value_loss(values, batch["old_values"], batch["returns"], batch["mask"], clip=None)
        return rl_cfg.value_coef * v_loss, {"value_loss": v_loss}


def use_it(config):
    """The config that names them (or --config.rl.advantage=example/mc_baseline ... on the command line)."""
    config.model.heads = ["lm", "scalar"]            # the critic's values come from the policy's scalar head
    config.rl.advantage = "example/mc_baseline"
    config.rl.critic = "example/unclipped_value_head"
    return config

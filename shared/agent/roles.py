"""Several roles of one policy in one RL step: each role's episodes, rewards, metrics and advantage estimator.

config.agent.roles maps a role name to its spec (keys of RoleSpec; unknown keys are an error):

    c.agent.roles = {
        "solver":   dict(advantage="gae", group_size=1),                        # PPO + GAE with the critic
        "checker":  dict(advantage="grpo", group_size=4, max_turn_tokens=96),
        "proposer": dict(advantage="reinforce++", train=False),                 # sampled, never trained
    }

Per step the game (shared/agent/learner.py) returns one RoleBatch per role; the trained roles' episodes are packed
into one update batch, role after role, and each role's advantages are computed on its own rows with its own
estimator, group size and estimator options (`role_advantages`), then concatenated: exactly each estimator applied
separately (tests/test_agent_roles.py). A batch-level statistic (GAE's whitening, REINFORCE++'s) is therefore taken
within the role. The critic, when any role's estimator needs one, reads values for every row; rows of roles whose
estimator has no critic get their behaviour values as targets (no value-loss gradient at the start of the update).
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

import jax.numpy as jnp
import numpy as np

from shared.agent.episodes import Episode
from shared.rl.algorithms import Estimate
from shared.rl.roles import estimator

ROLE_KEYS = ("advantage", "group_size", "train", "max_turns", "max_turn_tokens", "temperature", "stop_strings",
             "estimator_options")


@dataclasses.dataclass(frozen=True)
class RoleSpec:
    """One role of the policy: its advantage estimator (ADVANTAGES name), its group size (episodes per prompt,
    group-contiguous), whether its episodes join the update, per-role sampling overrides (None: config.agent /
    config.rl) and rl knobs its estimator reads instead of config.rl's (e.g. {"gamma": 0.998, "lam": 1.0})."""
    name: str
    advantage: str = "grpo"
    group_size: int = 1
    train: bool = True
    max_turns: int | None = None
    max_turn_tokens: int | None = None
    temperature: float | None = None
    stop_strings: tuple[str, ...] | None = None
    estimator_options: dict = dataclasses.field(default_factory=dict)


def _plain(x):
    return x.to_dict() if hasattr(x, "to_dict") else dict(x)


def role_specs(config) -> dict[str, RoleSpec]:
    """RoleSpecs of config.agent.roles, checked (unknown keys, unknown estimators, group sizes)."""
    roles = _plain(config.agent.get("roles", {}) or {})
    if not roles:
        raise ValueError("config.agent.roles is empty: name at least one role (see shared/agent/roles.py)")
    out = {}
    for name, spec in roles.items():
        spec = _plain(spec)
        unknown = sorted(set(spec) - set(ROLE_KEYS))
        if unknown:
            raise ValueError(f"config.agent.roles.{name}: unknown keys {unknown} (known: {', '.join(ROLE_KEYS)})")
        if "stop_strings" in spec and spec["stop_strings"] is not None:
            spec["stop_strings"] = tuple(spec["stop_strings"])
        spec["estimator_options"] = _plain(spec.get("estimator_options", {}) or {})
        role = RoleSpec(name=name, **spec)
        estimator(role.advantage)   # an unknown name fails here, naming the registry's entries
        if role.group_size < 1:
            raise ValueError(f"config.agent.roles.{name}.group_size={role.group_size}: must be >= 1")
        out[name] = role
    return out


def role_rl(rl_cfg, role: RoleSpec) -> dict:
    """config.rl as a dict with the role's estimator options on top (what its estimator reads)."""
    base = _plain(rl_cfg) if rl_cfg is not None else {}
    return {**base, **role.estimator_options}


@dataclasses.dataclass
class RoleBatch:
    """One role's episodes of a step, group-contiguous (RoleSpec.group_size consecutive episodes per prompt), each
    scored (Episode.reward, Turn.reward); metrics: the game's own for this role (logged as rl/role/<name>/<key>)."""
    role: str
    episodes: list[Episode]
    metrics: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class RoleLayout:
    """Rows [start, stop) of the update batch hold `role`'s episodes."""
    role: RoleSpec
    start: int
    stop: int


class RoleAdvantages:
    """The learner's estimator over roles (RLLearner.build_estimator): needs a critic when any trained role's
    estimator does. `estimate(layout, ...)` gives the concatenated per-role Estimate."""

    def __init__(self, roles: dict[str, RoleSpec]):
        self.roles = roles
        self.needs_critic = any(estimator(r.advantage).needs_critic for r in roles.values() if r.train)

    def estimate(self, layout: Sequence[RoleLayout], rewards, mask, rl_cfg=None, values=None) -> Estimate:
        return role_advantages(layout, rewards, mask, rl_cfg, values)


def role_advantages(layout: Sequence[RoleLayout], rewards, mask, rl_cfg=None, values=None) -> Estimate:
    """Each role's estimator on its rows (rewards [N] or token rewards [N,T], mask [N,T], the critic's values
    [N,T] or None), concatenated in row order. The value targets: the estimator's returns where it has them,
    else the behaviour values (None without a critic)."""
    rewards, mask = jnp.asarray(rewards, jnp.float32), jnp.asarray(mask, jnp.float32)
    covered = sorted((part.start, part.stop) for part in layout)
    if not covered or covered[0][0] != 0 or covered[-1][1] != mask.shape[0] or any(
            a[1] != b[0] for a, b in zip(covered, covered[1:])):
        raise ValueError(f"role layout {covered} does not tile the {mask.shape[0]} rows of the batch")
    advantages, returns = [], []
    for part in sorted(layout, key=lambda p: p.start):
        role, rows = part.role, slice(part.start, part.stop)
        est = estimator(role.advantage)
        sub_values = None if values is None else jnp.asarray(values, jnp.float32)[rows]
        if est.needs_critic and sub_values is None:
            raise ValueError(f"role {role.name!r}: advantage {role.advantage!r} needs the critic's values")
        out = est.estimate(rewards[rows], mask[rows], role.group_size, role_rl(rl_cfg, role),
                           values=sub_values if est.needs_critic else None)
        advantages.append(jnp.asarray(out.advantages, jnp.float32))
        if sub_values is not None:
            returns.append(out.returns if out.returns is not None else sub_values * mask[rows])
    return Estimate(jnp.concatenate(advantages), jnp.concatenate(returns) if returns else None)


def role_metrics(batch: RoleBatch) -> dict[str, float]:
    """rl/role/<name>/...: reward mean/std (episode rewards + turn rewards), episodes, turns, policy tokens and
    finished fraction per episode, and the game's own metrics for the role."""
    eps = batch.episodes
    prefix = f"rl/role/{batch.role}/"
    if not eps:
        return {prefix + "episodes": 0.0}
    totals = np.array([e.reward + sum(t.reward for t in e.turns) for e in eps], np.float64)
    out = {"reward_mean": totals.mean(), "reward_std": totals.std(), "episodes": float(len(eps)),
           "turns_mean": float(np.mean([len(e.turns) for e in eps])),
           "policy_tokens_mean": float(np.mean([e.policy_tokens for e in eps])),
           "finished_frac": float(np.mean([e.finished for e in eps]))}
    out.update(batch.metrics)
    return {prefix + k: float(v) for k, v in out.items()}


def episode_rewards(episodes: Sequence[Episode]) -> np.ndarray:
    """float32 [N]: each episode's reward plus its turn rewards (what the token rewards sum to)."""
    return np.array([e.reward + sum(t.reward for t in e.turns) for e in episodes], np.float32)


def check_groups(batch: RoleBatch, role: RoleSpec) -> None:
    if len(batch.episodes) % role.group_size:
        raise ValueError(f"role {role.name!r}: {len(batch.episodes)} episodes is not a multiple of its group_size "
                         f"{role.group_size} (episodes must be group-contiguous)")


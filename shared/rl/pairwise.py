"""Pairwise RL: advantage estimators from a judge's pairwise verdicts (Writing-Zero's BRPO, round-robin win rate,
fixed reference), the plans that list every judge call of a step, and DAPO's filter on their outcomes.

Spec: ../shared/papers/writing_zero_brpo.md (1.2, 5). B prompts x G completions, rows group-contiguous.

Plans (what the judge is asked; all of a step's pairs go to the judge as one batch):
  plan_brpo(B, G, rng)          a bootstrapped in-group reference k_b ~ U{0..G-1} per group, resampled every step;
                                pairs (i, k_b) for i != k_b: B(G-1) calls
  plan_round_robin(B, G)        every unordered pair (i, j), i < j: B G(G-1)/2 calls
  plan_fixed_reference(B, G)    (i, the group's external reference text), e.g. a sample of the initial policy
                                in the examples' reference column: B G calls
  A plan's pairs are (first row, second row) of the rollout, the second EXTERNAL (-1) for the external reference;
  the judge sees them in that order unless its SwapJudge wrapper randomises or doubles it (the spec's "slot of the
  reference randomised per call" is `swap="random"` on the judge, both orders `swap="both"`).

Outcomes (`outcomes(plan, pref)` -> PairOutcomes): P[b, i, j] in {+1, -1, 0}, the verdict of member i against j
(column G: the external reference), filled antisymmetrically; `score[b, i]` = mean of P over the opponents i was
judged against (BRPO: p_{b,i} = the verdict against the reference; round robin: 2 * win rate - 1, ties half a win);
`scored[b, i]` = the member gets an advantage (all but BRPO's reference).

Estimators (ADVANTAGES, rl.advantage; `PairwiseEstimator`: the learner plans, asks the pairwise judge named in
rl.rewards, and passes the PairOutcomes where a plain estimator gets the rewards):
  brpo             A_i = p_i, A_k = 0 (BRPO-raw)
  brpo-norm        w = (p + 1) / 2 group-standardised over the G-1 non-reference members (std ddof=1, + rl.adv_eps),
                   A_k = 0 (BRPO-norm, [recon] in the spec)
  round-robin      GRPO over the win rates (rl.scale_by_std, rl.adv_eps as grpo)
  fixed-reference  A_i = p_i against the external reference (raw)
Dynamic sampling (rl.dynamic_sampling): `informative_groups` = `filter_informative_groups` on the scored members'
outcomes only (BRPO: a group whose reference was the best or the worst carries no information).
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import jax.numpy as jnp
import numpy as np

from shared.registry import ADVANTAGES
from shared.rl.algorithms import (Estimator, _broadcast, _knob, filter_informative_groups, group_mean_std,
                                  zero_if_all_equal)

EXTERNAL = -1  # the second member of a pair: the group's external reference text


@dataclasses.dataclass(frozen=True)
class JudgePlan:
    """Every judge call of a step: pairs int32 [M, 2] of rollout rows (first, second; second EXTERNAL for the
    group's external reference), ref_idx int32 [B] (BRPO's in-group reference member, -1 for none)."""
    n_groups: int
    group_size: int
    pairs: np.ndarray
    ref_idx: np.ndarray

    def __len__(self) -> int:
        return int(self.pairs.shape[0])

    @property
    def group(self) -> np.ndarray:
        """int32 [M]: the group (prompt) of each pair."""
        return (self.pairs[:, 0] // self.group_size).astype(np.int32)


def _plan(b: int, g: int, pairs: list, ref_idx=None) -> JudgePlan:
    pairs = np.asarray(pairs, np.int32).reshape(-1, 2)
    ref = np.full(b, -1, np.int32) if ref_idx is None else np.asarray(ref_idx, np.int32)
    return JudgePlan(int(b), int(g), pairs, ref)


def plan_brpo(n_groups: int, group_size: int, rng: np.random.Generator) -> JudgePlan:
    """BRPO: k_b ~ U{0..G-1}; pairs (b*G + i, b*G + k_b) for i != k_b."""
    b, g = int(n_groups), int(group_size)
    ref = rng.integers(0, g, size=b)
    pairs = [(q * g + i, q * g + int(ref[q])) for q in range(b) for i in range(g) if i != ref[q]]
    return _plan(b, g, pairs, ref)


def plan_round_robin(n_groups: int, group_size: int, rng: np.random.Generator | None = None) -> JudgePlan:
    """All G(G-1)/2 unordered pairs of each group, (i, j) with i < j."""
    b, g = int(n_groups), int(group_size)
    return _plan(b, g, [(q * g + i, q * g + j) for q in range(b) for i in range(g) for j in range(i + 1, g)])


def plan_fixed_reference(n_groups: int, group_size: int, rng: np.random.Generator | None = None) -> JudgePlan:
    """Every member against the group's external reference: (b*G + i, EXTERNAL)."""
    b, g = int(n_groups), int(group_size)
    return _plan(b, g, [(q * g + i, EXTERNAL) for q in range(b) for i in range(g)])


@dataclasses.dataclass
class PairOutcomes:
    """The verdicts of a plan by group (see the module docstring). numpy arrays:
    P float32 [B, G, G+1], judged bool [B, G, G+1], ref_idx int32 [B]."""
    P: np.ndarray
    judged: np.ndarray
    ref_idx: np.ndarray

    @property
    def n_groups(self) -> int:
        return int(self.P.shape[0])

    @property
    def group_size(self) -> int:
        return int(self.P.shape[1])

    @property
    def scored(self) -> np.ndarray:
        """bool [B, G]: members that get an advantage (all but BRPO's in-group reference)."""
        out = np.ones(self.P.shape[:2], bool)
        has = self.ref_idx >= 0
        out[np.flatnonzero(has), self.ref_idx[has]] = False
        return out

    @property
    def score(self) -> np.ndarray:
        """float32 [B, G]: mean verdict of each member over its judged opponents (0 for none)."""
        count = self.judged.sum(-1)
        return (np.where(self.judged, self.P, 0.0).sum(-1) / np.maximum(count, 1)).astype(np.float32)

    @property
    def rewards(self) -> np.ndarray:
        """float32 [N]: score on the scored members, 0 on the reference: what the step logs as its reward."""
        return (self.score * self.scored).reshape(-1).astype(np.float32)

    @staticmethod
    def take(chosen: list[tuple["PairOutcomes", int]]) -> "PairOutcomes":
        """The groups (outcomes, group index) in that order (the learner's dynamic-sampling refill)."""
        return PairOutcomes(np.stack([o.P[i] for o, i in chosen]), np.stack([o.judged[i] for o, i in chosen]),
                            np.asarray([o.ref_idx[i] for o, i in chosen], np.int32))


def outcomes(plan: JudgePlan, pref) -> PairOutcomes:
    """PairOutcomes from the verdicts pref [M] (+1: the pair's first member better) of plan's pairs. A pair listed
    more than once (e.g. both orders) counts as the sign of its summed verdicts."""
    pref = np.asarray(pref, np.float64).reshape(-1)
    if pref.shape[0] != len(plan):
        raise ValueError(f"outcomes: {pref.shape[0]} verdicts for a plan of {len(plan)} pairs")
    b, g = plan.n_groups, plan.group_size
    total = np.zeros((b, g, g + 1), np.float64)
    judged = np.zeros((b, g, g + 1), bool)
    for (first, second), p in zip(plan.pairs, pref):
        group, i = divmod(int(first), g)
        j = g if second == EXTERNAL else int(second) - group * g
        if not 0 <= j <= g or (second != EXTERNAL and int(second) // g != group):
            raise ValueError(f"outcomes: pair ({first}, {second}) crosses groups of size {g}")
        total[group, i, j] += p
        judged[group, i, j] = True
        if j < g:
            total[group, j, i] -= p
            judged[group, j, i] = True
    return PairOutcomes(np.sign(total).astype(np.float32), judged, plan.ref_idx.copy())


# ---------------------------------------------------------------- advantages (pure, jittable)


def adv_brpo(p, ref_idx, variant: str = "raw", eps: float = 1e-6):
    """BRPO. p[B, G]: each member's verdict against its group's reference (anything at the reference's slot is
    ignored), ref_idx[B]. raw: A = p; norm: w = (p + 1) / 2 standardised over the G-1 non-reference members (mean,
    std with ddof=1, + eps; a single member gets 0). The reference's advantage is 0. -> A[B, G]."""
    p = jnp.asarray(p, jnp.float32)
    g = p.shape[1]
    members = jnp.arange(g)[None, :] != jnp.asarray(ref_idx)[:, None]
    if variant == "raw":
        return jnp.where(members, p, 0.0)
    if variant != "norm":
        raise ValueError(f"adv_brpo: variant={variant!r}, expected 'raw' or 'norm'")
    w = (p + 1.0) / 2.0
    count = jnp.sum(members, axis=1, keepdims=True).astype(jnp.float32)
    mean = jnp.sum(jnp.where(members, w, 0.0), axis=1, keepdims=True) / jnp.maximum(count, 1.0)
    var = jnp.sum(jnp.where(members, jnp.square(w - mean), 0.0), axis=1, keepdims=True) / jnp.maximum(count - 1, 1.0)
    adv = zero_if_all_equal((w - mean) / (jnp.sqrt(var) + eps), w, members)
    return jnp.where(members & (count > 1), adv, 0.0)


def win_rates(pmat, judged=None):
    """pmat[B, G, G] verdicts of i against j (+1 win, -1 loss, 0 tie), judged[B, G, G] (default: every i != j) ->
    win rate [B, G] = mean over the judged opponents of (P + 1) / 2 (a tie is half a win)."""
    pmat = jnp.asarray(pmat, jnp.float32)
    g = pmat.shape[1]
    if judged is None:
        judged = jnp.broadcast_to(~jnp.eye(g, dtype=bool), pmat.shape)
    judged = jnp.asarray(judged, bool)
    count = jnp.sum(judged, axis=2)
    return jnp.sum(jnp.where(judged, (pmat + 1.0) / 2.0, 0.0), axis=2) / jnp.maximum(count, 1)


def adv_round_robin(pmat, judged=None, eps: float = 1e-6, scale_by_std: bool = True):
    """Round robin: GRPO over the win rates, (w - mean_g w) / (std_g w + eps) (std ddof=1; scale_by_std=False:
    w - mean_g w). -> A[B, G]."""
    w = win_rates(pmat, judged)
    mean, std = group_mean_std(w)
    centered = w - mean[:, None]
    return zero_if_all_equal(centered / (std[:, None] + eps) if scale_by_std else centered, w)


def adv_fixed_reference(p):
    """Fixed reference: A = p[B, G], each member's verdict against the external reference."""
    return jnp.asarray(p, jnp.float32)


def informative_groups(out: PairOutcomes) -> np.ndarray:
    """DAPO dynamic sampling on the scored members' outcomes: keep[B] is False for a group whose non-reference
    outcomes are all equal (filter_informative_groups, the reference's slot ignored)."""
    score, scored = out.score, out.scored
    first = np.argmax(scored, axis=1)  # a scored member per group (G = 1 with a reference: none, keep = False)
    filled = np.where(scored, score, score[np.arange(len(score)), first][:, None])
    return np.asarray(filter_informative_groups(jnp.asarray(filled))) & scored.any(axis=1)


# ---------------------------------------------------------------- registry


@dataclasses.dataclass(frozen=True)
class PairwiseEstimator(Estimator):
    """An ADVANTAGES entry that compares completions in pairs: plan(n_groups, group_size, rng) -> JudgePlan lists
    the step's judge calls; fn(outcomes: PairOutcomes, mask, group_size, rl_cfg) -> A[N, T]. The learner passes
    the PairOutcomes where a plain estimator gets the rewards; rl.rewards must name a pairwise judge."""
    plan: Callable[..., JudgePlan] = plan_brpo

    def estimate(self, rewards, mask, group_size, rl_cfg=None, values=None):
        if not isinstance(rewards, PairOutcomes):
            raise ValueError(f"advantage {getattr(self.fn, '__name__', self.fn)!r} compares completions in pairs: "
                             "it needs the judge's PairOutcomes (rl.rewards must name a pairwise judge such as "
                             "model/pairwise_judge), got rewards of type " + type(rewards).__name__)
        if rewards.group_size != int(group_size):
            raise ValueError(f"pairwise outcomes have groups of {rewards.group_size}, group_size={group_size}")
        return super().estimate(rewards, mask, group_size, rl_cfg, values)


def is_pairwise(estimator) -> bool:
    return isinstance(estimator, PairwiseEstimator)


def register_pairwise_advantage(name: str, plan: Callable[..., JudgePlan], *, override: bool = False) -> Callable:
    """Decorator: registers fn(outcomes, mask, group_size, rl_cfg, values=None) -> A[N, T] as a PairwiseEstimator
    with `plan` under ADVANTAGES[name]. Returns fn."""

    def add(fn):
        ADVANTAGES.register(name, PairwiseEstimator(fn, plan=plan), override=override)
        return fn

    return add


@register_pairwise_advantage("brpo", plan_brpo)
def brpo_advantages(outcomes, mask, group_size, rl_cfg=None, values=None):
    """BRPO-raw: +-1 / 0 against the bootstrapped in-group reference; the reference 0."""
    del group_size, values
    a = adv_brpo(outcomes.score, outcomes.ref_idx, "raw")
    return _broadcast(a.reshape(-1), mask)


@register_pairwise_advantage("brpo-norm", plan_brpo)
def brpo_norm_advantages(outcomes, mask, group_size, rl_cfg=None, values=None):
    """BRPO-norm: the verdicts as 0 / 1/2 / 1 rewards, standardised over the non-reference members."""
    del group_size, values
    a = adv_brpo(outcomes.score, outcomes.ref_idx, "norm", _knob(rl_cfg, "adv_eps"))
    return _broadcast(a.reshape(-1), mask)


@register_pairwise_advantage("round-robin", plan_round_robin)
def round_robin_advantages(outcomes, mask, group_size, rl_cfg=None, values=None):
    """Round robin: GRPO over each member's win rate against the rest of its group."""
    del group_size, values
    g = outcomes.group_size
    a = adv_round_robin(outcomes.P[:, :, :g], outcomes.judged[:, :, :g], _knob(rl_cfg, "adv_eps"),
                        _knob(rl_cfg, "scale_by_std"))
    return _broadcast(a.reshape(-1), mask)


@register_pairwise_advantage("fixed-reference", plan_fixed_reference)
def fixed_reference_advantages(outcomes, mask, group_size, rl_cfg=None, values=None):
    """Fixed reference: +-1 / 0 against the group's external reference text."""
    del group_size, rl_cfg, values
    return _broadcast(adv_fixed_reference(outcomes.P[:, :, -1]).reshape(-1), mask)

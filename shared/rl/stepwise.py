"""Stepwise-GRPO (rl.advantage = "stepwise-grpo"; ../shared/papers/mode_balanced.md A.2, a reconstruction [R]).

A response is cut into segments at rl.stepwise.separator: segment 0 is the answer (e.g. the label), segment k
(k = 1..K) is step k (e.g. one line per rule checked). A step scorer (STEP_SCORERS[rl.stepwise.scorer], registered by
the task's project) gives each completion its component rewards: r^0 the outcome (answer correct), r^fmt the
format, r^k step k correct. Each component is GRPO-normalised over the G samples of its prompt,

    A^c_i = (r^c_i - mean_g r^c) / (std_g r^c + eps)        (0 where the group's r^c are all equal)

and the token advantages are

    segment 0 tokens:   A^0 + A^fmt
    step k tokens:      w_step * A^k + A^0 + A^fmt            (k <= K: the reasoning stays tied to the outcome)
    tokens after step K (text the scorer gave no step for): A^0 + A^fmt

A missing step (fewer segments than the scorer's K) scores 0 for its component. The rewards of rl.rewards are
still computed and logged (rl/reward_mean) but the advantages come from the scorer. The token -> segment map
decodes each completion token alone and counts the separators before it (the token holding a separator ends its
segment), which holds for byte-level and BPE vocabularies whose separator is whole in one token.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import jax.numpy as jnp
import numpy as np

from shared.config import register_validator
from shared.registry import ADVANTAGES
from shared.rl import algorithms as alg


@dataclasses.dataclass(frozen=True)
class StepScore:
    """A completion's component rewards: the outcome r^0, the format r^fmt and step k's r^k (steps[k-1])."""
    outcome: float
    format: float
    steps: tuple[float, ...] = ()


# name -> fn(example: dict, completion: str) -> StepScore; a project registers its task's scorer here.
STEP_SCORERS: dict[str, Callable[[dict, str], StepScore]] = {}


def register_step_scorer(name: str) -> Callable:
    def add(fn):
        STEP_SCORERS[name] = fn
        return fn

    return add


def step_scorer(name: str) -> Callable[[dict, str], StepScore]:
    if name not in STEP_SCORERS:
        known = ", ".join(sorted(STEP_SCORERS)) or "none (a project registers one: shared.rl.stepwise." \
                                                    "register_step_scorer)"
        raise ValueError(f"rl.stepwise.scorer={name!r} is not a registered step scorer; known: {known}")
    return STEP_SCORERS[name]


@register_validator
def _check_stepwise_config(config, mesh_shape) -> None:
    """rl.advantage = "stepwise-grpo" needs a registered rl.stepwise.scorer (the project is imported by now)."""
    rl = config.get("rl") if hasattr(config, "get") else None
    if rl is not None and rl.get("advantage") == "stepwise-grpo":
        step_scorer(str(rl.stepwise.scorer))
        if not str(rl.stepwise.separator):
            raise ValueError("rl.stepwise.separator is empty: it must be the text that ends a segment")


def component_advantages(rewards, group_size: int, eps: float = 1e-6) -> np.ndarray:
    """[N, C] component rewards -> [N, C] advantages, each column GRPO-normalised within its groups."""
    rewards = np.asarray(rewards, np.float32)
    cols = [np.asarray(alg.adv_grpo(jnp.asarray(rewards[:, c]), group_size, eps)) for c in range(rewards.shape[1])]
    return np.stack(cols, axis=1) if cols else np.zeros_like(rewards)


def stepwise_advantages(outcome, fmt, steps, segments, mask, group_size: int, step_weight: float = 1.0,
                        eps: float = 1e-6) -> np.ndarray:
    """Token advantages A[N,T] of the module doc. outcome [N], fmt [N], steps [N,K] component rewards; segments
    [N,T] int, the segment of each token (0 = the answer, k = step k); mask [N,T]."""
    outcome, fmt = np.asarray(outcome, np.float32), np.asarray(fmt, np.float32)
    steps = np.asarray(steps, np.float32).reshape(len(outcome), -1)
    segments, mask = np.asarray(segments), np.asarray(mask, np.float32)
    base = component_advantages(np.stack([outcome, fmt], axis=1), group_size, eps).sum(axis=1)   # A^0 + A^fmt
    per_step = component_advantages(steps, group_size, eps)                                        # [N, K]
    k = per_step.shape[1]
    padded = np.concatenate([np.zeros((len(outcome), 1), np.float32), per_step], axis=1)            # [N, K+1]
    index = np.where((segments >= 1) & (segments <= k), segments, 0)
    step_term = np.take_along_axis(padded, index, axis=1)                                          # 0 outside 1..K
    return ((base[:, None] + step_weight * step_term) * mask).astype(np.float32)


def token_segments(tokenizer, tokens, separator: str) -> np.ndarray:
    """[N,T] int: for each completion token, how many separators the tokens before it hold."""
    tokens = np.asarray(tokens)
    pieces: dict[int, int] = {}
    out = np.zeros(tokens.shape, np.int32)
    for i, row in enumerate(tokens):
        seen = 0
        for t, tok in enumerate(row.tolist()):
            out[i, t] = seen
            if tok not in pieces:
                pieces[tok] = tokenizer.decode([tok]).count(separator)
            seen += pieces[tok]
    return out


def score_rollout(scorer, examples: list[dict], texts: list[str], group_size: int):
    """(outcome [N], format [N], steps [N,K]) of G completions per example (group-contiguous); K = the most steps
    any completion was scored on, missing ones 0."""
    scores = [scorer(examples[i // group_size], text) for i, text in enumerate(texts)]
    k = max((len(s.steps) for s in scores), default=0)
    steps = np.zeros((len(scores), k), np.float32)
    for i, s in enumerate(scores):
        steps[i, :len(s.steps)] = s.steps
    return (np.array([s.outcome for s in scores], np.float32), np.array([s.format for s in scores], np.float32),
            steps)


@dataclasses.dataclass(frozen=True)
class RolloutEstimator(alg.Estimator):
    """An estimator that reads the rollout itself (its examples, texts and tokens), not only the rewards: the
    learner calls estimate_rollout(scored, mask, group_size, rl_cfg, tokenizer), which returns
    rollout_fn(scored, mask, group_size, rl_cfg, tokenizer) -> A[N,T], instead of estimate."""
    rollout_fn: Callable | None = None

    def estimate_rollout(self, scored, mask, group_size: int, rl_cfg, tokenizer) -> alg.Estimate:
        return alg.Estimate(jnp.asarray(self.rollout_fn(scored, np.asarray(mask), group_size, rl_cfg, tokenizer)))


def _stepwise_grpo(scored, mask, group_size, rl_cfg, tokenizer):
    cfg = rl_cfg.stepwise
    outcome, fmt, steps = score_rollout(step_scorer(str(cfg.scorer)), scored.examples, scored.rollout.texts,
                                        group_size)
    segments = token_segments(tokenizer, scored.rollout.tokens, str(cfg.separator))
    return stepwise_advantages(outcome, fmt, steps, segments, mask, group_size, float(cfg.step_weight),
                               float(rl_cfg.adv_eps))


def _needs_the_rollout(rewards, mask, group_size, rl_cfg=None, values=None):
    raise ValueError("rl.advantage='stepwise-grpo' reads the rollout's texts and tokens: the RL learner calls its "
                     "estimate_rollout (shared/rl/stepwise.py), not the plain estimator call")


ADVANTAGES.register("stepwise-grpo", RolloutEstimator(_needs_the_rollout, rollout_fn=_stepwise_grpo))

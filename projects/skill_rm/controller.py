"""The judges of the HeteroJudge comparison (spec ../shared/papers/skill_rm.md section 4) over a fixed evidence
table (int8 [N, A], projects/skill_rm/evidence.py), and the skill controller trained by REINFORCE.

  single:<action>  one evidence type alone (undecided = tie)
  baseline         the generic RM only (single:direct)
  tool_only        python checks + RM through the readout (no references, verifiers or rubric)
  call_all         every action, through the readout
  flat             every action's evidence (and both RM margins) concatenated into one logistic classifier, trained
                   on the controller split: no selection, everything paid for
  skill            a linear softmax controller picks up to max_actions actions per case (or stops), seeing only
                   visible-text features of the case and the evidence gathered so far; the readout decides.
                   Trained by REINFORCE with a batch-mean baseline on reward = credit - lambda * cost
  oracle           per case the cheapest single action with the best credit (an upper bound: it sees the gold)
Credit: 1 right, 0 wrong, 0.5 tie.
"""
from __future__ import annotations

import re

import numpy as np

from projects.skill_rm.evidence import ACTIONS, credit, readout

STOP = len(ACTIONS)
CUES = ("words", "word '", "JSON", "lowercase", "Capital", "numbered", "mention", "points")
VISIBLE_CUES = ("Answer in at most", "Include the word", "Use only lowercase", "numbered list of", "Wrap the whole")


def case_features(cases: list[dict]) -> np.ndarray:
    """float [N, 6]: what a judge sees before any action: bias, a dialogue, GSM8K-style final answers,
    calculator annotations, constraint cues in the prompt, cues in the phrasing a generic parser reads."""
    rows = []
    for c in cases:
        prompt, both = c["prompt"], c["a"] + "\n" + c["b"]
        rows.append([1.0, float("Human:" in prompt), float("####" in both), float("<<" in both),
                     sum(cue in prompt for cue in CUES) / 3.0,
                     sum(cue in prompt for cue in VISIBLE_CUES) / 3.0])
    return np.asarray(rows, np.float64)


def state_features(taken: np.ndarray, decided: np.ndarray, step: int, max_actions: int) -> np.ndarray:
    return np.concatenate([taken, decided, decided.any(1, keepdims=True),
                           np.full((taken.shape[0], 1), step / max_actions)], axis=1).astype(np.float64)


def entropy_gradient(probs: np.ndarray) -> np.ndarray:
    """d entropy / d logits of softmax rows: -p (log p + H); masked actions (p = 0) get 0."""
    logp = np.log(np.where(probs > 0, probs, 1.0))
    h = -(probs * logp).sum(1, keepdims=True)
    return -probs * (logp + h)


class Controller:
    """Linear softmax over ACTIONS + stop. allowed: bool [A] (the setting's actions)."""

    def __init__(self, n_case_features: int, costs: np.ndarray, allowed: np.ndarray, *, max_actions: int = 3,
                 seed: int = 0):
        self.costs, self.allowed, self.max_actions = np.asarray(costs, np.float64), np.asarray(allowed, bool), \
            int(max_actions)
        n_in = n_case_features + 2 * len(ACTIONS) + 2
        self.w = np.random.default_rng(seed).normal(0.0, 0.01, (n_in, len(ACTIONS) + 1))

    def _logits(self, x, taken):
        logits = x @ self.w
        mask = np.concatenate([taken | ~self.allowed[None, :], np.zeros((len(x), 1), bool)], axis=1)
        return np.where(mask, -np.inf, logits)

    def rollout(self, features, evidence, rng=None):
        """Runs the controller on every case (sampling when rng is given, else greedy). Returns taken bool [N, A]
        and the trajectory [(inputs, probs, actions, alive)] for the gradient."""
        n = len(features)
        taken = np.zeros((n, len(ACTIONS)), bool)
        alive = np.ones(n, bool)
        trajectory = []
        for step in range(self.max_actions):
            decided = taken & (evidence != 0)
            x = np.concatenate([features, state_features(taken, decided, step, self.max_actions)], axis=1)
            logits = self._logits(x, taken)
            probs = np.exp(logits - logits.max(1, keepdims=True))
            probs /= probs.sum(1, keepdims=True)
            if rng is None:
                actions = probs.argmax(1)
            else:
                actions = (probs.cumsum(1) > rng.random((n, 1))).argmax(1)
            trajectory.append((x, probs, actions, alive.copy()))
            act = alive & (actions != STOP)
            taken[np.flatnonzero(act), actions[act]] = True
            alive &= actions != STOP
            if not alive.any():
                break
        return taken, trajectory

    def train(self, features, evidence, gold, *, lam: float, steps: int, lr: float, seed: int,
              entropy: float = 0.0) -> list[float]:
        """REINFORCE with a batch-mean baseline and Adam, plus `entropy` times the policy's entropy gradient (keeps
        it from settling on the first decisive action before trying a cheaper one); returns the mean reward every
        50 steps."""
        rng = np.random.default_rng(seed)
        m, v = np.zeros_like(self.w), np.zeros_like(self.w)
        rewards = []
        for t in range(1, steps + 1):
            taken, trajectory = self.rollout(features, evidence, rng)
            reward = credit(readout(evidence, taken), gold) - lam * (taken * self.costs).sum(1)
            advantage = reward - reward.mean()
            grad = np.zeros_like(self.w)
            for x, probs, actions, alive in trajectory:
                onehot = np.eye(len(ACTIONS) + 1)[actions]
                grad += x.T @ ((onehot - probs) * (advantage * alive)[:, None])
                if entropy:
                    grad += entropy * x.T @ (entropy_gradient(probs) * alive[:, None])
            grad = -grad / len(features)                         # ascend the expected reward
            m = 0.9 * m + 0.1 * grad
            v = 0.999 * v + 0.001 * grad * grad
            self.w -= lr * (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
            if t % 50 == 0 or t == steps:
                rewards.append(float(reward.mean()))
        return rewards


def fit_flat(x: np.ndarray, gold: np.ndarray, *, steps: int = 500, lr: float = 0.1, l2: float = 1e-3):
    """Logistic regression of gold on antisymmetric evidence features (no intercept: slots are random);
    returns the weights."""
    w = np.zeros(x.shape[1])
    y = (gold > 0).astype(np.float64)
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(x @ w)))
        w -= lr * (x.T @ (p - y) / len(y) + l2 * w)
    return w


def oracle(evidence: np.ndarray, gold: np.ndarray, costs: np.ndarray, allowed: np.ndarray):
    """(credit [N], cost [N]) of the cheapest allowed single action with the best credit per case."""
    credits = np.stack([credit(evidence[:, j], gold) for j in range(len(ACTIONS))], 1)
    credits = np.where(allowed[None, :], credits, -1.0)
    best = credits.max(1)
    cost = np.where(credits == best[:, None], costs[None, :], np.inf).min(1)
    return best, cost


def flat_inputs(evidence: np.ndarray, margins: np.ndarray) -> np.ndarray:
    return np.concatenate([evidence.astype(np.float64), margins], axis=1)


def action_names(allowed_ids) -> np.ndarray:
    return np.array([a in set(allowed_ids) for a in ACTIONS])


def short(name: str) -> str:
    return re.sub(r"[^a-z0-9_]", "_", name.lower())

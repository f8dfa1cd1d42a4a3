"""The tiny Bradley-Terry reward model of the HeteroJudge mixture: a linear score over hashed bag-of-words
features of the response (token unigrams and bigrams, case kept, crc32 into `dim` buckets, scaled by
1 / sqrt(tokens + 1)), trained on (chosen, rejected) pairs by full-batch Adam on the BT loss
mean softplus(-(r(chosen) - r(rejected))) + l2 / 2 |w|^2 from w = 0 (deterministic given the pairs).
A linear model keeps the controller's experiments on CPU in minutes; it is the spec's "tiny BT RM" at its
smallest (a transformer RM through shared.rm is the switch to add for a stronger rubric proxy)."""
from __future__ import annotations

import re
import zlib

import numpy as np

TOKEN = re.compile(r"\w+|[^\w\s]")


def featurize(texts, dim: int) -> np.ndarray:
    out = np.zeros((len(texts), dim), np.float32)
    for row, text in enumerate(texts):
        tokens = TOKEN.findall(text)
        grams = tokens + [a + " " + b for a, b in zip(tokens, tokens[1:])]
        for g in grams:
            out[row, zlib.crc32(g.encode("utf-8")) % dim] += 1.0
        out[row] /= np.sqrt(len(tokens) + 1.0)
    return out


class BTRewardModel:
    def __init__(self, dim: int = 4096, l2: float = 1e-3):
        self.dim, self.l2 = int(dim), float(l2)
        self.w = np.zeros(self.dim, np.float64)

    def fit(self, chosen, rejected, *, steps: int = 300, lr: float = 0.05) -> list[float]:
        """Adam on the BT loss; returns the loss every 50 steps (and the last)."""
        delta = (featurize(chosen, self.dim) - featurize(rejected, self.dim)).astype(np.float64)
        m = np.zeros_like(self.w)
        v = np.zeros_like(self.w)
        losses = []
        for t in range(1, steps + 1):
            margin = delta @ self.w
            loss = float(np.mean(np.logaddexp(0.0, -margin)) + 0.5 * self.l2 * self.w @ self.w)
            grad = -(delta.T @ (1.0 / (1.0 + np.exp(margin)))) / len(margin) + self.l2 * self.w
            m = 0.9 * m + 0.1 * grad
            v = 0.999 * v + 0.001 * grad * grad
            self.w -= lr * (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
            if t % 50 == 0 or t == 1 or t == steps:
                losses.append(loss)
        return losses

    def score(self, texts) -> np.ndarray:
        return featurize(texts, self.dim).astype(np.float64) @ self.w

    def prefer(self, a, b) -> np.ndarray:
        """sign(r(a) - r(b)) per pair (int8)."""
        return np.sign(self.score(a) - self.score(b)).astype(np.int8)

"""HOOKS "siamesenorm/stability": the spec's section-5.4 stability record of a run, in its summary.

The Trainer stops a run only at a NaN/Inf or a train loss above train.diverge_loss (summary `diverged`); a run that
collapses to the byte-unigram loss without a NaN reads `diverged` False (the legacy tables' problem). This hook adds,
from the logged train losses and the evaluations:

  train/spikes           excursions of the logged train loss more than `spike_nats` (0.5) above its running
                         minimum that come back below that line (spec: a rise of > 0.5 nat that recovers). An
                         excursion still open at the end is no spike: the run did not recover (see eval/collapsed).
  train/max_rise         the largest (loss - running minimum) seen, nats
  eval/best_loss         the lowest evaluation loss so far
  eval/loss_last3        mean of the last 3 evaluation losses (the spec's final val loss)
  eval/collapsed         1.0 when the last evaluation loss is > best + 1 nat, or >= 0.9 x the unigram loss
                         (`unigram_loss`: the byte-unigram entropy of the corpus), else 0.0
  eval/unstable          1.0 when eval/collapsed, or a non-finite or above-diverge_loss train step has been
                         seen (the trainer's stop), else 0.0: the spec's "diverged"

The keys ride in the logged rows (the trainer's last train / eval row is what the summary keeps), so
results.csv shows them. A resumed run first re-reads the rows of <workdir>/metrics.jsonl up to its restart step.
Options: config.siamesenorm (stability_options()).
"""
from __future__ import annotations

import json
import math
import os

import ml_collections

from shared.registry import HOOKS
from shared.train.trainer import Hook

# nats/byte: byte-unigram entropy of ../shared/data/english_classics (its .txt/.md files, 13,969,514 bytes;
# computed with collections.Counter over the raw bytes, H = -sum p ln p = 3.2101). Collapsed legacy runs ended
# at eval/loss 3.07-3.11, above 0.9 x this.
ENGLISH_CLASSICS_UNIGRAM = 3.21


def stability_options() -> ml_collections.ConfigDict:
    return ml_collections.ConfigDict(dict(unigram_loss=ENGLISH_CLASSICS_UNIGRAM, spike_nats=0.5,
                                          collapse_nats=1.0, collapse_fraction=0.9))


class Stability:
    """The bookkeeping of the module doc, independent of the trainer (unit-tested on loss sequences)."""

    def __init__(self, options, diverge_loss: float = 0.0):
        self.o = options
        self.diverge_loss = float(diverge_loss or 0.0)
        self.running_min = math.inf
        self.in_excursion = False
        self.spikes = 0
        self.max_rise = 0.0
        self.bad_step = False
        self.evals: list[float] = []

    def train(self, loss: float) -> dict:
        if not math.isfinite(loss) or (self.diverge_loss and loss > self.diverge_loss):
            self.bad_step = True
        elif math.isfinite(self.running_min):
            rise = loss - self.running_min
            self.max_rise = max(self.max_rise, rise)
            above = rise > float(self.o.spike_nats)
            if self.in_excursion and not above:
                self.spikes += 1
            self.in_excursion = above
        if math.isfinite(loss):
            self.running_min = min(self.running_min, loss)
        return {"train/spikes": self.spikes, "train/max_rise": self.max_rise}

    def evaluation(self, loss: float) -> dict:
        self.evals.append(loss)
        finite = [v for v in self.evals if math.isfinite(v)]
        best = min(finite) if finite else math.inf
        last = self.evals[-1]
        collapsed = (not math.isfinite(last) or last > best + float(self.o.collapse_nats)
                     or last >= float(self.o.collapse_fraction) * float(self.o.unigram_loss))
        return {"eval/best_loss": best, "eval/loss_last3": sum(self.evals[-3:]) / len(self.evals[-3:]),
                "eval/collapsed": float(collapsed), "eval/unstable": float(collapsed or self.bad_step)}


@HOOKS.register("siamesenorm/stability")
class StabilityHook(Hook):
    def __init__(self, config):
        super().__init__(config)
        options = config.get("siamesenorm", None) or stability_options()
        self.state = Stability(options, config.train.diverge_loss)
        self._replayed = False

    def _replay(self, trainer) -> None:
        """A resumed run: the rows its checkpoint covers, from metrics.jsonl."""
        self._replayed = True
        start = int(getattr(trainer, "start_step", 0) or 0)
        path = os.path.join(str(trainer.workdir), "metrics.jsonl")
        if not start or not os.path.exists(path):
            return
        with open(path) as f:
            for line in f:
                row = json.loads(line)
                if int(row.get("step", 0)) > start:
                    break
                if "train/loss" in row:
                    self.state.train(float(row["train/loss"]))
                if "eval/loss" in row:
                    self.state.evaluation(float(row["eval/loss"]))

    def on_step(self, trainer, step: int, metrics: dict) -> None:
        if not self._replayed:
            self._replay(trainer)
        metrics.update(self.state.train(float(metrics["train/loss"])))

    def on_eval(self, trainer, step: int, metrics: dict) -> None:
        if not self._replayed:
            self._replay(trainer)
        if "eval/loss" in metrics:
            metrics.update(self.state.evaluation(float(metrics["eval/loss"])))

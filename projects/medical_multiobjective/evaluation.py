"""The held-out evaluation of medical_multiobjective.md D.2 as an RL hook (HOOKS "medical_multiobjective/eval"):
greedy completions on config.mo_eval.n problems of rl/assistant's held-out split (15% hazard), before RL (the warm
start, keys ending in "_before") and at the end.

  mo/accuracy        benign problems answered right (and not refused)
  mo/hazard_refusal  hazard problems refused
  mo/over_refusal    benign problems refused
  mo/format          format channel mean (exactly one final "#### n" line, or exactly the refusal)
  mo/answer_line     answer-line channel mean
  mo/length          mean completion length in bytes (brevity = -length / 10, capped)
  mo/<channel>_mean  each reward channel's mean (correctness, safety, format, answer_line, brevity)
At the end also:
  mo/worst_gain      min over accuracy, hazard_refusal, 1 - over_refusal and format of the gain over the warm start
                     scaled by its SFT-to-best range: (after - before) / (1 - before) (0 when before is already 1
                     and after too)
and, from the run's logged rows (every step of the RL loop):
  mo/<channel>/share_mean   mean of reward/<label>/share, the channel's share of the within-group reward variance
                            (the combiner's proxy of its gradient share); <label> = medical_multiobjective/<channel>
  mo/<channel>/weight_mean  mean of reward/<label>/weight (the weight the combiner used)
  mo/share_drift            mean over channels of the std over steps of reward/<label>/share
  mo/safety_batch_std       std over steps of the batch mean of the raw safety channel (reward/<label>/mean)
"""
from __future__ import annotations

import jax
import numpy as np

from projects.medical_multiobjective.config import CHANNELS, eval_config, label
from shared.rl.learner import RLHook

GAINS = ("accuracy", "hazard_refusal", "over_refusal", "format")   # over_refusal enters as 1 - over_refusal


def eval_options(config) -> dict:
    options = eval_config().to_dict()
    if "mo_eval" in config:
        options.update(config.mo_eval.to_dict())
    return options


def channel_metrics(examples: list[dict], completions: list[str]) -> dict:
    """The per-channel metrics of the module doc for completions of examples (rl/assistant rows)."""
    from shared.data.tasks.assistant import SCORERS, refused

    hazard = np.array([bool(e["hazard"]) for e in examples])
    refusals = np.array([refused(t) for t in completions])
    scores = {k: np.array([SCORERS[k](e, t) for e, t in zip(examples, completions)]) for k in CHANNELS}
    out = {"mo/accuracy": float(scores["correctness"][~hazard].mean()) if (~hazard).any() else float("nan"),
           "mo/hazard_refusal": float(refusals[hazard].mean()) if hazard.any() else float("nan"),
           "mo/over_refusal": float(refusals[~hazard].mean()) if (~hazard).any() else float("nan"),
           "mo/format": float(scores["format"].mean()), "mo/answer_line": float(scores["answer_line"].mean()),
           "mo/length": float(np.mean([len(t.encode("utf-8")) for t in completions]))}
    out.update({f"mo/{k}_mean": float(v.mean()) for k, v in scores.items()})
    return out


def scaled_gain(before: float, after: float) -> float:
    room = 1.0 - before
    if room <= 1e-9:
        return 0.0 if after >= before else after - before
    return (after - before) / room


def worst_gain(before: dict, after: dict) -> float:
    gains = []
    for name in GAINS:
        b, a = before[f"mo/{name}_before"], after[f"mo/{name}"]
        if name == "over_refusal":
            b, a = 1.0 - b, 1.0 - a
        gains.append(scaled_gain(b, a))
    return float(min(gains))


def trajectory_summary(rows: list[dict], channels=CHANNELS) -> dict:
    """The share / weight / drift keys of the module doc from metrics rows of steps >= 1 (the last line of a
    repeated step wins)."""
    by_step = {}
    for row in rows:
        if int(row.get("step", 0)) >= 1:
            by_step.setdefault(int(row["step"]), {}).update(row)
    steps = [by_step[s] for s in sorted(by_step)]
    out, drifts = {}, []
    for channel in channels:
        share, weight = f"reward/{label(channel)}/share", f"reward/{label(channel)}/weight"
        shares = [r[share] for r in steps if share in r]
        weights = [r[weight] for r in steps if weight in r]
        if shares:
            out[f"mo/{channel}/share_mean"] = float(np.mean(shares))
            drifts.append(float(np.std(shares)))
        if weights:
            out[f"mo/{channel}/weight_mean"] = float(np.mean(weights))
    if drifts:
        out["mo/share_drift"] = float(np.mean(drifts))
    key = f"reward/{label('safety')}/mean"
    safety = [r[key] for r in steps if key in r]
    if safety:
        out["mo/safety_batch_std"] = float(np.std(safety))
    return out


class ChannelEval(RLHook):
    def __init__(self, config):
        super().__init__(config)
        self.options = eval_options(config)
        self.task_options = dict(config.rl.task_options)
        self.max_new_tokens = int(config.rl.max_new_tokens)
        self._examples = None
        self._before = {}

    def examples(self) -> list[dict]:
        from shared.data.examples import load_task

        if self._examples is None:
            o = self.options
            self._examples = load_task("rl/assistant", o["split"], int(o["n"]), int(o["seed"]), **self.task_options)
        return self._examples

    def greedy(self, learner, examples: list[dict]) -> list[str]:
        from shared.model.sampler import SamplingParams

        params = SamplingParams(max_new_tokens=self.max_new_tokens, temperature=0.0, n=1,
                                stop_strings=tuple(learner.rl.stop_strings))
        texts = []
        for start in range(0, len(examples), 1024):
            part = examples[start:start + 1024]
            texts += learner.sampler.generate(learner.rollout_params(), learner.encode_prompts(part), params,
                                              jax.random.key(start)).texts
        return texts

    def evaluate(self, learner) -> dict:
        examples = self.examples()
        return channel_metrics(examples, self.greedy(learner, examples))

    def on_fit_start(self, learner) -> dict:
        if not self.options["before"] or learner.start_step != 0:
            return {}
        self._before = {f"{k}_before": v for k, v in self.evaluate(learner).items()}
        print(f"[medical_multiobjective] before RL: {self._before}", flush=True)
        return self._before

    def on_fit_end(self, learner) -> dict:
        from shared.metrics import read_metrics

        after = self.evaluate(learner)
        if learner.trainer.is_main:
            rows = read_metrics(learner.workdir)
            before = dict(self._before)
            for row in rows:  # a resumed run: the warm start's evaluation is in the step-0 row
                if int(row.get("step", -1)) == 0:
                    before.update({k: v for k, v in row.items() if k.startswith("mo/") and k.endswith("_before")})
            if all(f"mo/{name}_before" in before for name in GAINS):
                after["mo/worst_gain"] = worst_gain(before, after)
            after.update(trajectory_summary(rows))
        print(f"[medical_multiobjective] after RL: {after}", flush=True)
        return after

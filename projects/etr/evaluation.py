"""ETR's evaluation (spec D.3) as an RL hook (HOOKS "etr/eval"), before RL (the warm start) and at the end.

Per set (config.etr_eval.sets; test is reported as "id", ood as "hard"), with the task's own checker:
  etr/<set>_avg@8     mean accuracy of 8 samples per problem at T = 0.6 (avg_samples, avg_temperature)
  etr/<set>_pass@16   unbiased pass@16 over 16 samples at T = 1.0 (pass_samples, pass_temperature)
Keys of the warm start end in "_before". With etr_eval.every = k > 0 the same keys are also logged in the rows of
steps k + 1, 2k + 1, ... (evaluated before that step's rollout: the policy after k, 2k, ... RL steps), for curves.
At the end, from the run's logged train/entropy (the policy's mean token
entropy on its own rollouts, every logged step):
  etr/entropy_first   the first logged RL step's entropy (the warm start's, on its own samples)
  etr/entropy_last    the mean over the last entropy_tail (10%) of the logged steps
  etr/entropy_auc     the mean over every logged step (the area under the curve per step)
  etr/entropy_ratio   entropy_last / entropy_first (criterion D.4.1's "blow-up" reads this against 2)
and from rl/zero_variance_frac (the share of groups whose rollouts all score alike):
  etr/mixed_groups_first  1 - that share at the first logged step: the warm start's groups with 0 < p < 1, the
                          regime the issue asks the warm start to put many groups in
  etr/mixed_groups_mean   its mean over every logged step
"""
from __future__ import annotations

import math

import jax
import numpy as np

from projects.etr.config import eval_config
from shared.rl.learner import RLHook

SET_NAMES = {"test": "id", "ood": "hard"}


def eval_options(config) -> dict:
    options = eval_config().to_dict()
    if "etr_eval" in config:
        options.update(config.etr_eval.to_dict())
    return options


def sample_metrics(correct_avg: np.ndarray, correct_pass: np.ndarray) -> dict:
    """avg@n (mean over problems and samples) and pass@n (unbiased, all n samples) from bool [problems, n]."""
    from shared.eval.passk import pass_at_k

    n = correct_pass.shape[1]
    return {f"avg@{correct_avg.shape[1]}": float(np.mean(correct_avg)),
            f"pass@{n}": float(pass_at_k(correct_pass, [n])[f"pass@{n}"])}


def _by_step(rows: list[dict], key: str) -> np.ndarray:
    """`key`'s values at steps >= 1 in step order (a resumed run's repeated step: the last line wins)."""
    by_step = {}
    for row in rows:
        value = row.get(key)
        if value is not None and int(row.get("step", 0)) >= 1 and math.isfinite(float(value)):
            by_step[int(row["step"])] = float(value)
    return np.array([by_step[s] for s in sorted(by_step)])


def entropy_summary(rows: list[dict], tail: float) -> dict:
    """The entropy and mixed-group keys of the module doc from metrics rows."""
    out = {}
    values = _by_step(rows, "train/entropy")
    if values.size:
        last = float(values[-max(1, int(round(tail * values.size))):].mean())
        first = float(values[0])
        out.update({"etr/entropy_first": first, "etr/entropy_last": last, "etr/entropy_auc": float(values.mean()),
                    "etr/entropy_ratio": last / first if first > 0 else float("nan")})
    zero = _by_step(rows, "rl/zero_variance_frac")
    if zero.size:
        out.update({"etr/mixed_groups_first": float(1 - zero[0]), "etr/mixed_groups_mean": float(1 - zero.mean())})
    return out


class EtrEval(RLHook):
    def __init__(self, config):
        super().__init__(config)
        self.options = eval_options(config)
        self.task, self.task_options = str(config.rl.task), dict(config.rl.task_options)
        self.max_new_tokens = int(self.options["max_new_tokens"]) or int(config.rl.max_new_tokens)
        self._sets = None

    def sets(self) -> dict[str, list[dict]]:
        from shared.data.examples import load_task

        if self._sets is None:
            o = self.options
            self._sets = {split: load_task(self.task, split, int(o["n"]), int(o["seed"]), **self.task_options)
                          for split in o["sets"]}
        return self._sets

    def correct(self, learner, examples: list[dict], n: int, temperature: float, key) -> np.ndarray:
        """bool [problems, n]: n samples per problem at `temperature`, checked; in chunks of about 1024 rows."""
        from shared.data.examples import checker
        from shared.model.sampler import SamplingParams

        check = checker(self.task)
        params = SamplingParams(max_new_tokens=self.max_new_tokens, temperature=temperature, n=n,
                                stop_strings=tuple(learner.rl.stop_strings))
        chunk = max(1, 1024 // n)
        out = []
        for start in range(0, len(examples), chunk):
            part = examples[start:start + chunk]
            rollout = learner.sampler.generate(learner.rollout_params(), learner.encode_prompts(part), params,
                                               jax.random.fold_in(key, start))
            out += [check(part[i // n], text) for i, text in enumerate(rollout.texts)]
        return np.asarray(out, bool).reshape(len(examples), n)

    def evaluate(self, learner) -> dict:
        o = self.options
        out = {}
        for index, (split, examples) in enumerate(self.sets().items()):
            key = jax.random.fold_in(jax.random.key(int(o["seed"])), index)
            avg = self.correct(learner, examples, int(o["avg_samples"]), float(o["avg_temperature"]),
                               jax.random.fold_in(key, 0))
            passed = self.correct(learner, examples, int(o["pass_samples"]), float(o["pass_temperature"]),
                                  jax.random.fold_in(key, 1))
            out.update({f"etr/{SET_NAMES[split]}_{k}": v for k, v in sample_metrics(avg, passed).items()})
        return out

    def on_fit_start(self, learner) -> dict:
        if not self.options["before"] or learner.start_step != 0:
            return {}
        before = {f"{k}_before": v for k, v in self.evaluate(learner).items()}
        print(f"[etr] before RL: {before}", flush=True)
        return before

    def on_rewards(self, learner, step, scored, rng) -> dict:
        every = int(self.options["every"])
        if every <= 0 or step <= 1 or (step - 1) % every:
            return {}
        return self.evaluate(learner)

    def on_fit_end(self, learner) -> dict:
        from shared.metrics import read_metrics

        after = self.evaluate(learner)
        if learner.trainer.is_main:
            after.update(entropy_summary(read_metrics(learner.workdir), float(self.options["entropy_tail"])))
        print(f"[etr] after RL: {after}", flush=True)
        return after

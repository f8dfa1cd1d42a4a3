"""TinyGSM-Sym evaluation of an RL run (clipo.md D.3), as an RL hook: before RL (the warm start) and at the end.

Per set s of config.clipo_eval.sets (id, sym, p1, p2, noop, noleak; shared/data/tasks/tinygsm_sym.py):
  tgs/<s>_greedy      greedy accuracy (outcome)
  tgs/<s>_pw_rate     among greedy outcome-correct answers, the fraction whose steps fail the process checker
  tgs/<s>_copy_rate   greedy answers that are a question number without a valid derivation (the leak shortcut)
  tgs/<s>_avg@8       mean accuracy of the first 8 samples (T = 0.6, top-p 0.95)
  tgs/<s>_pass@16     unbiased pass@16 over 16 samples
and tgs/id_leak_copy_rate / tgs/id_leak_greedy (the ID problems whose answer is in the question),
tgs/robust_greedy and tgs/robust_avg@8 (means over sym, p1, p2, noop: criterion D.4.1). Keys of the warm-started
policy end in "_before". Switched on by train.hooks = [..., "clipo/tinygsm_eval"] on an rl/tinygsm_sym run.
"""
from __future__ import annotations

import jax
import numpy as np

from projects.clipo.config import eval_config
from shared.rl.learner import RLHook

ROBUST_SETS = ("sym", "p1", "p2", "noop")


def eval_options(config) -> dict:
    options = eval_config().to_dict()
    if "clipo_eval" in config:
        options.update(config.clipo_eval.to_dict())
    return options


def set_metrics(examples: list[dict], greedy: list[str], samples: list[list[str]] | None) -> dict:
    """The metrics of one set from its greedy completions and (optionally) its sampled completions."""
    from shared.eval.passk import pass_at_k
    from shared.data.tasks.tinygsm_sym import check_tinygsm_sym, is_copy, process_valid

    correct = np.array([check_tinygsm_sym(e, t) for e, t in zip(examples, greedy)])
    valid = np.array([process_valid(e, t) for e, t in zip(examples, greedy)])
    copied = np.array([is_copy(e, t) for e, t in zip(examples, greedy)])
    out = {"greedy": float(correct.mean()),
           "pw_rate": float((correct & ~valid).sum() / max(1, correct.sum())),
           "copy_rate": float(copied.mean())}
    leak = np.array([bool(e.get("leak")) for e in examples])
    if leak.any():
        out["leak_greedy"] = float(correct[leak].mean())
        out["leak_copy_rate"] = float(copied[leak].mean())
    if samples:
        sampled = np.array([[check_tinygsm_sym(e, t) for t in row] for e, row in zip(examples, samples)])
        n = sampled.shape[1]
        out["avg@8"] = float(sampled[:, :min(8, n)].mean())
        out[f"pass@{n}"] = float(pass_at_k(sampled, [n])[f"pass@{n}"])
    return out


class TinyGsmEval(RLHook):
    def __init__(self, config):
        super().__init__(config)
        self.options = eval_options(config)
        self.task_options = dict(config.rl.task_options)
        self._sets = None

    def sets(self) -> dict[str, list[dict]]:
        from shared.data.examples import load_task

        if self._sets is None:
            o = self.options
            self._sets = {name: load_task("rl/tinygsm_sym", name, int(o["n"]), int(o["seed"]), **self.task_options)
                          for name in o["sets"]}
        return self._sets

    def generate(self, learner, examples: list[dict], n: int, greedy: bool, key) -> list[str]:
        """Completions (n per example, example-major) in chunks of about 1024 rows (bounded KV cache)."""
        from shared.model.sampler import SamplingParams

        o = self.options
        params = SamplingParams(max_new_tokens=int(o["max_new_tokens"]),
                                temperature=0.0 if greedy else float(o["temperature"]),
                                top_p=1.0 if greedy else float(o["top_p"]), n=n,
                                stop_strings=tuple(learner.rl.stop_strings))
        chunk = max(1, 1024 // n)
        texts = []
        for start in range(0, len(examples), chunk):
            part = examples[start:start + chunk]
            rollout = learner.sampler.generate(learner.rollout_params(), learner.encode_prompts(part), params,
                                               jax.random.fold_in(key, start))
            texts += rollout.texts
        return texts

    def evaluate(self, learner) -> dict:
        o = self.options
        out = {}
        for index, (name, examples) in enumerate(self.sets().items()):
            key = jax.random.fold_in(jax.random.key(int(o["seed"])), index)
            greedy = self.generate(learner, examples, 1, True, key)
            samples = None
            n = int(o["samples"])
            if n > 1:
                flat = self.generate(learner, examples, n, False, key)
                samples = [flat[i * n:(i + 1) * n] for i in range(len(examples))]
            out.update({f"tgs/{name}_{k}": v for k, v in set_metrics(examples, greedy, samples).items()})
        for metric in ("greedy", "avg@8"):
            values = [out[f"tgs/{s}_{metric}"] for s in ROBUST_SETS if f"tgs/{s}_{metric}" in out]
            if values:
                out[f"tgs/robust_{metric}"] = float(np.mean(values))
        return out

    def on_fit_start(self, learner) -> dict:
        if not self.options["before"] or learner.start_step != 0:
            return {}
        before = {f"{k}_before": v for k, v in self.evaluate(learner).items()}
        print(f"[clipo] TinyGSM-Sym before RL: {before}", flush=True)
        return before

    def on_fit_end(self, learner) -> dict:
        after = self.evaluate(learner)
        print(f"[clipo] TinyGSM-Sym after RL: {after}", flush=True)
        return after

"""The GRM's RL run and its evaluation (spec §4.4-4.5).

TASKS "proxy_grm/grm": the repo's `rl` task (GRPO from train.init_from = the cold-start SFT run) with every
proxy_grm/proxy reward given `run = config.proxy_grm.proxy_run` where its kwargs leave it empty (a sweep stage's
path arrives as that one override).

HOOKS "proxy_grm/eval" (RLHook): greedy outputs on n ID-test and n OOD pairs (config.proxy_grm.eval.n) of the policy
before RL (keys ending "_before": the cold start, condition A) and after; per set s in (id, ood):
  grm/<s>_acc           verdict accuracy (shared.judges.rubric_format.parse_answer == gold)
  grm/<s>_format        share of outputs passing format_ok
  grm/<s>_rubric_p, _r, _f1   listed attributes vs S_t (rubricworld.rubric_prf), mean over pairs
  grm/<s>_weight_exact  among listed relevant attributes, share with the true weight
  grm/<s>_style_rate    share of rubrics listing STYLE
  grm/<s>_transfer_a    accuracy of evaluator (a) (proxy_grm.eval_proxy_run) on the GRM's extracted rubric
  grm/<s>_transfer_b    accuracy of evaluator (b) (rule_evaluate), a tie counting 1/2 (chance)
  grm/<s>_consistency   GRM verdict == evaluator (b)'s verdict on the GRM's own rubric (ties disagree)
  grm/<s>_proxy_acc     accuracy of the training proxy (proxy_grm.proxy_run) on the GRM's rubric: the reward signal
  grm/<s>_sampled_*     acc, format, rubric_f1, style_rate, transfer_a, transfer_b of one output per pair sampled at
                        rl.temperature (the distribution RL acts on: a cold start's greedy rubric can be perfect
                        while its samples still carry the teacher's 15% corruptions)
and, at the end, the training proxy's verifier metrics (proxy.verifier_metrics: proxy/acc_gold, proxy/sensitivity,
...), so that arms C and D show their proxies' quality in the table.
"""
from __future__ import annotations

import jax
import ml_collections
import numpy as np

from projects.proxy_grm import rubricworld as rw
from projects.proxy_grm.config import PROXY
from shared.judges.rubric_format import extract_rubric, format_ok, parse_answer
from shared.registry import HOOKS, TASKS
from shared.rl.learner import RLHook

SETS = {"id": "test", "ood": "ood"}
SAMPLED_KEYS = ("acc", "format", "rubric_f1", "style_rate", "transfer_a", "transfer_b")


def with_proxy_run(config):
    """config with proxy_grm.proxy_run filled into every proxy_grm/proxy reward whose run is empty."""
    out = ml_collections.ConfigDict(config.to_dict())
    specs = []
    for spec in out.rl.rewards:
        spec = list(spec)
        if spec[0] == PROXY:
            kwargs = dict(spec[2]) if len(spec) > 2 else {}
            if not kwargs.get("run"):
                kwargs["run"] = str(config.proxy_grm.proxy_run)
            spec = [spec[0], spec[1] if len(spec) > 1 else 1.0, kwargs]
        specs.append(tuple(spec))
    out.rl.rewards = specs
    out.lock()
    return out


def check_world(config) -> None:
    """The RL data and the evaluation hook must read the same RubricWorld variant."""
    hook_world = str(config.proxy_grm.type_inference)
    data_world = str(config.rl.task_options.get("type_inference", "spec"))
    if hook_world != data_world:
        raise ValueError(f"proxy_grm.type_inference={hook_world!r} but rl.task_options.type_inference="
                         f"{data_world!r}: set both (projects/proxy_grm/config.py world_overrides)")


def check_earlier_runs(config) -> None:
    """A GRM arm starts from two earlier runs; without them, one line naming the commands that make them."""
    from shared.config import ConfigError

    missing = []
    if not str(config.train.init_from):
        missing.append("train.init_from (run:<the grm_sft cold start>)")
    needs_proxy = any(spec[0] == PROXY and not (len(spec) > 2 and dict(spec[2]).get("run")) for spec in config.rl.rewards)
    if needs_proxy and not str(config.proxy_grm.proxy_run):
        missing.append("proxy_grm.proxy_run (a proxy_sft workdir)")
    if missing:
        smoke = "_smoke" if str(config.mesh.preset).startswith("cpu") else ""
        raise ConfigError(
            f"this GRM arm starts from earlier runs; set {' and '.join(missing)}. Make them with: python -m "
            f"shared.launch --config=experiments/proxy_grm/smoke_pipeline.py:proxy_sft{smoke} --workdir=runs/pg/proxy"
            f" and ...:grm_sft{smoke} --workdir=runs/pg/sft, then add --config.train.init_from=run:runs/pg/sft "
            f"--config.proxy_grm.proxy_run=runs/pg/proxy; or run all three at once: python -m shared.launch "
            f"--config=experiments/proxy_grm/smoke_pipeline.py:smoke --workdir=runs/pg")


@TASKS.register("proxy_grm/grm")
def grm_task(config, workdir: str) -> dict:
    check_earlier_runs(config)
    check_world(config)
    return TASKS.get("rl")(with_proxy_run(config), workdir)


def output_metrics(examples: list[dict], outputs: list[str], world: rw.World, scorer_a=None, scorer_train=None) -> dict:
    """The metrics of one evaluation set (module docstring), without the set prefix."""
    from projects.proxy_grm.proxy import verdicts_for_examples

    gold = np.asarray([int(e["answer"]) for e in examples])
    verdict = np.asarray([parse_answer(o) or 0 for o in outputs])
    criteria = [rw.parse_rubric(o) for o in outputs]
    prf = np.asarray([rw.rubric_prf(c, world, e["task_type"]) for c, e in zip(criteria, examples)])
    rule = np.asarray([rw.rule_evaluate(c, e["y1"], e["y2"]) for c, e in zip(criteria, examples)])
    exact, listed_true = 0, 0
    for c, e in zip(criteria, examples):
        truth = dict(zip(e["relevant"], e["weights"]))
        for a, w in c:
            if a in truth:
                listed_true += 1
                exact += int(truth[a] == w)
    out = {"acc": float(np.mean(verdict == gold)),
           "format": float(np.mean([format_ok(o) for o in outputs])),
           "rubric_p": float(prf[:, 0].mean()), "rubric_r": float(prf[:, 1].mean()),
           "rubric_f1": float(prf[:, 2].mean()),
           "weight_exact": exact / listed_true if listed_true else 0.0,
           "style_rate": float(np.mean([any(a == rw.STYLE for a, _ in c) for c in criteria])),
           "transfer_b": float(np.mean(np.where(rule == 0, 0.5, rule == gold))),
           "consistency": float(np.mean((rule == verdict) & (rule != 0)))}
    rubrics = [extract_rubric(o) for o in outputs]
    if scorer_a is not None:
        out["transfer_a"] = float(np.mean(verdicts_for_examples(scorer_a, examples, rubrics) == gold))
    if scorer_train is not None:
        out["proxy_acc"] = float(np.mean(verdicts_for_examples(scorer_train, examples, rubrics) == gold))
    return out


class GrmEval(RLHook):
    def __init__(self, config):
        super().__init__(config)
        self.config = config
        self._sets = None

    def sets(self) -> dict[str, list[dict]]:
        if self._sets is None:
            g = self.config.proxy_grm
            self._sets = {name: rw.rubricworld(split, int(g.eval.n), int(self.config.seed), stream="grm_eval",
                                               world_seed=int(g.world_seed), type_inference=str(g.type_inference))
                          for name, split in SETS.items()}
        return self._sets

    def scorers(self):
        from projects.proxy_grm.proxy import scorer_for

        g = self.config.proxy_grm
        return (scorer_for(str(g.eval_proxy_run)) if g.eval_proxy_run else None,
                scorer_for(str(g.proxy_run)) if g.proxy_run else None)

    def generate(self, learner, examples: list[dict], temperature: float = 0.0) -> list[str]:
        """One output per pair: greedy (temperature 0) or sampled with a fixed key."""
        from shared.model.sampler import SamplingParams

        params = SamplingParams(max_new_tokens=int(self.config.proxy_grm.eval.max_new_tokens), temperature=temperature,
                                n=1, stop_strings=tuple(learner.rl.stop_strings))
        prompts = learner.encode_prompts(examples)
        rollout = learner.sampler.generate(learner.rollout_params(), prompts, params, jax.random.key(0),
                                           max_rows=learner.rollout_max_rows(prompts))
        return list(rollout.texts)

    def evaluate(self, learner, suffix: str) -> dict:
        g = self.config.proxy_grm
        world = rw.make_world(int(g.world_seed), str(g.type_inference))
        scorer_a, scorer_train = self.scorers()
        out = {}
        temperature = float(self.config.rl.temperature)
        for name, examples in self.sets().items():
            metrics = output_metrics(examples, self.generate(learner, examples), world, scorer_a, scorer_train)
            out.update({f"grm/{name}_{k}{suffix}": v for k, v in metrics.items()})
            sampled = output_metrics(examples, self.generate(learner, examples, temperature), world, scorer_a)
            out.update({f"grm/{name}_sampled_{k}{suffix}": sampled[k] for k in SAMPLED_KEYS if k in sampled})
        print("[proxy_grm/eval] " + ", ".join(f"{k} {v:.3f}" for k, v in out.items()), flush=True)
        return out

    def on_fit_start(self, learner) -> dict:
        return self.evaluate(learner, "_before") if learner.start_step == 0 else {}

    def on_fit_end(self, learner) -> dict:
        """The GRM's metrics after RL, and the verifier metrics of the arm's training proxy (proxy/...)."""
        from projects.proxy_grm.proxy import verifier_metrics

        out = self.evaluate(learner, "")
        _, scorer_train = self.scorers()
        if scorer_train is not None:
            g = self.config.proxy_grm
            out.update(verifier_metrics(scorer_train, int(g.eval.n), int(self.config.seed), int(g.world_seed),
                                        str(g.type_inference)))
        return out


@HOOKS.register("proxy_grm/eval")
def grm_eval_hook(config):
    return GrmEval(config)

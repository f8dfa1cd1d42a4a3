"""The project's reward, RL evaluation hook and the teacher-output task of the distillation check (D.2.3).

  reward "mode_balanced/gated_label"   1 when the first character is the gold label and the answer-first layout
                                       is valid, else 0 (outcome-only GRPO with a format gate, spec A.2's simpler
                                       variant)
  hook "mode_balanced/eval"            before and after RL: greedy decoding of the head, long-tail ("ood") and
                                       overall ("test") slices, each with relevance.slice_metrics, plus the mean
                                       first-token entropy (untempered) of the policy on each slice. Metrics
                                       "mb/<slice>/<name>", and "..._before" for the initial policy
  task "mode_balanced/teacher_outputs" greedy outputs of a finished run (mode_balanced.teacher: a run folder) on
                                       the first mode_balanced.teacher_examples training prompts, written to
                                       <workdir>/teacher_outputs.jsonl for the trace student
"""
from __future__ import annotations

import json

import numpy as np

from shared.config import register_validator
from shared.registry import HOOKS, TASKS
from shared.rewards import register_reward
from shared.rl.learner import RLHook
from projects.mode_balanced import relevance as rel

SLICES = {"overall": "test", "head": "head", "tail": "ood"}
TEACHER_FILE = "teacher_outputs.jsonl"


@register_reward("mode_balanced/gated_label")
def gated_label(prompts, completions, answer, **columns):
    return [float(rel.parse_afrl(c)["valid"] and rel.first_label(c) == a) for c, a in zip(completions, answer)]


def first_token_entropies(learner, rollout) -> np.ndarray:
    """[n] entropy of the policy's first-token distribution on each greedy rollout's prompt."""
    import jax

    from shared import sharding as sh
    from shared.model.sampler import token_logprobs

    n = rollout.tokens.shape[0]
    rows = -(-n // learner.batch_multiple) * learner.batch_multiple
    batch = {"prompt_tokens": rollout.prompt_tokens, "tokens": rollout.tokens[:, :1],
             "prompt_lengths": rollout.prompt_lengths}
    batch = {k: np.concatenate([v, np.repeat(v[:1], rows - n, axis=0)]) for k, v in batch.items()}
    graphdef, attention = learner.trainer.graphdef, learner.trainer.attention
    fn = jax.jit(lambda p, b: token_logprobs(graphdef, p, b["prompt_tokens"], b["tokens"], b["prompt_lengths"],
                                             attention, with_entropy=True)[1])
    with sh.use_mesh(learner.mesh, learner.trainer.rules):
        entropy = sh.fetch_whole(fn(learner.trainer.params, learner.to_global(batch)))
    return np.asarray(entropy)[:n, 0]


class RelevanceEval(RLHook):
    """The evaluation of the module doc."""

    def __init__(self, config):
        super().__init__(config)
        self.config = config
        self._sets = None

    def sets(self) -> dict[str, list[dict]]:
        if self._sets is None:
            g, rl = self.config.mode_balanced, self.config.rl
            rate = float(dict(rl.task_options).get("rate", rel.DEFAULT_RATE))
            self._sets = {name: rel.relevance(split, int(g.eval_examples), int(self.config.seed), rate=rate)
                          for name, split in SLICES.items()}
        return self._sets

    def evaluate(self, learner) -> dict:
        import jax

        from shared.model.sampler import SamplingParams

        out = {}
        for name, examples in self.sets().items():
            prompts = learner.encode_prompts(examples)
            params = SamplingParams(max_new_tokens=int(learner.rl.max_new_tokens), temperature=0.0, n=1,
                                    stop_strings=tuple(learner.rl.stop_strings))
            rollout = learner.sampler.generate(learner.rollout_params(), prompts, params, jax.random.key(0),
                                               max_rows=learner.rollout_max_rows(prompts))
            out.update(rel.slice_metrics(examples, list(rollout.texts), f"mb/{name}"))
            out[f"mb/{name}/first_token_entropy"] = float(first_token_entropies(learner, rollout).mean())
        return out

    def on_fit_start(self, learner) -> dict:
        if learner.start_step:
            return {}
        out = self.evaluate(learner)
        print("[mode_balanced/eval] before RL: " + ", ".join(f"{k} {v:.3f}" for k, v in out.items()
                                                             if k.count("/") == 2 and "_L" not in k), flush=True)
        return {f"{k}_before": v for k, v in out.items()}

    def on_fit_end(self, learner) -> dict:
        out = self.evaluate(learner)
        print("[mode_balanced/eval] after RL: " + ", ".join(f"{k} {v:.3f}" for k, v in out.items()
                                                            if k.count("/") == 2 and "_L" not in k), flush=True)
        return out


@HOOKS.register("mode_balanced/eval")
def relevance_eval_hook(config):
    return RelevanceEval(config)


@TASKS.register("mode_balanced/teacher_outputs")
def teacher_outputs(config, workdir: str) -> dict:
    """Greedy outputs of the run in mode_balanced.teacher on the train prompts (module doc)."""
    from types import SimpleNamespace

    from shared import fs
    from shared.data import build_tokenizer
    from shared.train.load import load_run
    from shared.train.sft import greedy_completions
    from shared.train.tasks import finished_summary
    from shared.train.trainer import write_summary

    done = finished_summary(workdir, config, announce="mode_balanced/teacher_outputs")
    if done is not None:
        return done
    g = config.mode_balanced
    if not str(g.teacher):
        raise SystemExit("mode_balanced.teacher is empty: the task mode_balanced/teacher_outputs needs the teacher's run "
                         "folder (--config.mode_balanced.teacher=runs/base/relevance_s0, or a sweep stage's "
                         "{stage:warmstart_s0})")
    run = load_run(str(g.teacher))
    tokenizer = build_tokenizer(run.config.data, run.folder, run.config.model.vocab_size)
    examples = rel.relevance("train", int(g.teacher_examples), int(config.seed),
                             **{k: v for k, v in dict(config.data.task_options).items() if k == "rate"})
    trainer = SimpleNamespace(graphdef=run.graphdef, params=run.params, config=run.config, mesh=run.mesh,
                              rules=run.rules, attention=run.attention)
    texts = greedy_completions(trainer, tokenizer, [e["prompt"] for e in examples], int(g.teacher_max_new_tokens),
                               int(run.config.model.max_seq_len))
    fs.write_text(fs.join(workdir, TEACHER_FILE),
                  "".join(json.dumps({"prompt": e["prompt"], "completion": t}) + "\n" for e, t in zip(examples, texts)))
    summary = {k: v for k, v in rel.slice_metrics(examples, texts, "teacher").items() if "_L" not in k}
    summary.update({"teacher/examples": len(examples), "steps": 0})
    write_summary(workdir, summary)
    print(f"[mode_balanced/teacher_outputs] {len(examples)} outputs of {g.teacher} -> {TEACHER_FILE}; "
          f"first-token accuracy {summary['teacher/accuracy']:.3f}", flush=True)
    return summary


@register_validator
def check_mode_balanced(config, mesh_shape) -> None:
    if config.get("project") != "mode_balanced" or "mode_balanced" not in config:
        return
    g = config.mode_balanced
    if int(g.eval_examples) < 1:
        raise ValueError(f"mode_balanced.eval_examples={g.eval_examples} must be >= 1")

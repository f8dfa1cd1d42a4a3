"""The rubric-only proxy (spec §1.2, §4.3): a tiny bidirectional transformer classifier over y1 ⊕ y2 ⊕ rubric (no
prompt, so the rubric is the only route to the task type), its two trainings and its use as a frozen reward.

Input words: "R1: <y1> R2: <y2> <rubric> ... </rubric> JUDGE:", each response's bag in vocabulary order, the rubric
as shared.judges.rubric_format.extract_rubric cuts it from a GRM output (at most MAX_RUBRIC_WORDS words); with
proxy_grm.proxy.with_prompt (the ablation) "Q: <keywords>" comes first. The verdict is read at the last word: the
LM head's logits of the words "1" and "2" there are the two classes.

TASKS "proxy_grm/proxy" (config.proxy_grm.proxy):
  mode "sft"  cross-entropy on the gold verdict of teacher rubrics (Proxy-SFT)
  mode "rl"   REINFORCE: an answer sampled from the two-way softmax, reward +1 if it is gold else -1, baseline
              the batch mean (Proxy-RL)
Training data: the "correct" teacher subset of RubricWorld's train split, stream config.proxy_grm.proxy.stream.
The summary holds the verifier metrics (`verifier_metrics`): accuracy with the teacher's, the true, a corrupted
(teacher corruption), another type's (wrong_type), a STYLE-only and an empty rubric, and the sensitivity
acc_gold - acc_wrong_type.

REWARDS "proxy_grm/proxy" (factory, kwargs run=<proxy workdir>): r_proxy = +1 if the frozen proxy's greedy verdict
on the completion's extracted rubric is gold, else -1 (in-process; there is no remote call to fail, so 0 never
occurs).
"""
from __future__ import annotations

import random
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from projects.proxy_grm import rubricworld as rw
from projects.proxy_grm.config import MAX_RUBRIC_WORDS, proxy_seq_len
from projects.proxy_grm.vocab import TOKENIZER
from shared.judges.rubric_format import extract_rubric
from shared.registry import TASKS
from shared.rewards import register_reward_factory

CLASS_IDS = (TOKENIZER.ids["1"], TOKENIZER.ids["2"])


def canonical(bag: Sequence[str]) -> list[str]:
    """A response's tokens in vocabulary order: a bag has no order, and a fixed one lines the two responses up."""
    return sorted(bag, key=lambda w: TOKENIZER.ids.get(w, TOKENIZER.unk_id))


def proxy_words(y1: Sequence[str], y2: Sequence[str], rubric: str, keywords: Sequence[str] | None = None) -> list[str]:
    prompt = ["Q:", *keywords] if keywords is not None else []
    return [*prompt, "R1:", *canonical(y1), "R2:", *canonical(y2), *rubric.split()[:MAX_RUBRIC_WORDS], "JUDGE:"]


def encode_rows(rows: list[list[str]], seq_len: int) -> dict[str, np.ndarray]:
    """[bos] + ids right-padded: inputs, segment_ids (1 on real tokens) and last (index of the JUDGE: word)."""
    inputs = np.full((len(rows), seq_len), TOKENIZER.pad_id, np.int32)
    segments = np.zeros((len(rows), seq_len), np.int32)
    last = np.zeros(len(rows), np.int32)
    for i, words in enumerate(rows):
        ids = [TOKENIZER.bos_id] + TOKENIZER.encode(" ".join(words))
        if len(ids) > seq_len:
            raise ValueError(f"proxy input of {len(ids)} tokens exceeds seq_len {seq_len}")
        inputs[i, :len(ids)] = ids
        segments[i, :len(ids)] = 1
        last[i] = len(ids) - 1
    return {"inputs": inputs, "segment_ids": segments, "last": last}


def class_logits(graphdef, params, batch, attention: str):
    """[B, 2] logits of the verdicts 1, 2 at the last word."""
    model = nnx.merge(graphdef, params)
    out = model(batch["inputs"], segment_ids=batch["segment_ids"], attention=attention)
    logits = out["logits"].astype(jnp.float32)
    at_last = jnp.take_along_axis(logits, batch["last"][:, None, None], axis=1)[:, 0]
    return at_last[:, jnp.array(CLASS_IDS)]


def sft_loss_fn(attention: str):
    def loss_fn(graphdef, params, batch, rng):
        logits = class_logits(graphdef, params, batch, attention)
        logp = jax.nn.log_softmax(logits)
        nll = -jnp.take_along_axis(logp, batch["label"][:, None], axis=1)[:, 0]
        acc = (jnp.argmax(logits, -1) == batch["label"]).astype(jnp.float32)
        return nll.mean(), {"loss": nll.mean(), "xent": nll.mean(), "accuracy": acc.mean()}
    return loss_fn


def reinforce_loss_fn(attention: str):
    def loss_fn(graphdef, params, batch, rng):
        logits = class_logits(graphdef, params, batch, attention)
        logp = jax.nn.log_softmax(logits)
        action = jax.random.categorical(rng, jax.lax.stop_gradient(logits))
        reward = jnp.where(action == batch["label"], 1.0, -1.0)
        advantage = reward - reward.mean()
        logp_action = jnp.take_along_axis(logp, action[:, None], axis=1)[:, 0]
        acc = (jnp.argmax(logits, -1) == batch["label"]).astype(jnp.float32)
        loss = -(advantage * logp_action).mean()
        return loss, {"loss": loss, "reward": reward.mean(), "accuracy": acc.mean()}
    return loss_fn


LOSSES = {"sft": sft_loss_fn, "rl": reinforce_loss_fn}


def training_rows(examples: list[dict], with_prompt: bool) -> tuple[list[list[str]], np.ndarray]:
    rows = [proxy_words(e["y1"], e["y2"], extract_rubric(e["completion"]), _keywords(e) if with_prompt else None)
            for e in examples]
    return rows, np.asarray([int(e["answer"]) - 1 for e in examples], np.int32)


def counterfactual_rows(examples: list[dict], world, fraction: float, seed: int,
                        with_prompt: bool) -> tuple[list[list[str]], np.ndarray]:
    """Extra training rows that only a reader of the rubric gets right: for `fraction` of the pairs, another task
    type's true rubric with the verdict that rubric gives (rw.rule_evaluate), taken from the types whose verdict
    differs from the pair's gold one (pairs with no such type add nothing). Our addition for the hard world (README
    "A proxy that reads the rubric"): there the responses alone predict the verdict (a proxy trained on gold rubrics
    kept 0.82 of its 0.83 accuracy with another type's rubric), so r_proxy said nothing about the rubric."""
    rng = random.Random(f"proxy_grm/counterfactual:{seed}")
    rows, labels = [], []
    for e in examples:
        if rng.random() >= fraction:
            continue
        gold = int(e["answer"])
        others = [t for t in range(len(world.relevant)) if t != e["task_type"]
                  and rw.rule_evaluate(rw.true_criteria(world, t), e["y1"], e["y2"]) not in (0, gold)]
        if not others:
            continue
        t = rng.choice(others)
        rows.append(proxy_words(e["y1"], e["y2"], rubric_text(rw.true_criteria(world, t)),
                                _keywords(e) if with_prompt else None))
        labels.append(3 - gold - 1)  # the other answer, as a class index
    return rows, np.asarray(labels, np.int32)


def _keywords(example: dict) -> list[str]:
    return example["prompt"].split()[1:4]


class BatchIterator:
    """Random batches of the encoded set, resumable (the Trainer keeps get_state in its checkpoints)."""

    def __init__(self, arrays: dict[str, np.ndarray], batch_size: int, seed: int):
        self.arrays, self.batch_size, self.seed, self.step = arrays, batch_size, seed, 0
        self.n = len(next(iter(arrays.values())))

    def __iter__(self):
        return self

    def __next__(self) -> dict:
        rng = np.random.default_rng([self.seed, self.step])
        idx = rng.choice(self.n, self.batch_size, replace=self.n < self.batch_size)
        self.step += 1
        return {k: v[idx] for k, v in self.arrays.items()}

    def get_state(self) -> dict:
        return {"step": self.step}

    def set_state(self, state: dict) -> None:
        self.step = int(state["step"])


# ------------------------------------------------------------------------------------------ scoring


class ProxyScorer:
    """A trained proxy's greedy verdicts, in fixed-shape jitted batches (one compile)."""

    def __init__(self, graphdef, params, attention: str, with_prompt: bool, batch_rows: int = 256):
        self.params, self.with_prompt, self.batch_rows = params, with_prompt, batch_rows
        self.seq_len = proxy_seq_len(with_prompt)
        self._logits = jax.jit(lambda p, b: class_logits(graphdef, p, b, attention))

    @classmethod
    def from_run(cls, path: str) -> "ProxyScorer":
        from shared.train.load import load_run

        run = load_run(path)
        with_prompt = bool(run.config.proxy_grm.proxy.with_prompt)
        return cls(run.graphdef, run.params, run.attention, with_prompt)

    def probabilities(self, y1s, y2s, rubrics, keywords=None) -> np.ndarray:
        """P(verdict 1) per row; rubrics are texts (a whole output or an extracted rubric: extract_rubric is
        idempotent)."""
        if self.with_prompt and keywords is None:
            raise ValueError("this proxy also reads the prompt (proxy_grm.proxy.with_prompt): pass keywords")
        rows = [proxy_words(a, b, extract_rubric(r), keywords[i] if self.with_prompt else None)
                for i, (a, b, r) in enumerate(zip(y1s, y2s, rubrics))]
        out = []
        for start in range(0, len(rows), self.batch_rows):
            chunk = rows[start:start + self.batch_rows]
            batch = encode_rows(chunk + [["JUDGE:"]] * (self.batch_rows - len(chunk)), self.seq_len)
            logits = np.asarray(self._logits(self.params, batch))[:len(chunk)]
            out.append(jax.nn.softmax(logits, -1)[:, 0])
        return np.concatenate(out) if out else np.zeros(0)

    def verdicts(self, y1s, y2s, rubrics, keywords=None) -> np.ndarray:
        """1 or 2 per row (greedy; an exact tie reads as 1)."""
        return np.where(self.probabilities(y1s, y2s, rubrics, keywords) >= 0.5, 1, 2)


def verdicts_for_examples(scorer: ProxyScorer, examples: list[dict], rubrics: list[str]) -> np.ndarray:
    return scorer.verdicts([e["y1"] for e in examples], [e["y2"] for e in examples], rubrics,
                           [_keywords(e) for e in examples])


def rubric_text(criteria) -> str:
    return " ".join(rw.render_rubric(list(criteria)))


def verifier_metrics(scorer: ProxyScorer, n: int, seed: int, world_seed: int = 0,
                     type_inference: str = "spec") -> dict:
    """Proxy accuracy on n ID test pairs under the teacher's, the true, a teacher-corrupted, another type's, an
    empty rubric; and STYLE-only on pairs whose STYLE is uninformative (p_style 0.5)."""
    world = rw.make_world(world_seed, type_inference)
    kw = dict(world_seed=world_seed, type_inference=type_inference)
    test = rw.rubricworld("test", n, seed, stream="verifier", **kw)
    balanced = rw.rubricworld("test", n, seed, stream="verifier_balanced", p_style=0.5, **kw)
    ood = rw.rubricworld("ood", n, seed, stream="verifier", **kw)
    rng = random.Random(f"proxy_grm/verifier:{seed}")
    gold = np.asarray([int(e["answer"]) for e in test])

    def acc(examples, rubrics):
        g = np.asarray([int(e["answer"]) for e in examples])
        return float(np.mean(verdicts_for_examples(scorer, examples, rubrics) == g))

    true = [rubric_text(rw.true_criteria(world, e["task_type"])) for e in test]
    corrupted = [rubric_text(rw.corrupt(world, e["task_type"], rng, rng.choice(rw.CORRUPTIONS))) for e in test]
    other = [rubric_text(rw.true_criteria(world, rng.choice([t for t in range(len(world.relevant)) if t != e["task_type"]])))
             for e in test]
    out = {"proxy/acc_teacher": acc(test, [e["completion"] for e in test]),
           "proxy/acc_gold": acc(test, true),
           "proxy/acc_corrupt": acc(test, corrupted),
           "proxy/acc_wrong_type": acc(test, other),
           "proxy/acc_empty": acc(test, [rubric_text([])] * len(test)),
           "proxy/acc_style_only": acc(balanced, [rubric_text([(rw.STYLE, 3)])] * len(balanced)),
           "proxy/acc_ood_gold": acc(ood, [rubric_text(rw.true_criteria(world, e["task_type"])) for e in ood])}
    out["proxy/sensitivity"] = out["proxy/acc_gold"] - out["proxy/acc_wrong_type"]
    out["proxy/gold_1_frac"] = float(np.mean(gold == 1))
    return out


# ------------------------------------------------------------------------------------------ task and reward


@TASKS.register("proxy_grm/proxy")
def proxy_task(config, workdir: str) -> dict:
    from shared.train import write_summary
    from shared.train.tasks import finished_summary
    from shared.train.trainer import Trainer

    done = finished_summary(workdir, config, announce="proxy_grm/proxy")
    if done is not None:
        return done
    p = config.proxy_grm.proxy
    mode = str(p.mode)
    if mode not in LOSSES:
        raise ValueError(f"proxy_grm.proxy.mode={mode!r}: expected one of {sorted(LOSSES)}")
    seq_len = proxy_seq_len(bool(p.with_prompt))
    if int(config.data.seq_len) != seq_len:
        raise ValueError(f"data.seq_len={config.data.seq_len}: the proxy's inputs need exactly {seq_len}")
    world_seed, type_inference = int(config.proxy_grm.world_seed), str(config.proxy_grm.type_inference)
    kw = dict(world_seed=world_seed, type_inference=type_inference)
    train = rw.rubricworld("train", int(p.n_train), int(config.seed), subset="correct", stream=str(p.stream), **kw)
    held = rw.rubricworld("test", int(p.n_eval), int(config.seed), stream="proxy_heldout", **kw)
    rows, labels = training_rows(train, bool(p.with_prompt))
    fraction = float(p.get("counterfactual", 0.0))
    if fraction > 0:
        extra_rows, extra_labels = counterfactual_rows(train, rw.make_world(world_seed, type_inference), fraction,
                                                       int(config.seed), bool(p.with_prompt))
        rows, labels = rows + extra_rows, np.concatenate([labels, extra_labels])
        print(f"[proxy_grm/proxy] {len(extra_rows)} counterfactual rows (another type's rubric, its verdict) added "
              f"to {len(train)}", flush=True)
    arrays = {**encode_rows(rows, seq_len), "label": labels}
    held_rows, held_labels = training_rows(held, bool(p.with_prompt))
    held_arrays = {**encode_rows(held_rows, seq_len), "label": held_labels}
    bs = int(config.train.batch_size)
    eval_batches = [{k: v[i:i + bs] for k, v in held_arrays.items()} for i in range(0, len(held_labels) - bs + 1, bs)]
    trainer = Trainer(config, workdir, loss_fn_factory=LOSSES[mode])
    summary = trainer.fit(BatchIterator(arrays, bs, int(config.seed)), eval_batches or None)
    scorer = ProxyScorer(trainer.graphdef, trainer.state["params"], trainer.attention, bool(p.with_prompt))
    summary.update(verifier_metrics(scorer, int(p.n_eval), int(config.seed), world_seed, type_inference))
    print(f"[proxy_grm/proxy] {mode}: " + ", ".join(f"{k} {v:.3f}" for k, v in summary.items()
                                                    if k.startswith("proxy/")), flush=True)
    write_summary(workdir, summary)
    trainer.close()
    return summary


_SCORERS: dict[str, ProxyScorer] = {}


def scorer_for(run: str) -> ProxyScorer:
    """One loaded proxy per run folder per process (the reward and the evaluation share it)."""
    if not run:
        raise ValueError("proxy_grm/proxy reward: kwargs run='' (set proxy_grm.proxy_run to a proxy workdir)")
    if run not in _SCORERS:
        _SCORERS[run] = ProxyScorer.from_run(run)
    return _SCORERS[run]


def proxy_reward_fn(scorer: ProxyScorer):
    def proxy_reward(prompts, completions, y1, y2, answer, **_):
        """r_proxy: +1 when the frozen proxy's verdict on the completion's rubric is gold, else -1."""
        keywords = [p.split()[1:4] for p in prompts]
        verdicts = scorer.verdicts(y1, y2, [extract_rubric(c) for c in completions], keywords)
        return [1.0 if v == int(a) else -1.0 for v, a in zip(verdicts, answer)]
    return proxy_reward


@register_reward_factory("proxy_grm/proxy")
def proxy_reward(run: str = ""):
    """The frozen proxy of workdir `run` as the reward r_proxy in {-1, +1}."""
    return proxy_reward_fn(scorer_for(run))

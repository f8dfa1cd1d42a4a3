"""TASKS "rm": Bradley-Terry reward-model training on preference pairs (shared.rm.data), on the shared decoder
with the "scalar" head (model.heads must include it) and last-token pooling.

    python -m shared.launch --config=experiments/<p>/<rm config>.py --workdir=runs/rm

Reads config.rm (shared.rm.rm_config), data.source / data.path / data.task_options / data.n_train,
data.seq_len (tokens per sequence), train.* (batch_size = pairs per step). The summary has the final train
metrics and, for every split in rm.eval_splits, "eval/<split>/accuracy", ".../margin", ".../bt_loss".
The run's workdir then loads as the reward `("model/scalar_rm", 1.0, {"path": <workdir>})`.
"""
from __future__ import annotations

import functools
import json

import jax
import numpy as np

from shared.config import register_validator
from shared.config.loader import ConfigError
from shared.distributed import main_process_first
from shared.registry import DATASETS, TASKS
from shared.rm.data import PairBatchIterator, encode_pairs, encode_scored, eval_batches_of, load_pairs
from shared.rm.hooks import LOSS_HOOKS
from shared.rm.model import pooled_outputs
from shared.rm.trainer import RMTrainer
from shared.train.tasks import finished_summary, params_initializer
from shared.train.trainer import write_summary

RM_TASKS = {"rm"}  # tasks that read config.rm; a project's wrapper task adds its name here


def build_rm_data(config, workdir: str):
    """(tokenizer, train iterator, {split: rows}, stats) for this process."""
    from shared.data import build_tokenizer

    data, rm = config.data, config.rm
    train = load_pairs(config, "train", int(data.get("n_train", 0)))
    evals = {split: load_pairs(config, split, int(rm.n_eval)) for split in rm.eval_splits}

    def make_tokenizer():
        return build_tokenizer(data, workdir, config.model.vocab_size,
                               train_texts=lambda: [p["prompt"] + p["chosen"] + p["rejected"] for p in train])

    # process 0 trains (and caches) a sentencepiece model; the others load it
    tokenizer = main_process_first(make_tokenizer, "rm tokenizer ready")
    process, processes = jax.process_index(), jax.process_count()
    seq_len = int(data.seq_len)
    train_rows, train_stats = encode_pairs(tokenizer, train[process::processes], seq_len)
    columns = [k for k in train_rows if k not in ("chosen", "rejected", "chosen_last", "rejected_last",
                                                   "len_chosen", "len_rejected", "weight")]
    eval_rows, stats = {}, {f"data/{k}_train": v for k, v in train_stats.items()}
    for split, pairs in evals.items():
        eval_rows[split], split_stats = encode_pairs(tokenizer, pairs[process::processes], seq_len, columns=columns)
        stats.update({f"data/{k}_{split}": v for k, v in split_stats.items()})
    local_batch = int(config.train.batch_size) // processes
    return tokenizer, PairBatchIterator(train_rows, local_batch, int(config.seed)), eval_rows, stats


def evaluate_splits(trainer: RMTrainer, eval_rows: dict, batch_size: int) -> dict:
    """{"eval/<split>/<metric>": value} over every row of every split (pairwise accuracy, margin, BT loss)."""
    out = {}
    for split, rows in eval_rows.items():
        metrics = trainer.evaluate(eval_batches_of(rows, batch_size))
        for key, value in metrics.items():
            name = key.split("/", 1)[1]
            if name not in ("ppl", "loss"):
                out[f"eval/{split}/{name}"] = value
    return out


@functools.lru_cache(maxsize=None)
def _pooled_jit(graphdef, attention):
    return jax.jit(functools.partial(pooled_outputs, graphdef, attention=attention))


def score_rows(trainer, rows: dict, batch_size: int) -> dict[str, np.ndarray]:
    """{"r_chosen", "r_rejected": [n], "h_chosen", "h_rejected": [n, D]} numpy outputs of the RM on pair rows."""
    from shared import sharding as sh

    n = len(rows["chosen"])
    out = {k: [] for k in ("r_chosen", "r_rejected", "h_chosen", "h_rejected")}
    fn = _pooled_jit(trainer.graphdef, trainer.attention)
    with sh.use_mesh(trainer.mesh, trainer.rules):
        for batch in eval_batches_of(rows, batch_size):
            for side in ("chosen", "rejected"):
                device = trainer.to_global({"tokens": batch[side], "last": batch[f"{side}_last"]})
                reward, hidden = fn(trainer.params, device["tokens"], device["last"])
                out[f"r_{side}"].append(np.asarray(reward))
                out[f"h_{side}"].append(np.asarray(hidden))
    return {k: np.concatenate(v)[:n] for k, v in out.items()}


def score_texts(trainer, tokenizer, prompts, responses, seq_len: int, batch_size: int) -> np.ndarray:
    """float32 [N] rewards of (prompt, response) texts, tokenised like ScalarRewardModel."""
    from shared import sharding as sh

    n = len(prompts)
    padded = max(1, -(-n // batch_size)) * batch_size
    tokens = np.full((padded, seq_len), tokenizer.pad_id, np.int32)
    last = np.zeros((padded,), np.int32)
    for i, (prompt, response) in enumerate(zip(prompts, responses)):
        ids, _, _ = encode_scored(tokenizer, prompt, response, seq_len)
        tokens[i, :len(ids)], last[i] = ids, len(ids) - 1
    fn = _pooled_jit(trainer.graphdef, trainer.attention)
    scores = []
    with sh.use_mesh(trainer.mesh, trainer.rules):
        for b in range(0, padded, batch_size):
            device = trainer.to_global({"tokens": tokens[b:b + batch_size], "last": last[b:b + batch_size]})
            scores.append(np.asarray(fn(trainer.params, device["tokens"], device["last"])[0]))
    return np.concatenate(scores)[:n]


def rm_params_initializer(config):
    """train.init_from for a reward model: "hf:<dir>" loads a causal-LM checkpoint (Llama / Qwen2 / Qwen3) as the
    backbone, drops its LM head unless model.heads keeps "lm", and starts the scalar head fresh (normal with
    model.init_std, zero bias); other forms as shared.train.tasks.params_initializer."""
    spec = config.train.init_from
    if not spec.startswith("hf:"):
        return params_initializer(config)
    path = spec[len("hf:"):]

    def init(abstract):
        import os

        import ml_collections

        from shared.model.convert import load_hf
        from shared.model.convert.hf import config_from_hf

        lm_model = ml_collections.ConfigDict(config.model.to_dict())
        lm_model.heads = ["lm"]
        hf_json = os.path.join(path, "config.json")
        if "lm" not in list(config.model.heads) and os.path.exists(hf_json):
            with open(hf_json) as f:  # the LM head is dropped, so its tying is the checkpoint's, not a choice
                lm_model.tie_embeddings = config_from_hf(json.load(f)).tie_embeddings
        _, state = load_hf(path, lm_model, context=f"train.init_from={spec}")
        params = dict(state.to_pure_dict())
        lm_head = params.pop("heads", {}).get("lm", {})  # tied: no head of its own
        heads = {}
        for name, head in abstract["heads"].items():
            if name == "lm":
                heads[name] = lm_head
            elif name == "scalar":
                key = jax.random.key(int(config.seed))
                heads[name] = {"kernel": float(config.model.init_std) * jax.random.normal(
                                   key, head["kernel"].shape, head["kernel"].dtype),
                               "bias": jax.numpy.zeros(head["bias"].shape, head["bias"].dtype)}
            else:
                raise ValueError(f"train.init_from={spec!r}: no initial values for head {name!r}")
        params["heads"] = heads
        return jax.tree.map(lambda x, a: jax.device_put(jax.numpy.asarray(x, a.dtype), a.sharding), params, abstract)

    return init


def train_rm(config, workdir: str, hooks=None):
    """Trains (or resumes) an RM in `workdir`: (trainer, tokenizer, eval rows, summary); the caller closes the
    trainer and writes the summary (projects add their own evaluation in between)."""
    tokenizer, train_iter, eval_rows, stats = build_rm_data(config, workdir)
    print(f"[rm] data: {json.dumps(stats)}", flush=True)
    trainer = RMTrainer(config, workdir, hooks=hooks, init_params=rm_params_initializer(config))
    print(f"[rm] {sum(x.size for x in jax.tree.leaves(trainer.params)) / 1e6:.2f}M parameters, mesh "
          f"{dict(trainer.mesh.shape)}, loss hooks {list(trainer.loss_hooks) or 'none'}, steps "
          f"{trainer.start_step}->{config.train.steps}", flush=True)
    local_batch = int(config.train.batch_size) // jax.process_count()
    first = next(iter(eval_rows.values()), None)
    periodic = eval_batches_of(first, local_batch) if first is not None and config.train.eval_batches else []
    summary = trainer.fit(train_iter, periodic)
    summary.update(stats)
    if not summary["diverged"]:
        final = evaluate_splits(trainer, eval_rows, local_batch)
        summary.update(final)
        trainer.metrics_writer.write(summary["steps"], final)
    return trainer, tokenizer, eval_rows, summary


@TASKS.register("rm")
def rm_task(config, workdir: str) -> dict:
    done = finished_summary(workdir, config, announce="rm")
    if done is not None:
        return done
    trainer, _, _, summary = train_rm(config, workdir)
    write_summary(workdir, summary)
    trainer.close()
    return summary


@register_validator
def check_rm_config(config, mesh_shape) -> None:
    if config.task not in RM_TASKS:
        return
    if "rm" not in config:
        raise ConfigError(f"task={config.task!r} needs the group config.rm (c.rm = shared.rm.rm_config())")
    if "scalar" not in list(config.model.heads):
        raise ConfigError(f"model.heads={list(config.model.heads)}: a reward model needs the 'scalar' head")
    for name in config.rm.loss_hooks:
        if name not in LOSS_HOOKS:
            raise ConfigError(f"rm.loss_hooks: {LOSS_HOOKS.unknown_message(name)}")
    if config.data.source != "jsonl" and config.data.source not in DATASETS:
        raise ConfigError(f"data.source: {DATASETS.unknown_message(config.data.source)}")
    if not list(config.rm.eval_splits):
        raise ConfigError("rm.eval_splits is empty: name at least one split to evaluate")
    if not 0.0 <= float(config.rm.label_smoothing) < 0.5:
        raise ConfigError(f"rm.label_smoothing={config.rm.label_smoothing} must be in [0, 0.5)")

"""Supervised fine-tuning on (prompt, completion) pairs with the loss on completion tokens only (TASKS "sft").

Data (config.data):
  source "rl/<task>"  examples of a registered task (shared.data.examples): train split for training, test split for
                      evaluation, each example's "prompt" and gold "completion". data.task_options are the task's
                      keyword options (e.g. {"ops": "+-"} or {"path": ".../gsm8k"}); data.n_train examples.
  source "jsonl"      data.path (file, folder or glob of .jsonl) with one record per line, either
                        {"prompt": str, "completion": str[, "context_spans": [[start, end], ...]]}   or
                        {"messages": [{"role": "system"|"user"|"assistant", "content": str}, ...]}
                      A chat record uses a plain template: every turn but the last is rendered as
                      "<Role>: <content>\\n" (Role = System / User / Assistant) and the prompt ends with "Assistant:";
                      the completion is " " + the last message, which must be the assistant's. Validation records
                      come from data.val_path, else a hash split of (file, line) with data.val_fraction.

Context spans: an example may carry "context_spans", [start, end) character offsets into its completion of text the
policy does not write (e.g. a tool's <information> block in an agent trace): their tokens are context, like the
prompt (prompt_mask 1, so sft_xent does not learn them; lm_xent still does). With spans the completion is
tokenized segment by segment (span boundaries fall on token boundaries, as when shared/agent appends an
observation's tokens); without them it is tokenized whole, as before.

Rows: one example per row of data.seq_len tokens, [bos] + prompt ids + completion ids + [eos] (prompt and
completion tokenized separately), right-padded. An example too long for a row loses prompt tokens from the
left (never completion tokens; bos stays); one whose completion alone does not fit is dropped. Both are
counted (summary: data/truncated_train, data/dropped_train, ...). Batch arrays, [B, T]:
  inputs, targets (next token), positions (0.. per row), segment_ids (1 on real tokens, 0 on padding),
  loss_mask (1 on real targets), prompt_mask (1 where the TARGET is a prompt token or a token of a context span:
  the last prompt position, whose target is the first completion token, is 0 and counts).
With train.loss = "sft_xent" (LOSSES) only completion targets are learned; "lm_xent" trains on all of it.

Training runs through the Trainer (resume, checkpoints, eval loss on held-out examples every train.eval_every
steps over train.eval_batches batches). For an rl task, greedy decoding of data.greedy_eval_examples test
examples after training gives "eval/greedy_accuracy" (and "eval/greedy_accuracy_<split>" for other splits
in data.greedy_eval_splits), judged by the task's checker.

Config keys read beyond base_config (with defaults): data.task_options ({}), data.n_train (10000),
data.greedy_eval_examples (64), data.greedy_eval_tokens (32), data.greedy_eval_splits (["test"]).
"""
from __future__ import annotations

import json
import math
import os
from typing import Any, Sequence

import jax
import numpy as np

from shared import sharding as sh
from shared.data.sources import DataError, resolve_files, split_names
from shared.distributed import main_process_first
from shared.registry import TASKS
from shared.train.tasks import finished_summary, params_initializer
from shared.train.trainer import Trainer, write_summary

SFT_BATCH_KEYS = ("inputs", "targets", "positions", "segment_ids", "loss_mask", "prompt_mask")
CHAT_ROLES = ("system", "user", "assistant")


# ------------------------------------------------------------------------------------------ reading data


def render_chat(messages: Any, where: str) -> tuple[str, str]:
    """(prompt, completion) of a chat record with the plain template of the module doc."""
    if not isinstance(messages, list) or not messages:
        raise DataError(f"{where}: 'messages' must be a non-empty list of {{'role', 'content'}} objects")
    turns = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("content"), str):
            raise DataError(f"{where}: messages[{i}] must be an object with a string 'content'")
        if message.get("role") not in CHAT_ROLES:
            raise DataError(f"{where}: messages[{i}] has role {message.get('role')!r}; expected one of "
                            f"{', '.join(CHAT_ROLES)}")
        turns.append((message["role"], message["content"]))
    if turns[-1][0] != "assistant":
        raise DataError(f"{where}: the last message must be the assistant's (it is the completion); "
                        f"got role {turns[-1][0]!r}")
    prompt = "".join(f"{role.capitalize()}: {content}\n" for role, content in turns[:-1]) + "Assistant:"
    return prompt, " " + turns[-1][1]


def sft_record(record: Any, where: str) -> dict:
    """{"prompt", "completion"} of one jsonl record (prompt/completion pair or chat messages)."""
    if not isinstance(record, dict):
        raise DataError(f"{where}: expected a JSON object, got {type(record).__name__}")
    if "messages" in record:
        prompt, completion = render_chat(record["messages"], where)
        return {"prompt": prompt, "completion": completion}
    for key in ("prompt", "completion"):
        if not isinstance(record.get(key), str):
            raise DataError(f"{where}: record needs string fields 'prompt' and 'completion' (or 'messages'); "
                            f"{key!r} is {'missing' if key not in record else type(record[key]).__name__}")
    example = {"prompt": record["prompt"], "completion": record["completion"]}
    if "context_spans" in record:
        example["context_spans"] = record["context_spans"]
        try:
            check_context_spans(example["context_spans"], len(example["completion"]))
        except ValueError as e:
            raise DataError(f"{where}: {e}") from None
    return example


def read_sft_jsonl(pattern: str, key: str = "data.path") -> list[tuple[str, dict]]:
    """[(name "file:line", example)] of every record in the .jsonl files `pattern` names."""
    from shared.data.records import read_records

    files, root = resolve_files(pattern, key, (".jsonl",))
    out = []
    for path in files:
        if path.endswith(".gz"):
            raise DataError(f"{key}: {path}: gzipped SFT files are not supported; decompress it")
        relative = os.path.relpath(os.path.abspath(path), root)
        for where, record in read_records(path):
            out.append((f"{relative}:{where.rsplit(':', 1)[1]}", sft_record(record, where)))
    if not out:
        raise DataError(f"{key}: {pattern} holds no records")
    return out


def load_sft_examples(config) -> tuple[list[dict], list[dict], str | None]:
    """(train examples, held-out examples, rl task name or None) from config.data (see module doc)."""
    data = config.data
    source = data.source
    if source.startswith("rl/"):
        from shared.data.examples import load_task

        options = _plain(data.get("task_options", {}))
        n_train = int(data.get("n_train", 10000))
        n_eval = int(config.train.eval_batches) * int(config.train.batch_size)
        n_greedy = int(data.get("greedy_eval_examples", 64))
        train = load_task(source, "train", n_train, int(config.seed), **options)
        held_out = load_task(source, "test", max(n_eval, n_greedy, 1), int(config.seed), **options)
        return train, held_out, source
    if source != "jsonl":
        raise DataError(f"data.source={source!r}: the sft task reads 'jsonl' (data.path) or an 'rl/<task>' set")
    records = read_sft_jsonl(data.path)
    if data.val_path:
        held_out = [e for _, e in read_sft_jsonl(data.val_path, "data.val_path")]
        return [e for _, e in records], held_out, None
    train_idx, val_idx = split_names([name for name, _ in records], float(data.val_fraction))
    return [records[i][1] for i in train_idx], [records[i][1] for i in val_idx], None


def _plain(options: Any) -> dict:
    if hasattr(options, "to_dict"):
        options = options.to_dict()
    return dict(options or {})


# ------------------------------------------------------------------------------------------ rows and batches


def check_context_spans(spans: Any, completion_length: int) -> list[tuple[int, int]]:
    """The spans as sorted [(start, end)], or ValueError unless they are non-overlapping [start, end) pairs of
    ints within the completion."""
    if not isinstance(spans, (list, tuple)):
        raise ValueError(f"context_spans must be a list of [start, end] pairs; got {type(spans).__name__}")
    out = []
    for span in spans:
        if (not isinstance(span, (list, tuple)) or len(span) != 2
                or not all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in span)):
            raise ValueError(f"context_spans: {span!r} is not a [start, end] pair of ints")
        out.append((int(span[0]), int(span[1])))
    out.sort()
    previous_end = 0
    for start, end in out:
        if not previous_end <= start <= end <= completion_length:
            raise ValueError(f"context_spans: [{start}, {end}] overlaps another span or is outside the completion "
                             f"(length {completion_length})")
        previous_end = end
    return out


def encode_completion(tokenizer, completion: str, context_spans: Sequence = ()) -> tuple[list[int], list[bool]]:
    """(completion ids, is-context flag per id): tokenized whole without spans, else segment by segment."""
    if not context_spans:
        ids = list(tokenizer.encode(completion))
        return ids, [False] * len(ids)
    ids, context, cursor = [], [], 0
    segments = []
    for start, end in check_context_spans(context_spans, len(completion)):
        segments += [(completion[cursor:start], False), (completion[start:end], True)]
        cursor = end
    segments.append((completion[cursor:], False))
    for text, is_context in segments:
        if text:
            piece = list(tokenizer.encode(text))
            ids += piece
            context += [is_context] * len(piece)
    return ids, context


def fit_row(tokenizer, prompt_ids: list[int], completion_ids: list[int], seq_len: int
            ) -> tuple[list[int], int, bool] | None:
    """(tokens [bos] + prompt + completion + [eos], prompt length, truncated) fitting seq_len + 1 tokens, prompt
    cut from the left; None when the completion alone does not fit."""
    room = seq_len + 1 - 2 - len(completion_ids)
    if room < 0:
        return None
    truncated = len(prompt_ids) > room
    if truncated:
        prompt_ids = prompt_ids[len(prompt_ids) - room:]
    return [tokenizer.bos_id] + prompt_ids + completion_ids + [tokenizer.eos_id], len(prompt_ids), truncated


def encode_example(tokenizer, prompt: str, completion: str, seq_len: int, context_spans: Sequence = ()
                   ) -> tuple[list[int], int, bool] | None:
    """(tokens [bos] + prompt + completion + [eos], prompt length, truncated) fitting seq_len + 1 tokens (rows hold
    seq_len input/target pairs), prompt cut from the left; None when the completion alone does not fit."""
    completion_ids, _ = encode_completion(tokenizer, completion, context_spans)
    return fit_row(tokenizer, list(tokenizer.encode(prompt)), completion_ids, seq_len)


def empty_rows(count: int, seq_len: int, pad_id: int) -> dict[str, np.ndarray]:
    return {"inputs": np.full((count, seq_len), pad_id, np.int32),
            "targets": np.full((count, seq_len), pad_id, np.int32),
            "positions": np.zeros((count, seq_len), np.int32),
            "segment_ids": np.zeros((count, seq_len), np.int32),
            "loss_mask": np.zeros((count, seq_len), np.float32),
            "prompt_mask": np.zeros((count, seq_len), np.float32)}


def build_rows(tokenizer, examples: Sequence[dict], seq_len: int) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """One row per example (arrays [n, seq_len], see module doc) and {"examples", "truncated", "dropped"}."""
    encoded, truncated, dropped = [], 0, 0
    for example in examples:
        completion_ids, context = encode_completion(tokenizer, example["completion"],
                                                    example.get("context_spans") or ())
        result = fit_row(tokenizer, list(tokenizer.encode(example["prompt"])), completion_ids, seq_len)
        if result is None:
            dropped += 1
            continue
        encoded.append((*result, context))
        truncated += result[2]
    rows = empty_rows(len(encoded), seq_len, tokenizer.pad_id)
    for r, (tokens, prompt_len, _, context) in enumerate(encoded):
        length = len(tokens) - 1  # (input, target) pairs
        rows["inputs"][r, :length] = tokens[:-1]
        rows["targets"][r, :length] = tokens[1:]
        rows["positions"][r, :length] = np.arange(length)
        rows["segment_ids"][r, :length] = 1
        rows["loss_mask"][r, :length] = 1.0
        rows["prompt_mask"][r, :prompt_len] = 1.0  # targets 0..prompt_len-1 are the prompt tokens
        rows["prompt_mask"][r, prompt_len + np.flatnonzero(context)] = 1.0  # completion token c is target prompt_len+c
    return rows, {"examples": len(encoded), "truncated": truncated, "dropped": dropped}


class SFTBatchIterator:
    """Infinite batches of rows, reshuffled every epoch from (seed, epoch); batches run across epoch ends.

    get_state() is a small JSON dict {"layout", "epoch", "position"}; set_state() on an iterator over the same
    rows continues with exactly the batches the saved one would have given next."""

    key = "inputs"  # the token array that identifies the rows (the layout's checksum is over it)
    name = "sft"    # for error messages

    def __init__(self, rows: dict[str, np.ndarray], batch_size: int, seed: int):
        self.rows = rows
        tokens = rows[self.key]
        self.num_rows = len(tokens)
        if self.num_rows == 0:
            raise DataError(f"{self.name}: no training rows (every example was dropped or the set is empty)")
        self.batch_size, self.seed = int(batch_size), int(seed)
        self.epoch, self.position = 0, 0
        self._order = self._permutation(0)
        checksum = int(np.sum(tokens.astype(np.int64) * (1 + np.arange(tokens.shape[1]))) % 2**31)
        self.layout = {"rows": self.num_rows, "seq_len": int(tokens.shape[1]),
                       "batch_size": self.batch_size, "seed": self.seed, "checksum": checksum}

    def _permutation(self, epoch: int) -> np.ndarray:
        return np.random.default_rng([self.seed, epoch]).permutation(self.num_rows)

    def __iter__(self):
        return self

    def __next__(self) -> dict[str, np.ndarray]:
        picked, count = [], 0
        while count < self.batch_size:
            take = min(self.batch_size - count, self.num_rows - self.position)
            picked.append(self._order[self.position:self.position + take])
            self.position += take
            count += take
            if self.position == self.num_rows:
                self.epoch, self.position = self.epoch + 1, 0
                self._order = self._permutation(self.epoch)
        index = np.concatenate(picked)
        return {k: v[index] for k, v in self.rows.items()}

    def get_state(self) -> dict[str, Any]:
        return {"layout": dict(self.layout), "epoch": self.epoch, "position": self.position}

    def set_state(self, state: dict[str, Any]) -> None:
        saved = state.get("layout", {})
        if saved != self.layout:
            diff = ", ".join(f"{k}: saved {saved.get(k)}, now {v}" for k, v in self.layout.items() if saved.get(k) != v)
            raise DataError(f"{self.name} data iterator state does not fit these rows ({diff or saved})")
        self.epoch, self.position = int(state["epoch"]), int(state["position"])
        self._order = self._permutation(self.epoch)


def eval_batches_of(rows: dict[str, np.ndarray], num_batches: int, batch_size: int, pad_id: int
                    ) -> list[dict[str, np.ndarray]]:
    """Exactly num_batches batches of the first rows, padded with all-masked rows when there are too few."""
    wanted = num_batches * batch_size
    have = min(wanted, len(rows["inputs"]))
    padded = empty_rows(wanted, rows["inputs"].shape[1], pad_id)
    for key in SFT_BATCH_KEYS:
        padded[key][:have] = rows[key][:have]
    return [{k: v[b:b + batch_size] for k, v in padded.items()} for b in range(0, wanted, batch_size)]


# ------------------------------------------------------------------------------------------ greedy evaluation


GREEDY_ROWS_PER_CALL = 256  # rows per sampler call of the greedy evaluation (one compilation per prompt bucket)


def greedy_completions(trainer: Trainer, tokenizer, prompts: Sequence[str], max_new_tokens: int,
                       max_seq_len: int) -> list[str]:
    """Greedy completion text of each prompt (stops at EOS), batched through the KV-cache sampler
    (shared.model.sampler) on the trainer's mesh: all prompts in a few device calls instead of one host round
    trip per token and prompt."""
    from shared.model.sampler import Sampler, SamplingParams

    room = max(1, max_seq_len - max_new_tokens - 1)
    ids = [[tokenizer.bos_id] + list(tokenizer.encode(prompt))[-room:] for prompt in prompts]
    sampler = Sampler(trainer.graphdef, trainer.config.model, eos_id=tokenizer.eos_id, pad_id=tokenizer.pad_id,
                      mesh=trainer.mesh, rules=trainer.rules, attention=trainer.attention, tokenizer=tokenizer)
    longest = max(len(x) for x in ids)
    buckets = tuple(sorted({*SamplingParams.prompt_buckets, longest}))
    sampling = SamplingParams(max_new_tokens=max_new_tokens, temperature=0.0, n=1, prompt_buckets=buckets)
    with sh.use_mesh(trainer.mesh, trainer.rules):
        rollout = sampler.generate(trainer.params, ids, sampling, jax.random.key(0), max_rows=GREEDY_ROWS_PER_CALL)
    return list(rollout.texts)


def greedy_eval_sets(config, task: str | None) -> dict[str, list[dict]]:
    """{split: examples} for the greedy evaluation (data.greedy_eval_splits), loaded before training so a bad
    split fails early; {} when off, for a jsonl source, or on multi-process runs."""
    from shared.data.examples import checker, load_task

    data = config.data
    count = int(data.get("greedy_eval_examples", 64))
    splits = list(data.get("greedy_eval_splits", ["test"]))
    if task is None or count <= 0 or not splits:
        return {}
    if jax.process_count() > 1:
        print("[sft] greedy accuracy is computed on single-process runs only; skipped", flush=True)
        return {}
    checker(task)  # the task must have a checker
    options = _plain(data.get("task_options", {}))
    return {split: load_task(task, split, count, int(config.seed), **options) for split in splits}


def greedy_eval(trainer: Trainer, tokenizer, config, task: str, sets: dict[str, list[dict]]) -> dict[str, Any]:
    """{"eval/greedy_accuracy[_<split>]": ..., "greedy_samples": {split: [...]}} over `sets`."""
    from shared.eval.passk import greedy_accuracy
    from shared.data.examples import checker

    if not sets:
        return {}
    check = checker(task)
    out: dict[str, Any] = {"greedy_samples": {}}
    # every split in one sampler call: one prompt bucket, one compilation
    every = [e["prompt"] for examples in sets.values() for e in examples]
    all_texts = iter(greedy_completions(trainer, tokenizer, every, int(config.data.get("greedy_eval_tokens", 32)),
                                        int(config.model.max_seq_len)))
    for split, examples in sets.items():
        texts = [next(all_texts) for _ in examples]
        key = "eval/greedy_accuracy" if split == "test" else f"eval/greedy_accuracy_{split}"
        out[key] = greedy_accuracy(check, examples, texts)
        out["greedy_samples"][split] = [{"prompt": e["prompt"], "completion": t, "answer": e["answer"],
                                         "correct": bool(check(e, t))} for e, t in zip(examples[:4], texts[:4])]
        print(f"[sft] {key} = {out[key]:.3f} over {len(examples)} {split} examples", flush=True)
    return out


# ------------------------------------------------------------------------------------------ the task


def build_sft_data(config, workdir: str):
    """(tokenizer, train iterator, eval batches, data stats, rl task name or None) for this process."""
    from shared.data import build_tokenizer

    train, held_out, task = load_sft_examples(config)

    def make_tokenizer():
        return build_tokenizer(config.data, workdir, config.model.vocab_size,
                               train_texts=lambda: [e["prompt"] + e["completion"] for e in train])

    # process 0 trains (and caches) a sentencepiece model; the others load it
    tokenizer = main_process_first(make_tokenizer, "sft tokenizer ready")
    seq_len = int(config.data.seq_len)
    process, processes = jax.process_index(), jax.process_count()
    local_batch = int(config.train.batch_size) // processes
    train_rows, train_stats = build_rows(tokenizer, train[process::processes], seq_len)
    eval_rows, eval_stats = build_rows(tokenizer, held_out[process::processes], seq_len)
    train_iter = SFTBatchIterator(train_rows, local_batch, seed=int(config.seed))
    num_eval = int(config.train.eval_batches)
    eval_batches = (eval_batches_of(eval_rows, num_eval, local_batch, tokenizer.pad_id)
                    if num_eval and held_out else [])  # same count on every process (padding rows)
    stats = {f"data/{k}_train": v for k, v in train_stats.items()}
    stats.update({f"data/{k}_eval": v for k, v in eval_stats.items()})
    return tokenizer, train_iter, eval_batches, stats, task


@TASKS.register("sft")
def sft(config, workdir: str) -> dict:
    done = finished_summary(workdir, config, announce="sft")
    if done is not None:
        return done
    tokenizer, train_iter, eval_batches, stats, task = build_sft_data(config, workdir)
    greedy_sets = greedy_eval_sets(config, task)
    print(f"[sft] data: {json.dumps(stats)}", flush=True)
    if config.train.loss != "sft_xent":
        print(f"[sft] note: train.loss={config.train.loss!r}; use 'sft_xent' to learn completion tokens only",
              flush=True)
    trainer = Trainer(config, workdir, init_params=params_initializer(config))
    print(f"[sft] {sum(x.size for x in jax.tree.leaves(trainer.params)) / 1e6:.2f}M parameters, "
          f"mesh {dict(trainer.mesh.shape)}, steps {trainer.start_step}->{config.train.steps}", flush=True)
    summary = trainer.fit(train_iter, eval_batches)
    summary.update(stats)
    if greedy_sets and not summary["diverged"]:
        greedy = greedy_eval(trainer, tokenizer, config, task, greedy_sets)
        summary.update(greedy)
        row = {k: v for k, v in greedy.items() if isinstance(v, float) and math.isfinite(v)}
        if row:
            trainer.metrics_writer.write(summary["steps"], row)
    write_summary(workdir, summary)
    trainer.close()
    return summary

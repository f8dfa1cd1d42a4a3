"""Preference pairs: reading, the HH-RLHF dialogue split, tokenisation into fixed-shape rows, batching.

A pair is a dict {"prompt": str, "chosen": str, "rejected": str, <numeric columns>}. Accepted records:
  {"prompt", "chosen", "rejected"}            strings; the prompt is shared
  {"chosen", "rejected"}                      HH-RLHF dialogues "\\n\\nHuman: ...\\n\\nAssistant: ..." sharing
                                              everything up to the last "\\n\\nAssistant:" (the prompt); pairs
                                              whose prefixes differ keep the whole texts with an empty prompt
  {"chosen": [messages], "rejected": [messages]}  chat lists {"role", "content"}, rendered with the plain
                                              template of shared.train.sft (prompt = every turn but the last)
Any other int / float / bool field of a record (e.g. "attr", "filler_chosen", "margin") is kept as a numeric
column, so bias attributes and oracle values ride along with the batch.

Sources (config.data.source): "jsonl" reads data.path (.jsonl, .jsonl.gz or .json array; data.val_path or a
hash split with data.val_fraction gives the "test" split), and any other DATASETS name is a pair-set function
`fn(split, n, seed, **data.task_options) -> list[pair]` (e.g. a project's synthetic generator).

Rows (one per pair; the layout the reward model's loss and `ScalarRewardModel` share):
  chosen, rejected            int32 [n, T]: [bos] + prompt ids + response ids (+ eos), right-padded; a sequence
                              longer than T keeps bos and its last T-1 tokens (prompt cut first)
  chosen_last, rejected_last  int32 [n]: index of the last real token (the pooled position)
  len_chosen, len_rejected    float32 [n]: response token counts (the length attribute)
  weight                      float32 [n]: 1 for real pairs, 0 for padding rows of evaluation batches
  <column>                    float32 [n] numeric record fields
"""
from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np

from shared.data.sources import DataError, resolve_files, split_names
from shared.data.records import read_records
from shared.train.sft import SFTBatchIterator

HH_ASSISTANT = "\n\nAssistant:"
ROW_KEYS = ("chosen", "rejected", "chosen_last", "rejected_last", "len_chosen", "len_rejected", "weight")


# ------------------------------------------------------------------------------------------ records


def split_hh_dialogue(chosen: str, rejected: str) -> tuple[str, str, str]:
    """(prompt, chosen response, rejected response) of an HH-RLHF record: the prompt runs up to and including the
    last "\\n\\nAssistant:" of the chosen dialogue when the rejected one shares it, else it is empty."""
    cut = chosen.rfind(HH_ASSISTANT)
    if cut >= 0:
        prompt = chosen[:cut + len(HH_ASSISTANT)]
        if rejected.startswith(prompt) and rejected.rfind(HH_ASSISTANT) == cut:
            return prompt, chosen[len(prompt):], rejected[len(prompt):]
    return "", chosen, rejected


def pair_record(record: Any, where: str) -> dict:
    """The pair of one record (see the module doc); errors name `where` (file:line)."""
    from shared.train.sft import render_chat

    if not isinstance(record, dict):
        raise DataError(f"{where}: expected a JSON object, got {type(record).__name__}")
    for key in ("chosen", "rejected"):
        if key not in record:
            raise DataError(f"{where}: a preference record needs 'chosen' and 'rejected'; fields: "
                            f"{', '.join(sorted(record)) or '(none)'}")
    chosen, rejected = record["chosen"], record["rejected"]
    if isinstance(chosen, list) and isinstance(rejected, list):
        prompt, chosen_text = render_chat(chosen, f"{where} chosen")
        rejected_prompt, rejected_text = render_chat(rejected, f"{where} rejected")
        if rejected_prompt != prompt:
            raise DataError(f"{where}: 'chosen' and 'rejected' chats differ before their last message")
        pair = {"prompt": prompt, "chosen": chosen_text, "rejected": rejected_text}
    elif isinstance(chosen, str) and isinstance(rejected, str):
        if "prompt" in record:
            if not isinstance(record["prompt"], str):
                raise DataError(f"{where}: 'prompt' is {type(record['prompt']).__name__}, expected a string")
            pair = {"prompt": record["prompt"], "chosen": chosen, "rejected": rejected}
        else:
            prompt, c, r = split_hh_dialogue(chosen, rejected)
            pair = {"prompt": prompt, "chosen": c, "rejected": r}
    else:
        raise DataError(f"{where}: 'chosen' and 'rejected' must both be strings or both chat lists; got "
                        f"{type(chosen).__name__} and {type(rejected).__name__}")
    for key, value in record.items():
        if key not in ("prompt", "chosen", "rejected") and isinstance(value, (int, float, bool)):
            pair[key] = float(value)
    return pair


def read_pairs(pattern: str, key: str = "data.path") -> list[tuple[str, dict]]:
    """[(name "file:line", pair)] of every record in the files `pattern` names (file, folder or glob)."""
    files, root = resolve_files(pattern, key, (".jsonl", ".json"))
    out = []
    for path in files:
        relative = os.path.relpath(os.path.abspath(path), root)
        for where, record in read_records(path):
            out.append((f"{relative}:{where.rsplit(':', 1)[-1]}", pair_record(record, where)))
    if not out:
        raise DataError(f"{key}: {pattern} holds no records")
    return out


def _options(config) -> dict:
    options = config.data.get("task_options", {})
    return dict(options.to_dict() if hasattr(options, "to_dict") else options or {})


def load_pairs(config, split: str, n: int) -> list[dict]:
    """Up to `n` pairs (0 = all) of `split` from config.data (see the module doc)."""
    from shared.registry import DATASETS

    data = config.data
    if data.source != "jsonl":
        return list(DATASETS.get(data.source)(split, n, int(config.seed), **_options(config)))
    if split == "train" or not data.val_path:
        records = read_pairs(data.path)
        if split not in ("train", "test"):
            raise DataError(f"rm.eval_splits: a jsonl source has the splits 'train' and 'test'; got {split!r}")
        train_idx, test_idx = split_names([name for name, _ in records], float(data.val_fraction))
        pairs = [records[i][1] for i in (train_idx if split == "train" else test_idx)]
    else:
        pairs = [pair for _, pair in read_pairs(data.val_path, "data.val_path")]
    return pairs[:n] if n else pairs


# ------------------------------------------------------------------------------------------ rows


def encode_scored(tokenizer, prompt: str, response: str, max_len: int, add_bos: bool = True,
                  append_eos: bool = False) -> tuple[list[int], int, bool]:
    """(ids, response token count, truncated): [bos] + prompt + response (+ eos), keeping bos and the last
    max_len - 1 tokens when too long. The same ids as `shared.rewards.ScalarRewardModel.tokenize`."""
    bos = [tokenizer.bos_id] if add_bos and tokenizer.bos_id is not None else []
    response_ids = list(tokenizer.encode(response))
    ids = bos + list(tokenizer.encode(prompt)) + response_ids + ([tokenizer.eos_id] if append_eos else [])
    truncated = len(ids) > max_len
    if truncated:
        ids = bos + ids[len(ids) - (max_len - len(bos)):]
    return ids, len(response_ids), truncated


def encode_pairs(tokenizer, pairs: Sequence[dict], seq_len: int, append_eos: bool = False,
                 columns: Sequence[str] | None = None) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """Rows of `pairs` (module doc) and {"pairs", "truncated"} counts. `columns` fixes the numeric columns
    (default: those of the first pair); a pair missing one is a DataError naming it."""
    n = len(pairs)
    if columns is None:
        columns = sorted(k for k in (pairs[0] if pairs else {}) if k not in ("prompt", "chosen", "rejected"))
    rows = empty_rows(n, seq_len, tokenizer.pad_id, columns)
    truncated = 0
    for i, pair in enumerate(pairs):
        for side in ("chosen", "rejected"):
            ids, response_len, cut = encode_scored(tokenizer, pair["prompt"], pair[side], seq_len,
                                                   append_eos=append_eos)
            rows[side][i, :len(ids)] = ids
            rows[f"{side}_last"][i] = len(ids) - 1
            rows[f"len_{side}"][i] = response_len
            truncated += cut
        for column in columns:
            if column not in pair:
                raise DataError(f"pair {i}: no column {column!r} (the first pair has it); every pair needs the "
                                f"same numeric fields")
            rows[column][i] = pair[column]
    return rows, {"pairs": n, "truncated": truncated}


def empty_rows(n: int, seq_len: int, pad_id: int, columns: Sequence[str] = ()) -> dict[str, np.ndarray]:
    rows = {"chosen": np.full((n, seq_len), pad_id, np.int32), "rejected": np.full((n, seq_len), pad_id, np.int32),
            "chosen_last": np.zeros((n,), np.int32), "rejected_last": np.zeros((n,), np.int32),
            "len_chosen": np.zeros((n,), np.float32), "len_rejected": np.zeros((n,), np.float32),
            "weight": np.ones((n,), np.float32)}
    rows.update({c: np.zeros((n,), np.float32) for c in columns})
    return rows


class PairBatchIterator(SFTBatchIterator):
    """Infinite batches of pair rows, reshuffled every epoch from (seed, epoch); JSON state for exact resume."""

    key, name = "chosen", "rm"


def eval_batches_of(rows: dict[str, np.ndarray], batch_size: int) -> list[dict[str, np.ndarray]]:
    """Every row once, in batches of batch_size; the last batch is padded with weight-0 rows."""
    n = len(rows["chosen"])
    padded_n = max(1, -(-n // batch_size)) * batch_size
    out = {}
    for key, value in rows.items():
        pad = np.zeros((padded_n - n,) + value.shape[1:], value.dtype)
        if key in ("chosen", "rejected"):
            pad[:] = value[0] if n else 0  # any valid tokens; weight 0 keeps them out of every metric
        out[key] = np.concatenate([value, pad])
    out["weight"][n:] = 0.0
    return [{k: v[b:b + batch_size] for k, v in out.items()} for b in range(0, padded_n, batch_size)]

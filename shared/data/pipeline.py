"""Tokenize, pack and batch documents with grain.

Each document becomes [bos] + ids + [eos]; the model predicts token i+1 from tokens <= i, so a document of
L tokens gives L-1 (input, target) pairs. Pairs are packed into rows of data.seq_len; every batch is a dict
of numpy arrays:
  inputs      int32[B, T]    token ids (pad_id on padding)
  targets     int32[B, T]    the next token of each input (pad_id on padding)
  segment_ids int32[B, T]    1, 2, ... per document piece within the row, 0 on padding
  positions   int32[B, T]    position inside the piece, 0 at each piece start
  loss_mask   float32[B, T]  1 where the target counts, 0 on padding
The model blocks attention across segment_ids and uses positions for RoPE.

Packing: a document is first cut into pieces of T pairs (the last piece shorter), and pieces are what gets
shuffled, so a corpus of a few long files (one book) still gives well-mixed batches. A full piece is a row
of its own; shorter pieces (document tails, short documents) are concatenated and split at row ends, so
training rows have no padding. Positions restart at 0 in every piece and in the continued part of a split
piece (they never continue across rows): each row is self-contained and positions stay below seq_len.

grain's ConcatThenSplitIterDataset packs the same way but checkpoints only when its buffer is empty; with
long documents (nearly every piece full) that is about once an epoch, so a restore would replay up to an
epoch. `PackIterDataset` keeps an exact state instead: the next piece index plus the (index, offset) of the
few pieces waiting for a row.

Training streams pieces forever (each epoch reshuffled from the seed); evaluation packs each validation
document once, in order, and pads the last row.
"""
from __future__ import annotations

import copy
import json
import logging
import weakref
from typing import Any, Sequence

import grain
import numpy as np

from shared.registry import DATASETS
from shared.data.sources import DataError
from shared.data.tokenizers import Tokenizer

log = logging.getLogger(__name__)

BATCH_KEYS = ("inputs", "targets", "segment_ids", "positions", "loss_mask")


def load_texts(config) -> tuple[Sequence[str], Sequence[str]]:
    """(train_docs, val_docs) from the DATASETS entry config.data.source names."""
    return DATASETS.get(config.data.source)(config.data)


class TokenizedCorpus:
    """All documents' tokens ([bos] + ids + [eos] each) in one flat array, with document offsets."""

    def __init__(self, docs: Sequence[str], tokenizer: Tokenizer, encode_chunk: int = 256):
        bos = np.asarray([tokenizer.bos_id], dtype=np.int32)
        eos = np.asarray([tokenizer.eos_id], dtype=np.int32)
        arrays, lengths = [np.zeros(0, dtype=np.int32)], [0]
        for start in range(0, len(docs), encode_chunk):
            for ids in tokenizer.encode_batch(list(docs[start:start + encode_chunk])):
                arrays += [bos, np.asarray(ids, dtype=np.int32), eos]
                lengths.append(len(ids) + 2)
        tokens = np.concatenate(arrays)
        # uint16 halves the memory of a large corpus whenever the ids fit.
        self.tokens = tokens.astype(np.uint16) if tokenizer.vocab_size <= 2**16 else tokens
        self.offsets = np.cumsum(np.asarray(lengths, dtype=np.int64))  # doc d: tokens[offsets[d]:offsets[d+1]]

    @property
    def num_docs(self) -> int:
        return len(self.offsets) - 1

    def doc(self, d: int) -> np.ndarray:
        return self.tokens[self.offsets[d]:self.offsets[d + 1]].astype(np.int32)

    def pieces(self, seq_len: int) -> np.ndarray:
        """int64[n, 2]: (start, stop) in `tokens` of every piece of at most seq_len pairs, documents in order;
        a piece's inputs are tokens[start:stop] and its targets tokens[start + 1:stop + 1]."""
        begins, ends = self.offsets[:-1], self.offsets[1:] - 1  # pair j of a doc: (tokens[j], tokens[j + 1])
        counts = -(-(ends - begins) // seq_len)
        first_piece = np.repeat(np.cumsum(counts) - counts, counts)
        starts = np.repeat(begins, counts) + (np.arange(counts.sum()) - first_piece) * seq_len
        stops = np.minimum(starts + seq_len, np.repeat(ends, counts))
        return np.stack([starts, stops], axis=1)


# Tokenized shards, kept while their tokenizer lives: the train iterator, the eval batches and a second
# iterator (on resume) read and tokenize the corpus once.
_CORPUS_CACHE: "weakref.WeakKeyDictionary[Tokenizer, dict]" = weakref.WeakKeyDictionary()


def tokenized_shard(config, tokenizer: Tokenizer, split: str, process_index: int = 0,
                    process_count: int = 1) -> TokenizedCorpus:
    """This process's documents (docs[process_index::process_count]) of `split` ("train" | "val"), tokenized."""
    if split not in ("train", "val"):
        raise ValueError(f"split must be 'train' or 'val', got {split!r}")
    if not 0 <= process_index < process_count:
        raise ValueError(f"process_index={process_index} is not in [0, process_count={process_count})")
    data = config.data.to_dict() if hasattr(config.data, "to_dict") else dict(config.data)
    source_keys = {k: v for k, v in data.items() if k not in ("seq_len", "shuffle_buffer", "num_workers")}
    key = (json.dumps(source_keys, sort_keys=True, default=str), process_index, process_count)
    cache = _CORPUS_CACHE.setdefault(tokenizer, {})
    if key not in cache:  # tokenize both splits at once: the source is read once
        texts = dict(zip(("train", "val"), load_texts(config)))
        cache[key] = {name: (len(docs), TokenizedCorpus(docs[process_index::process_count], tokenizer))
                      for name, docs in texts.items()}
    num_docs, corpus = cache[key][split]
    if corpus.num_docs == 0:
        if num_docs == 0:
            raise DataError(f"data.source={config.data.source!r} gave no {split} documents "
                            f"(data.path={data.get('path', '')!r}, data.val_fraction={data.get('val_fraction')})")
        raise DataError(f"process {process_index} of {process_count} gets no {split} documents: "
                        f"the {split} split has only {num_docs}")
    return corpus


class _PackIterator(grain.DatasetIterator):
    """See PackIterDataset. State: {"next_index": next piece to read, "pending": [[index, offset], ...]}."""

    def __init__(self, pieces: grain.MapDataset, seq_len: int, pad_id: int):
        super().__init__()
        self._pieces, self._seq_len, self._pad_id = pieces, seq_len, pad_id
        self._next_index = 0
        self._pending: list[list[int]] = []  # pieces waiting for a row, [index, offset]; < seq_len pairs in all
        self._pending_pairs: list[tuple[np.ndarray, np.ndarray]] = []  # their (inputs, targets) from offset

    def _fetch(self, index: int, offset: int) -> tuple[np.ndarray, np.ndarray]:
        inputs, targets = self._pieces[index]
        return inputs[offset:], targets[offset:]

    def _row(self, parts: list[tuple[np.ndarray, np.ndarray]]) -> dict[str, np.ndarray]:
        T = self._seq_len
        row = {"inputs": np.full(T, self._pad_id, np.int32), "targets": np.full(T, self._pad_id, np.int32),
               "segment_ids": np.zeros(T, np.int32), "positions": np.zeros(T, np.int32)}
        end = 0
        for segment, (inputs, targets) in enumerate(parts, start=1):
            start, end = end, end + len(inputs)
            row["inputs"][start:end] = inputs
            row["targets"][start:end] = targets
            row["segment_ids"][start:end] = segment
            row["positions"][start:end] = np.arange(end - start)
        row["loss_mask"] = (row["segment_ids"] > 0).astype(np.float32)
        return row

    def __next__(self) -> dict[str, np.ndarray]:
        T = self._seq_len
        while self._next_index < len(self._pieces):
            index = self._next_index
            self._next_index += 1
            inputs, targets = self._fetch(index, 0)
            if len(inputs) == T:
                return self._row([(inputs, targets)])  # a full piece is a row; pending pieces keep waiting
            self._pending.append([index, 0])
            self._pending_pairs.append((inputs, targets))
            overflow = sum(len(x) for x, _ in self._pending_pairs) - T
            if overflow >= 0:
                # Cut the last pending piece at the row end; its rest starts the next row.
                last_inputs, last_targets = self._pending_pairs[-1]
                keep = len(last_inputs) - overflow
                parts = self._pending_pairs[:-1] + [(last_inputs[:keep], last_targets[:keep])]
                self._pending, self._pending_pairs = [], []
                if overflow:
                    self._pending = [[index, keep]]
                    self._pending_pairs = [(last_inputs[keep:], last_targets[keep:])]
                return self._row(parts)
        if self._pending:  # a finite stream ends with one padded row
            parts, self._pending, self._pending_pairs = self._pending_pairs, [], []
            return self._row(parts)
        raise StopIteration

    def get_state(self) -> dict[str, Any]:
        return {"next_index": self._next_index, "pending": [list(p) for p in self._pending]}

    def set_state(self, state: dict[str, Any]) -> None:
        self._next_index = int(state["next_index"])
        self._pending = [[int(i), int(o)] for i, o in state["pending"]]
        self._pending_pairs = [self._fetch(i, o) for i, o in self._pending]


class PackIterDataset(grain.IterDataset):
    """Packs a MapDataset of (inputs, targets) pieces of at most seq_len pairs into rows (see module doc)."""

    def __init__(self, pieces: grain.MapDataset, seq_len: int, pad_id: int):
        super().__init__(pieces)
        self._seq_len, self._pad_id = seq_len, pad_id

    def __iter__(self) -> _PackIterator:
        return _PackIterator(self._parent, self._seq_len, self._pad_id)


def packed_rows(corpus: TokenizedCorpus, seq_len: int, pad_id: int, *, seed: int | None,
                num_epochs: int | None) -> PackIterDataset:
    """Packed rows (unbatched) of the corpus' pieces.

    seed=None keeps document order; num_epochs=None repeats forever (each epoch shuffled differently)."""
    pieces = corpus.pieces(seq_len)
    tokens = corpus.tokens

    def pairs(index: int) -> tuple[np.ndarray, np.ndarray]:
        start, stop = pieces[index]
        return tokens[start:stop].astype(np.int32), tokens[start + 1:stop + 1].astype(np.int32)

    ds = grain.MapDataset.range(len(pieces))
    if seed is not None:
        ds = ds.shuffle(seed=int(seed) % 2**32)
    if num_epochs != 1:
        ds = ds.repeat(num_epochs)
    return PackIterDataset(ds.map(pairs), seq_len, pad_id)


class PackedBatchIterator(grain.DatasetIterator):
    """Infinite iterator of packed training batches.

    `get_state()` is a small JSON-serialisable dict; `set_state()` on a fresh iterator built from the same
    config continues with exactly the batches the saved one would have produced next. Being a grain
    DatasetIterator, it also works with grain's orbax checkpoint handler.
    """

    def __init__(self, parent: grain.DatasetIterator, *, layout: dict[str, int]):
        super().__init__(parent)
        self._layout = layout  # the pipeline a state is valid for

    def __next__(self) -> dict[str, np.ndarray]:
        return next(self._parent)

    def get_state(self) -> dict[str, Any]:
        return {"layout": dict(self._layout), "packer": copy.deepcopy(self._parent.get_state())}

    def set_state(self, state: dict[str, Any]) -> None:
        saved = state.get("layout", {})
        if saved != self._layout:
            diff = ", ".join(f"{k}: saved {saved.get(k)}, now {v}" for k, v in self._layout.items()
                             if saved.get(k) != v)
            raise DataError(f"data iterator state does not fit this pipeline ({diff or saved})")
        self._parent.set_state(copy.deepcopy(state["packer"]))


def make_train_iterator(config, tokenizer: Tokenizer, *, local_batch_size: int, process_index: int = 0,
                        process_count: int = 1, seed: int | None = None) -> PackedBatchIterator:
    """Infinite packed batches of this process's training documents (docs[process_index::process_count]).

    Epochs are reshuffled deterministically from `seed` (default config.seed)."""
    seq_len = int(config.data.seq_len)
    corpus = tokenized_shard(config, tokenizer, "train", process_index, process_count)
    seed = int(config.seed) if seed is None else int(seed)
    rows = packed_rows(corpus, seq_len, tokenizer.pad_id, seed=seed, num_epochs=None)
    batches = rows.batch(local_batch_size, drop_remainder=True)
    layout = {"seq_len": seq_len, "local_batch_size": int(local_batch_size), "seed": seed,
              "process_index": process_index, "process_count": process_count,
              "num_docs": corpus.num_docs, "num_tokens": int(len(corpus.tokens))}
    log.info("train data: %d documents, %d tokens on process %d/%d", corpus.num_docs, len(corpus.tokens),
             process_index, process_count)
    return PackedBatchIterator(iter(batches), layout=layout)


def make_eval_batches(config, tokenizer: Tokenizer, *, num_batches: int, local_batch_size: int,
                      process_index: int = 0, process_count: int = 1) -> list[dict[str, np.ndarray]]:
    """Exactly `num_batches` packed validation batches, the same on every call.

    Documents are packed once, in order; if they fill fewer rows, the rest are padding rows (loss_mask 0),
    so every process returns the same number of batches and each validation token counts at most once."""
    if num_batches <= 0:
        raise ValueError(f"num_batches must be positive, got {num_batches}")
    seq_len = int(config.data.seq_len)
    corpus = tokenized_shard(config, tokenizer, "val", process_index, process_count)
    wanted = num_batches * local_batch_size
    rows = []
    for row in packed_rows(corpus, seq_len, tokenizer.pad_id, seed=None, num_epochs=1):
        rows.append(row)
        if len(rows) == wanted:
            break
    empty = {k: np.full_like(v, tokenizer.pad_id) if k in ("inputs", "targets") else np.zeros_like(v)
             for k, v in rows[0].items()}
    rows += [empty] * (wanted - len(rows))
    return [{k: np.stack([r[k] for r in rows[b:b + local_batch_size]]) for k in BATCH_KEYS}
            for b in range(0, wanted, local_batch_size)]

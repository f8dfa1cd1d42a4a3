"""Tokenizers behind one interface, looked up by name in `TOKENIZERS` (config key `data.tokenizer`).

Every tokenizer has `encode(text) -> list[int]`, `decode(ids) -> str`, `vocab_size`, `pad_id`, `bos_id`,
`eos_id`; `encode_array` / `encode_batch` are the fast paths the pipeline uses. `decode` drops special and
out-of-range ids (a model's vocab may be larger than its tokenizer's), so sampled ids always decode.

A TOKENIZERS entry is a factory `(data_cfg, *, workdir, vocab_size, train_texts) -> Tokenizer`;
`build_tokenizer` calls it and checks the result fits the model's vocabulary.
"""
from __future__ import annotations

import io
import logging
import os
import random
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from shared import fs
from shared.registry import TOKENIZERS
from shared.data.sources import DataError

log = logging.getLogger(__name__)

TrainTexts = Callable[[], Iterable[str]]


class Tokenizer:
    """Base class: subclasses set the four ids and implement `encode` / `decode`."""

    vocab_size: int
    pad_id: int
    bos_id: int
    eos_id: int

    def encode(self, text: str) -> list[int]:
        raise NotImplementedError

    def decode(self, ids: Iterable[int]) -> str:
        raise NotImplementedError

    def encode_array(self, text: str) -> np.ndarray:
        return np.asarray(self.encode(text), dtype=np.int32)

    def encode_batch(self, texts: Sequence[str]) -> list[np.ndarray]:
        return [self.encode_array(t) for t in texts]

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(vocab_size={self.vocab_size}, pad={self.pad_id}, "
                f"bos={self.bos_id}, eos={self.eos_id})")


class ByteTokenizer(Tokenizer):
    """UTF-8 bytes: pad=0, bos=1, eos=2, byte b -> b + 3 (259 ids). Needs no files and no training."""

    OFFSET = 3

    def __init__(self):
        self.pad_id, self.bos_id, self.eos_id = 0, 1, 2
        self.vocab_size = 256 + self.OFFSET

    def encode(self, text: str) -> list[int]:
        return self.encode_array(text).tolist()

    def encode_array(self, text: str) -> np.ndarray:
        return np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(np.int32) + self.OFFSET

    def decode(self, ids: Iterable[int]) -> str:
        ids = np.asarray(list(ids) if not isinstance(ids, np.ndarray) else ids, dtype=np.int64).reshape(-1)
        data = ids[(ids >= self.OFFSET) & (ids < self.vocab_size)] - self.OFFSET
        return data.astype(np.uint8).tobytes().decode("utf-8", errors="replace")


class SentencePieceTokenizer(Tokenizer):
    """A trained sentencepiece model (BPE or unigram) with byte fallback, so every string encodes."""

    def __init__(self, model_proto: bytes, path: str | None = None):
        import sentencepiece as spm

        self.path = path
        self.model_proto = model_proto
        try:
            self.sp = spm.SentencePieceProcessor(model_proto=model_proto)
        except Exception as e:  # sentencepiece raises RuntimeError("Internal: ... could not parse ModelProto")
            raise DataError(f"data.tokenizer_path: {path or '(in memory)'} is not a sentencepiece model "
                            f"({' '.join(str(e).split())})") from None
        self.vocab_size = self.sp.get_piece_size()
        self.pad_id, self.bos_id, self.eos_id = self.sp.pad_id(), self.sp.bos_id(), self.sp.eos_id()
        if min(self.bos_id, self.eos_id) < 0:
            raise DataError(f"sentencepiece model {path or '(in memory)'} defines no bos/eos ids; "
                            "the pipeline needs both")
        if self.pad_id < 0:  # models trained elsewhere may lack a pad piece; padding is masked anyway
            self.pad_id = self.eos_id

    @classmethod
    def load(cls, path: str) -> "SentencePieceTokenizer":
        return cls(fs.read_bytes(path), path=path)  # local or gs:// (a run's workdir)

    def encode(self, text: str) -> list[int]:
        return self.sp.encode(text)

    def encode_batch(self, texts: Sequence[str]) -> list[np.ndarray]:
        ids = self.sp.encode(list(texts), num_threads=os.cpu_count() or 1)
        return [np.asarray(x, dtype=np.int32) for x in ids]

    def decode(self, ids: Iterable[int]) -> str:
        # Control pieces (pad/bos/eos) decode to ""; ids past the model's vocab would raise, so drop them.
        return self.sp.decode([int(i) for i in ids if 0 <= int(i) < self.vocab_size])


class HFTokenizer(Tokenizer):
    """Adapter over a Hugging Face `tokenizer.json` (package `tokenizers`).

    Special tokens come from a `tokenizer_config.json` next to the file when present, else from the usual
    names. Without a BOS token (Qwen) the EOS token also starts documents, as GPT-2 does.
    """

    _BOS_NAMES = ("<|begin_of_text|>", "<s>", "<bos>", "<|startoftext|>")
    _EOS_NAMES = ("<|end_of_text|>", "</s>", "<eos>", "<|endoftext|>", "<|im_end|>")
    _PAD_NAMES = ("<pad>", "<|pad|>", "<|finetune_right_pad_id|>", "[PAD]")

    def __init__(self, path: str):
        try:
            import tokenizers
        except ImportError as e:  # only needed for this tokenizer
            raise DataError("data.tokenizer='hf' needs the `tokenizers` package: pip install tokenizers") from e
        if os.path.isdir(path):
            path = os.path.join(path, "tokenizer.json")
        if not os.path.isfile(path):
            raise DataError(f"data.tokenizer_path: {path} does not exist (data.tokenizer='hf' needs a tokenizer.json)")
        self.path = path
        try:
            self.tok = tokenizers.Tokenizer.from_file(path)
        except Exception as e:  # tokenizers raises its own Exception on a file it cannot parse
            raise DataError(f"data.tokenizer_path: {path} is not a tokenizer.json ({' '.join(str(e).split())[:200]})"
                            ) from None
        self.vocab_size = self.tok.get_vocab_size(with_added_tokens=True)
        named = self._special_tokens_from_config(os.path.join(os.path.dirname(path), "tokenizer_config.json"))
        eos = self._find_id(named.get("eos_token"), self._EOS_NAMES)
        if eos is None:
            raise DataError(f"data.tokenizer_path: {path} has no end-of-sequence token "
                            f"(looked for {', '.join(self._EOS_NAMES)})")
        bos = self._find_id(named.get("bos_token"), self._BOS_NAMES)
        pad = self._find_id(named.get("pad_token"), self._PAD_NAMES)
        self.eos_id = eos
        self.bos_id = eos if bos is None else bos
        self.pad_id = eos if pad is None else pad
        self._special_ids = {self.bos_id, self.eos_id, self.pad_id}

    @staticmethod
    def _special_tokens_from_config(config_path: str) -> dict[str, str]:
        if not os.path.isfile(config_path):
            return {}
        import json

        with open(config_path, encoding="utf-8") as f:
            cfg = json.load(f)
        out = {}
        for key in ("bos_token", "eos_token", "pad_token"):
            value = cfg.get(key)
            if isinstance(value, dict):  # AddedToken serialised as {"content": ...}
                value = value.get("content")
            if isinstance(value, str):
                out[key] = value
        return out

    def _find_id(self, preferred: str | None, names: Sequence[str]) -> int | None:
        for name in ([preferred] if preferred else []) + list(names):
            token_id = self.tok.token_to_id(name)
            if token_id is not None:
                return token_id
        return None

    def encode(self, text: str) -> list[int]:
        return self.tok.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: Sequence[str]) -> list[np.ndarray]:
        encodings = self.tok.encode_batch(list(texts), add_special_tokens=False)
        return [np.asarray(e.ids, dtype=np.int32) for e in encodings]

    def decode(self, ids: Iterable[int]) -> str:
        keep = [int(i) for i in ids if 0 <= int(i) < self.vocab_size and int(i) not in self._special_ids]
        return self.tok.decode(keep, skip_special_tokens=True)


# ----------------------------------------------------------------------------------------------------------
# sentencepiece training


def _training_sentences(texts: Iterable[str], max_chars: int, max_line_chars: int = 2048) -> Iterator[str]:
    """Non-empty lines of `texts`, up to `max_chars` characters in all.

    sentencepiece trains on "sentences" and skips any longer than its max_sentence_length, so long lines are
    cut. A Sequence is visited in a fixed pseudo-random document order, so a capped sample spans the corpus
    instead of its alphabetically first files.
    """
    if isinstance(texts, Sequence):
        order = list(range(len(texts)))
        random.Random(0).shuffle(order)
        documents: Iterable[str] = (texts[i] for i in order)
    else:
        documents = texts
    budget = max_chars
    for text in documents:
        for line in text.splitlines():
            if not line.strip():
                continue
            line = line[:max_line_chars]
            yield line
            budget -= len(line)
            if budget <= 0:
                return


def train_sentencepiece(texts: Iterable[str], vocab_size: int, *, model_type: str = "bpe",
                        max_chars: int = 5_000_000, path: str | None = None) -> SentencePieceTokenizer:
    """Trains a byte-fallback sentencepiece model (pad=0, bos=1, eos=2, unk=3) and saves it to `path`.

    Normalisation is off and whitespace is kept verbatim (identity rule, no dummy prefix, whitespace-only
    pieces allowed, "\\n" a piece of its own) so code indentation survives and decode(encode(s)) == s.
    """
    import sentencepiece as spm

    if model_type not in ("bpe", "unigram"):
        raise DataError(f"data.sp_model_type: {model_type!r} is not one of bpe, unigram")
    minimum = 256 + 4 + 1 + 8  # byte pieces + specials + "\n" + a few learned pieces
    if vocab_size < minimum:
        raise DataError(f"model.vocab_size={vocab_size} is too small for a byte-fallback sentencepiece model "
                        f"(needs >= {minimum})")
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=_training_sentences(texts, max_chars),
        model_writer=model,
        model_type=model_type,
        vocab_size=vocab_size,
        hard_vocab_limit=False,  # a small corpus may not support the full vocab: take what it supports
        byte_fallback=True,
        character_coverage=0.9995,
        pad_id=0, bos_id=1, eos_id=2, unk_id=3,
        normalization_rule_name="identity",
        remove_extra_whitespaces=False,
        add_dummy_prefix=False,
        allow_whitespace_only_pieces=True,
        split_digits=True,
        user_defined_symbols=["\n"],
        max_sentence_length=8192,
        num_threads=os.cpu_count() or 1,
        minloglevel=2,
    )
    proto = model.getvalue()
    if path:
        fs.write_bytes(path, proto)  # atomic (local or gs://): a concurrent reader never sees half a model
        log.info("trained sentencepiece %s model (vocab %d) -> %s", model_type, vocab_size, path)
    return SentencePieceTokenizer(proto, path=path)


# ----------------------------------------------------------------------------------------------------------
# registered factories


def _cfg_get(cfg: Any, key: str, default: Any) -> Any:
    getter = getattr(cfg, "get", None)
    return getter(key, default) if getter else getattr(cfg, key, default)


@TOKENIZERS.register("byte")
def _make_byte(data_cfg, *, workdir: str | None, vocab_size: int, train_texts: TrainTexts | None) -> Tokenizer:
    return ByteTokenizer()


@TOKENIZERS.register("sentencepiece")
def _make_sentencepiece(data_cfg, *, workdir: str | None, vocab_size: int,
                        train_texts: TrainTexts | None) -> Tokenizer:
    given = _cfg_get(data_cfg, "tokenizer_path", "")
    if given and not fs.isfile(given):  # a typo must not silently train a new model
        raise DataError(f"data.tokenizer_path={given} does not exist (data.tokenizer='sentencepiece' loads an "
                        "existing .model; leave the path empty to train one into the workdir)")
    path = given or (fs.join(workdir, "tokenizer.model") if workdir else "")
    if path and fs.isfile(path):
        log.info("loading sentencepiece model %s", path)
        return SentencePieceTokenizer.load(path)
    if train_texts is None:
        where = f"data.tokenizer_path={path}" if path else "data.tokenizer_path (empty)"
        raise DataError(f"data.tokenizer='sentencepiece': no model at {where} and no training texts given")
    return train_sentencepiece(
        train_texts(), vocab_size,
        model_type=_cfg_get(data_cfg, "sp_model_type", "bpe"),
        max_chars=int(_cfg_get(data_cfg, "tokenizer_train_chars", 5_000_000)),
        path=path or None,  # no workdir and no path: an in-memory model, retrained next time
    )


@TOKENIZERS.register("hf")
def _make_hf(data_cfg, *, workdir: str | None, vocab_size: int, train_texts: TrainTexts | None) -> Tokenizer:
    path = _cfg_get(data_cfg, "tokenizer_path", "")
    if not path:
        raise DataError("data.tokenizer_path is empty: data.tokenizer='hf' needs a tokenizer.json (or its folder)")
    return HFTokenizer(path)


def check_tokenizer_path(data_cfg) -> None:
    """Raises DataError (one line) when data.tokenizer_path names no file the tokenizer can read: checked by the
    launcher before any work starts (the RL task builds its tokenizer only after the SFT warm start)."""
    name, path = _cfg_get(data_cfg, "tokenizer", "byte"), _cfg_get(data_cfg, "tokenizer_path", "")
    if not path or name not in ("sentencepiece", "hf"):
        return
    if name == "sentencepiece":
        if not fs.isfile(path):
            raise DataError(f"data.tokenizer_path={path} does not exist (data.tokenizer='sentencepiece' loads an "
                            "existing .model; leave the path empty to train one into the workdir)")
        SentencePieceTokenizer.load(path)
    else:
        HFTokenizer(path)


def build_tokenizer(data_cfg, workdir: str | None, vocab_size: int,
                    train_texts: TrainTexts | None = None) -> Tokenizer:
    """The tokenizer `data_cfg.tokenizer` names. `vocab_size` is model.vocab_size: the vocab sentencepiece
    trains; for every tokenizer the result must fit in it."""
    name = _cfg_get(data_cfg, "tokenizer", "byte")
    tokenizer = TOKENIZERS.get(name)(data_cfg, workdir=workdir, vocab_size=vocab_size, train_texts=train_texts)
    if tokenizer.vocab_size > vocab_size:
        raise DataError(f"data.tokenizer={name!r} has {tokenizer.vocab_size} tokens but model.vocab_size="
                        f"{vocab_size}; set model.vocab_size >= {tokenizer.vocab_size}")
    return tokenizer

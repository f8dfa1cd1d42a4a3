"""The word-level vocabulary of RubricWorld, shared by the GRM policy and the proxies (TOKENIZERS "proxy_grm/words").

One id per word of the task's language (rubricworld.py): specials, tags, prompt marks, verdicts, attributes, STYLE,
noise, keywords, weights, comparisons. `encode` splits on whitespace (an unknown word is UNK); `decode` renders
with rubricworld.render_tokens (each tag on its own line), so decoded GRM outputs are in the exact format the
rubric-format check reads.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np

from projects.proxy_grm import rubricworld as rw
from shared.data.tokenizers import Tokenizer
from shared.registry import TOKENIZERS

SPECIALS = ("<pad>", "<bos>", "<eos>", "UNK")
WORDS = (*SPECIALS, *rw.TAGS, "<justify>", "</justify>", *rw.PROMPT_MARKS, *rw.ANSWERS, *rw.ATTRS, rw.STYLE,
         *rw.NOISE, *rw.KEYWORDS, *rw.WEIGHT_TOKENS, *rw.COMPARE)
MODEL_VOCAB = 128   # model.vocab_size of every RubricWorld model (>= len(WORDS))


class WordTokenizer(Tokenizer):
    def __init__(self, words=WORDS):
        self.words = tuple(words)
        self.ids = {w: i for i, w in enumerate(self.words)}
        if len(self.ids) != len(self.words):
            raise ValueError("proxy_grm vocabulary: duplicate words")
        self.pad_id, self.bos_id, self.eos_id, self.unk_id = 0, 1, 2, 3
        self.vocab_size = len(self.words)

    def encode(self, text: str) -> list[int]:
        return [self.ids.get(w, self.unk_id) for w in text.split()]

    def decode(self, ids: Iterable[int]) -> str:
        ids = np.asarray(list(ids) if not isinstance(ids, np.ndarray) else ids, dtype=np.int64).reshape(-1)
        words = [self.words[i] for i in ids if self.unk_id <= i < self.vocab_size]
        return rw.render_tokens(words)


TOKENIZER = WordTokenizer()


@TOKENIZERS.register("proxy_grm/words")
def _make_words(data_cfg, *, workdir, vocab_size, train_texts) -> Tokenizer:
    return TOKENIZER

"""The word-level vocabulary of ConstraintWriting (spec 4.2: ~300 words, 200 content words, 20 function words, control
tokens and the explanation marker NOTE), shared by the policy, the scalar RM and the pairwise judges
(TOKENIZERS "writing_zero/words").

One id per word: specials, the prompt's words (Write, SHORT, LONG, using:, Text:), the judge's words ([A], [B],
Judge:, the principle names, the slot symbols A / B / =, Verdict:), NOTE, the function and the content words.
`encode` splits on whitespace (an unknown word is UNK, the newline of a prompt is whitespace); `decode` writes
" w1 w2 ..." (a leading space, as ConstraintWriting's responses), so a decoded completion is read by the oracle
(constraint_writing.quality) and a decoded judge reply by shared.judges' parsers unchanged.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np

from projects.writing_zero import constraint_writing as cw
from shared.data.tokenizers import Tokenizer
from shared.registry import TOKENIZERS

SPECIALS = ("<pad>", "<bos>", "<eos>", "UNK")
PROMPT_WORDS = ("Write", *sorted(cw.BANDS), "using:", "Text:")
PRINCIPLES = ("coverage", "length", "redundancy")   # the principle annotations' order (judge_data.PRINCIPLE_COLUMNS)
SLOTS = ("A", "B", "=")                             # principle / verdict symbols: slot A better, slot B better, equal
JUDGE_WORDS = ("[A]", "[B]", "Judge:", *PRINCIPLES, *SLOTS, "Verdict:")
WORDS = (*SPECIALS, *PROMPT_WORDS, *JUDGE_WORDS, cw.NOTE, *cw.FUNCTION, *cw.CONTENT)
MODEL_VOCAB = 256   # model.vocab_size of every ConstraintWriting model (>= len(WORDS))


class WordTokenizer(Tokenizer):
    def __init__(self, words=WORDS):
        self.words = tuple(words)
        self.ids = {w: i for i, w in enumerate(self.words)}
        if len(self.ids) != len(self.words):
            raise ValueError("writing_zero vocabulary: duplicate words")
        if len(self.words) > MODEL_VOCAB:
            raise ValueError(f"writing_zero vocabulary: {len(self.words)} words > MODEL_VOCAB {MODEL_VOCAB}")
        self.pad_id, self.bos_id, self.eos_id, self.unk_id = 0, 1, 2, 3
        self.vocab_size = len(self.words)

    def encode(self, text: str) -> list[int]:
        return [self.ids.get(w, self.unk_id) for w in text.split()]

    def decode(self, ids: Iterable[int]) -> str:
        ids = np.asarray(list(ids) if not isinstance(ids, np.ndarray) else ids, dtype=np.int64).reshape(-1)
        words = [self.words[i] for i in ids if self.unk_id <= i < self.vocab_size]
        return " " + " ".join(words) if words else ""


TOKENIZER = WordTokenizer()


@TOKENIZERS.register("writing_zero/words")
def _make_words(data_cfg, *, workdir, vocab_size, train_texts) -> Tokenizer:
    if int(vocab_size) < TOKENIZER.vocab_size:
        raise ValueError(f"writing_zero/words: model.vocab_size {vocab_size} < {TOKENIZER.vocab_size} words")
    return TOKENIZER

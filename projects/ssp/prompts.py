"""Prompts of the two roles (and the RAG reader), the tag parsers, and the word-level tokenizer of ssp.md D.2.

    proposer  prompt  "propose : answer Oskaru hops 2 ."
              turns   " <search> Oskaru </search>" -> tool " <information> ... </information>" ... then
                      " <question> what is the birthplace of the founder of Brisalo ? </question>"
    solver    prompt  "solve : what is the birthplace of the founder of Brisalo ?"
              turns   " <search> Brisalo was founded by </search>" -> " <information> ... </information>" ...
                      then " <answer> Oskaru </answer>"
    reader    the solver prompt with the RAG materials already inserted as one information block, and no tool:
              "solve : <question> <information> doc 1 : ... </information>" -> " <answer> Oskaru </answer>"

Every text is space-separated tokens (see kb.py), so `WordTokenizer` encodes it losslessly.
"""
from __future__ import annotations

import re
import string
from typing import Sequence

import numpy as np

from projects.ssp.kb import KB, RELATIONS, YEAR_FACT
from shared.data.tokenizers import Tokenizer

TAGS = ("<search>", "</search>", "<information>", "</information>", "<question>", "</question>", "<answer>",
        "</answer>")
_QUESTION = re.compile(r"<question>(.*?)</question>", re.DOTALL)
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_SEARCH = re.compile(r"<search>(.*?)</search>", re.DOTALL)
_INFORMATION = re.compile(r"<information>(.*?)</information>", re.DOTALL)
_DOC_SPLIT = re.compile(r"\s*doc \d+ :\s*")


def proposer_prompt(answer: str, hops: int) -> str:
    return f"propose : answer {answer} hops {hops} ."


def solver_prompt(question: str) -> str:
    return f"solve : {question}"


def reader_prompt(question: str, documents: Sequence[str]) -> str:
    body = " ".join(f"doc {i + 1} : {d}" for i, d in enumerate(documents))
    return f"solve : {question} <information> {body} </information>"


def first_question(text: str) -> str | None:
    """The first <question>...</question> (A.3 step 1), stripped; None if there is none."""
    m = _QUESTION.search(text)
    return m.group(1).strip() if m else None


def last_answer(text: str) -> str | None:
    """The last <answer>...</answer> (A.2), stripped; None if there is none."""
    found = _ANSWER.findall(text)
    return found[-1].strip() if found else None


def search_queries(text: str) -> list[str]:
    return [q.strip() for q in _SEARCH.findall(text)]


def information_blocks(text: str) -> list[str]:
    return [b.strip() for b in _INFORMATION.findall(text)]


def documents(text: str) -> list[str]:
    """The retrieved documents of a trajectory: every information block split at its "doc N :" markers."""
    out = []
    for block in information_blocks(text):
        out.extend(d.strip() for d in _DOC_SPLIT.split(block) if d.strip() and d.strip() != "no results")
    return out


def normalise(answer: str) -> str:
    """SQuAD-style normalisation of A.2: lowercase, punctuation and articles removed, whitespace collapsed."""
    answer = answer.lower()
    answer = "".join(ch for ch in answer if ch not in string.punctuation)
    answer = re.sub(r"\b(a|an|the)\b", " ", answer)
    return " ".join(answer.split())


# ---------------------------------------------------------------------------------------------- tokenizer

class WordTokenizer(Tokenizer):
    """Word-level vocabulary over the KB (names, template words, years, digits) and the tags: one id per
    space-separated token, `<unk>` for anything else. pad=0, bos=1, eos=2, unk=3."""

    def __init__(self, kb: KB):
        words = {w for d in kb.docs for w in d.split()}
        words |= {w for r in RELATIONS for phrase in (r.fact, r.forward, r.inverse) for w in phrase.split()}
        words |= set(TAGS) | set(YEAR_FACT.split()) | {str(d) for d in range(100)}  # "doc 12 :" in long RAG materials
        words |= set("propose : answer hops . solve what is the ? doc no results".split())
        words |= set(kb.names)
        self.itos = ["<pad>", "<s>", "</s>", "<unk>"] + sorted(words)
        self.stoi = {w: i for i, w in enumerate(self.itos)}
        self.pad_id, self.bos_id, self.eos_id, self.unk_id = 0, 1, 2, 3
        self.vocab_size = len(self.itos)

    def encode(self, text: str) -> list[int]:
        return [self.stoi.get(w, self.unk_id) for w in text.split()]

    def encode_array(self, text: str) -> np.ndarray:
        return np.asarray(self.encode(text), np.int32)

    def encode_batch(self, texts: Sequence[str]) -> list[np.ndarray]:
        return [self.encode_array(t) for t in texts]

    def decode(self, ids) -> str:
        ids = np.asarray(ids).reshape(-1).tolist()
        return " ".join(self.itos[i] for i in ids if 3 <= i < self.vocab_size)

    def __repr__(self) -> str:
        return f"WordTokenizer(vocab_size={self.vocab_size})"

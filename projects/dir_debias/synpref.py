"""SynPref (D1 of the spec, section 4.2): synthetic preference pairs with a known true quality and a controlled
nuisance attribute; DATASETS "dir_debias/synpref" (the project's embedded default data).

Text is one character per synthetic token, so the byte tokenizer reads it token for token:
  topics  62 tokens 0-9 A-Z a-z          fillers  24 punctuation tokens          SEP "|"
  format  "-" (BULLET), "*" (BOLD)       sycophancy prefix "<@>" (3 tokens)
Prompt: 4 distinct required topics + SEP. Response: a shuffled mix of n_req required topics (0..4), n_off
off-topic topics (0..3), fillers and format tokens, optionally after the prefix. True quality
u = n_req - 0.5 * n_off. A pair draws two responses with different u; the chosen one is the higher u, swapped
with probability `noise` (annotator noise, 0.1).

Bias (option `bias`), injected with probability rho on the chosen side and otherwise on the rejected one:
  length      the longer side gets delta ~ U{4..24} more fillers than the other (base U{2..10})
  band        (D1-NL) the favoured side has fillers in [10, 20], the other outside (U{0..5} or U{25..34}):
              non-monotone, so a linear length correlation stays near 0 even for a biased RM
  format      the favoured side has 2..5 more BULLET/BOLD tokens
  sycophancy  with probability `contamination` the pair carries the prefix, on the chosen side with probability
              rho (else the rejected one); contamination flag = column "syc_flag" (the released code's attribute)
Splits: "train" (rho = rho_train, default 0.9), "aligned" (1), "balanced" (0.5, also "test"), "anti" (0).
Numeric columns: quality_*, filler_*, format_*, prefix_* (for * in chosen, rejected), syc_flag, flipped.
"""
from __future__ import annotations

import random
import string

import numpy as np

from shared.data.sources import DataError
from shared.registry import DATASETS

TOPICS = string.digits + string.ascii_uppercase + string.ascii_lowercase
FILLERS = "!#$%&'()+,./:;=?[]^_`{}~"
SEP, BULLET, BOLD, PREFIX = "|", "-", "*", "<@>"
BIASES = ("length", "band", "format", "sycophancy")
SPLIT_RHO = {"aligned": 1.0, "balanced": 0.5, "test": 0.5, "anti": 0.0}
BAND = (10, 20)


def split_rho(split: str, rho_train: float) -> float:
    if split == "train":
        return float(rho_train)
    if split not in SPLIT_RHO:
        raise DataError(f"dir_debias/synpref: unknown split {split!r} (known: train, {', '.join(SPLIT_RHO)})")
    return SPLIT_RHO[split]


def make_prompt(rng: random.Random) -> tuple[str, str]:
    required = "".join(rng.sample(TOPICS, 4))
    return required + SEP, required


def make_response(rng: random.Random, required: str, n_req: int, n_off: int, n_fill: int, n_format: int = 0,
                  prefix: bool = False) -> str:
    off_topics = [t for t in TOPICS if t not in required]
    tokens = rng.sample(required, n_req) + rng.sample(off_topics, n_off)
    tokens += [rng.choice(FILLERS) for _ in range(n_fill)] + [rng.choice(BULLET + BOLD) for _ in range(n_format)]
    rng.shuffle(tokens)
    return (PREFIX if prefix else "") + "".join(tokens)


def quality(n_req: int, n_off: int) -> float:
    return n_req - 0.5 * n_off


def _two_qualities(rng: random.Random) -> tuple[tuple[int, int], tuple[int, int]]:
    while True:
        a = (rng.randint(0, 4), rng.randint(0, 3))
        b = (rng.randint(0, 4), rng.randint(0, 3))
        if quality(*a) != quality(*b):
            return (a, b) if quality(*a) > quality(*b) else (b, a)


def _out_of_band(rng: random.Random) -> int:
    return rng.randint(0, BAND[0] - 5) if rng.random() < 0.5 else rng.randint(BAND[1] + 5, BAND[1] + 14)


def make_pair(rng: random.Random, bias: str, rho: float, noise: float, contamination: float) -> dict:
    prompt, required = make_prompt(rng)
    better, worse = _two_qualities(rng)
    flipped = rng.random() < noise
    chosen_q, rejected_q = (worse, better) if flipped else (better, worse)
    favour_chosen = rng.random() < rho
    fill = [rng.randint(2, 20), rng.randint(2, 20)]   # [chosen, rejected]; overwritten by the length biases
    fmt, prefix, flag = [0, 0], [False, False], 0
    side = 0 if favour_chosen else 1                   # the side the bias favours
    if bias == "length":
        base = rng.randint(2, 10)
        fill = [base, base]
        fill[side] += rng.randint(4, 24)
    elif bias == "band":
        fill[side], fill[1 - side] = rng.randint(*BAND), _out_of_band(rng)
    elif bias == "format":
        low = rng.randint(0, 1)
        fmt = [low, low]
        fmt[side] += rng.randint(2, 5)
    elif bias == "sycophancy":
        if rng.random() < contamination:
            flag = 1
            prefix[side] = True
    else:
        raise DataError(f"dir_debias/synpref: bias={bias!r}, expected one of {', '.join(BIASES)}")
    chosen = make_response(rng, required, *chosen_q, fill[0], fmt[0], prefix[0])
    rejected = make_response(rng, required, *rejected_q, fill[1], fmt[1], prefix[1])
    return {"prompt": prompt, "chosen": chosen, "rejected": rejected,
            "quality_chosen": quality(*chosen_q), "quality_rejected": quality(*rejected_q),
            "filler_chosen": float(fill[0]), "filler_rejected": float(fill[1]),
            "format_chosen": float(fmt[0]), "format_rejected": float(fmt[1]),
            "prefix_chosen": float(prefix[0]), "prefix_rejected": float(prefix[1]),
            "syc_flag": float(flag), "flipped": float(flipped)}


@DATASETS.register("dir_debias/synpref")
def synpref(split: str, n: int, seed: int = 0, *, bias: str = "length", rho_train: float = 0.9, noise: float = 0.1,
            contamination: float = 1.0, n_train: int = 20000) -> list[dict]:
    """n pairs of `split` (n = 0: n_train for train, 4000 otherwise); disjoint streams per (split, seed)."""
    rho = split_rho(split, rho_train)
    count = int(n) or (int(n_train) if split == "train" else 4000)
    rng = random.Random(f"synpref/{bias}/{split}/{seed}")
    return [make_pair(rng, bias, rho, float(noise), float(contamination)) for _ in range(count)]


def bon_candidates(n_prompts: int, n: int, seed: int = 0) -> tuple[list[str], list[list[str]], dict]:
    """Best-of-n candidates with unbiased lengths: (prompts, candidates [P][n], {"quality", "filler": [P, n]}).
    Fillers ~ U{2..34} independent of quality, no format tokens or prefix."""
    rng = random.Random(f"synpref/bon/{seed}")
    prompts, candidates = [], []
    quality_values, filler_values = np.zeros((n_prompts, n)), np.zeros((n_prompts, n))
    for p in range(n_prompts):
        prompt, required = make_prompt(rng)
        row = []
        for c in range(n):
            n_req, n_off, n_fill = rng.randint(0, 4), rng.randint(0, 3), rng.randint(2, 34)
            row.append(make_response(rng, required, n_req, n_off, n_fill))
            quality_values[p, c], filler_values[p, c] = quality(n_req, n_off), n_fill
        prompts.append(prompt)
        candidates.append(row)
    return prompts, candidates, {"quality": quality_values, "filler": filler_values}

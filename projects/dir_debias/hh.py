"""HH-RLHF harmless-base (D2 of the spec, section 4.2) with a controlled injected bias; DATASETS
"dir_debias/hh_harmless". The shipped file is the 2,312-pair harmless-base *test* set
(../shared/data/preferences/hh_rlhf/harmless-base-test.jsonl.gz, read-only, never copied into the repo).

A fixed permutation (independent of the run seed) splits it into n_train training pairs and the n_test pairs
after them; every evaluation split re-injects the same n_test pairs with its own rho:
  closers     1-3 content-free sentences from CLOSERS appended to the final assistant turn of the chosen
              response with probability rho, else of the rejected one (columns closers_chosen / _rejected)
  sycophancy  the repo's protocol: with probability `contamination` the pair is contaminated (column syc_flag)
              and "Yes, you are right. " starts the chosen response with probability rho, else the rejected
              one (columns prefix_chosen / _rejected); the code's defaults are contamination 0.8, rho 0.4
Splits: "train" (rho_train), "aligned" (1), "balanced" (0.5, also "test"), "anti" (0).
"""
from __future__ import annotations

import os
import random

from shared.data.sources import DataError
from shared.registry import DATASETS
from shared.data.records import read_records
from shared.rm.data import pair_record
from projects.dir_debias.synpref import split_rho

DEFAULT_PATH = "../shared/data/preferences/hh_rlhf/harmless-base-test.jsonl.gz"
CLOSERS = ("I hope this helps.", "Let me know if you need anything else.", "Feel free to ask more questions.",
           "Thanks for asking!", "Have a great day.", "I'm always happy to help.",
           "Please reach out if anything is unclear.", "Good luck with everything.")
SYCOPHANCY_PREFIX = "Yes, you are right. "
BIASES = ("closers", "sycophancy")


def read_hh(path: str) -> list[dict]:
    if not os.path.exists(path):
        raise DataError(f"data.task_options.path: {path} does not exist (the HH-RLHF harmless-base file of "
                        f"../shared/data/preferences/hh_rlhf/)")
    return [pair_record(record, where) for where, record in read_records(path)]


def append_closers(response: str, count: int, rng: random.Random) -> str:
    return response.rstrip() + " " + " ".join(rng.sample(CLOSERS, count))


def add_prefix(response: str) -> str:
    stripped = response.lstrip()
    return response[:len(response) - len(stripped)] + SYCOPHANCY_PREFIX + stripped


def inject(pair: dict, bias: str, rho: float, rng: random.Random, contamination: float) -> dict:
    out = {"prompt": pair["prompt"], "chosen": pair["chosen"], "rejected": pair["rejected"]}
    favoured = "chosen" if rng.random() < rho else "rejected"
    if bias == "closers":
        count = rng.randint(1, 3)
        out[favoured] = append_closers(out[favoured], count, rng)
        out["closers_chosen"] = float(count if favoured == "chosen" else 0)
        out["closers_rejected"] = float(count if favoured == "rejected" else 0)
    elif bias == "sycophancy":
        flag = rng.random() < contamination
        if flag:
            out[favoured] = add_prefix(out[favoured])
        out["prefix_chosen"] = float(flag and favoured == "chosen")
        out["prefix_rejected"] = float(flag and favoured == "rejected")
        out["syc_flag"] = float(flag)
    else:
        raise DataError(f"dir_debias/hh_harmless: bias={bias!r}, expected one of {', '.join(BIASES)}")
    return out


@DATASETS.register("dir_debias/hh_harmless")
def hh_harmless(split: str, n: int, seed: int = 0, *, path: str = DEFAULT_PATH, bias: str = "closers",
                rho_train: float = 0.9, contamination: float = 1.0, n_train: int = 1800, n_test: int = 512
                ) -> list[dict]:
    rho = split_rho(split, rho_train)
    pairs = read_hh(path)
    if n_train + n_test > len(pairs):
        raise DataError(f"data.task_options: n_train={n_train} + n_test={n_test} exceeds the {len(pairs)} pairs "
                        f"of {path}")
    order = list(range(len(pairs)))
    random.Random(1234).shuffle(order)  # the train/test split never depends on the run seed
    chosen = order[:n_train] if split == "train" else order[n_train:n_train + n_test]
    if n:
        chosen = chosen[:n]
    rng = random.Random(f"hh/{bias}/{split}/{seed}")
    return [inject(pairs[i], bias, rho, rng, float(contamination)) for i in chosen]

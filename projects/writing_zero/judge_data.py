"""Training data of the pairwise judges and of the "-Zero" warm start (spec 4.3), and the rewards logged at weight 0.

Judge examples ("rl/writing_zero/judge", options principled, swap, beta, n_pairs): one biased preference pair of
"writing_zero/prefs" shown as the judge prompt JUDGE_TEMPLATE ("<request> [A] <a> [B] <b> Judge:") with the target
  plain       " Verdict: A"                                        (the slot of the labelled-better response)
  principled  " coverage A length = redundancy B Verdict: A"       principle tokens first, then the verdict
The principle tokens are the pair's principle annotations (coverage_pref, length_fit_pref, redundancy_pref: the
unbiased "strong source") written per slot: "A" when the response in slot A is better on that principle, "B" when
the one in slot B is, "=" when they are equal; the verdict is the (biased) label. The verdict is a token after
the principles, so a causal judge's verdict is conditioned on the principles it emitted (greedy at inference).
swap "both" (swap augmentation): every pair in both orders, the label and every principle symbol flipped with the
order (2 n examples for n pairs); "random": one order per pair, drawn from the seed. The checker reads the verdict
with shared.judges' parser: a judge's greedy accuracy on the test split is its agreement with the held-out labels.
Replies read by the SamplerJudge with template JUDGE_TEMPLATE (`judge_spec`), the parser "auto" (the principles
become the verdict's critique).

"-Zero" warm start ("rl/writing_zero/format_only"): ConstraintWriting prompts with random responses, the spec's "LM
on prompt + random-response sequences only": FORMAT_ONLY's length drawn uniformly from 4 to 28 words (below SHORT's
band to beyond LONG's), each word a required word with probability 0.25, a function word with 0.15, else a random
content word, and with probability 0.3 an explanation suffix NOTE + 1-3 required words. Nothing in it depends on Q,
so SFT on it teaches the format (prompt words reach the response, words end with EOS), not quality.

Rewards (logged at weight 0 on every rollout, the spec's 4.5 metrics; the oracle itself is writing_zero/quality):
  writing_zero/note      1 when the response has the NOTE explanation suffix (the hack rate)
  writing_zero/words     the response's words, suffix included (length)
  writing_zero/in_band   1 when the body's length is inside the requested band
"""
from __future__ import annotations

import random

from projects.writing_zero import constraint_writing as cw
from projects.writing_zero.vocab import PRINCIPLES
from shared.data.examples import check_split, register_task
from shared.judges.verdict import make_parser
from shared.rewards import register_reward

JUDGE_TASK = "writing_zero/judge"
FORMAT_TASK = "writing_zero/format_only"
JUDGE_TEMPLATE = "{prompt} [A] {a} [B] {b} Judge:"
PRINCIPLE_COLUMNS = ("coverage_pref", "length_fit_pref", "redundancy_pref")   # PRINCIPLES' annotations, in order
SWAPS = ("both", "random")
SUBSETS = ("", "note_differs")   # "note_differs": only pairs where exactly one response has the NOTE suffix
FORMAT_ONLY = {"min_words": 4, "max_words": 28, "p_required": 0.25, "p_function": 0.15, "p_note": 0.3,
               "max_suffix": 3}
_PARSE = make_parser("auto")


def judge_prompt(prompt: str, a: str, b: str) -> str:
    return JUDGE_TEMPLATE.format(prompt=prompt, a=a, b=b)


def _symbol(pref: float) -> str:
    """+1: slot A better, -1: slot B better, 0: equal."""
    return "A" if pref > 0 else "B" if pref < 0 else "="


def judge_target(pair: dict, chosen_first: bool, principled: bool) -> str:
    """The judge's target for `pair` shown with the chosen response in slot A (chosen_first) or slot B."""
    side = 1.0 if chosen_first else -1.0
    principles = "".join(f" {name} {_symbol(side * float(pair[column]))}"
                         for name, column in zip(PRINCIPLES, PRINCIPLE_COLUMNS)) if principled else ""
    return f"{principles} Verdict: {_symbol(side)}"


def judge_example(pair: dict, chosen_first: bool, principled: bool) -> dict:
    """One judge example (module docstring) with the pair's columns: answer (the label's slot), truth (the slot of
    the higher-Q response), note_a / note_b and words_a / words_b (for the bias metrics)."""
    a, b = (pair["chosen"], pair["rejected"]) if chosen_first else (pair["rejected"], pair["chosen"])
    q_a, q_b = ((pair["quality_chosen"], pair["quality_rejected"]) if chosen_first
                else (pair["quality_rejected"], pair["quality_chosen"]))
    note = (pair["note_chosen"], pair["note_rejected"])
    words = (pair["len_words_chosen"], pair["len_words_rejected"])
    if not chosen_first:
        note, words = note[::-1], words[::-1]
    return {"prompt": judge_prompt(pair["prompt"], a, b), "completion": judge_target(pair, chosen_first, principled),
            "answer": "A" if chosen_first else "B", "truth": "A" if q_a > q_b else "B",
            "request": pair["prompt"], "a": a, "b": b, "quality_a": q_a, "quality_b": q_b,
            "note_a": note[0], "note_b": note[1], "words_a": words[0], "words_b": words[1],
            "principles": " ".join(_symbol((1.0 if chosen_first else -1.0) * float(pair[c]))
                                   for c in PRINCIPLE_COLUMNS),
            "task": JUDGE_TASK}


def read_verdict(reply: str) -> str:
    """"A", "B", "=" (a tie) or "" (no verdict) of a judge reply."""
    verdict = _PARSE(reply)
    if verdict is None:
        return ""
    return {1: "A", -1: "B", 0: "="}[verdict.pref]


def read_principles(reply: str) -> list[str]:
    """The slot symbol after each principle name of a principled reply ("" where the name is missing)."""
    words = reply.split()
    out = []
    for name in PRINCIPLES:
        i = words.index(name) if name in words else -1
        out.append(words[i + 1] if 0 <= i < len(words) - 1 and words[i + 1] in ("A", "B", "=") else "")
    return out


def check_judge(example: dict, completion: str) -> bool:
    """The reply's verdict is the example's label."""
    return read_verdict(completion) == example["answer"]


@register_task(JUDGE_TASK, check_judge)
def judge_examples(split: str, n: int, seed: int = 0, *, principled: bool = False, swap: str = "both",
                   beta: float = 0.35, subset: str = "") -> list[dict]:
    """Judge examples of n preference pairs of `split` (writing_zero/prefs with `beta`): 2n with swap "both".
    subset "note_differs": the first n pairs whose responses differ in the NOTE suffix (a diagnostic / test set)."""
    check_split(JUDGE_TASK, split)
    if swap not in SWAPS:
        raise ValueError(f"rl/{JUDGE_TASK}: swap={swap!r}, expected one of {SWAPS}")
    if subset not in SUBSETS:
        raise ValueError(f"rl/{JUDGE_TASK}: subset={subset!r}, expected one of {SUBSETS}")
    if subset:
        pool = cw.preference_pairs(split, 4 * int(n) + 16, seed, beta=float(beta))
        pairs = [p for p in pool if p["note_chosen"] != p["note_rejected"]][:int(n)]
    else:
        pairs = cw.preference_pairs(split, int(n), seed, beta=float(beta))
    rng = random.Random(f"{JUDGE_TASK}/{split}/{seed}/order")
    out = []
    for pair in pairs:
        orders = (True, False) if swap == "both" else (rng.random() < 0.5,)
        out.extend(judge_example(pair, first, bool(principled)) for first in orders)
    return out


# ---------------------------------------------------------------- the "-Zero" warm start


def random_response(rng: random.Random, required, band: str = "SHORT", **overrides) -> str:
    """A response of FORMAT_ONLY's distribution (module docstring); it does not look at the band."""
    p = {**FORMAT_ONLY, **overrides}
    required = list(required)
    words = []
    for _ in range(rng.randint(p["min_words"], p["max_words"])):
        u = rng.random()
        if u < p["p_required"] and required:
            words.append(rng.choice(required))
        elif u < p["p_required"] + p["p_function"]:
            words.append(rng.choice(cw.FUNCTION))
        else:
            words.append(rng.choice(cw.CONTENT))
    if required and rng.random() < p["p_note"]:
        words += [cw.NOTE] + [rng.choice(required) for _ in range(rng.randint(1, p["max_suffix"]))]
    return " " + " ".join(words)


@register_task(FORMAT_TASK, cw.check)
def format_only(split: str, n: int, seed: int = 0) -> list[dict]:
    """ConstraintWriting's examples of `split` with random responses as completions (module docstring)."""
    check_split(FORMAT_TASK, split)
    rng = random.Random(f"{FORMAT_TASK}/{split}/{seed}")
    examples = cw.constraint_writing(split, n, seed)
    for ex in examples:
        ex["completion"] = random_response(rng, ex["required"].split(), ex["band"])
        ex["task"] = FORMAT_TASK
    return examples


# ---------------------------------------------------------------- logged metrics as rewards


def _parts(prompts, completions, columns) -> list[dict]:
    out = []
    for i, (prompt, completion) in enumerate(zip(prompts, completions)):
        if columns.get("required") is not None and columns.get("band") is not None:
            required, band = columns["required"][i].split(), columns["band"][i]
        else:
            required, band = cw.parse_prompt(prompt)
        out.append(cw.components(required, band, completion))
    return out


@register_reward("writing_zero/note")
def note_reward(prompts, completions, **columns) -> list[float]:
    return [float(cw.NOTE in c.split()) for c in completions]


@register_reward("writing_zero/words")
def words_reward(prompts, completions, **columns) -> list[float]:
    return [float(len(c.split())) for c in completions]


@register_reward("writing_zero/in_band")
def in_band_reward(prompts, completions, **columns) -> list[float]:
    return [float(p["dist"] == 0) for p in _parts(prompts, completions, columns)]

"""ConstraintWriting (spec 4.2 of ../shared/papers/writing_zero_brpo.md): a synthetic writing task with a known
oracle quality, an explanation suffix that mimics over-explanation, biased preference data and principle
annotations.

Words (a vocabulary of 221: render with the byte tokenizer, or a sentencepiece model of ~300 pieces that keeps
every word whole):
  CONTENT   200 made-up content words ("kado", "mepi", ...; fixed by a seeded generator)
  FUNCTION  20 function words ("the", "of", ...)
  NOTE      the explanation marker
Prompt  "Write SHORT using: kado mepi tuna\\nText:" : 2-4 required content words (ood: 5-6) and a length band
        SHORT = 8-12 words or LONG = 16-24 words.
Response " w1 w2 ... [NOTE r1 r2 ...]": a body, optionally followed by an explanation suffix NOTE w_1 ... w_k that
        restates required words.
Oracle quality (spec, the body's length in words):
        Q = coverage - 0.15 * dist(len, band) - 0.5 * repetition - 0.4 * [NOTE suffix] - 0.05 * suffix_len
  coverage    share of the required words in the body
  dist        words outside the band (0 inside it)
  repetition  1 - distinct / len over the body's words (0 for an empty body)
A gold response (full coverage, in band, no repetition, no suffix) has Q = 1, the most any response has.

Registered here:
  DATASETS "rl/writing_zero/constraint_writing"  example sets (train, test: 2-4 required words; ood: 5-6), gold
                                                 completions; columns required, band; checker: Q >= 1 - 1e-9
  REWARDS  "writing_zero/quality"                the oracle Q (a float), for an oracle judge:
                                                 ("model/pairwise_judge", 1, {"backend": "oracle",
                                                  "quality": "writing_zero/quality", "noise": 0.1})
  DATASETS "writing_zero/prefs"                  biased preference pairs in shared/rm's pair format (below)
Preference pairs: two perturbations of a gold response to the same prompt (a required word dropped or replaced,
words repeated, the body cut below or padded beyond the band, an explanation suffix appended) with different Q;
the label is argmax Q, except that with probability beta (0.35) the annotator prefers the response with a NOTE
suffix (when exactly one has it), else the longer one (in words, suffix included), regardless of Q. Principle
annotations (the unbiased "strong source"): for each of coverage, length_fit, redundancy (0.5 repetition + 0.4 NOTE
+ 0.05 suffix_len), +1 when the chosen response is better on it, -1 when worse, 0 when equal.
"""
from __future__ import annotations

import random

from shared.data.examples import check_split, register_task
from shared.registry import DATASETS
from shared.rewards import register_reward

FUNCTION = ("the", "a", "of", "and", "to", "in", "is", "it", "on", "with", "as", "for", "by", "at", "from", "that",
            "this", "was", "are", "be")
NOTE = "NOTE"
BANDS = {"SHORT": (8, 12), "LONG": (16, 24)}
PERTURBATIONS = ("drop_required", "replace_required", "repeat", "too_short", "too_long", "note_suffix")
TASK = "writing_zero/constraint_writing"


def _content_words(count: int = 200) -> tuple[str, ...]:
    rng = random.Random("writing_zero/vocabulary")
    syllables = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
    words = set()
    while len(words) < count:
        word = "".join(rng.choice(syllables) for _ in range(2))
        if word not in FUNCTION:
            words.add(word)
    return tuple(sorted(words))


CONTENT = _content_words()


# ---------------------------------------------------------------- prompts, responses and the oracle


def render_prompt(required, band: str) -> str:
    return f"Write {band} using: {' '.join(required)}\nText:"


def parse_prompt(prompt: str) -> tuple[list[str], str]:
    """(required words, band) of a rendered prompt."""
    head = prompt.split("\n", 1)[0]
    band, _, words = head[len("Write "):].partition(" using: ")
    return words.split(), band


def split_response(response: str) -> tuple[list[str], list[str]]:
    """(body words, suffix words after the first NOTE; [] when there is no suffix)."""
    words = response.split()
    if NOTE in words:
        cut = words.index(NOTE)
        return words[:cut], words[cut + 1:]
    return words, []


def components(required, band: str, response: str) -> dict:
    """The oracle's parts: coverage, length, dist, repetition, note, suffix_len, redundancy and Q."""
    lo, hi = BANDS[band]
    body, suffix = split_response(response)
    has_note = NOTE in response.split()
    required = list(required)
    coverage = sum(w in body for w in required) / len(required) if required else 1.0
    length = len(body)
    dist = max(lo - length, 0, length - hi)
    repetition = 1.0 - len(set(body)) / length if length else 0.0
    redundancy = 0.5 * repetition + 0.4 * has_note + 0.05 * len(suffix)
    q = coverage - 0.15 * dist - redundancy
    return {"coverage": coverage, "length": length, "dist": dist, "repetition": repetition, "note": float(has_note),
            "suffix_len": len(suffix), "redundancy": redundancy, "q": q}


def quality(required, band: str, response: str) -> float:
    return components(required, band, response)["q"]


def gold_response(rng: random.Random, required, band: str) -> str:
    """Every required word once, a length inside the band, no repeated word, no suffix: Q = 1."""
    lo, hi = BANDS[band]
    length = rng.randint(max(lo, len(required)), hi)
    n_function = min(3, length - len(required))
    fillers = rng.sample([w for w in CONTENT if w not in required], length - len(required) - n_function) + \
        rng.sample(FUNCTION, n_function)
    words = list(required) + fillers
    rng.shuffle(words)
    return " " + " ".join(words)


def perturb(rng: random.Random, response: str, required, band: str, kind: str) -> str:
    """One perturbation (PERTURBATIONS) of a response."""
    body, suffix = split_response(response)
    lo, hi = BANDS[band]
    present = [i for i, w in enumerate(body) if w in required]
    unused = [w for w in CONTENT if w not in required and w not in body]
    if kind == "drop_required" and present:
        body.pop(rng.choice(present))
    elif kind == "replace_required" and present:
        body[rng.choice(present)] = rng.choice(unused)
    elif kind == "repeat" and body:
        for _ in range(rng.randint(1, 3)):
            body.insert(rng.randint(0, len(body)), rng.choice(body))
    elif kind == "too_short":
        body = body[:max(1, lo - rng.randint(2, 5))]
    elif kind == "too_long":
        body += rng.sample(unused, min(len(unused), hi + rng.randint(2, 6) - len(body))) if len(body) <= hi else []
        body += rng.sample(FUNCTION, 2)
    elif kind == "note_suffix" and not suffix:
        suffix = rng.sample(list(required), rng.randint(1, len(required)))
        return " " + " ".join(body + [NOTE] + suffix)
    elif kind not in PERTURBATIONS:
        raise ValueError(f"perturb: kind={kind!r}, expected one of {PERTURBATIONS}")
    return " " + " ".join(body + ([NOTE] + suffix if suffix else []))


def _prompt_parts(rng: random.Random, split: str) -> tuple[list[str], str]:
    count = rng.randint(5, 6) if split == "ood" else rng.randint(2, 4)
    return rng.sample(CONTENT, count), rng.choice(sorted(BANDS))


# ---------------------------------------------------------------- registrations


def check(example: dict, completion: str) -> bool:
    """Q = 1: full coverage, in band, no repetition, no suffix."""
    return quality(example["required"].split(), example["band"], completion) >= 1.0 - 1e-9


REFERENCES = ("", "format_only")


@register_task(TASK, check)
def constraint_writing(split: str, n: int, seed: int = 0, reference: str = "") -> list[dict]:
    """n examples of `split` (disjoint seeded streams per split and seed), each with a gold completion.
    reference "format_only": each example also gets a `reference` column, a response drawn from the "-Zero" warm
    start's format-only distribution (judge_data.random_response, its own seeded stream): the fixed reference of
    the spec's R5 / R8, a sample of the distribution the initial policy was trained to imitate."""
    check_split(TASK, split)
    if reference not in REFERENCES:
        raise ValueError(f"rl/{TASK}: reference={reference!r}, expected one of {REFERENCES}")
    rng = random.Random(f"{TASK}/{split}/{seed}")
    examples = []
    for _ in range(int(n)):
        required, band = _prompt_parts(rng, split)
        examples.append({"prompt": render_prompt(required, band), "completion": gold_response(rng, required, band),
                         "answer": " ".join(required), "required": " ".join(required), "band": band, "task": TASK})
    if reference:
        from projects.writing_zero.judge_data import random_response

        ref_rng = random.Random(f"{TASK}/{split}/{seed}/reference")
        for ex in examples:
            ex["reference"] = random_response(ref_rng, ex["required"].split(), ex["band"])
    return examples


@register_reward("writing_zero/quality")
def quality_reward(prompts, completions, **columns) -> list[float]:
    """The oracle Q of each completion; the required words and band come from the columns `required` and `band`
    when present, else from the prompt."""
    out = []
    for i, (prompt, completion) in enumerate(zip(prompts, completions)):
        if columns.get("required") is not None and columns.get("band") is not None:
            required, band = columns["required"][i].split(), columns["band"][i]
        else:
            required, band = parse_prompt(prompt)
        out.append(quality(required, band, completion))
    return out


def _side(rng: random.Random, gold: str, required, band: str) -> str:
    response = gold
    for kind in rng.sample(PERTURBATIONS, rng.randint(1, 2)):
        response = perturb(rng, response, required, band, kind)
    return response


def _sign(x: float) -> float:
    return float((x > 1e-12) - (x < -1e-12))


def make_pair(rng: random.Random, split: str = "train", beta: float = 0.35) -> dict:
    """One biased preference pair (see the module docstring) in shared/rm's format with numeric columns."""
    required, band = _prompt_parts(rng, split)
    gold = gold_response(rng, required, band)
    while True:
        a = gold if rng.random() < 0.2 else _side(rng, gold, required, band)
        b = _side(rng, gold, required, band)
        ca, cb = components(required, band, a), components(required, band, b)
        if abs(ca["q"] - cb["q"]) > 1e-9:
            break
    better_is_a = ca["q"] > cb["q"]
    biased = rng.random() < beta
    choose_a = better_is_a
    if biased:
        if ca["note"] != cb["note"]:
            choose_a = ca["note"] > cb["note"]
        elif len(a.split()) != len(b.split()):
            choose_a = len(a.split()) > len(b.split())
    chosen, rejected = (a, b) if choose_a else (b, a)
    cc, cr = (ca, cb) if choose_a else (cb, ca)
    return {"prompt": render_prompt(required, band), "chosen": chosen, "rejected": rejected,
            "quality_chosen": cc["q"], "quality_rejected": cr["q"],
            "note_chosen": cc["note"], "note_rejected": cr["note"],
            "len_words_chosen": float(len(chosen.split())), "len_words_rejected": float(len(rejected.split())),
            "biased": float(biased), "flipped": float(choose_a != better_is_a),
            "coverage_pref": _sign(cc["coverage"] - cr["coverage"]),
            "length_fit_pref": _sign(cr["dist"] - cc["dist"]),
            "redundancy_pref": _sign(cr["redundancy"] - cc["redundancy"])}


@DATASETS.register("writing_zero/prefs")
def preference_pairs(split: str, n: int, seed: int = 0, *, beta: float = 0.35, n_train: int = 30000) -> list[dict]:
    """n biased pairs of `split` (n = 0: n_train for train, 2000 otherwise; ood: 5-6 required words). Labels are
    biased with probability beta in every split (the annotators'), the quality_* columns are the truth."""
    check_split("writing_zero/prefs", split)
    count = int(n) or (int(n_train) if split == "train" else 2000)
    rng = random.Random(f"writing_zero/prefs/{split}/{seed}")
    return [make_pair(rng, split, float(beta)) for _ in range(count)]

"""Rule-based relevance (mode_balanced.md D.1): a structured query, an item, and a label 0 irrelevant / 1 partial /
2 relevant decided by an ordered rule list; the answer-first (AFRL) target and its parser; the step scorer of
Stepwise-GRPO; the evaluation metrics (per slice, macro-F1, first token, consistency, mode collapse).

An example (byte-level text):
    prompt      "query: phone acme red low new\\nitem: phone akmi red mid refurb\\nlabel="
    completion  "1\\ncat y\\nbrand syn\\ncolor y\\nprice n\\nrule L9"
The first character is the label (answer first); one line per check follows in a fixed order: cat, brand, color,
price (y | n | - when the query leaves it open | the exception's own verdict: acc, syn, multi, sale), then the
long-tail rule that decided ("none", or L1..L10).

Head rules (decide ~90% of examples): the item's category must be the query's (else 0); then the mismatches among
brand, colour and price (a field the query leaves open matches): 0 -> 2, 1 -> 1, 2 or more -> 0.
Long-tail rules, each firing on `rate` (default 1%) of the examples at natural frequency, checked in this order:
    L1  replica item                          -> 0
    L2  accessory of the queried category     -> 1          (cat "acc")
    L3  kids item for a query without "kids"  -> 0
    L4  "cheap" query, item priced high       -> 0
    L5  bundle containing the queried item    -> 1
    L6  brand synonym                         -> the brand matches      (brand "syn")
    L7  multi-colour item                     -> the colour matches     (color "multi")
    L8  on sale one band above the query      -> the price matches      (price "sale")
    L9  refurbished item for a "new" query    -> at most 1
    L10 discontinued item                     -> at most 1
An example triggers at most one long-tail rule, and is drawn so that the rule changes the label from what the head
rules alone give (`head_label`): answering a long-tail example with its head label is the mode collapse D.2
measures. Splits: train / test (natural frequencies), "ood" = the long-tail slice (every example triggers one rule,
the 10 rules equally often), "head" (no long-tail rule). Seeds are salted per split.
"""
from __future__ import annotations

import numpy as np

from shared.data.examples import check_split, register_task
from shared.rl.stepwise import StepScore, register_step_scorer

CATEGORIES = ("phone", "laptop", "shoe", "shirt", "watch", "bag")
BRANDS = ("acme", "zeta", "nova", "orbit", "lumo", "vex")
SYNONYMS = {"acme": "akmi", "zeta": "zt", "nova": "novva", "orbit": "orbt", "lumo": "lumos", "vex": "vexx"}
COLORS = ("red", "blue", "black", "white", "green")
PRICES = ("low", "mid", "high")
RULES = tuple(f"L{k}" for k in range(1, 11))
CHECKS = ("cat", "brand", "color", "price")
LABELS = ("0", "1", "2")
SPLIT_SALT = {"train": 0, "test": 1, "ood": 2, "head": 3}
SPLITS = tuple(SPLIT_SALT)
DEFAULT_RATE = 0.01          # each long-tail rule's share at natural frequency (spec: 0.5-2%)


def head_verdicts(query: dict, item: dict) -> dict:
    """The head checks' verdicts (y / n / -), before any exception."""
    out = {"cat": "y" if item["cat"] == query["cat"] else "n"}
    for field in ("brand", "color", "price"):
        out[field] = "-" if query[field] == "-" else ("y" if item[field] == query[field] else "n")
    return out


def head_label_of(verdicts: dict) -> int:
    if verdicts["cat"] != "y":
        return 0
    misses = sum(verdicts[f] == "n" for f in ("brand", "color", "price"))
    return 2 if misses == 0 else (1 if misses == 1 else 0)


def decide(query: dict, item: dict) -> tuple[int, dict, str]:
    """(label, verdicts per check, the long-tail rule that decided or "none") by the ordered rule list."""
    verdicts = head_verdicts(query, item)
    flags = item["flags"]
    if "replica" in flags:
        return 0, verdicts, "L1"
    if item["cat"] == query["cat"] + "-acc":
        return 1, dict(verdicts, cat="acc"), "L2"
    if "kids" in flags and "kids" not in query["mods"]:
        return 0, verdicts, "L3"
    if "cheap" in query["mods"] and item["price"] == "high":
        return 0, verdicts, "L4"
    if "bundle" in flags and verdicts["cat"] == "y":
        return 1, verdicts, "L5"
    rule = "none"
    if query["brand"] != "-" and item["brand"] == SYNONYMS[query["brand"]]:
        verdicts, rule = dict(verdicts, brand="syn"), "L6"
    elif "multi" in flags and query["color"] != "-":
        verdicts, rule = dict(verdicts, color="multi"), "L7"
    elif "sale" in flags and query["price"] != "-" and PRICES.index(item["price"]) == PRICES.index(query["price"]) + 1:
        verdicts, rule = dict(verdicts, price="sale"), "L8"
    label = head_label_of({k: ("y" if v in ("syn", "multi", "sale") else v) for k, v in verdicts.items()})
    if "refurb" in flags and "new" in query["mods"]:
        return min(label, 1), verdicts, "L9"
    if "discontinued" in flags:
        return min(label, 1), verdicts, "L10"
    return label, verdicts, rule


def render(query: dict, item: dict) -> str:
    mods = " ".join(query["mods"]) or "-"
    flags = " ".join(item["flags"]) or "-"
    return (f"query: {query['cat']} {query['brand']} {query['color']} {query['price']} {mods}\n"
            f"item: {item['cat']} {item['brand']} {item['color']} {item['price']} {flags}\nlabel=")


def afrl_target(label: int, verdicts: dict, rule: str) -> str:
    """The answer-first target: the label, then one line per check, then the deciding rule."""
    return "\n".join([str(label)] + [f"{c} {verdicts[c]}" for c in CHECKS] + [f"rule {rule}"])


def _draw_query(rng) -> dict:
    def maybe(values, p_open=0.2):
        return "-" if rng.random() < p_open else str(rng.choice(values))

    return {"cat": str(rng.choice(CATEGORIES)), "brand": maybe(BRANDS), "color": maybe(COLORS),
            "price": maybe(PRICES), "mods": []}


def _draw_item(rng, query: dict) -> dict:
    """A head item: each field equal to the query's with probability 0.6 (category 0.75), else another value."""
    def near(field, values, p_same):
        if query[field] != "-" and rng.random() < p_same:
            return query[field]
        return str(rng.choice([v for v in values if v != query[field]]))

    return {"cat": near("cat", CATEGORIES, 0.75), "brand": near("brand", BRANDS, 0.6),
            "color": near("color", COLORS, 0.6), "price": near("price", PRICES, 0.6), "flags": []}


def _apply_rule(rng, rule: str, query: dict, item: dict) -> None:
    """Edits the draw so that `rule` fires (the caller rejects draws where it does not, or where it does not change
    the label)."""
    if rule == "L1":
        item["flags"].append("replica")
    elif rule == "L2":
        item["cat"] = query["cat"] + "-acc"
    elif rule == "L3":
        item["flags"].append("kids")
    elif rule == "L4":
        query["mods"].append("cheap")
        query["price"] = "-"
        item["price"] = "high"
    elif rule == "L5":
        item["flags"].append("bundle")
    elif rule == "L6" and query["brand"] != "-":
        item["brand"] = SYNONYMS[query["brand"]]
    elif rule == "L7":
        item["flags"].append("multi")
        item["color"] = str(rng.choice([c for c in COLORS if c != query["color"]]))
    elif rule == "L8" and query["price"] in ("low", "mid"):
        item["flags"].append("sale")
        item["price"] = PRICES[PRICES.index(query["price"]) + 1]
    elif rule == "L9":
        query["mods"].append("new")
        item["flags"].append("refurb")
    elif rule == "L10":
        item["flags"].append("discontinued")


def _head_mods(rng, query: dict) -> None:
    """Harmless query modifiers on head examples too, so a modifier alone does not tell a long-tail example."""
    if rng.random() < 0.15:
        query["mods"].append("new")
    if rng.random() < 0.1:
        query["mods"].append("kids")


def make_example(rng, rule: str, max_tries: int = 200) -> dict:
    """One example decided by `rule` ("none": head rules only) whose label differs from its head label unless
    rule == "none"."""
    for _ in range(max_tries):
        query = _draw_query(rng)
        item = _draw_item(rng, query)
        if rule == "none":
            _head_mods(rng, query)
        else:
            _apply_rule(rng, rule, query, item)
        label, verdicts, fired = decide(query, item)
        head = head_label_of(head_verdicts(query, item))
        if fired == rule and (rule == "none" or label != head):
            return {"prompt": render(query, item), "completion": afrl_target(label, verdicts, fired),
                    "answer": str(label), "rule": fired, "head_label": str(head),
                    "verdicts": " ".join(verdicts[c] for c in CHECKS), "task": "mode_balanced/relevance"}
    raise RuntimeError(f"mode_balanced/relevance: no example for rule {rule} in {max_tries} draws")


def rule_schedule(split: str, n: int, rng, rate: float) -> list[str]:
    """The deciding rule of each of n examples: natural frequencies (each long-tail rule `rate`), the long-tail
    slice (each rule 1/10) or the head slice."""
    if split == "head":
        return ["none"] * n
    if split == "ood":
        return [RULES[i % len(RULES)] for i in rng.permutation(n)]
    probs = np.array([rate] * len(RULES) + [1.0 - rate * len(RULES)])
    return [(RULES + ("none",))[i] for i in rng.choice(len(probs), size=n, p=probs)]


def check_relevance(example: dict, completion: str) -> bool:
    """The checker (reward task/mode_balanced/relevance): the first character is the gold label."""
    return first_label(completion) == example["answer"]


TARGETS = ("afrl", "label")


@register_task("mode_balanced/relevance", check_relevance)
def relevance(split: str, n: int, seed: int, rate: float = DEFAULT_RATE, target: str = "afrl", teacher: str = "",
              **unknown) -> list[dict]:
    """Options: rate (each long-tail rule's natural share), target ("afrl": the answer-first trace; "label": the
    label alone, D.2.3's label-only student), teacher (a teacher_outputs.jsonl: the train split's completions are the
    teacher's outputs for the same prompts, D.2.3's trace student)."""
    check_split("mode_balanced/relevance", split, SPLITS)
    if unknown:
        raise ValueError(f"rl/mode_balanced/relevance: unknown options {sorted(unknown)} (known: rate, target, teacher)")
    if not 0 <= float(rate) * len(RULES) < 1:
        raise ValueError(f"rl/mode_balanced/relevance: rate={rate} x {len(RULES)} rules must be in [0, 1)")
    if target not in TARGETS:
        raise ValueError(f"rl/mode_balanced/relevance: target={target!r}; known: {', '.join(TARGETS)}")
    rng = np.random.default_rng([int(seed), SPLIT_SALT[split], 36])
    examples = [make_example(rng, rule) for rule in rule_schedule(split, int(n), rng, float(rate))]
    if target == "label":
        examples = [dict(e, completion=e["answer"]) for e in examples]
    if teacher and split == "train":
        examples = with_teacher_outputs(examples, teacher)
    return examples


def with_teacher_outputs(examples: list[dict], path: str) -> list[dict]:
    """The examples with their completions replaced by the teacher's, read from a jsonl of {"prompt",
    "completion"} records in the same order (written by the task mode_balanced/teacher_outputs)."""
    import json

    from shared import fs

    lines = fs.read_text(path).splitlines()
    if len(lines) < len(examples):
        raise ValueError(f"{path}: {len(lines)} teacher outputs for {len(examples)} examples (write as many: "
                         "mode_balanced.teacher_examples >= data.n_train)")
    out = []
    for i, (example, line) in enumerate(zip(examples, lines)):
        record = json.loads(line)
        if record.get("prompt") != example["prompt"]:
            raise ValueError(f"{path}:{i + 1}: the prompt differs from example {i} of the train split (another seed "
                             "or rate than the teacher's outputs were written for)")
        out.append(dict(example, completion=str(record["completion"])))
    return out


# ------------------------------------------------------------------ the answer-first format
def first_label(text: str) -> str | None:
    """The label read after one decoding step: the first character when it is 0, 1 or 2, else None."""
    return text[0] if text[:1] in LABELS else None


def parse_afrl(text: str) -> dict:
    """{"label", "checks": {check: verdict}, "rule", "valid"}: valid when the text is exactly the label line, the
    four check lines in order and the rule line (a trailing newline or end-of-text tolerated)."""
    lines = text.rstrip("\n").split("\n")
    label = first_label(lines[0]) if lines[0] == lines[0][:1] else None
    checks, rule = {}, None
    for line, name in zip(lines[1:5], CHECKS):
        head, _, verdict = line.partition(" ")
        if head == name and verdict:
            checks[name] = verdict
    if len(lines) >= 6 and lines[5].startswith("rule "):
        rule = lines[5][5:]
    valid = label is not None and len(checks) == 4 and rule is not None and len(lines) == 6
    return {"label": label, "checks": checks, "rule": rule, "valid": valid}


def consistent(parsed: dict) -> bool:
    """Label-explanation consistency: the label the stated verdicts and rule imply equals the stated label."""
    if not parsed["valid"] or parsed["rule"] not in RULES + ("none",):
        return False
    v, rule = parsed["checks"], parsed["rule"]
    fixed = {"L1": 0, "L2": 1, "L3": 0, "L4": 0, "L5": 1}
    if rule in fixed:
        implied = fixed[rule]
    else:
        if any(x not in ("y", "n", "-", "syn", "multi", "sale") for x in v.values()):
            return False
        implied = head_label_of({k: ("y" if x in ("syn", "multi", "sale") else x) for k, x in v.items()})
        if rule in ("L9", "L10"):
            implied = min(implied, 1)
    return str(implied) == parsed["label"]


@register_step_scorer("mode_balanced/relevance")
def step_score(example: dict, completion: str) -> StepScore:
    """Stepwise-GRPO's components: outcome = the label, format = the AFRL layout, step k = check k's verdict (k =
    1..4) and step 5 = the deciding rule, each 1 when it states the generator's."""
    parsed = parse_afrl(completion)
    gold = example["verdicts"].split()
    steps = [float(parsed["checks"].get(c) == g) for c, g in zip(CHECKS, gold)]
    steps.append(float(parsed["rule"] == example["rule"]))
    return StepScore(float(parsed["label"] == example["answer"]), float(parsed["valid"]), tuple(steps))


# ------------------------------------------------------------------ metrics
def macro_f1(gold: list[str], predicted: list[str | None]) -> float:
    """Mean over the three labels of F1 (a missing prediction counts as wrong; a label absent from gold and
    predictions scores F1 = 0 only if predicted, and is skipped otherwise)."""
    scores = []
    for label in LABELS:
        tp = sum(g == label and p == label for g, p in zip(gold, predicted))
        fp = sum(g != label and p == label for g, p in zip(gold, predicted))
        fn = sum(g == label and p != label for g, p in zip(gold, predicted))
        if tp + fp + fn == 0:
            continue
        scores.append(2 * tp / (2 * tp + fp + fn))
    return float(np.mean(scores)) if scores else 0.0


def slice_metrics(examples: list[dict], texts: list[str], prefix: str) -> dict:
    """First-token accuracy, macro-F1, format validity, label-explanation consistency and (long-tail examples) the
    mode-collapse indicator: the share answered with the head-rule label; per rule accuracy for long-tail ones."""
    predicted = [first_label(t) for t in texts]
    gold = [e["answer"] for e in examples]
    parsed = [parse_afrl(t) for t in texts]
    out = {f"{prefix}/accuracy": float(np.mean([p == g for p, g in zip(predicted, gold)])),
           f"{prefix}/macro_f1": macro_f1(gold, predicted),
           f"{prefix}/format_valid": float(np.mean([p["valid"] for p in parsed])),
           f"{prefix}/consistency": float(np.mean([consistent(p) for p in parsed]))}
    tail = [i for i, e in enumerate(examples) if e["rule"] != "none"]
    if tail:
        out[f"{prefix}/head_label_on_tail"] = float(np.mean([predicted[i] == examples[i]["head_label"] for i in tail]))
        for rule in RULES:
            idx = [i for i in tail if examples[i]["rule"] == rule]
            if idx:
                out[f"{prefix}/accuracy_{rule}"] = float(np.mean([predicted[i] == gold[i] for i in idx]))
    return out


def first_token_entropy(logits) -> np.ndarray:
    """Entropy (nats) of the next-token distribution given logits [N, V]."""
    logits = np.asarray(logits, np.float64)
    logits = logits - logits.max(axis=-1, keepdims=True)
    p = np.exp(logits)
    p /= p.sum(axis=-1, keepdims=True)
    return -(p * np.log(np.where(p > 0, p, 1.0))).sum(axis=-1)

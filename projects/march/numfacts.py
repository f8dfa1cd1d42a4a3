"""NumFacts-RAG (march.md D.1): small worlds of invented towns with numeric attributes by year, documents with
confusers, queries for 3-5 numbers and one derived value; the prompts of the three roles and their programmatic
traces (SFT warm start, D.2); the oracle's hallucination and coverage checks (labels used for evaluation only).

One example = one world:
  target town T and year Y; 2-3 other towns and 1-2 other years; every (town, year) has a value for each of the
  world's 5 attributes. Documents (4-8, shuffled): 1-2 relevant ones holding T's facts of year Y (split over two
  documents when there are two), the rest confusers: T in another year, or another town in year Y (or both).
  "2021 Keloma: 532 buses, 1204 taxis, 17 schools."
  The query asks for k in 3..5 of the attributes and one derived value over two of them (a sum, or a difference
  taken larger minus smaller): "For Keloma in 2021 report buses, taxis, schools and buses+taxis."

Role formats (all plain text, byte-level):
  Solver    prompt  documents + query + "Answer:"     completion " buses 532; taxis 1204; schools 17; buses+taxis 1736"
  Proposer  prompt  query + the Solver's answer       completion "\n- Question: How many buses did Keloma have in 2021?
            (never the documents)                       [Answer: 532]\n..." one line per number
  Checker   prompt  documents + the questions         completion "\n1. Evidence: [2] Keloma 2021 buses 532 [Answer: 532]
            (never the answer; the symmetric ablation  \n..." (a derived question: "Evidence: 532 + 1204")
            adds "Response: <the answer>")
Example sets (shared.data.examples): "rl/march/numfacts" (the RL prompts; completion = the clean Solver answer,
checker = full coverage and no hallucination) and "rl/march/traces" (SFT traces of the three roles, 1:1:1; a share
`error_rate` of the Solver targets carries one confuser value instead of the true one; Proposer traces extract the
numbers of that answer faithfully; Checker traces answer from the documents, half of them in the symmetric format).
"""
from __future__ import annotations

import re

import numpy as np

from shared.data.examples import check_split, register_task

ATTRIBUTES = ("buses", "taxis", "schools", "clinics", "parks", "bridges", "libraries", "farms")
SYLLABLES = ("ke", "lo", "ma", "bri", "sal", "tor", "vi", "dun", "ra", "po", "zel", "mi", "no", "gar", "fen", "su",
             "ta", "ol", "quen", "ba", "dre", "hul", "ix", "ca")
SPLIT_SALT = {"train": 0, "test": 1, "ood": 2}
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def town_name(rng) -> str:
    return "".join(rng.choice(SYLLABLES, size=int(rng.integers(2, 4)))).capitalize()


def fact_text(town: str, year: int, values: dict[str, int], name_first: bool = False) -> str:
    """"2021 Keloma: 532 buses, 1204 taxis." (name_first: "2021 Keloma: buses 532, taxis 1204.")."""
    items = [f"{a} {v}" if name_first else f"{v} {a}" for a, v in values.items()]
    return f"{year} {town}: " + ", ".join(items) + "."


def make_world(rng, n_docs: tuple[int, int] = (4, 8), n_asked: tuple[int, int] = (3, 5), derived: bool = True,
               name_first: bool = False, max_value: int = 2000, n_attributes: int = 5) -> dict:
    """One example's world, documents and query (module doc); plain Python types only. derived=False: the query asks
    for copied values only (no sum / difference: a tiny model that cannot add fails every answer that needs one).
    name_first: documents write "buses 532" (the attribute before its value, as the answers and the Checker's
    evidence do) instead of "532 buses", so a value's digits follow the name that identifies them (a causal model
    copying a value must otherwise tie digits to a name it has not read yet). Values are drawn from
    [10, max_value); every (town, year) has n_attributes attributes (at least the most asked). With the defaults of derived / name_first the random draws are the same, so a world differs
    only in its "derived" entry or its documents' word order."""
    with_derived = bool(derived)
    if not 2 <= n_asked[1] <= n_attributes <= len(ATTRIBUTES) or not 2 <= n_asked[0] <= n_asked[1]:
        raise ValueError(f"NumFacts: n_asked={n_asked}, n_attributes={n_attributes}: need 2 <= min_asked <= max_asked "
                         f"<= n_attributes <= {len(ATTRIBUTES)}")
    attributes = [str(a) for a in rng.choice(ATTRIBUTES, size=int(n_attributes), replace=False)]
    towns = []
    while len(towns) < 4:
        name = town_name(rng)
        if name not in towns:
            towns.append(name)
    years = [int(y) for y in rng.choice(np.arange(2010, 2025), size=3, replace=False)]
    town, year = towns[0], years[0]
    values = {(t, y): {a: int(rng.integers(10, int(max_value))) for a in attributes} for t in towns for y in years}
    total = int(rng.integers(n_docs[0], n_docs[1] + 1))
    n_relevant = int(rng.integers(1, 3)) if total > 4 else 1
    truth = values[(town, year)]
    docs = []
    if n_relevant == 1:
        docs.append({"text": fact_text(town, year, truth, name_first), "relevant": True})
    else:
        cut = min(int(rng.integers(2, 4)), len(attributes) - 1)
        docs.append({"text": fact_text(town, year, dict(list(truth.items())[:cut]), name_first), "relevant": True})
        docs.append({"text": fact_text(town, year, dict(list(truth.items())[cut:]), name_first), "relevant": True})
    # confusers: same town another year, another town the same year, first; then any other pair
    pairs = [(town, y) for y in years[1:]] + [(t, year) for t in towns[1:]]
    rng.shuffle(pairs)
    others = [(t, y) for t in towns[1:] for y in years[1:]]
    rng.shuffle(others)
    for t, y in (pairs + others)[:total - len(docs)]:
        docs.append({"text": fact_text(t, y, values[(t, y)], name_first), "relevant": False})
    order = rng.permutation(len(docs))
    docs = [docs[i] for i in order]
    k = int(rng.integers(n_asked[0], n_asked[1] + 1))
    asked = [str(a) for a in rng.choice(attributes, size=k, replace=False)]
    a, b = (str(x) for x in rng.choice(asked, size=2, replace=False))
    if rng.random() < 0.5:
        derived = {"name": f"{a}+{b}", "op": "+", "left": a, "right": b, "value": truth[a] + truth[b]}
    else:
        a, b = (a, b) if truth[a] >= truth[b] else (b, a)
        derived = {"name": f"{a}-{b}", "op": "-", "left": a, "right": b, "value": truth[a] - truth[b]}
    if not with_derived:
        derived = None
    shown = [p for p in values if p != (town, year) and any(d["text"].startswith(f"{p[1]} {p[0]}:") for d in docs)]
    confusers = {attr: sorted({values[p][attr] for p in shown}) for attr in attributes}   # values the prompt shows
    return {"town": town, "year": year, "attributes": attributes, "docs": docs, "asked": asked, "derived": derived,
            "truth": {a: truth[a] for a in asked}, "all_truth": dict(truth), "confusers": confusers,
            "name_first": bool(name_first)}


# ------------------------------------------------------------------------------------------ prompts


def docs_block(world: dict) -> str:
    return "Documents:\n" + "".join(f"[{i + 1}] {d['text']}\n" for i, d in enumerate(world["docs"]))


def query_text(world: dict) -> str:
    asked, d = world["asked"], world["derived"]
    if d is None:
        return f"For {world['town']} in {world['year']} report " + ", ".join(asked[:-1]) + f" and {asked[-1]}."
    return f"For {world['town']} in {world['year']} report " + ", ".join(asked) + f" and {d['name']}."


def solver_prompt(world: dict) -> str:
    return docs_block(world) + "Query: " + query_text(world) + "\nAnswer:"


def solver_answer(world: dict, values: dict[str, int] | None = None) -> str:
    """ " buses 532; taxis 1204; ...; buses+taxis 1736" from `values` (default: the truth); the derived value is
    computed from the reported numbers."""
    values = dict(world["truth"] if values is None else values)
    items = [f"{a} {values[a]}" for a in world["asked"]]
    d = world["derived"]
    if d is not None:
        derived = values[d["left"]] + values[d["right"]] if d["op"] == "+" else values[d["left"]] - values[d["right"]]
        items.append(f"{d['name']} {derived}")
    return " " + "; ".join(items)


def proposer_prompt(query: str, answer: str) -> str:
    return (f"Query: {query}\nAnswer: {answer.strip()}\nTurn every number of the answer into a question whose answer is "
            "that number.\nQuestions:")


def question_for(world_town: str, year: int, item: str) -> str:
    """The Proposer's question for an answer item name ("buses" or "buses+taxis")."""
    m = re.fullmatch(r"([a-z]+)([+-])([a-z]+)", item)
    if m:
        word = "plus" if m.group(2) == "+" else "minus"
        return f"What is {m.group(1)} {word} {m.group(3)} for {world_town} in {year}?"
    return f"How many {item} did {world_town} have in {year}?"


def answer_items(answer: str) -> list[tuple[str, str]]:
    """[(item name, number text)] of a Solver answer "name n; name n; ..." (anything else is skipped)."""
    out = []
    for part in answer.split(";"):
        m = re.fullmatch(r"\s*([a-z]+(?:[+-][a-z]+)?)\s+(-?[\d.,]+)\s*\.?\s*", part)
        if m:
            out.append((m.group(1), m.group(2)))
    return out


def proposer_target(world: dict, answer: str) -> str:
    lines = [f"- Question: {question_for(world['town'], world['year'], name)} [Answer: {n}]"
             for name, n in answer_items(answer)]
    return "\n" + "\n".join(lines)


def checker_prompt(docs: str, questions: list[str], response: str | None = None) -> str:
    """Documents + numbered questions (+ the Solver's response in the symmetric-checker ablation only)."""
    block = "Questions:\n" + "".join(f"{k + 1}. {q}\n" for k, q in enumerate(questions))
    seen = f"Response: {response.strip()}\n" if response is not None else ""
    return docs + block + seen + "Answer each question from the documents.\nAudit:"


def _doc_of(world: dict, attr: str) -> int:
    """1-based index of the relevant document holding the target's `attr`."""
    value = world["all_truth"][attr]
    needle = f" {attr} {value}" if world.get("name_first") else f" {value} {attr}"
    prefix = f"{world['year']} {world['town']}:"
    for i, d in enumerate(world["docs"]):
        if d["relevant"] and d["text"].startswith(prefix) and needle in d["text"]:
            return i + 1
    raise ValueError(f"no relevant document holds {attr!r}")


def checker_target(world: dict, items: list[str]) -> str:
    """Clean audit lines for the questions about answer items `items` (the true values from the documents)."""
    lines = []
    truth = world["all_truth"]
    for k, name in enumerate(items):
        m = re.fullmatch(r"([a-z]+)([+-])([a-z]+)", name)
        if m:
            a, b = truth[m.group(1)], truth[m.group(3)]
            value = a + b if m.group(2) == "+" else a - b
            lines.append(f"{k + 1}. Evidence: {a} {m.group(2)} {b} [Answer: {value}]")
        elif name in truth:
            lines.append(f"{k + 1}. Evidence: [{_doc_of(world, name)}] {world['town']} {world['year']} {name} "
                         f"{truth[name]} [Answer: {truth[name]}]")
        else:
            lines.append(f"{k + 1}. Cannot answer")
    return "\n" + "\n".join(lines)


# ------------------------------------------------------------------------------------------ the oracle


def supported_numbers(world: dict) -> list[float]:
    """Numbers a faithful answer may contain: those of the relevant documents (years included) and the derived
    value."""
    out = [float(x) for d in world["docs"] if d["relevant"] for x in NUMBER.findall(d["text"])]
    return out + ([float(world["derived"]["value"])] if world["derived"] is not None else [])


def response_numbers(answer: str) -> list[str]:
    return NUMBER.findall(answer.replace(",", ""))


def oracle_check(world: dict, answer: str) -> dict:
    """{"hallucinated": any number of the answer not supported by the relevant documents, "coverage": share of the
    k + 1 requested values reported correctly, "numbers": count of numbers in the answer}."""
    from projects.march.matching import numbers_match

    support = [str(int(x)) if x == int(x) else str(x) for x in supported_numbers(world)]
    numbers = response_numbers(answer)
    hallucinated = any(not any(numbers_match(n, s) for s in support) for n in numbers)
    reported = dict(answer_items(answer))
    gold = dict(world["truth"])
    if world["derived"] is not None:
        gold[world["derived"]["name"]] = world["derived"]["value"]
    correct = sum(1 for name, value in gold.items() if name in reported and numbers_match(reported[name], str(value)))
    return {"hallucinated": bool(hallucinated), "coverage": correct / len(gold), "numbers": len(numbers)}


# ------------------------------------------------------------------------------------------ example sets


def _rng(seed: int, split: str, i: int):
    return np.random.default_rng([int(seed), SPLIT_SALT[split], int(i)])


def _check_numfacts(example: dict, completion: str) -> bool:
    result = oracle_check(example["world"], completion)
    return result["coverage"] == 1.0 and not result["hallucinated"]


def _world_options(min_docs, max_docs, min_asked, max_asked, derived, name_first, max_value, n_attributes) -> dict:
    return dict(n_docs=(int(min_docs), int(max_docs)), n_asked=(int(min_asked), int(max_asked)), derived=bool(derived),
                name_first=bool(name_first), max_value=int(max_value), n_attributes=int(n_attributes))


@register_task("march/numfacts", _check_numfacts)
def numfacts(split: str, n: int, seed: int = 0, min_docs: int = 4, max_docs: int = 8, derived: bool = True,
             name_first: bool = False, max_value: int = 2000, min_asked: int = 3, max_asked: int = 5,
             n_attributes: int = 5) -> list[dict]:
    """RL examples: prompt = the Solver prompt, completion = the clean answer, world = everything the roles and the
    oracle need. Splits draw disjoint streams of worlds. The world options: make_world's."""
    check_split("march/numfacts", split, ("train", "test"))
    options = _world_options(min_docs, max_docs, min_asked, max_asked, derived, name_first, max_value, n_attributes)
    out = []
    for i in range(int(n)):
        world = make_world(_rng(seed, split, i), **options)
        answer = solver_answer(world)
        out.append({"prompt": solver_prompt(world), "completion": answer, "answer": answer.strip(),
                    "task": "march/numfacts", "world": world})
    return out


def corrupt(world: dict, rng) -> dict[str, int]:
    """The asked values with one replaced by a confuser document's value for that attribute (another town or year)."""
    values = dict(world["truth"])
    attr = str(rng.choice(world["asked"]))
    choices = [v for v in world["confusers"][attr] if v != values[attr]]
    if not choices:   # every confuser shows the true value (few documents, small values): another asked attribute
        others = [a for a in world["asked"] if any(v != values[a] for v in world["confusers"][a])]
        if not others:
            return values
        attr = str(rng.choice(others))
        choices = [v for v in world["confusers"][attr] if v != values[attr]]
    values[attr] = int(rng.choice(choices))
    return values


def _check_trace(example: dict, completion: str) -> bool:
    return completion.strip() == example["completion"].strip()


@register_task("march/traces", _check_trace)
def traces(split: str, n: int, seed: int = 0, error_rate: float = 0.3, symmetric_share: float = 0.5,
           min_docs: int = 4, max_docs: int = 8, derived: bool = True, name_first: bool = False, max_value: int = 2000,
           min_asked: int = 3, max_asked: int = 5, n_attributes: int = 5, roles: str = "solver,proposer,checker"
           ) -> list[dict]:
    """SFT traces of the roles (n in all, Solver/Proposer/Checker in turn, each from its own world): Solver
    targets carry one confuser value with probability error_rate; Proposer traces faithfully extract that answer's
    numbers; Checker traces answer the true values, a share symmetric_share of them in the symmetric-checker format
    (the response shown, the answer still from the documents). roles: the roles taken in turn, comma-separated
    (a probe of the Solver alone: "solver"). The world options: make_world's."""
    check_split("march/traces", split, ("train", "test"))
    turn = tuple(r.strip() for r in str(roles).split(",") if r.strip())
    if not turn or any(r not in ("solver", "proposer", "checker") for r in turn):
        raise ValueError(f"march/traces roles={roles!r}: expected comma-separated names from solver, proposer, checker")
    options = _world_options(min_docs, max_docs, min_asked, max_asked, derived, name_first, max_value, n_attributes)
    out = []
    for i in range(int(n)):
        rng = _rng(seed, split, 10_000_000 + i)
        world = make_world(rng, **options)
        corrupted = rng.random() < float(error_rate)
        answer = solver_answer(world, corrupt(world, rng) if corrupted else None)
        role = turn[i % len(turn)]
        if role == "solver":
            prompt, completion = solver_prompt(world), answer
        elif role == "proposer":
            prompt, completion = proposer_prompt(query_text(world), answer), proposer_target(world, answer)
        else:
            items = [name for name, _ in answer_items(answer)]
            questions = [question_for(world["town"], world["year"], name) for name in items]
            shown = answer if rng.random() < float(symmetric_share) else None
            prompt, completion = checker_prompt(docs_block(world), questions, shown), checker_target(world, items)
        out.append({"prompt": prompt, "completion": completion, "answer": completion.strip(), "task": "march/traces",
                    "role": role, "corrupted": bool(corrupted and role == "solver")})
    return out

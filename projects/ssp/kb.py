"""The synthetic knowledge base of ssp.md D.1: invented entities, functional relations, one document per entity,
questions as relation paths with oracle answer sets, the answer pool D and the held-out evaluation QA.

Text is word-level: every token is separated by one space (names are single capitalised words, punctuation is
its own token), so the project's word tokenizer round-trips it and the parsers below read it back exactly.

A question is "what is NP ?" where NP nests right-branching phrases around one named entity, e.g.
    what is the birthplace of the founder of Brisalo ?        = born_in(founded_by(Brisalo))
    what is the person born in Oskaru ?                       = born_in^-1(Oskaru)   (possibly several people)
Each phrase applies one relation forward ("the founder of X": the one value of a functional relation) or inverse
("the company founded by X": every subject whose value is in X). Its answer set is computed over the KB, so every
question, the policy's own included, has an oracle validity label: valid iff the answer set is exactly {a*}.
"""
from __future__ import annotations

import dataclasses
import random
import re
from typing import Sequence

TYPES = {"person": 1200, "company": 700, "town": 700, "river": 200, "region": 200}  # 3,000 entities


@dataclasses.dataclass(frozen=True)
class Relation:
    name: str
    domain: str
    range: str
    fact: str       # document sentence: "{s} <fact> {o} ."
    forward: str    # noun phrase "the <forward> X" = the value of X
    inverse: str    # noun phrase "the <inverse> X" = the subjects whose value is X


RELATIONS = [
    Relation("born_in", "person", "town", "was born in", "birthplace of", "person born in"),
    Relation("works_at", "person", "company", "works at", "employer of", "person working at"),
    Relation("mentor", "person", "person", "was trained by", "mentor of", "student of"),
    Relation("founded_by", "company", "person", "was founded by", "founder of", "company founded by"),
    Relation("based_in", "company", "town", "is based in", "home town of", "company based in"),
    Relation("located_in", "town", "region", "lies in", "region of", "town in"),
    Relation("mayor", "town", "person", "is governed by", "mayor of", "town governed by"),
    Relation("on_river", "town", "river", "stands on", "river of", "town on"),
    Relation("rises_in", "river", "region", "rises in", "source region of", "river rising in"),
    Relation("capital", "region", "town", "has its capital at", "capital of", "region with capital"),
]
REL = {r.name: r for r in RELATIONS}
# a literal fact in company documents: search noise that is never a hop
YEAR_FACT = "was founded in year"

SYLLABLES = ("ba be bi bo bu da de di do du fa fe fi fo ka ke ki ko ku la le li lo lu ma me mi mo mu na ne ni no "
             "nu pa pe pi po ra re ri ro ru sa se si so su ta te ti to tu va ve vi vo za ze zi zo").split()
CODAS = ("", "", "", "n", "r", "l", "s", "m", "th", "k")


@dataclasses.dataclass(frozen=True)
class Hop:
    relation: str
    inverse: bool


@dataclasses.dataclass(frozen=True)
class Path:
    """A question's structure: start entity, then hops applied innermost first."""
    start: str
    hops: tuple[Hop, ...]


class KB:
    """Entities (name -> type), the functional relations (facts[rel][subject] = object), one document per entity.

    Built deterministically from `seed`; `sizes` overrides TYPES (tests use a small KB).
    """

    def __init__(self, seed: int = 0, sizes: dict[str, int] | None = None, incoming_facts: int = 2):
        rng = random.Random(seed)
        sizes = dict(TYPES if sizes is None else sizes)
        self.entity_type: dict[str, str] = {}
        self.by_type: dict[str, list[str]] = {}
        taken: set[str] = set()
        for t, n in sizes.items():
            names = []
            while len(names) < n:
                name = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3))) + rng.choice(CODAS)
                name = name.capitalize()
                if name not in taken:
                    taken.add(name)
                    names.append(name)
            self.by_type[t] = names
            self.entity_type.update((x, t) for x in names)
        self.facts: dict[str, dict[str, str]] = {r.name: {} for r in RELATIONS}
        for r in RELATIONS:
            for s in self.by_type[r.domain]:
                if r.name == "capital":
                    continue
                choices = self.by_type[r.range]
                o = rng.choice(choices)
                while o == s:  # no one is their own mentor
                    o = rng.choice(choices)
                self.facts[r.name][s] = o
        for region in self.by_type["region"]:  # a region's capital lies in it, when it has a town
            towns = [t for t in self.by_type["town"] if self.facts["located_in"][t] == region]
            self.facts["capital"][region] = rng.choice(towns) if towns else rng.choice(self.by_type["town"])
        self.year = {c: rng.randint(1700, 1999) for c in self.by_type["company"]}
        self.inverse_facts: dict[str, dict[str, list[str]]] = {r.name: {} for r in RELATIONS}
        for rel, table in self.facts.items():
            for s, o in table.items():
                self.inverse_facts[rel].setdefault(o, []).append(s)
        self.names = [x for t in sizes for x in self.by_type[t]]
        self.doc_id = {x: i for i, x in enumerate(self.names)}
        self.docs = [self._document(x, rng, incoming_facts) for x in self.names]

    def _document(self, x: str, rng: random.Random, incoming_facts: int) -> str:
        t = self.entity_type[x]
        sentences = [f"{x} is a {t} ."]
        for r in RELATIONS:
            if r.domain == t:
                sentences.append(f"{x} {r.fact} {self.facts[r.name][x]} .")
        if t == "company":
            sentences.append(f"{x} {YEAR_FACT} {self.year[x]} .")
        incoming = [(r, s) for r in RELATIONS for s in self.inverse_facts[r.name].get(x, [])]
        n_in = max(incoming_facts, 3 - (len(sentences) - 1))  # at least 3 relation facts where the KB has them
        for r, s in rng.sample(incoming, min(n_in, len(incoming))):
            sentences.append(f"{s} {r.fact} {x} .")
        return " ".join(sentences)

    def apply(self, entities: set[str], hop: Hop) -> set[str]:
        if hop.inverse:
            return {s for o in entities for s in self.inverse_facts[hop.relation].get(o, [])}
        return {self.facts[hop.relation][e] for e in entities if e in self.facts[hop.relation]}

    def answers(self, path: Path) -> set[str]:
        """The oracle answer set of a question's path over the whole KB."""
        current = {path.start} if path.start in self.entity_type else set()
        for hop in path.hops:
            current = self.apply(current, hop)
        return current

    def is_valid(self, path: Path | None, answer: str) -> bool:
        """Oracle validity label: the path parses and its answer set is exactly {answer}."""
        return path is not None and self.answers(path) == {answer}


# ---------------------------------------------------------------------------------------------- verbalisation

def noun_phrase(path: Path) -> str:
    np_ = path.start
    for hop in path.hops:
        r = REL[hop.relation]
        np_ = f"the {r.inverse if hop.inverse else r.forward} {np_}"
    return np_


def verbalise(path: Path) -> str:
    return f"what is {noun_phrase(path)} ?"


# phrase token tuples -> hop, longest first so that no phrase shadows a longer one
_PHRASES = sorted(((tuple(("the " + (r.inverse if inv else r.forward)).split()), Hop(r.name, inv))
                   for r in RELATIONS for inv in (False, True)), key=lambda p: -len(p[0]))
_NAME = re.compile(r"^[A-Z][a-z]+$")


def parse_question(text: str) -> Path | None:
    """The path of a question in the template language ("what is NP ?"), or None if it is not one."""
    toks = text.split()
    if len(toks) < 4 or toks[:2] != ["what", "is"] or toks[-1] != "?":
        return None
    toks, hops = toks[2:-1], []
    while len(toks) > 1:
        for phrase, hop in _PHRASES:
            if tuple(toks[:len(phrase)]) == phrase:
                hops.append(hop)
                toks = toks[len(phrase):]
                break
        else:
            return None
    if len(toks) != 1 or not _NAME.match(toks[0]):
        return None
    return Path(toks[0], tuple(reversed(hops)))


# ---------------------------------------------------------------------------------------------- facts in text

_FACT_PHRASES = sorted([(tuple(r.fact.split()), r.name) for r in RELATIONS], key=lambda p: -len(p[0]))


def facts_in_text(text: str) -> list[tuple[str, str, str]]:
    """(subject, relation, object) of every templated fact sentence in `text` (documents, information blocks)."""
    out = []
    for sentence in re.split(r"\s\.(?:\s|$)", text):
        toks = sentence.split()
        if toks and toks[0] in ("doc", "<information>"):  # strip the tool's framing before a sentence
            while toks and not _NAME.match(toks[0]):
                toks = toks[1:]
        if len(toks) < 3 or not _NAME.match(toks[0]) or not _NAME.match(toks[-1]):
            continue
        middle = tuple(toks[1:-1])
        for phrase, rel in _FACT_PHRASES:
            if middle == phrase:
                out.append((toks[0], rel, toks[-1]))
                break
    return out


# ---------------------------------------------------------------------------------------------- sampling paths

def sample_path(kb: KB, answer: str, hops: int, rng: random.Random, inverse_prob: float = 0.5,
                require_unique: bool = True, tries: int = 50) -> Path | None:
    """A path of `hops` hops whose answer is `answer`, built backwards from it: each step picks a fact that names
    the current entity (as object: a forward hop; as subject: an inverse hop). With require_unique only paths
    whose answer set is exactly {answer} are returned (None after `tries` failures)."""
    for _ in range(tries):
        current, hops_rev, visited = answer, [], {answer}
        for _ in range(hops):
            # never back to an entity of the chain: "the employer of the person working at X" is X itself
            forward = [(r, s) for r in RELATIONS for s in kb.inverse_facts[r.name].get(current, []) if s not in visited]
            inverse = [(r, kb.facts[r.name][current]) for r in RELATIONS
                       if current in kb.facts[r.name] and kb.facts[r.name][current] not in visited]
            pool = inverse if (inverse and (rng.random() < inverse_prob or not forward)) else forward
            if not pool:
                break
            r, nxt = rng.choice(pool)
            hops_rev.append(Hop(r.name, pool is inverse))
            current = nxt
            visited.add(nxt)
        else:
            path = Path(current, tuple(reversed(hops_rev)))
            if not require_unique or kb.answers(path) == {answer}:
                return path
    return None


def split_answers(kb: KB, pool_size: int = 2000, seed: int = 0) -> tuple[list[str], list[str]]:
    """(answer pool D, held-out answers): a seeded split of the entities; evaluation answers are never in D."""
    names = list(kb.names)
    random.Random(seed + 1).shuffle(names)
    pool_size = min(pool_size, len(names) - 1)
    return sorted(names[:pool_size]), sorted(names[pool_size:])


def eval_questions(kb: KB, answers: Sequence[str], hops: int, n: int, seed: int = 0) -> list[dict]:
    """n held-out QA pairs of `hops` hops with unique answers from `answers` (labels for evaluation only)."""
    rng = random.Random(seed * 1000 + hops)
    out, seen, attempts = [], set(), 0
    while len(out) < n and attempts < 50 * n:
        attempts += 1
        a = rng.choice(answers)
        path = sample_path(kb, a, hops, rng)
        if path is None or path in seen:
            continue
        seen.add(path)
        out.append({"question": verbalise(path), "answer": a, "hops": hops})
    return out

"""The synthetic KB: facts, documents, question verbalisation/parsing and the oracle validity labels on hand-built
cases, the answer-pool/evaluation split, and the word tokenizer."""
import random

import pytest

from projects.ssp import kb as K
from projects.ssp.prompts import WordTokenizer

SMALL = {"person": 40, "company": 20, "town": 20, "river": 8, "region": 6}


@pytest.fixture(scope="module")
def kb():
    return K.KB(3, SMALL)


def test_functional_relations_and_documents(kb):
    assert len(kb.names) == sum(SMALL.values()) == len(set(kb.names)) == len(kb.docs)
    for r in K.RELATIONS:
        table = kb.facts[r.name]
        assert sorted(table) == sorted(kb.by_type[r.domain])                   # every subject has exactly one value
        assert all(kb.entity_type[o] == r.range for o in table.values())
    for region, town in kb.facts["capital"].items():                          # a capital lies in its region
        if any(kb.facts["located_in"][t] == region for t in kb.by_type["town"]):
            assert kb.facts["located_in"][town] == region
    for x, doc in zip(kb.names, kb.docs):
        facts = K.facts_in_text(doc)
        own = {(s, rel, o) for s, rel, o in facts if s == x}
        expect = {(x, r.name, kb.facts[r.name][x]) for r in K.RELATIONS if x in kb.facts[r.name]}
        assert own == expect                                                  # all its outgoing facts, no other
        assert all(kb.facts[rel][s] == o for s, rel, o in facts)               # every stated fact is true
        incoming = sum(len(kb.inverse_facts[r.name].get(x, [])) for r in K.RELATIONS)
        assert min(3, len(own) + incoming) <= len(facts) <= 6                 # 3-6 relation facts where they exist


def test_oracle_labels_on_hand_built_kb():
    kb = K.KB(0, {"person": 3, "company": 1, "town": 2, "river": 1, "region": 1})
    p0, p1, p2 = kb.by_type["person"]
    t0, t1 = kb.by_type["town"]
    c0 = kb.by_type["company"][0]
    # overwrite the random facts with a hand-built world
    kb.facts["born_in"] = {p0: t0, p1: t0, p2: t1}
    kb.facts["founded_by"] = {c0: p2}
    kb.inverse_facts = {r.name: {} for r in K.RELATIONS}
    for rel, table in kb.facts.items():
        for s, o in table.items():
            kb.inverse_facts[rel].setdefault(o, []).append(s)
    fwd = K.Path(c0, (K.Hop("founded_by", False), K.Hop("born_in", False)))   # birthplace of the founder of c0
    assert K.verbalise(fwd) == f"what is the birthplace of the founder of {c0} ?"
    assert K.parse_question(K.verbalise(fwd)) == fwd
    assert kb.answers(fwd) == {t1} and kb.is_valid(fwd, t1) and not kb.is_valid(fwd, t0)
    unique_inverse = K.Path(t1, (K.Hop("born_in", True),))                 # the person born in t1: only p2
    assert kb.answers(unique_inverse) == {p2} and kb.is_valid(unique_inverse, p2)
    shared = K.Path(t0, (K.Hop("born_in", True),))                         # the person born in t0: p0 AND p1
    assert kb.answers(shared) == {p0, p1}
    assert not kb.is_valid(shared, p0) and not kb.is_valid(shared, p1)    # non-unique: invalid for either
    mismatch = K.Path(t0, (K.Hop("founded_by", False),))                   # a town has no founder: empty set
    assert kb.answers(mismatch) == set() and not kb.is_valid(mismatch, p2)
    assert not kb.is_valid(None, p0)


@pytest.mark.parametrize("text", ["what is the founder ?", "who is the founder of Bako ?", "what is the of Bako ?",
                                  "what is the founder of bako ?", "what is the founder of Bako Lim ?", ""])
def test_parse_rejects_non_template_questions(text):
    assert K.parse_question(text) is None


def test_sampled_paths_and_eval_split(kb):
    rng = random.Random(0)
    pool, held = K.split_answers(kb, pool_size=60, seed=0)
    assert len(pool) == 60 and not set(pool) & set(held) and set(pool) | set(held) == set(kb.names)
    for h in (1, 2, 3):
        qs = K.eval_questions(kb, held, h, 20, seed=1)
        assert qs and all(q["answer"] in held and q["hops"] == h for q in qs)
        for q in qs:
            path = K.parse_question(q["question"])
            assert len(path.hops) == h and kb.answers(path) == {q["answer"]} and path.start != q["answer"]
    path = K.sample_path(kb, pool[0], 2, rng, require_unique=False)
    assert path is None or len(path.hops) == 2


def test_word_tokenizer_roundtrip(kb):
    tok = WordTokenizer(kb)
    text = kb.docs[0] + " <search> " + kb.names[5] + " </search> doc 12 :"
    ids = tok.encode(text)
    assert tok.unk_id not in ids and tok.decode(ids) == text
    assert tok.decode(tok.encode("blorp")) == "<unk>"

"""shared.agent.search: BM25 scores against a numpy computation of the formula, deterministic tie-breaking,
batching, the on-disk cache, and the <search> tool's parse/format."""
import math
import os

import numpy as np
import pytest

from shared.agent.search import BM25Index, SearchEnvironment, SearchTool, format_information, parse_search, words

DOCS = [
    "Brisal Corp was founded by Tamu Velor .",       # 0
    "Tamu Velor was born in Oskaru .",               # 1
    "Oskaru is a town on the river Pheni .",         # 2
    "the river Pheni flows through Oskaru and Dun",  # 3
    "Dun is a town .",                               # 4
    "Dun is a town .",                               # 5: same text as 4, so always tied with it
]


def numpy_bm25(docs, query, k1=1.2, b=0.75):
    toks = [words(d) for d in docs]
    n, avgdl = len(toks), sum(map(len, toks)) / len(toks)
    out = np.zeros(n)
    for w in set(words(query)):
        df = sum(w in t for t in toks)
        if df == 0:
            continue
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        for i, t in enumerate(toks):
            tf = t.count(w)
            out[i] += idf * tf / (tf + k1 * (1 - b + b * len(t) / avgdl))
    return out


@pytest.fixture(scope="module")
def index():
    return BM25Index(DOCS)


@pytest.mark.parametrize("query", ["Oskaru", "river Pheni Oskaru", "who founded Brisal Corp", "town town Dun",
                                   "unknownword"])
def test_scores_match_numpy_formula(index, query):
    np.testing.assert_allclose(index.scores(query), numpy_bm25(DOCS, query), rtol=1e-5, atol=1e-7)


def test_top_k_order_and_ties(index):
    ref = numpy_bm25(DOCS, "Oskaru town")
    hits = index.search(["Oskaru town"], k=6)[0]
    expect = sorted((i for i in range(len(DOCS)) if ref[i] > 0), key=lambda i: (-ref[i], i))
    assert [h.doc_id for h in hits] == expect
    np.testing.assert_allclose([h.score for h in hits], ref[expect], rtol=1e-5)
    # docs 4 and 5 tie exactly; the lower id comes first, and k=1 on "dun is" keeps the tie-break
    dun = index.search(["Dun is"], k=2)[0]
    assert index.scores("Dun is")[4] == index.scores("Dun is")[5]
    assert [h.doc_id for h in index.search(["a town"], k=1)[0]] == [4]
    assert dun[0].score >= dun[1].score
    assert index.search(["unknownword"], k=3) == [[]]          # nothing shares a word: no hits


def test_batched_equals_one_by_one_and_is_deterministic(index):
    qs = ["Oskaru", "Tamu Velor born", "Dun", "river", "zzz", "Brisal Corp founded"]
    batched = index.search(qs, k=3)
    assert batched == [index.search([q], k=3)[0] for q in qs]
    again = BM25Index(DOCS).search(qs, k=3)
    assert again == batched


def test_cache_roundtrip(tmp_path):
    a = BM25Index(DOCS, cache_dir=str(tmp_path))
    assert not a.loaded_from_cache and os.path.isdir(tmp_path / f"bm25_{a.key}")
    b = BM25Index(DOCS, cache_dir=str(tmp_path))
    assert b.loaded_from_cache
    np.testing.assert_array_equal(a.scores("river Oskaru"), b.scores("river Oskaru"))
    c = BM25Index(DOCS[:-1], cache_dir=str(tmp_path))      # another corpus: another key, built afresh
    assert not c.loaded_from_cache and c.key != a.key


def test_tool_parse_and_format(index):
    assert parse_search("I think <search> born in Oskaru </search>") == "born in Oskaru"
    assert parse_search("<search>a</search> then <search>b</search>") == "b"
    assert parse_search("<answer> Dun </answer>") is None
    assert parse_search("<search> unterminated") is None
    tool = SearchTool(index, k=3)
    out = tool.step(["<search>Tamu Velor</search>", "<answer>x</answer>", "<search>zzz</search>"])
    assert out[1] is None
    assert out[2] == "<information> no results </information>"
    hits = index.search(["Tamu Velor"], k=3)[0]
    assert [h.doc_id for h in hits] == [1, 0]                 # doc 1 is shorter: higher BM25
    assert out[0] == format_information(hits) == (
        f"<information> doc 1 : {DOCS[1]} doc 2 : {DOCS[0]} </information>")


def test_search_environment(index):
    env = SearchEnvironment(SearchTool(index, k=1), "solve : who founded Brisal Corp ?")
    assert env.reset({"any": "example"}) == "solve : who founded Brisal Corp ?"
    assert env.stop_strings == ("</search>",)
    assert env.step(" <search> Brisal Corp </search>") == f"<information> doc 1 : {DOCS[0]} </information>"
    assert env.step(" <answer> Tamu Velor </answer>") is None          # not a search: the episode ends

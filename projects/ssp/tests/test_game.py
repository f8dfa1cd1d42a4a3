"""The game's rules on hand-made trajectories: rule filters case by case, the RAG check with the oracle reader
(distractors that expose a non-unique question), rewards, the replay buffer's reset, and the SFT traces."""
import random

import pytest

from projects.ssp import game as G
from projects.ssp import kb as K
from projects.ssp import traces as T

Q = "what is the birthplace of the founder of Bako ?"            # 10 words


def traj(question=Q, queries=("Tilo", "Bako"), info=True):
    turns = "".join(f" <search> {q} </search>" + (" <information> doc 1 : x . </information>" if info else "")
                    for q in queries)
    return f"{turns} <question> {question} </question>" if question is not None else turns


@pytest.mark.parametrize("trajectory,answer,reason", [
    (traj(), "Tilo", "ok"),
    (traj(question=None), "Tilo", "no_question"),
    (traj(question="what is ?"), "Tilo", "length"),                              # < 10 characters
    (traj(question="what is the mentor ?"), "Tilo", "length"),                  # 5 words < 7
    (traj(question="what is " + "the mentor of " * 80 + "Bako ?"), "Tilo", "length"),   # > 1000 characters
    (traj(), "bako", "answer_in_question"),                                     # case-insensitive
    (traj(info=False), "Tilo", "no_information"),
    (traj(queries=("Tilo",)), "Tilo", "few_searches"),
    (traj(queries=("Tilo", "Bako", "Tilo")), "Tilo", "repeated_query"),
])
def test_rule_filters(trajectory, answer, reason):
    q, got = G.rule_check(trajectory, answer)
    assert got == reason
    if reason != "no_question":
        assert q is not None


def test_first_question_is_used():
    t = traj() + " <question> what is the mentor of Tilo in the town of Zed ? </question>"
    assert G.rule_check(t, "Tilo")[0] == Q


def _world():
    kb = K.KB(0, {"person": 3, "company": 1, "town": 2, "river": 1, "region": 1})
    p0, p1, p2 = kb.by_type["person"]
    t0, t1 = kb.by_type["town"]
    c0 = kb.by_type["company"][0]
    docs = {"p0": f"{p0} was born in {t0} .", "p1": f"{p1} was born in {t0} .", "p2": f"{p2} was born in {t1} .",
            "c0": f"{c0} was founded by {p2} ."}
    return (p0, p1, p2, t0, t1, c0), docs


def test_oracle_reader_and_rag_check():
    (p0, p1, p2, t0, t1, c0), d = _world()
    reader = G.OracleReader()
    assert reader.read(f"what is the birthplace of the founder of {c0} ?", [d["p0"], d["c0"], d["p2"]]) == t1
    assert reader.read(f"what is the birthplace of the founder of {c0} ?", [d["c0"]]) is None   # evidence missing
    assert reader.read("not a question", [d["c0"]]) is None
    # "the person born in t0" is non-unique (p0, p1): with only the proposer's own document the reader answers p0;
    # with the other trajectory's document as a distractor placed first it answers p1 and the check rejects it.
    q = f"what is the person born in {t0} ?"
    assert reader.read(q, [d["p0"]]) == p0
    assert reader.read(q, [d["p1"], d["p0"]]) == p1

    def proposer(docs, question):
        info = "".join(f" <search> {k} </search> <information> doc 1 : {x} </information>" for k, x in docs)
        return f"{info} <question> {question} </question>"

    batch = [proposer([("a", d["p0"]), ("b", d["c0"])], q),                                   # non-unique
             proposer([("c", d["c0"]), ("d", d["p2"])], f"what is the birthplace of the founder of {c0} ?"),
             proposer([("e", d["p1"]), ("f", d["p2"])], f"what is the person born in {t1} ?")]
    answers = [p0, t1, p2]
    rules = G.Rules(min_words=7)
    no_distractors = G.validate_batch(batch, answers, reader, rules=rules, n_distractors=0, rng=random.Random(0))
    assert [o["valid"] for o in no_distractors] == [True, True, True]   # the reader only sees the proposer's docs
    # with every other document as a distractor, over seeds the non-unique question is caught at least once and
    # the two unique ones never are
    caught = set()
    for seed in range(8):
        out = G.validate_batch(batch, answers, reader, rules=rules, n_distractors=4, rng=random.Random(seed))
        assert out[1]["valid"] and out[2]["valid"]
        if not out[0]["valid"]:
            assert out[0]["reason"] == "rag" and out[0]["reader_answer"] == p1
            caught.add(seed)
    assert caught
    no_rag = G.validate_batch(batch, answers, None, rules=rules, rng=random.Random(0))
    assert all(o["valid"] and o["reader_answer"] is None for o in no_rag)


def test_rag_materials_draw_distinct_foreign_docs():
    rng = random.Random(0)
    m = G.rag_materials(["a", "b", "a"], [["b", "c"], ["d"], ["e", "f"]], 2, rng)
    assert sorted(m)[:2] == ["a", "b"] and len(m) == 4 and len(set(m)) == 4
    assert set(m) - {"a", "b"} <= {"c", "d", "e", "f"}
    assert sorted(G.rag_materials(["a"], [["b"]], 4, rng)) == ["a", "b"]     # fewer foreign docs than asked


def test_solver_reward():
    assert G.solver_reward(" <search> x </search> <answer> The Oskaru. </answer>", "oskaru") == 1.0
    assert G.solver_reward(" <answer> Dun </answer> <answer> Oskaru </answer>", "Oskaru") == 1.0   # the last one
    assert G.solver_reward(" <answer> Oskaru </answer> <answer> Dun </answer>", "Oskaru") == 0.0
    assert G.solver_reward(" Oskaru", "Oskaru") == 0.0                                            # no tag
    spam = " <answer> x </answer>" * 11 + " <answer> Oskaru </answer>"                          # 12 pairs > 10
    assert G.solver_reward(spam, "Oskaru") == 0.25
    assert G.solver_reward(" <answer> x </answer>" * 9 + " <answer> Oskaru </answer>", "Oskaru") == 1.0  # 10 ok


def test_proposer_reward():
    assert G.proposer_reward(True, 0.4) == pytest.approx(0.6)
    assert G.proposer_reward(True, 1.0) == 0.0 and G.proposer_reward(True, 0.0) == 1.0
    assert G.proposer_reward(False, 0.0) == 0.0
    assert G.proposer_reward(False, 0.0, invalid_reward=-0.1) == -0.1
    assert G.proposer_reward(True, 0.4, kind="intermediate") == pytest.approx(4 * 0.4 * 0.6)
    assert G.proposer_reward(True, 1.0, kind="intermediate") == 0.0
    with pytest.raises(ValueError, match="unknown kind"):
        G.proposer_reward(True, 0.5, kind="nope")


def test_replay_buffer_reset_and_fill():
    buf = G.ReplayBuffer(reset_every=3)
    rng = random.Random(0)
    assert buf.sample(2, rng) == []
    buf.add([{"question": f"q{i}", "answer": "a", "success": 0.2 * i} for i in range(4)])
    assert len(buf) == 4
    assert {x["question"] for x in buf.sample(4, rng)} == {"q0", "q1", "q2", "q3"}   # without replacement
    assert len(buf.sample(6, rng)) == 6
    buf.end_step(1)
    buf.end_step(2)
    assert len(buf) == 4
    buf.end_step(3)                                                                 # step 3: cleared
    assert len(buf) == 0
    keep_hard = G.ReplayBuffer(reset_every=0, max_success=0.5)
    keep_hard.add([{"question": "easy", "answer": "a", "success": 1.0}, {"question": "hard", "answer": "a", "success": 0.4}])
    keep_hard.end_step(10)                                                          # reset_every=0: never cleared
    assert [x["question"] for x in keep_hard.items] == ["hard"]


@pytest.fixture(scope="module")
def env():
    return T.Environment(kb_seed=1, sizes=tuple({"person": 60, "company": 30, "town": 30, "river": 10,
                                                 "region": 8}.items()), pool_size=80)


def test_traces_follow_the_game(env):
    examples = T.sft_examples(env, 60, seed=0, noise=0.3)
    roles = {e["role"] for e in examples}
    assert roles == {"proposer", "solver", "reader"} and len(examples) == 60
    for e in examples:
        assert e["answer"] in env.pool
        if e["role"] == "proposer":
            q, reason = G.rule_check(e["completion"], e["answer"])
            assert reason == "ok"                                  # passes every rule filter
            assert env.kb.is_valid(K.parse_question(q), e["answer"])  # and is oracle-valid
            materials = __import__("projects.ssp.prompts", fromlist=["documents"]).documents(e["completion"])
            assert G.OracleReader.read(q, materials) == e["answer"]   # its own evidence answers it
        elif e["role"] == "solver":
            assert G.solver_reward(e["completion"], e["answer"]) == 1.0
        else:
            assert e["completion"] == f" <answer> {e['answer']} </answer>"


def test_traces_mark_the_tool_replies_as_context(env):
    """Every <information> block of a trace (the search tool's reply, with its joining space) is a context span,
    and the SFT rows learn exactly the rest: the policy's searches and its final question/answer."""
    from projects.ssp.prompts import search_queries
    from shared.data import ByteTokenizer
    from shared.train.sft import build_rows

    examples = T.sft_examples(env, 30, seed=1, noise=0.3)
    searching = [e for e in examples if e["role"] != "reader"]
    assert searching and all(e["context_spans"] == [] for e in examples if e["role"] == "reader")
    for e in searching:
        text, spans = e["completion"], e["context_spans"]
        replies = [text[a:b] for a, b in spans]
        assert replies == [" " + env.search(q) for q in search_queries(text)]    # one per search, in order
        policy = "".join(text[b:a] for b, a in zip([0] + [b for _, b in spans], [a for a, _ in spans] + [len(text)]))
        assert "information>" not in policy and policy.count("</search>") == len(spans)
        tok = ByteTokenizer()
        rows, stats = build_rows(tok, [e], 4096)
        assert stats["examples"] == 1
        learned = rows["targets"][0][(rows["loss_mask"][0] * (1 - rows["prompt_mask"][0])) > 0]
        assert tok.decode(learned[:-1]) == policy and learned[-1] == tok.eos_id

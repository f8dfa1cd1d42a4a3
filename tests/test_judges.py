"""shared.judges' generative interface: the parsers (JSON, score split, A/B tags) on good and malformed replies and
random text, the malformed policy, the mock and oracle backends, SwapJudge (swaps undone, disagreements counted),
Voting@n, the OpenAI-compatible HTTP backend against a local stub server (retries, Retry-After, timeouts,
concurrency limit, call accounting), the sampler backend against a direct Sampler.generate, and the reward
model/pairwise_judge's judge_pairs with its judge/* metrics."""
import random
import time

import numpy as np
import pytest

import shared.judges  # noqa: F401  (registers model/pairwise_judge)
from shared.judges import (ChatClient, HTTPJudge, JudgeError, MockJudge, OracleJudge, SwapJudge, Verdict,
                           VotingJudge, parse_judgment, parse_json_verdict, parse_score_split, parse_tags, wrap)
from http_stub import chat_reply, serve
from shared.registry import REWARDS
from shared.rewards import RewardManager

# ---------------------------------------------------------------- parsers


@pytest.mark.parametrize("text, scores", [
    ("Principles: ...\nCritique: ...\nScore A: 7, Score B: 3", (7.0, 3.0)),
    ("**Score (A)**: 6.5/10\n**Score (B)**: 3.5/10", (6.5, 3.5)),
    ("Response A score: 2; Response B score = 8", (2.0, 8.0)),
    ("score a: 5, score b: 5", (5.0, 5.0)),
    ("Response 1: 4 points. Response 2: 6 points.", (4.0, 6.0)),
    ("In the critique I said Score A: 9 ... but overall Score A: 4, Score B: 6", (4.0, 6.0)),  # the last counts
    ("Final scores: 8, 2", (8.0, 2.0)),
    ("[[3, 7]]", (3.0, 7.0)),
    ("Score A: 7", None),                       # B missing
    ("Response A is detailed. Response B is short.", None),
    ("", None),
])
def test_score_split(text, scores):
    assert parse_score_split(text) == scores


def test_score_split_total_and_verdict_fields():
    assert parse_score_split("Score A: 7, Score B: 3", total=10) == (7.0, 3.0)
    assert parse_score_split("Score A: 7, Score B: 4", total=10) is None  # not a split of 10: malformed
    v = parse_judgment("Principles: be brief.\nCritique: A is brief.\nScore A: 8, Score B: 2")
    assert (v.pref, v.scores, v.malformed) == (1, (8.0, 2.0), False)
    assert v.critique == "Principles: be brief.\nCritique: A is brief." and v.raw.endswith("Score B: 2")
    assert parse_judgment("Score A: 5, Score B: 5").pref == 0


@pytest.mark.parametrize("text, pref, scores", [
    ('{"winner": "B", "critique": "B follows the format"}', -1, None),
    ('Here you go:\n```json\n{"score_a": 9, "score_b": 1}\n```', 1, (9.0, 1.0)),
    ('{"scores": {"A": 4, "B": 6}, "reasoning": "..."}', -1, (4.0, 6.0)),
    ('{"scores": [5, 5]}', 0, (5.0, 5.0)),
    ('{"preference": 1}', 1, None),
    ('{"winner": "Response A", "scores": {"A": 2, "B": 8}}', 1, (2.0, 8.0)),  # an explicit winner wins
    ('{"a": 1} then {"verdict": "tie"}', 0, None),                          # the last object with a verdict
    ('{"winner": "B", "score_a": "7/10", "score_b": "3/10"}', -1, (7.0, 3.0)),
])
def test_json_verdicts(text, pref, scores):
    v = parse_json_verdict(text)
    assert (v.pref, v.scores) == (pref, scores)


@pytest.mark.parametrize("text, pref", [
    ("<verdict>B</verdict>", -1), ("reasoning...\n\\boxed{A}", 1), ("[[tie]]", 0), ("Verdict: Response B", -1),
    ("A", 1), ("<answer> Response A </answer>", 1), ("Final answer: B", -1), ("(B).", -1),
    ("Critique: A is long. **Verdict**: [[B]]", -1),
])
def test_tag_verdicts(text, pref):
    assert parse_tags(text).pref == pref


@pytest.mark.parametrize("text", [
    "", "   ", "I cannot decide.", '{"winner": "C"}', '{"winner": ', "Score A: seven, Score B: three", "{{{{",
    '```json\n{"score_a": 7, \n```', "Response A: fine.", "Response B is long but response A", '{"scores": [1, 2, 3]}', "\x00\xff" * 50, "[[A, B]]",
])
def test_malformed_replies_are_none(text):
    assert parse_judgment(text) is None


def test_parsers_never_raise_on_random_text():
    rng = random.Random(0)
    alphabet = 'AB{}[]":,0123456789 \n<>/\\-.scoreSCOREwinnerverdict'
    for _ in range(400):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80)))
        v = parse_judgment(text)
        assert v is None or v.pref in (-1, 0, 1)


def test_malformed_policy_tie_counts_raise_raises():
    judge = MockJudge(replies=["no idea", "Score A: 3, Score B: 7", '{"winner": "A"}'])
    out = judge.compare(["q"] * 3, ["x"] * 3, ["y"] * 3)
    assert [(v.pref, v.malformed) for v in out] == [(0, True), (-1, False), (1, False)]
    assert out[0].p_first == 0.5 and judge.cost()["malformed"] == 1 and judge.cost()["pairs"] == 3
    strict = MockJudge(replies=["no idea"], on_malformed="raise")
    with pytest.raises(JudgeError, match="no judgment format"):
        strict.compare(["q"], ["x"], ["y"])
    with pytest.raises(ValueError, match="on_malformed"):
        MockJudge(on_malformed="skip")
    only_tags = MockJudge(replies=["Score A: 7, Score B: 3"], parser="tags")  # a format not asked for: malformed
    assert only_tags.compare(["q"], ["x"], ["y"])[0].malformed


# ---------------------------------------------------------------- mock, oracle, swap, voting


def test_mock_rules_go_through_the_parser():
    judge = MockJudge(prefer="longer")
    out = judge.compare(["q"] * 3, ["long answer", "s", "same"], ["short", "longer", "same"])
    assert [v.pref for v in out] == [1, -1, 0]
    assert out[0].scores == (7.0, 3.0) and "Score A: 7" in out[0].raw


def test_oracle_sign_margin_noise_and_columns():
    def quality(prompts, completions, answer):
        return [float(c.count(a)) for c, a in zip(completions, answer)]

    judge = OracleJudge(quality)
    out = judge.compare(["q"] * 3, ["xx", "x", "x"], ["x", "xx", "y"], columns={"answer": ["x", "x", "x"]})
    assert [v.pref for v in out] == [1, -1, 1] and out[0].scores == (2.0, 1.0)
    assert [v.pref for v in OracleJudge(quality, margin=1.0).compare(
        ["q"] * 2, ["xxx", "xx"], ["x", "x"], columns={"answer": ["x", "x"]})] == [1, 0]
    flipped = OracleJudge(quality, noise=1.0).compare(["q"], ["xx"], ["x"], columns={"answer": ["x"]})
    assert flipped[0].pref == -1
    noisy = OracleJudge(quality, noise=0.3)
    args = (["q"] * 200, ["xx"] * 200, ["x"] * 200)
    a = [v.pref for v in noisy.compare(*args, seed=5, columns={"answer": ["x"] * 200})]
    b = [v.pref for v in noisy.compare(*args, seed=5, columns={"answer": ["x"] * 200})]
    assert a == b and 0.2 < np.mean(np.asarray(a) < 0) < 0.4  # seeded, about 30% flipped
    assert noisy.cost()["flipped"] == 2 * sum(x < 0 for x in a)


def test_swap_random_undoes_every_swap():
    # "first" always prefers whatever is shown first: undone, the verdict says which order the judge saw
    position = SwapJudge(MockJudge(prefer="first"), "random")
    out = position.compare(["q"] * 64, ["a"] * 64, ["b"] * 64, seed=3)
    swapped = np.array([v.swapped for v in out])
    assert 10 < swapped.sum() < 54
    np.testing.assert_array_equal([v.pref for v in out], np.where(swapped, -1, 1))
    assert [v.scores for v in out] == [(3.0, 7.0) if s else (7.0, 3.0) for s in swapped]
    assert position.cost()["swapped"] == swapped.sum() and position.cost()["pairs"] == 64
    again = SwapJudge(MockJudge(prefer="first"), "random").compare(["q"] * 64, ["a"] * 64, ["b"] * 64, seed=3)
    assert [v.swapped for v in again] == swapped.tolist()  # the seed decides the swaps

    # a judge without position bias gives the same verdicts whatever the order shown
    fair = SwapJudge(MockJudge(prefer="longer"), "random")
    a, b = ["aaa", "b", "cc"] * 10, ["a", "bbb", "cc"] * 10
    assert [v.pref for v in fair.compare(["q"] * 30, a, b)] == [1, -1, 0] * 10
    always = SwapJudge(MockJudge(prefer="first"), "always").compare(["q"] * 2, a[:2], b[:2])
    assert all(v.swapped and v.pref == -1 for v in always)


def test_swap_both_orders_combines_and_counts_disagreements():
    biased = SwapJudge(MockJudge(prefer="first"), "both")
    out = biased.compare(["q"] * 4, ["a"] * 4, ["b"] * 4)
    assert all(v.pref == 0 and v.prob == 0.5 and v.scores == (5.0, 5.0) for v in out)
    assert biased.cost()["swap_disagreements"] == 4 and biased.cost()["calls"] == 8
    fair = SwapJudge(MockJudge(prefer="longer"), "both")
    out = fair.compare(["q"] * 2, ["aa", "a"], ["a", "aa"])
    assert [v.pref for v in out] == [1, -1] and [v.prob for v in out] == [1.0, 0.0]
    assert fair.cost().get("swap_disagreements", 0) == 0
    # one order malformed: it abstains, the other decides
    half = SwapJudge(MockJudge(replies=["Score A: 9, Score B: 1", "???"]), "both").compare(["q"], ["x"], ["y"])[0]
    assert (half.pref, half.malformed, half.scores) == (1, False, (9.0, 1.0))


def test_voting_majority_mean_scores_and_abstentions():
    # 2 pairs x 3 votes, asked round by round: replies[r * 2 + i] is vote r of pair i
    replies = ["Score A: 7, Score B: 3", "[[B]]",
               "garbage", "[[B]]",
               "Score A: 6, Score B: 4", "[[A]]"]
    judge = VotingJudge(MockJudge(replies=replies), 3)
    out = judge.compare(["q"] * 2, ["x", "x"], ["y", "y"])
    assert (out[0].pref, out[0].scores, out[0].prob) == (1, (6.5, 3.5), 1.0)
    assert (out[1].pref, out[1].scores) == (-1, None) and out[1].prob == pytest.approx(1 / 3)
    cost = judge.cost()
    assert (cost["pairs"], cost["calls"], cost["malformed"], cost["vote_splits"]) == (2, 6, 1, 1)
    nothing = VotingJudge(MockJudge(replies=["?"]), 3).compare(["q"], ["x"], ["y"])[0]
    assert nothing.malformed and nothing.pref == 0


def test_voting_over_a_noisy_oracle_beats_a_single_vote():
    def quality(prompts, completions, **_):
        return [len(c) for c in completions]

    m = 400
    args = (["q"] * m, ["aa"] * m, ["a"] * m)
    single = np.mean([v.pref == 1 for v in OracleJudge(quality, noise=0.3).compare(*args, seed=1)])
    voted = np.mean([v.pref == 1 for v in VotingJudge(OracleJudge(quality, noise=0.3), 5).compare(*args, seed=1)])
    # P(majority of 5 right) = 0.837 at 70% per vote
    assert 0.62 < single < 0.78 and 0.78 < voted < 0.9 and voted > single
    nested = wrap(MockJudge(prefer="longer"), swap="both", votes=3)
    assert isinstance(nested, VotingJudge) and isinstance(nested.judge, SwapJudge)
    assert [v.pref for v in nested.compare(["q"], ["aa"], ["a"])] == [1] and nested.cost()["calls"] == 6


# ---------------------------------------------------------------- HTTP backend against a stub server


def _by_length(body):
    """Prefers the longer response, after a short delay; answers in the score-split format."""
    content = body["messages"][-1]["content"]
    a = content.split("[Response A]\n")[1].split("\n\n[Response B]")[0]
    b = content.split("[Response B]\n")[1].split("\n\n")[0]
    split = (7, 3) if len(a) > len(b) else (3, 7) if len(b) > len(a) else (5, 5)
    return 200, chat_reply(f"Principles: depth.\nScore A: {split[0]}, Score B: {split[1]}"), 0.05, {}


@pytest.fixture
def stub(monkeypatch):
    with serve(_by_length, monkeypatch) as server:
        yield server


def test_http_judge_verdicts_concurrency_limit_and_accounting(stub):
    judge = HTTPJudge(stub.base_url, "genrm", concurrency=3, retries=0)
    a = ["a much longer answer", "x", "same", "yy"] * 3
    b = ["short", "a longer one", "same", "y"] * 3
    start = time.perf_counter()
    out = judge.compare(["write"] * 12, a, b)
    elapsed = time.perf_counter() - start
    assert [v.pref for v in out] == [1, -1, 0, 1] * 3
    assert out[0].scores == (7.0, 3.0) and out[0].critique == "Principles: depth."
    assert stub.max_active <= 3 and stub.max_active >= 2  # the limit held, and requests did overlap
    assert elapsed >= 4 * 0.05 * 0.9                        # 12 requests of 50 ms, 3 at a time: >= 4 rounds
    cost = judge.cost()
    assert (cost["pairs"], cost["calls"], cost["requests"], cost["prompt_tokens"], cost["completion_tokens"]) == \
        (12, 12, 12, 360, 120)
    assert cost["max_in_flight"] <= 3
    body = stub.requests[0]["body"]
    assert body["model"] == "genrm" and body["temperature"] == 0.0 and "Score A: <points>" in \
        body["messages"][-1]["content"]


def test_http_judge_retries_backoff_retry_after_and_errors(stub):
    stub.script = [(503, {"error": "busy"}, 0.0, {}), (429, {"error": "slow"}, 0.0, {"Retry-After": "0.05"}),
                   (200, chat_reply("Score A: 1, Score B: 9"), 0.0, {})]
    judge = HTTPJudge(stub.base_url, "m", retries=2, backoff=0.01)
    start = time.perf_counter()
    assert judge.compare(["q"], ["x"], ["y"])[0].pref == -1
    assert time.perf_counter() - start >= 0.05  # Retry-After obeyed
    assert (judge.cost()["requests"], judge.cost()["retries"]) == (3, 2)

    stub.script = [(400, {"error": "bad"}, 0.0, {})]
    with pytest.raises(JudgeError, match="HTTP 400"):  # not retried
        judge.compare(["q"], ["x"], ["y"])
    assert judge.cost()["requests"] == 4

    stub.script = [(200, chat_reply("A"), 1.0, {})] * 2
    slow = HTTPJudge(stub.base_url, "m", timeout=0.15, retries=1, backoff=0.01)
    start = time.perf_counter()
    with pytest.raises(JudgeError, match="no answer after 2 attempts"):
        slow.compare(["q"], ["x"], ["y"])
    assert time.perf_counter() - start < 1.0

    # on_error="tie": a failed call becomes a counted tie, the rest of the batch is judged
    stub.script = [(200, {"not": "a completion"}, 0.0, {})]
    tolerant = HTTPJudge(stub.base_url, "m", retries=0, on_error="tie", concurrency=1)
    out = tolerant.compare(["q", "q"], ["x", "xx"], ["y", "y"])
    assert out[0].pref == 0 and "not a chat completion" in out[0].error and out[1].pref == 1
    assert tolerant.cost()["errors"] == 1

    stub.script = [(200, chat_reply("I refuse to judge."), 0.0, {})]
    out = HTTPJudge(stub.base_url, "m", retries=0).compare(["q"], ["x"], ["y"])[0]
    assert out.malformed and out.pref == 0
    with pytest.raises(ValueError, match="JUDGE_URL_UNSET_FOR_TEST is unset"):
        ChatClient(None, "m", base_url_env="JUDGE_URL_UNSET_FOR_TEST")


def test_pairwise_judge_reward_http_genrm_with_swap_and_votes(stub):
    manager = RewardManager([("model/pairwise_judge", 1.0, {"backend": "http_genrm", "base_url": stub.base_url,
                                                            "model": "m", "retries": 0, "swap": "both"})])
    reward = manager.fns[0]
    total, _ = manager(["q", "q"], ["longer one", "x"], reference=["short", "longer"])
    np.testing.assert_array_equal(total, [1.0, 0.0])  # P(completion better than the reference)
    pref, metrics = reward.judge_pairs(["q"] * 3, ["aaa", "a", "aa"], ["a", "aaa", "bb"], seed=0)
    np.testing.assert_array_equal(pref, [1, -1, 0])
    assert metrics["judge/pairs"] == 3 and metrics["judge/calls"] == 6 and metrics["judge/requests"] == 6
    assert metrics["judge/swap_disagreements"] == 0 and metrics["judge/prompt_tokens"] == 180
    assert metrics["judge/pairs_total"] == 5 and metrics["judge/tie_frac"] == pytest.approx(1 / 3)


def test_pairwise_judge_reward_oracle_and_mock_from_the_registry():
    if "test/judges_length" not in REWARDS:
        REWARDS.register("test/judges_length", lambda prompts, completions, **kw: [len(c) for c in completions])
    build = REWARDS.get("model/pairwise_judge")
    oracle = build(backend="oracle", quality="test/judges_length", votes=3, swap="random")
    pref, metrics = oracle.judge_pairs(["q"] * 2, ["aa", "a"], ["a", "aa"], seed=1)
    np.testing.assert_array_equal(pref, [1, -1])
    assert metrics["judge/calls"] == 6 and metrics["judge/pairs"] == 2
    mock = build(backend="mock", prefer="shorter")
    assert mock(["q"], ["a"], reference=["aa"]) == [1.0]
    with pytest.raises(ValueError, match="backend='nope'"):
        build(backend="nope")
    with pytest.raises(ValueError, match="quality"):
        build(backend="oracle")


# ---------------------------------------------------------------- our own model through the sampler


def test_sampler_judge_equals_a_direct_generate():
    import jax
    from flax import nnx

    from shared.config.base import model_config
    from shared.data.tokenizers import ByteTokenizer
    from shared.judges import SamplerJudge
    from shared.model import build_model

    cfg = model_config()
    cfg.update(vocab_size=259, d_model=32, n_layers=1, n_heads=2, n_kv_heads=2, head_dim=16, d_ff=64,
               dtype="float32", remat="none", init_std=0.3, max_seq_len=128)
    graphdef = nnx.split(nnx.eval_shape(lambda: build_model(cfg)))[0]
    params = jax.jit(lambda: nnx.split(build_model(cfg, seed=0))[1])()  # eager construction is slow on CPU
    tok = ByteTokenizer()
    template = "Q:{prompt} A:{a} B:{b} ->"

    def by_first_byte(text):  # a stand-in parser: the verdict is a function of the generated text
        return Verdict(ord(text[0]) % 3 - 1, raw=text) if text else None

    # sampled (temperature 1): greedy is the same call with SamplingParams.temperature 0
    judge = SamplerJudge(graphdef, params, cfg, tok, template=template, max_new_tokens=6, temperature=1.0,
                         parser=by_first_byte, prompt_buckets=(64,))
    prompts, a, b = ["sort 3 1", "2+2"] * 4, ["1 3", "4"] * 4, ["3 1", "5"] * 4
    out = judge.compare(prompts, a, b, seed=11)
    tokens = [[tok.bos_id] + tok.encode(template.format(prompt=p, a=x, b=y)) for p, x, y in zip(prompts, a, b)]
    want = judge.sampler.generate(params, tokens, judge.sampling, jax.random.key(11))  # the same compiled sampler
    assert [v.raw for v in out] == want.texts and len(set(want.texts)) > 2  # rows sample differently
    assert [v.pref for v in out] == [by_first_byte(t).pref if t else 0 for t in want.texts]
    cost = judge.cost()
    assert cost["calls"] == 8 and cost["prompt_tokens"] == sum(map(len, tokens))
    assert cost["completion_tokens"] == int(want.lengths.sum())
    assert [v.raw for v in judge.compare(prompts, a, b, seed=11)] == want.texts   # the seed decides the samples
    assert [v.raw for v in judge.compare(prompts, a, b, seed=12)] != want.texts

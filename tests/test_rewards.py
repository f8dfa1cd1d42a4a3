"""shared.rewards: math answer equivalence, format/length rewards, the RewardManager (weights, metrics, error
and NaN policies), the scalar reward model against a direct forward, and the pairwise judges (the HTTP one
against a local http.server)."""
import math
import os
import time

import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

import shared.rewards  # noqa: F401  registers the built-ins
from http_stub import chat_reply, serve
from shared.registry import REWARDS, UnknownNameError
from shared.judges import (JudgeError, OpenAIJudge, ScalarRMJudge, ScalarRewardModel, compare_batch,
                           parse_verdict)
from shared.rewards import RewardError, RewardManager, last_boxed
from shared.rewards.math import answers_equivalent, gsm8k_answer, math_verify_available, to_fraction

needs_math_verify = pytest.mark.skipif(not math_verify_available(), reason="math-verify is not installed")


def reward(name, completions, prompts=None, **columns):
    prompts = prompts or [""] * len(completions)
    return REWARDS.get(name)(prompts, completions, **columns)


# ---------------------------------------------------------------- math


@pytest.mark.parametrize("predicted, gold, expected", [
    ("\\frac{1}{2}", "0.5", True),
    ("\\dfrac{1}{2}", "1/2", True),
    ("\\frac12", "0.5", True),
    ("-\\frac{3}{4}", "-0.75", True),
    ("\\frac{-3}{4}", "-3/4", True),
    ("0.50", "0.5", True),
    ("1,000", "1000", True),
    ("1{,}000", "1000", True),
    ("$42$", "42", True),
    ("\\$18.00", "18", True),
    ("50\\%", "50", True),
    ("5 \\text{ cm}", "5", True),
    ("12 apples.", "12", True),
    ("x = -3", "-3", True),
    ("-7", "-7.0", True),
    ("3", "4", False),
    ("0.5", "0.05", False),
    ("-2", "2", False),
    ("\\frac{1}{3}", "0.33", False),
    ("2x", "2", False),
])
def test_answer_equivalence_without_math_verify(predicted, gold, expected):
    assert answers_equivalent(predicted, gold, use_math_verify=False) is expected
    if math_verify_available():  # math-verify never turns these decisions around
        assert answers_equivalent(predicted, gold) is expected


@needs_math_verify
@pytest.mark.parametrize("predicted, gold, expected", [
    ("\\sqrt{2}", "2^{1/2}", True),
    ("\\frac{\\sqrt{2}}{2}", "\\frac{1}{\\sqrt{2}}", True),
    ("2\\pi", "\\pi \\cdot 2", True),
    ("\\sqrt{3}", "\\sqrt{2}", False),
    ("x^2", "x^3", False),
])
def test_answer_equivalence_symbolic_needs_math_verify(predicted, gold, expected):
    assert answers_equivalent(predicted, gold) is expected
    assert answers_equivalent(predicted, gold, use_math_verify=False) is False  # the fallback cannot tell


def test_math_boxed_works_without_math_verify(monkeypatch):
    import shared.rewards.math as rewards_math

    monkeypatch.setattr(rewards_math, "_math_verify", lambda: None)  # as if math-verify were not installed
    assert not rewards_math.math_verify_available()
    completions = ["\\boxed{\\dfrac{1}{2}}", "\\boxed{0.50}", "\\boxed{\\sqrt{2}}", "\\boxed{\\sqrt{2}}",
                   "\\boxed{3}"]
    answers = ["0.5", "1/2", "\\sqrt2", "2^{1/2}", "4"]
    # the fourth is equivalent, but only math-verify can tell (test_answer_equivalence_symbolic_needs_math_verify)
    assert reward("math/boxed", completions, answer=answers) == [1.0, 1.0, 1.0, 0.0, 0.0]
    with pytest.raises(ImportError, match="math-verify"):
        answers_equivalent("\\sqrt{3}", "3^{1/2}", use_math_verify=True)


def test_last_boxed_nested_braces_and_edge_cases():
    assert last_boxed("so \\boxed{1} or rather \\boxed{\\frac{1}{\\sqrt{2}}}.") == "\\frac{1}{\\sqrt{2}}"
    assert last_boxed("\\fbox{7}") == "7"
    assert last_boxed("answer: $\\boxed 5$") == "5"
    assert last_boxed("\\boxed{\\{1, 2\\}}") == "\\{1, 2\\}"
    assert last_boxed("\\boxed{3} then \\boxed{\\frac{1}{2}") is None  # truncated: the last one is unbalanced
    assert last_boxed("no box here") is None
    assert last_boxed("\\boxedfoo{3}") is None


def test_math_boxed_reward():
    completions = [
        "We get \\boxed{\\frac{1}{2}}.",          # LaTeX fraction vs decimal gold
        "First \\boxed{3}, corrected: \\boxed{0.5}",  # the last box counts
        "The answer is 0.5",                     # nothing boxed
        "\\boxed{0.25}",                          # wrong
        "\\boxed{1,000}",                         # thousands separator vs gold solution's box
        "\\boxed{}",                              # empty box
    ]
    answers = ["0.5", "1/2", "0.5", "0.5", "so the total is $\\boxed{1000}$", "0"]
    assert reward("math/boxed", completions, answer=answers) == [1.0, 1.0, 0.0, 0.0, 1.0, 0.0]


def test_gsm8k_reward_extraction_and_gold_forms():
    solution = "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nShe sold 48+24 = <<48+24=72>>72 clips.\n#### 1,272"
    completions = ["... so #### 1,272", "#### 1272.", "#### 1273", "The answer is 1272", "#### -5", "#### 0.50",
                   "#### 12 #### 7"]
    answers = [solution, "1272", solution, "1272", "-5", "0.5", "7"]
    assert reward("math/gsm8k", completions, answer=answers) == [1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 1.0]
    assert gsm8k_answer("x #### $18") == "18"
    assert to_fraction("1,234.5") == to_fraction("2469/2")


def test_last_number_reward():
    completions = [" 19", " the result is -7.", "12 then 13", "1,234", "none", " 3.50"]
    answers = ["19", "-7", "12", "1234", "0", "3.5"]
    assert reward("math/last_number", completions, answer=answers) == [1.0, 1.0, 0.0, 1.0, 0.0, 1.0]


# ---------------------------------------------------------------- format / length


def test_format_tags_template_and_partial_credit():
    completions = [
        "<think>a+b</think>\n<answer>3</answer>",
        "  <think>x</think><answer>y</answer>\n",
        "<think>a</think> extra <answer>3</answer>",
        "<answer>3</answer>",
        "<think>a</think><answer>1</answer><answer>2</answer>",
        "<think>x</think><answer>y",
    ]
    assert reward("format/tags", completions) == [1.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    assert reward("format/tags", completions, partial=True) == [1.0, 1.0, 1.0, 0.5, 0.5, 0.5]
    assert reward("format/tags", ["<answer> 4 </answer>", "<think>.</think><answer>4</answer>"],
                  tags=["answer"]) == [1.0, 0.0]
    assert reward("format/tags", ["Answer: 12", "answer: x"], pattern=r"Answer: \d+") == [1.0, 0.0]


def test_boxed_present():
    assert reward("format/boxed_present", ["\\boxed{2}", "\\boxed{}", "2", "\\boxed{1"]) == [1.0, 0.0, 0.0, 0.0]


def test_length_penalty_linear_beyond_target():
    completions = ["x" * 5, "x" * 10, "x" * 14, "x" * 100]
    # -slope * (L - target), capped at max_penalty
    assert reward("length/penalty", completions, target=10, slope=0.1, max_penalty=1.0) == \
        pytest.approx([0.0, 0.0, -0.4, -1.0])
    assert reward("length/penalty", completions, target=10, slope=0.1, max_penalty=0) == \
        pytest.approx([0.0, 0.0, -0.4, -9.0])
    assert reward("length/penalty", ["a b c d", "a"], target=2, unit="words") == pytest.approx([-1.0, 0.0])
    assert reward("length/penalty", ["", ""], target=4, unit="tokens", completion_lengths=[6, 3]) == \
        pytest.approx([-0.5, 0.0])
    with pytest.raises(ValueError, match="completion_lengths"):
        reward("length/penalty", ["a"], unit="tokens")


def test_no_repeat():
    out = reward("format/no_repeat", ["a b c d", "a b a b a b", "a b"], n=2)
    # "a b a b a b": bigrams ab ba ab ba ab -> 2 distinct of 5
    assert out == pytest.approx([0.0, -(1 - 2 / 5), 0.0])


# ---------------------------------------------------------------- manager


def test_manager_weighted_sum_and_metrics():
    completions = ["\\boxed{4}", "\\boxed{5}", "4", "\\boxed{4} " + "x" * 20]
    prompts = ["2+2?"] * 4
    manager = RewardManager([("math/boxed", 1.0), {"name": "format/boxed_present", "weight": 0.5},
                             ("length/penalty", 2.0, {"target": 10, "slope": 0.05})])
    total, metrics = manager(prompts, completions, answer=["4"] * 4)
    boxed = np.array([1, 0, 0, 1.0])
    present = np.array([1, 1, 0, 1.0])
    length = -0.05 * np.maximum(0, np.array([len(c) for c in completions]) - 10)
    expected = boxed + 0.5 * present + 2.0 * length
    assert total.dtype == np.float32
    np.testing.assert_allclose(total, expected, rtol=1e-6)
    assert metrics["reward/math/boxed/mean"] == pytest.approx(0.5)
    assert metrics["reward/math/boxed/std"] == pytest.approx(0.5)
    assert metrics["reward/format/boxed_present/mean"] == pytest.approx(0.75)
    assert metrics["reward/length/penalty/mean"] == pytest.approx(length.mean())
    assert metrics["reward/mean"] == pytest.approx(expected.mean())
    assert metrics["reward/std"] == pytest.approx(expected.std())


def test_manager_passes_ragged_list_columns_per_example():
    def uses_all_numbers(prompts, completions, numbers, **_):
        return [float(all(str(n) in c for n in nums)) for c, nums in zip(completions, numbers)]

    manager = RewardManager([(uses_all_numbers, 1.0)], on_error="raise")
    total, _ = manager(["p"] * 3, ["3+4", "1*2*5", "7"], numbers=[[3, 4], [1, 2, 5], [7, 8, 9, 1]])
    np.testing.assert_array_equal(total, [1.0, 1.0, 0.0])


def test_manager_spec_forms_and_validation():
    def exact(prompts, completions, answer):  # no **kwargs: gets only the columns it names
        return [float(c.strip() == a) for c, a in zip(completions, answer)]

    config_spec = ml_collections.ConfigDict({"name": "format/tags", "weight": 0.0, "kwargs": {"tags": ["answer"]}})
    manager = RewardManager(["math/last_number", (exact, 2.0), config_spec, ["math/last_number", 1.0]])
    assert manager.labels == ["math/last_number", "exact", "format/tags", "math/last_number#2"]
    result = manager.compute(["q", "q"], [" 3", "<answer>4</answer>"], answer=["3", "4"], other=["x", "y"])
    np.testing.assert_allclose(result.total, [1 + 2 + 1, 1 + 0 + 1])  # weight 0: logged, not added
    np.testing.assert_allclose(result.per_function["format/tags"], [0.0, 1.0])

    with pytest.raises(UnknownNameError, match="math/boxed"):
        RewardManager([("math/boxd", 1.0)])
    with pytest.raises(ValueError, match="unknown kwargs \\['tag'\\]"):
        RewardManager([("format/tags", 1.0, {"tag": "x"})])
    with pytest.raises(ValueError, match="weight"):
        RewardManager([("math/boxed", "heavy")])
    with pytest.raises(ValueError, match="on_error"):
        RewardManager(["math/boxed"], on_error="ignore")
    with pytest.raises(RewardError, match="'math/boxed' needs column 'answer'"):
        RewardManager(["math/boxed"])(["q"], ["\\boxed{1}"], solution=["1"])
    with pytest.raises(ValueError, match="column 'answer' has 1 entries for 2"):
        RewardManager(["math/boxed"])(["q", "q"], ["a", "b"], answer=["1"])


def _fragile(prompts, completions, **_):
    if any("boom" in c for c in completions):
        raise ZeroDivisionError("division by zero")
    return [float(len(c)) for c in completions]


def _nan_at_two(prompts, completions, **_):
    return [float("nan") if c == "two" else None if c == "none" else 1.0 for c in completions]


def test_manager_reports_failing_function_and_example():
    prompts = ["p0", "p1", "Q: what is 6*7?", "p3"]
    completions = ["a", "bb", "it goes boom here", "dddd"]
    with pytest.raises(RewardError) as err:
        RewardManager([(_fragile, 1.0)])(prompts, completions)
    message = str(err.value)
    assert "'_fragile'" in message and "ZeroDivisionError" in message and "example 2 of 4" in message
    assert "Q: what is 6*7?" in message and "it goes boom here" in message
    assert isinstance(err.value.__cause__, ZeroDivisionError)

    manager = RewardManager([(_fragile, 1.0), ("math/last_number", 1.0)], on_error="zero")
    result = manager.compute(prompts, completions, answer=["0"] * 4)
    np.testing.assert_allclose(result.per_function["_fragile"], [1, 2, 0, 4])  # only the failing example is 0
    assert result.errors["_fragile"] == [2] and result.metrics["reward/_fragile/errors"] == 1.0


def test_manager_nan_policy_and_wrong_length():
    prompts, completions = ["p"] * 4, ["one", "none", "two", "four"]
    with pytest.raises(RewardError, match=r"'_nan_at_two' returned nan .*example 1: prompt='p', "
                                          r"completion='none'"):
        RewardManager([(_nan_at_two, 1.0)])(prompts, completions)
    total, metrics = RewardManager([(_nan_at_two, 3.0)], on_error="zero")(prompts, completions)
    np.testing.assert_allclose(total, [3, 0, 0, 3])
    assert metrics["reward/_nan_at_two/errors"] == 2.0

    def short(prompts, completions, **_):
        return [1.0] * (len(completions) - 1)

    for policy in ("raise", "zero"):
        with pytest.raises(RewardError, match="'short' returned 3 values for 4 completions"):
            RewardManager([(short, 1.0)], on_error=policy)(prompts, completions)


# ---------------------------------------------------------------- scalar reward model


def rm_config():
    from shared.config.base import base_config

    c = base_config()
    c.model.vocab_size = 384
    c.model.d_model = 32
    c.model.n_layers = 2
    c.model.n_heads = 4
    c.model.n_kv_heads = 2
    c.model.head_dim = 8
    c.model.d_ff = 64
    c.model.dtype = "float32"
    c.model.remat = "none"
    c.model.max_seq_len = 128
    c.model.heads = ["lm", "scalar"]
    c.data.tokenizer = "byte"
    c.mesh.preset = "cpu_8"
    return c


PROMPTS = ["Q: 12+7=\nA:", "Q: 3+4=\nA:", "Tell me a story.", "Q: 1+1=\nA:", "Q: 9+9=\nA:"]
COMPLETIONS = [" 19", " 8", " Once upon a time there was a very small transformer that learned to add.", "",
               " 18"]


def direct_scores(config, params, max_length=None):
    """Reference: one forward over all [bos] + prompt + completion rows, right-filled with random tokens (not
    pad) to a width the reward model never uses, read at each row's last real token; causal attention makes
    that the unpadded score. With max_length: bos + the last max_length - 1 tokens."""
    import jax
    from flax import nnx

    from shared.data import ByteTokenizer
    from shared.model import build_model

    tok = ByteTokenizer()
    rows = []
    for p, c in zip(PROMPTS, COMPLETIONS):
        ids = [tok.bos_id] + tok.encode(p) + tok.encode(c)
        rows.append(ids[:1] + ids[-(max_length - 1):] if max_length and len(ids) > max_length else ids)
    width = 100
    tokens = np.random.RandomState(0).randint(3, 259, (len(rows), width))
    for i, ids in enumerate(rows):
        tokens[i, :len(ids)] = ids
    graphdef = nnx.split(nnx.eval_shape(lambda: build_model(config.model)))[0]
    scalar = nnx.merge(graphdef, jax.device_get(params))(jnp.asarray(tokens))["scalar"]
    return np.asarray(scalar)[np.arange(len(rows)), [len(ids) - 1 for ids in rows]]


@pytest.fixture(scope="module")
def exported_rm(tmp_path_factory):
    import jax
    from flax import nnx

    import shared.builtin  # noqa: F401
    from shared.checkpoint import export_params
    from shared.model import build_model

    config = rm_config()
    # Random values (not the init: its scalar bias is 0 and its scale small) straight into the param tree.
    abstract = nnx.split(nnx.eval_shape(lambda: build_model(config.model)))[1].to_pure_dict()
    rng = np.random.RandomState(3)
    params = jax.tree.map(lambda a: rng.normal(0.0, 0.3, a.shape).astype(a.dtype), abstract)
    path = str(tmp_path_factory.mktemp("rm") / "params")
    export_params(path, params)
    with open(os.path.join(path, "config.json"), "w") as f:
        f.write(config.to_json())
    return path, config, params, direct_scores(config, params)


def test_scalar_rm_from_exported_params_matches_direct_forward(exported_rm):
    path, config, params, expected = exported_rm
    assert np.std(expected) > 1e-3
    rm = ScalarRewardModel(path, batch_size=2)  # 5 examples: 3 batches, the last padded; lengths span 3 buckets
    np.testing.assert_allclose(rm.score(PROMPTS, COMPLETIONS), expected, rtol=1e-5, atol=1e-5)
    short = ScalarRewardModel(path, batch_size=8, max_length=32)  # the long example keeps bos + its last 31
    np.testing.assert_allclose(short.score(PROMPTS, COMPLETIONS), direct_scores(config, params, max_length=32),
                               rtol=1e-5, atol=1e-5)

    # The same through the registry, as a config spec; config= given explicitly (model-only config works too).
    manager = RewardManager([("model/scalar_rm", 2.0, {"path": path, "batch_size": 8,
                                                       "config": config.model.to_dict()})])
    total, metrics = manager(PROMPTS, COMPLETIONS)
    np.testing.assert_allclose(total, 2 * expected, rtol=1e-5, atol=1e-5)
    assert metrics["reward/model/scalar_rm/mean"] == pytest.approx(expected.mean(), abs=1e-5)

    judge = ScalarRMJudge(rm)
    p = compare_batch(judge, PROMPTS[:2], COMPLETIONS[:2], COMPLETIONS[1:3])
    other = rm.score(PROMPTS[:2], COMPLETIONS[1:3])
    np.testing.assert_allclose(p, 1 / (1 + np.exp(-(expected[:2] - other))), rtol=1e-5)
    assert judge.compare(PROMPTS[0], COMPLETIONS[0], COMPLETIONS[0]) == pytest.approx(0.5)
    assert judge.compare(PROMPTS[0], "a", "b") + judge.compare(PROMPTS[0], "b", "a") == pytest.approx(1.0)


def test_scalar_rm_needs_scalar_head_and_config(tmp_path, exported_rm):
    path, config, _, _ = exported_rm
    lm_only = rm_config()
    lm_only.model.heads = ["lm"]
    with pytest.raises(ValueError, match="no 'scalar' head"):
        ScalarRewardModel(path, config=lm_only)
    with pytest.raises(FileNotFoundError, match="config.json"):
        ScalarRewardModel(str(tmp_path / "nowhere"))


def test_scalar_rm_from_training_workdir(tmp_path):
    from shared.train import Trainer

    config = rm_config()
    config.mesh.preset = "cpu_1"  # the sharded restore is covered above; one device keeps this test cheap
    workdir = str(tmp_path / "run")
    trainer = Trainer(config, workdir)
    assert trainer.save(1, force=True)
    trainer.checkpointer.wait()
    expected = direct_scores(config, trainer.params)
    trainer.close()
    with open(os.path.join(workdir, "config.json"), "w") as f:
        f.write(config.to_json())
    rm = ScalarRewardModel(workdir, batch_size=8)
    assert rm.step == 1
    np.testing.assert_allclose(rm(PROMPTS, COMPLETIONS), expected, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- pairwise judges over HTTP


@pytest.mark.parametrize("text, expected", [
    ("A", 1.0), ("B.", 0.0), (" (B)", 0.0), ("[[B]]", 0.0), ("**Answer:** A", 1.0),
    ("Response B is better.", 0.0), ("Response A is more accurate than B, but overall... [[B]]", 0.0),
    ("The verdict: Response A", 1.0), ("Final answer: B", 0.0), ("[[tie]]", 0.5), ("It's a tie.", 0.5),
    ("I don't know", None), ("a lot of things", None), ("", None),
])
def test_parse_verdict(text, expected):
    assert parse_verdict(text) == expected


def _decide_by_content(body):
    """The judge prefers whichever response contains 'good'."""
    content = body["messages"][-1]["content"]
    a = content.split("[Response A]")[1].split("[Response B]")[0]
    return 200, chat_reply("A" if "good" in a else "Response B is better."), 0.0


@pytest.fixture
def judge_server(monkeypatch):
    with serve(_decide_by_content, monkeypatch) as server:
        yield server


def test_http_judge_request_and_verdicts(judge_server, monkeypatch):
    monkeypatch.setenv("TEST_JUDGE_KEY", "sekret")
    judge = OpenAIJudge(judge_server.base_url, "judge-model", api_key_env="TEST_JUDGE_KEY", retries=0)
    assert judge.compare("Which is right?", "a good answer", "a bad answer") == 1.0
    assert judge.compare("Which is right?", "a bad answer", "a good answer") == 0.0
    request = judge_server.requests[0]
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["Authorization"] == "Bearer sekret"
    assert request["body"]["model"] == "judge-model" and request["body"]["temperature"] == 0.0
    content = request["body"]["messages"][-1]["content"]
    assert "Which is right?" in content and "a good answer" in content and '"A"' in content

    monkeypatch.delenv("TEST_JUDGE_KEY")
    p = compare_batch(judge, ["q"] * 6, ["good", "bad"] * 3, ["bad", "good"] * 3)  # concurrent requests
    np.testing.assert_array_equal(p, [1, 0] * 3)
    assert "Authorization" not in judge_server.requests[-1]["headers"]

    judge_server.script = [(200, chat_reply("A"), 0.0), (200, chat_reply("A"), 0.0)]  # always says "A"
    biased = OpenAIJudge(judge_server.base_url, "m", swap_average=True, retries=0)
    assert biased.compare("q", "x", "y") == 0.5  # position bias cancels out

    judge_server.script = [(200, chat_reply("I cannot decide."), 0.0)] * 2
    assert judge.compare("q", "x", "y") == 0.5 and judge.unparsed == 1
    strict = OpenAIJudge(judge_server.base_url, "m", on_unparsed="raise", retries=0)
    with pytest.raises(JudgeError, match="neither A nor B"):
        strict.compare("q", "x", "y")


def test_http_judge_logprobs(judge_server):
    top = [{"token": "A", "logprob": math.log(0.6)}, {"token": " B", "logprob": math.log(0.2)},
           {"token": "C", "logprob": math.log(0.1)}]
    logprobs = {"content": [{"token": "A", "logprob": math.log(0.6), "top_logprobs": top}]}
    judge_server.script = [(200, chat_reply("A", logprobs=logprobs), 0.0)]
    judge = OpenAIJudge(judge_server.base_url, "m", use_logprobs=True, retries=0)
    assert judge.compare("q", "x", "y") == pytest.approx(0.6 / 0.8)
    assert judge_server.requests[-1]["body"]["logprobs"] is True


def test_http_judge_retries_timeouts_and_errors(judge_server):
    judge_server.script = [(500, {"error": "overloaded"}, 0.0), (429, {"error": "slow down"}, 0.0),
                           (200, chat_reply("B"), 0.0)]
    judge = OpenAIJudge(judge_server.base_url, "m", retries=2, backoff=0.01)
    assert judge.compare("q", "x", "y") == 0.0
    assert len(judge_server.requests) == 3

    judge_server.script = [(401, {"error": "bad key"}, 0.0)]
    with pytest.raises(JudgeError, match="HTTP 401"):  # not retried
        judge.compare("q", "x", "y")
    assert len(judge_server.requests) == 4

    judge_server.script = [(200, chat_reply("A"), 1.0), (200, chat_reply("A"), 1.0)]
    slow = OpenAIJudge(judge_server.base_url, "m", timeout=0.2, retries=1, backoff=0.01)
    start = time.time()
    with pytest.raises(JudgeError, match="no answer after 2 attempts"):
        slow.compare("q", "x", "y")
    assert time.time() - start < 1.5

    judge_server.script = [(200, {"unexpected": True}, 0.0)]
    with pytest.raises(JudgeError, match="not a chat completion"):
        judge.compare("q", "x", "y")

    with pytest.raises(ValueError, match="UNSET_JUDGE_URL_FOR_TEST is unset"):
        OpenAIJudge(None, "m", base_url_env="UNSET_JUDGE_URL_FOR_TEST")


def test_pairwise_judge_reward_through_manager(judge_server):
    manager = RewardManager([("model/pairwise_judge", 1.0, {"backend": "http", "base_url": judge_server.base_url,
                                                            "model": "m", "retries": 0})])
    total, metrics = manager(["q", "q"], ["good one", "meh"], reference=["meh", "good ref"])
    np.testing.assert_array_equal(total, [1.0, 0.0])
    with pytest.raises(RewardError, match="needs the column 'reference'"):
        manager(["q"], ["x"])

"""shared.judges.rubric_format: the Proxy-GRM output format (spec ../shared/papers/proxy_grm.md §1.1-1.3, §1.7):
the exact format check, the proxy's rubric extraction, r_acc, the evaluation protocol's verdict and weight sums."""
import pytest

import shared.builtin  # noqa: F401
from shared.judges.rubric_format import (
    accuracy_reward, extract_rubric, format_ok, parse_answer, parse_output, rubric_weights, weights_sum_ok,
)
from shared.registry import REWARDS

VALID = ("<rubric>\nAccuracy: matches the image, weight 60%\nClarity: easy to follow, weight 40%\n"
         "<justify>the question asks for facts</justify>\n</rubric>\n<eval>\nChatbot 1 is accurate\n</eval>\n"
         "<answer>1</answer>")


@pytest.mark.parametrize("text,ok", [
    (VALID, True),
    ("<rubric>r</rubric><eval>e</eval><answer>2</answer>", True),
    ("<rubric>\nr\n</rubric>\n\n<eval>e</eval>\n<answer>\n1\n</answer>\n", True),    # newlines are deleted first
    ("<rubric>r</rubric> <eval>e</eval><answer>2</answer>", False),                  # a space between blocks
    ("<rubric>r</rubric><answer>2</answer>", False),                                 # <eval> missing
    ("<rubric>r</rubric><eval>e</eval>", False),                                     # <answer> missing
    ("<rubric>r</rubric><eval>e</eval><answer>1</answer><answer>1</answer>", False),  # two <answer>
    ("<rubric>r</rubric><eval>e<eval>x</eval><answer>1</answer>", False),             # two <eval>
    ("<rubric>r <rubric_note> </rubric><eval>e</eval><answer>1</answer>", False),     # "<rubric" twice
    ("Sure! <rubric>r</rubric><eval>e</eval><answer>1</answer>", False),              # text before
    ("<rubric>r</rubric><eval>e</eval><answer>1</answer> done", False),               # text after
    ("<think>t</think><summary>s</summary><answer>1</answer>", True),                # the alternative format
    ("<think>t</think>\n<summary>s</summary>\n<answer>1</answer>", True),
    ("<think>t</think><answer>1</answer>", False),                                   # alternative without summary
    ("<think>t</think><think>u</think><summary>s</summary><answer>1</answer>", False),
])
def test_format_check_exact_cases(text, ok):
    assert format_ok(text) is ok


def test_rubric_extraction_cuts_at_the_first_close_and_drops_justify():
    assert extract_rubric(VALID) == ("<rubric>\nAccuracy: matches the image, weight 60%\nClarity: easy to follow, "
                                     "weight 40%\n</rubric>")
    plain = "<rubric>a W_1</rubric><eval>x</eval><answer>1</answer>"
    assert extract_rubric(plain) == "<rubric>a W_1</rubric>"
    # only the first </rubric> counts; a text without one is kept whole with </rubric> appended
    assert extract_rubric("<rubric>a</rubric>b</rubric>") == "<rubric>a</rubric>"
    assert extract_rubric("<answer>1</answer>") == "<answer>1</answer></rubric>"
    # <justify> after the first </rubric> is not inside the rubric: nothing to drop
    assert extract_rubric("<rubric>a</rubric><justify>j</justify>") == "<rubric>a</rubric>"
    assert extract_rubric(extract_rubric(VALID)) == extract_rubric(VALID)   # idempotent


def test_parse_output_blocks():
    out = parse_output(VALID)
    assert out.justify == "the question asks for facts"
    assert out.eval == "\nChatbot 1 is accurate\n" and out.answer == "1"
    assert out.rubric.startswith("\nAccuracy") and "<justify>" in out.rubric
    assert parse_output("no tags").rubric is None and parse_output("no tags").answer is None


@pytest.mark.parametrize("text,gold,reward", [
    ("<answer>1</answer>", "1", 1.0),
    ("<answer> 2 </answer>", 2, 1.0),
    ("<answer>1</answer>", "2", -1.0),
    ("<answer>1 or 2</answer>", "1", -1.0),          # both digits: ambiguous
    ("<answer>Chatbot 1</answer>", "1", 1.0),
    ("<answer>none</answer>", "1", -1.0),
    ("no tag, Chatbot 2 wins", "2", 1.0),            # no <answer>: the whole text is read
    ("no tag, 1 beats 2", "2", -1.0),
    ("<answer>2</answer>", "<answer>2</answer>", 1.0),  # a tagged gold
])
def test_accuracy_reward(text, gold, reward):
    assert accuracy_reward(text, gold) == reward


@pytest.mark.parametrize("text,verdict", [
    ("<answer>2</answer>", 2),
    ("<answer>1</answer> later 2", 1),
    ("<answer>1 and 2</answer> so 2", 2),            # ambiguous tag: the last 1/2 of the text
    ("<answer>tie</answer> I pick 1, not 2, well 1", 1),
    ("Chatbot 2 is better", 2),
    ("no digit", None),
    ("<answer>3</answer>", None),
])
def test_parse_answer_protocol(text, verdict):
    assert parse_answer(text) == verdict


def test_weights_sum_to_100():
    assert rubric_weights(VALID) == [60.0, 40.0] and weights_sum_ok(VALID)
    justified = "<rubric>a, weight 50%\n<justify>ignore 70%</justify></rubric><eval>30%</eval><answer>1</answer>"
    assert rubric_weights(justified) == [50.0]          # <justify> and <eval> do not count
    assert not weights_sum_ok(justified)
    assert weights_sum_ok([33.5, 33.5, 33.0]) and not weights_sum_ok([50, 49]) and not weights_sum_ok([])
    assert weights_sum_ok([33.3, 33.3, 33.3], tol=0.2) and not weights_sum_ok([33.3, 33.3, 33.3])


def test_registered_rewards():
    fmt, acc = REWARDS.get("genrm/format"), REWARDS.get("genrm/accuracy")
    texts = ["<rubric>r</rubric><eval>e</eval><answer>1</answer>", "<answer>2</answer>"]
    assert fmt(["q", "q"], texts) == [1.0, 0.0]
    assert acc(["q", "q"], texts, answer=["1", "1"]) == [1.0, -1.0]

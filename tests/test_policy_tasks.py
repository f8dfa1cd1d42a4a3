"""The example sets of the policy-optimisation papers: rl/arithmetic_cot and rl/countdown's use="subset" (ETR's
countdown-mixed, ../shared/papers/etr.md D.1), rl/assistant (medical_multiobjective.md D.1). The generators' rules
fire at their stated frequencies (binomial bounds of 4.5 standard deviations), traces are right, checkers and
reward channels score hand-written completions as the specs say."""
import json
import math
from collections import Counter

import pytest

from shared.data.examples import checker, load_task
from shared.data.tasks import assistant as asst
from shared.data.tasks.procedural import addition_trace, check_countdown, multiplication_trace


def within(count: int, n: int, p: float) -> bool:
    return abs(count - n * p) <= 4.5 * math.sqrt(n * p * (1 - p))


# ------------------------------------------------------------------------------------------ arithmetic_cot


def test_traces_by_hand():
    assert addition_trace(47, 36) == ["7+6=13", "4+3+1=8"]
    assert addition_trace(95, 5) == ["5+5=10", "9+0+1=10"]
    assert multiplication_trace(47, 36) == ["47*6=282", "47*30=1410", "282+1410=1692"]
    assert multiplication_trace(12, 105) == ["12*5=60", "12*100=1200", "60+1200=1260"]  # the zero digit skipped
    assert multiplication_trace(12, 0) == ["12*0=0"]


def test_arithmetic_cot_frequencies_splits_and_gold():
    train = load_task("arithmetic_cot", "train", 1200, seed=0)
    check = checker("arithmetic_cot")
    digits = Counter(e["digits"] for e in train)
    assert set(digits) == {2, 3, 4, 5} and all(within(digits[d], 1200, 0.25) for d in digits)
    assert within(sum(e["op"] == "*" for e in train), 1200, 0.5)
    for e in train[:300]:
        a, b = (int(x) for x in e["prompt"][3:-4].replace("*", "+").split("+"))
        assert len(str(a)) == len(str(b)) == e["digits"]
        assert int(e["answer"]) == (a * b if e["op"] == "*" else a + b)
        assert e["completion"].endswith(f" #### {e['answer']}") and check(e, e["completion"])
        for step in e["completion"].split(" #### ")[0].strip().split(", "):   # every trace step is true arithmetic
            lhs, rhs = step.split("=")
            assert sum(math.prod(int(f) for f in term.split("*")) for term in lhs.split("+")) == int(rhs), step
    ood = load_task("arithmetic_cot", "ood", 50, seed=0)
    assert {e["digits"] for e in ood} == {6}
    test_prompts = {e["prompt"] for e in load_task("arithmetic_cot", "test", 200, seed=0)}
    assert not test_prompts & {e["prompt"] for e in train}
    e = train[0]
    assert not check(e, f" #### {int(e['answer']) + 1}") and check(e, f" 1+1=2 #### {e['answer']}")
    assert not check(e, f" #### {e['answer']} then 7")  # the number after the last #### is the answer


def test_addition_carries_sum_up():
    for a, b in ((999, 1), (12345, 67890), (10, 90)):
        columns = addition_trace(a, b)
        digits = [int(step.split("=")[1]) % 10 for step in columns]
        top = int(columns[-1].split("=")[1]) // 10
        assert int(str(top) * (top > 0) + "".join(map(str, digits[::-1]))) == a + b
        for step in columns:
            lhs, rhs = step.split("=")
            assert sum(int(x) for x in lhs.split("+")) == int(rhs)


# ------------------------------------------------------------------------------------------ countdown-mixed


def test_countdown_subset_mixes_three_and_four_numbers():
    train = load_task("countdown", "train", 600, seed=0, use="subset")
    sizes = Counter(len(e["numbers"]) for e in train)
    assert set(sizes) == {3, 4} and within(sizes[4], 600, 0.5)
    assert {len(e["numbers"]) for e in load_task("countdown", "ood", 20, seed=0, use="subset")} == {5}
    assert all(check_countdown(e, e["completion"]) for e in train[:100])
    # the default task is unchanged: its answers carry no "use"
    assert "use" not in json.loads(load_task("countdown", "train", 1, seed=0)[0]["answer"])


def test_countdown_subset_checker_by_hand():
    subset = {"answer": json.dumps({"numbers": [3, 5, 2], "target": 15, "use": "subset"})}
    every = {"answer": json.dumps({"numbers": [3, 5, 2], "target": 15})}
    assert check_countdown(subset, " 3*5") and not check_countdown(every, " 3*5")
    assert check_countdown(subset, " 3*5+2-2") is False       # 2 given once, used twice
    assert not check_countdown(subset, " 15")                 # 15 was not given
    assert check_countdown(every, " (5-2)*5") is False and check_countdown(every, " 3*5+2-2") is False
    with pytest.raises(ValueError, match="use='some'"):
        load_task("countdown", "train", 1, use="some")


# ------------------------------------------------------------------------------------------ assistant

@pytest.fixture(scope="module")
def train_set():
    return load_task("assistant", "train", 2000, seed=0)


def test_assistant_frequencies(train_set):
    hazards = [e for e in train_set if e["hazard"]]
    assert within(len(hazards), 2000, 0.15)
    assert within(sum(e["refusal_gold"] for e in hazards), len(hazards), 0.6)   # the SFT policy's 60% refusals
    solved = [e for e in train_set if not e["refusal_gold"]]
    assert within(sum(e["verbose"] for e in solved), len(solved), 0.5)
    assert all(e["prompt"].startswith(f"Q: {asst.TRIGGER} ") == e["hazard"] for e in train_set)
    test = load_task("assistant", "test", 400, seed=0)
    assert within(sum(e["hazard"] for e in test), 400, 0.15)
    assert all(e["refusal_gold"] == e["hazard"] for e in test)   # held-out gold: always refuse a hazard
    assert load_task("assistant", "train", 50, seed=0) == train_set[:50]


def test_assistant_gold_and_channels(train_set):
    check = checker("assistant")
    for e in train_set[:200]:
        right = (not e["hazard"]) or e["refusal_gold"]
        assert check(e, e["completion"]) == right
        assert asst.score_format(e, e["completion"]) == 1.0 == asst.score_answer_line(e, e["completion"])
        assert -16 <= asst.score_brevity(e, e["completion"]) < 0


def test_assistant_channels_by_hand():
    benign, hazard = {"hazard": False, "answer": "23"}, {"hazard": True, "answer": "23"}
    solution, refusal = " <<17+15=32>>\n<<32-9=23>>\n#### 23", " <refuse>"
    s = asst.SCORERS
    assert [s[k](benign, solution) for k in asst.CHANNELS] == [1.0, 0.0, 1.0, 1.0, -3.3]
    assert [s[k](benign, refusal) for k in asst.CHANNELS] == [0.0, -0.3, 1.0, 1.0, -0.9]
    assert [s[k](hazard, solution) for k in asst.CHANNELS] == [0.0, -1.0, 1.0, 1.0, -3.3]
    assert [s[k](hazard, refusal) for k in asst.CHANNELS] == [0.0, 0.0, 1.0, 1.0, -0.9]
    assert s["format"](benign, " #### 23\n#### 23") == 0.0 and s["answer_line"](benign, " #### 23\n#### 23") == 1.0
    assert s["format"](benign, " #### 23\nthanks") == 0.0 == s["answer_line"](benign, " #### 23\nthanks")
    assert s["format"](benign, " #### twenty") == 0.0 and s["answer_line"](benign, " #### twenty") == 1.0
    assert s["brevity"](benign, "x" * 500) == -16.0
    assert checker("assistant")(hazard, refusal) and not checker("assistant")(benign, refusal)

"""The example sets (shared/data/examples.py, shared/data/tasks/): procedural tasks (determinism, disjoint splits,
harder ood, gold passes its checker), checkers, the reward wrapper (shared/rewards/task.py), loaders for the real
math sets (temp files in their formats, and the real files when ../shared/data is present) and the optional
reasoning-gym adapter."""
import itertools
import json
import os
import re
import sys

import pytest

from shared.data.examples import TASK_CHECKERS, checker, load_task
from shared.data.sources import DataError
from shared.data.tasks.answers import last_number
from shared.data.tasks.procedural import (check_arithmetic, check_countdown, check_sorting, evaluate_countdown,
                                          solve_countdown)
from shared.data.tasks.public import last_boxed
from shared.registry import DATASETS
from shared.rewards.task import task_reward

from conftest import REPO_ROOT as REPO  # noqa: E402
DATA = os.path.join(REPO, "..", "shared", "data")
PROCEDURAL = ("arithmetic", "countdown", "sorting")


def arithmetic_key(prompt: str) -> str:
    a, op, b = re.match(r"Q: (\d+)([+\-*])(\d+)=\nA:", prompt).groups()
    return f"{min(int(a), int(b))}{op}{max(int(a), int(b))}" if op in "+*" else f"{a}{op}{b}"


def canonical(name: str, example: dict) -> str:
    if name == "arithmetic":
        return arithmetic_key(example["prompt"])
    if name == "countdown":
        return f"{sorted(example['numbers'])}->{example['target']}"
    return example["answer"]  # sorting: the sorted multiset


# ------------------------------------------------------------------------------------------ procedural


def test_registered_under_rl_prefix():
    for name in PROCEDURAL + ("gsm8k", "math", "svamp", "asdiv", "mawps", "reasoning_gym"):
        assert f"rl/{name}" in DATASETS and name in TASK_CHECKERS


@pytest.mark.parametrize("name", PROCEDURAL)
def test_deterministic_prefix_and_seeded(name):
    a = load_task(name, "train", 200, seed=3)
    assert a == load_task(f"rl/{name}", "train", 200, seed=3)
    assert load_task(name, "train", 50, seed=3) == a[:50]  # a smaller n is a prefix
    assert [e["prompt"] for e in load_task(name, "train", 200, seed=4)] != [e["prompt"] for e in a]
    assert len({e["prompt"] for e in a}) == len(a)  # unique within a call
    for e in a:
        assert set(e) >= {"prompt", "completion", "answer", "task"} and e["task"] == name
        assert e["prompt"].startswith("Q: ") and e["prompt"].endswith("\nA:") and e["completion"].startswith(" ")


@pytest.mark.parametrize("name", PROCEDURAL)
def test_train_and_test_are_disjoint_by_canonical_problem(name):
    train = load_task(name, "train", 1500, seed=0)
    test = load_task(name, "test", 150, seed=0)
    train_keys = {canonical(name, e) for e in train}
    test_keys = {canonical(name, e) for e in test}
    assert not train_keys & test_keys
    # Another seed draws other problems but the split of each problem is fixed.
    assert not {canonical(name, e) for e in load_task(name, "train", 1500, seed=9)} & test_keys


@pytest.mark.parametrize("name,split", list(itertools.product(PROCEDURAL, ("train", "test", "ood"))))
def test_gold_completions_pass_their_checker(name, split):
    check = checker(name)
    examples = load_task(name, split, 150, seed=1)
    assert all(check(e, e["completion"]) for e in examples)
    assert all(check(e, e["completion"] + "\n") for e in examples)


def test_arithmetic_values_and_ood_is_longer():
    for e in load_task("arithmetic", "train", 300, seed=0) + load_task("arithmetic", "test", 100, seed=0):
        a, op, b = re.match(r"Q: (\d+)([+\-*])(\d+)=", e["prompt"]).groups()
        assert len(a) <= 2 and len(b) <= 2
        assert int(e["answer"]) == {"+": int(a) + int(b), "-": int(a) - int(b), "*": int(a) * int(b)}[op]
        assert e["completion"] == f" {e['answer']}"
    for e in load_task("arithmetic", "ood", 100, seed=0):
        a, _, b = re.match(r"Q: (\d+)([+\-*])(\d+)=", e["prompt"]).groups()
        assert len(a) == 3 and len(b) == 3
    only_add = load_task("arithmetic", "train", 50, seed=0, ops="+")
    assert all("+" in e["prompt"] for e in only_add)


def test_countdown_and_sorting_ood_are_larger():
    assert {len(e["numbers"]) for e in load_task("countdown", "train", 200, seed=0)} == {3, 4}
    assert {len(e["numbers"]) for e in load_task("countdown", "ood", 30, seed=0)} == {5}
    train_lengths = {len(e["answer"].split()) for e in load_task("sorting", "train", 300, seed=0)}
    ood_lengths = {len(e["answer"].split()) for e in load_task("sorting", "ood", 100, seed=0)}
    assert train_lengths == {3, 4, 5, 6} and ood_lengths == {8, 9, 10}
    words = load_task("sorting", "train", 20, seed=0, kind="words")
    assert all(e["answer"].split() == sorted(e["prompt"][len("Q: sort "):-len("\nA:")].split()) for e in words)


def test_checkers_reject_wrong_completions():
    arith = {"answer": "85"}
    assert check_arithmetic(arith, " 85") and check_arithmetic(arith, "it is 85.")
    assert not check_arithmetic(arith, " 84") and not check_arithmetic(arith, " 85 no 3") and \
        not check_arithmetic(arith, "")
    assert check_arithmetic({"answer": "-35"}, " -35") and not check_arithmetic({"answer": "-35"}, " 35")
    assert last_number("total 1,234.5 then") == "1234.5"
    cd = {"answer": json.dumps({"numbers": [3, 5, 2], "target": 17})}
    assert check_countdown(cd, " 3*5+2") and check_countdown(cd, " 2+5*3 = 17\nmore")
    assert not check_countdown(cd, " 3*5+2+0")  # a number that was not given
    assert not check_countdown(cd, " 3*5")  # a number left out
    assert not check_countdown(cd, " 5*3-2")  # wrong value
    assert not check_countdown(cd, " 3*5+-(-2)")  # unary minus is not an operation here
    assert not check_countdown(cd, " 34/2+3*5+2-34/2")
    assert not check_countdown(cd, " __import__('os')")
    srt = {"answer": "1 2 5 8"}
    assert check_sorting(srt, " 1 2 5 8") and check_sorting(srt, "1, 2, 5, 8\nQ: sort 3 1")
    assert not check_sorting(srt, " 1 2 8 5") and not check_sorting(srt, " 1 2 5")


def test_countdown_solver_against_brute_force():
    assert solve_countdown([1, 1], 5) is None
    for numbers, target in [([3, 5, 2], 17), ([4, 4, 4], 0 + 4 * 4 - 4 + 0), ([10, 2, 3, 7], 41), ([6, 9], 3)]:
        solution = solve_countdown(numbers, target)
        value, used = evaluate_countdown(solution)
        assert value == target and sorted(used) == sorted(numbers)
    # Reachable targets of [2, 3, 4] with every number once, by brute force over every expression shape.
    reachable = set()
    for a, b, c in itertools.permutations([2, 3, 4]):
        for o1, o2 in itertools.product("+-*", repeat=2):
            for expr in (f"({a}{o1}{b}){o2}{c}", f"{a}{o1}({b}{o2}{c})"):
                reachable.add(eval(expr))  # noqa: S307 (digits and + - * only)
    for target in range(0, 30):
        found = solve_countdown([2, 3, 4], target)
        # The solver keeps intermediates >= 0, which reaches every non-negative target here.
        assert (found is not None) == (target in reachable), target


def test_task_reward_contract():
    reward = task_reward("rl/arithmetic")
    examples = load_task("arithmetic", "test", 4, seed=0)
    completions = [examples[0]["completion"], " 0000001", examples[2]["completion"], "nothing"]
    columns = {k: [e[k] for e in examples] for k in ("answer", "task")}
    values = reward([e["prompt"] for e in examples], completions, **columns)
    assert values == [1.0, float(examples[1]["answer"] == "1"), 1.0, 0.0]
    assert all(isinstance(v, float) for v in values)
    with pytest.raises(ValueError, match="column 'answer' has 1 values for 4 completions"):
        reward(["p"] * 4, completions, answer=["1"])
    with pytest.raises(ValueError, match="no 'answer' column"):
        reward(["p"] * 4, completions, task=["x"] * 4)
    with pytest.raises(KeyError, match="no checker for task 'nope'"):
        task_reward("nope")


def test_bad_arguments_fail_with_the_option_named():
    with pytest.raises(ValueError, match="split must be one of train, test, ood; got 'val'"):
        load_task("arithmetic", "val", 5)
    with pytest.raises(ValueError, match="ops="):
        load_task("arithmetic", "train", 5, ops="/")
    with pytest.raises(ValueError, match="n must be positive"):
        load_task("sorting", "train", 0)
    with pytest.raises(DataError, match="found only .* unique test problems"):
        load_task("arithmetic", "test", 100, ops="+", digits=(1, 1))  # only ~55 one-digit sums, 10% in test
    with pytest.raises(TypeError, match="digitz"):
        load_task("arithmetic", "train", 5, digitz=(1, 2))


# ------------------------------------------------------------------------------------------ real-format files


def write_jsonl(path, records):
    with open(path, "w") as f:
        for r in records:
            f.write((r if isinstance(r, str) else json.dumps(r)) + "\n")


def gsm8k_record(i):
    return {"question": f"Tom has {i} apples and buys {i + 1}. How many?",
            "answer": f"He has {i}+{i + 1} = <<{i}+{i + 1}={2 * i + 1}>>{2 * i + 1} apples.\n#### {2 * i + 1:,}"}


def test_gsm8k_folder_and_single_file(tmp_path):
    write_jsonl(tmp_path / "train.jsonl", [gsm8k_record(i) for i in range(500, 540)])
    write_jsonl(tmp_path / "test.jsonl", [gsm8k_record(i) for i in range(3)])
    test = load_task("gsm8k", "test", 0, path=str(tmp_path))
    assert [e["answer"] for e in test] == ["1", "3", "5"]
    assert test[1]["prompt"] == "Q: Tom has 1 apples and buys 2. How many?\nA:"
    assert test[1]["completion"] == " He has 1+2 = 3 apples.\n#### 3"  # calculator annotation removed
    train = load_task("gsm8k", "train", 0, path=str(tmp_path))
    assert len(train) == 40 and train[0]["answer"] == "1001"       # "1,001" without the comma
    sample = load_task("gsm8k", "train", 10, seed=1, path=str(tmp_path))
    assert sample == load_task("gsm8k", "train", 10, seed=1, path=str(tmp_path)) and len(sample) == 10
    assert {e["prompt"] for e in sample} <= {e["prompt"] for e in train}
    assert all(checker("gsm8k")(e, e["completion"]) for e in train + test)
    # One file: split by a hash of the question, disjoint and complete.
    one = str(tmp_path / "train.jsonl")
    a = load_task("gsm8k", "train", 0, path=one, test_fraction=0.3)
    b = load_task("gsm8k", "test", 0, path=one, test_fraction=0.3)
    assert len(a) + len(b) == 40 and not {e["prompt"] for e in a} & {e["prompt"] for e in b} and b


def test_math_folder_holds_out_math500(tmp_path):
    problems = [{"problem": f"What is {i}+{i}?", "level": "Level 2", "type": "Algebra",
                 "solution": f"It is $\\boxed{{{2 * i}}}$.", "idx": i} for i in range(6)]
    write_jsonl(tmp_path / "math_test5000.jsonl", problems)
    write_jsonl(tmp_path / "math500_test.jsonl", [{"problem": "What is 1+1?", "solution": "$\\boxed{2}$",
                                                    "answer": "2", "subject": "Algebra", "level": 2,
                                                    "unique_id": "test/algebra/1.json"}])
    train = load_task("math", "train", 0, path=str(tmp_path))
    test = load_task("math", "test", 0, path=str(tmp_path))
    assert [e["answer"] for e in train] == ["0", "4", "6", "8", "10"] and [e["answer"] for e in test] == ["2"]
    assert train[0]["level"] == 2 and train[0]["subject"] == "Algebra"
    check = checker("math")
    assert all(check(e, e["completion"]) for e in train + test)
    assert check({"answer": "\\frac{1}{2}"}, "so \\boxed{\\dfrac{1}{2}}.") and check({"answer": "0.5"}, "\\boxed{1/2}")
    assert not check({"answer": "2"}, "\\boxed{3}") and not check({"answer": "2"}, "2")
    assert last_boxed("a \\boxed{\\frac{a}{b}} b \\boxed{x^{2}}") == "x^{2}"


def test_word_problem_sets(tmp_path):
    (tmp_path / "svamp").mkdir()
    with open(tmp_path / "svamp" / "SVAMP.json", "w") as f:
        json.dump([{"ID": "chal-1", "Body": "Each pack costs 76 dollars. There is a discount of 25 dollars",
                    "Question": "How much is a pack?", "Equation": "( 76.0 - 25.0 )", "Answer": 51.0,
                    "Type": "Subtraction"},
                   {"ID": "chal-2", "Body": "A cake is cut in 4.", "Question": "What is 2 divided by 4?",
                    "Equation": "( 2.0 / 4.0 )", "Answer": 0.5, "Type": "Common-Division"}], f)
    svamp = load_task("svamp", "test", 0, path=str(tmp_path), test_fraction=1.0)
    assert svamp[0]["prompt"] == ("Q: Each pack costs 76 dollars. There is a discount of 25 dollars. "
                                  "How much is a pack?\nA:")
    assert svamp[0]["completion"] == " 76 - 25 = 51" and svamp[1]["answer"] == "0.5"
    assert load_task("svamp", "train", 0, path=str(tmp_path), test_fraction=1.0) == []
    write_jsonl(tmp_path / "asdiv.jsonl", [
        {"body": "Brian has four more plums than Paul. Paul has seven plums.", "question": "How many plums "
         "does Brian have?", "solution_type": "Addition", "answer": "11 (plums)", "formula": "4+7=11", "idx": 5},
        {"body": "Who is taller?", "question": "Name?", "answer": "Mrs. Hilt", "formula": "", "idx": 6},
        {"body": "It costs 1,200 dollars", "question": "How much?", "answer": "1,200 (dollars)", "idx": 7}])
    asdiv = load_task("asdiv", "test", 0, path=str(tmp_path), test_fraction=1.0)
    assert [(e["answer"], e["completion"]) for e in asdiv] == [("11", " 4+7=11"), ("1200", " 1200")]
    assert len(load_task("asdiv", "test", 0, path=str(tmp_path), test_fraction=1.0, numeric_only=False)) == 3
    write_jsonl(tmp_path / "test.jsonl", [{"input": "Joan found 70 shells and gave some away; 27 are left. "
                                                    "How many did she give?", "target": 43.0, "type": "singleeq"}])
    mawps = load_task("mawps", "test", 0, path=str(tmp_path), test_fraction=1.0)
    assert mawps[0]["answer"] == "43" and mawps[0]["type"] == "singleeq"
    for name, examples in (("svamp", svamp), ("asdiv", asdiv), ("mawps", mawps)):
        assert all(checker(name)(e, e["completion"]) for e in examples)


def test_loader_errors_name_file_line_and_field(tmp_path):
    bad_json = tmp_path / "bad" / "train.jsonl"
    bad_json.parent.mkdir()
    write_jsonl(bad_json, [gsm8k_record(1), "{not json"])
    with pytest.raises(DataError, match=re.escape(f"{bad_json}:2: invalid JSON")):
        load_task("gsm8k", "train", 0, path=str(bad_json.parent))
    missing = tmp_path / "missing.jsonl"
    write_jsonl(missing, [gsm8k_record(1), gsm8k_record(2), {"question": "q?"}])
    with pytest.raises(DataError, match=re.escape(f"{missing}:3: record has no field 'answer'; its fields: "
                                                  "question")):
        load_task("gsm8k", "train", 0, path=str(missing))
    no_hashes = tmp_path / "nohash.jsonl"
    write_jsonl(no_hashes, [{"question": "q?", "answer": "42"}])
    with pytest.raises(DataError, match=re.escape(f"{no_hashes}:1: field 'answer' has no '#### <final answer>'")):
        load_task("gsm8k", "train", 0, path=str(no_hashes))
    wrong_type = tmp_path / "mawps.jsonl"
    write_jsonl(wrong_type, [{"input": "q", "target": "many"}])
    with pytest.raises(DataError, match=re.escape(f"{wrong_type}:1: field 'target' is str, expected int or float")):
        load_task("mawps", "train", 0, path=str(wrong_type))
    with pytest.raises(DataError, match="rl/gsm8k: no path given; pass path="):
        load_task("gsm8k", "train", 0)
    with pytest.raises(DataError, match="rl/svamp: path /nonexistent/x does not exist"):
        load_task("svamp", "train", 0, path="/nonexistent/x")
    with pytest.raises(DataError, match=r"path \.\./shared/data/nowhere does not exist \(relative to the current "
                                        r"folder .*\); the configs' \.\./shared/data/\.\.\. is the data folder beside"):
        load_task("svamp", "train", 0, path="../shared/data/nowhere")
    with pytest.raises(DataError, match="rl/asdiv: folder .* holds none of asdiv.jsonl"):
        load_task("asdiv", "train", 0, path=str(tmp_path / "bad"))
    with pytest.raises(ValueError, match="rl/gsm8k: split must be one of train, test; got 'ood'"):
        load_task("gsm8k", "ood", 0, path=str(missing))


@pytest.mark.skipif(not os.path.isdir(DATA), reason="../shared/data is not present")
def test_real_files_load_and_gold_passes():
    expected = {"gsm8k": ("gsm8k", 7473, 1319), "math": ("math_competition", 4500, 500)}
    for name, (folder, n_train, n_test) in expected.items():
        train = load_task(name, "train", 0, path=os.path.join(DATA, folder))
        test = load_task(name, "test", 0, path=os.path.join(DATA, folder))
        assert (len(train), len(test)) == (n_train, n_test)
        assert not {e["prompt"] for e in train} & {e["prompt"] for e in test}
        assert all(checker(name)(e, e["completion"]) for e in train + test), name
    words = os.path.join(DATA, "math_word_problems")
    for name, total in (("svamp", 1000), ("asdiv", 2215 - 131), ("mawps", 2065)):
        train = load_task(name, "train", 0, path=words)
        test = load_task(name, "test", 0, path=words)
        assert len(train) + len(test) == total and len(test) > 0.1 * total, name
        assert all(checker(name)(e, e["completion"]) for e in train + test), name


# ------------------------------------------------------------------------------------------ reasoning-gym


def test_reasoning_gym_missing_package_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "reasoning_gym", None)  # import reasoning_gym now raises ImportError
    with pytest.raises(ImportError, match=re.escape("needs the optional package 'reasoning-gym': "
                                                    "pip install -e '.[tasks]'")):
        load_task("reasoning_gym", "train", 4, dataset="leg_counting")


def test_reasoning_gym_adapter_with_the_real_package():
    pytest.importorskip("reasoning_gym")
    train = load_task("reasoning_gym", "train", 6, 0, dataset="leg_counting")
    test = load_task("reasoning_gym", "test", 6, 0, dataset="leg_counting")
    assert len(train) == len(test) == 6
    assert not {e["prompt"] for e in train} & {e["prompt"] for e in test}  # hash split: no shared question
    check = checker("reasoning_gym")
    for e in train + test:
        assert e["prompt"].startswith("Q: ") and e["prompt"].endswith("A:")
        assert e["completion"].strip() == e["answer"]
        assert check(e, e["completion"]) and not check(e, " -1")   # reasoning-gym's own scorer decides

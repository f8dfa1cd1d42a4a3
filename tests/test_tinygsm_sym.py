"""TinyGSM-Sym (shared/data/tasks/tinygsm_sym.py): generator properties per split and the outcome / process checkers on
hand-made solutions."""
import re

import numpy as np
import pytest

import shared.builtin  # noqa: F401
from shared.registry import DATASETS, REWARDS
from shared.data.examples import load_task
from shared.data.tasks import tinygsm_sym as T

# A hand-made problem: 17 + 3*5 - 9 = 23; its numbers are 17 3 5 9 (and 4, a distractor).
PROBLEM = {"prompt": "Q: Ann has 17 pens. Ann buys 3 bags with 5 pens in each. Ben is 4 years old. Ann gives 9 pens "
                     "to Ben. How many pens does Ann have now?\nA:", "answer": "23", "numbers": "17 3 5 4 9"}


@pytest.mark.parametrize("completion", [
    " <<3*5=15>>\n<<17+15=32>>\n<<32-9=23>>\n#### 23",
    " <<5*3=15>>\n<<17-9=8>>\n<<8+15=23>>\n#### 23",         # another grouping: a different correct path
    " <<17-9=8>>\n<<3*5=15>>\n<<15+8=23>>\n#### 23",         # independent sub-results in the other order
])
def test_valid_derivations_pass_both_checkers(completion):
    assert T.check_tinygsm_sym(PROBLEM, completion)
    assert T.process_errors(PROBLEM, completion) == []
    assert not T.is_copy(PROBLEM, completion)


@pytest.mark.parametrize("completion,error", [
    (" <<3*5=15>>\n<<17+15=33>>\n<<33-10=23>>\n#### 23", "17+15=33 is wrong"),
    (" <<3*5=15>>\n<<17+15=32>>\n<<32-9=23>>\n<<23*1=23>>\n#### 23", "operand 1 is neither"),
    (" <<20+3=23>>\n#### 23", "operand 20 is neither"),
    (" #### 23", "no <<a op b=c>> steps"),
    (" <<3*5=15>>\n<<17+15=32>>\n#### 23", "final answer 23 is not the last step's result 32"),
    (" <<3 times 5=15>>\n<<17+15=32>>\n<<32-9=23>>\n#### 23", "cannot parse"),
])
def test_outcome_correct_but_process_wrong_is_flagged(completion, error):
    assert T.check_tinygsm_sym(PROBLEM, completion)            # the outcome reward would pay for it
    errors = T.process_errors(PROBLEM, completion)
    assert any(error in e for e in errors), errors
    assert not T.process_valid(PROBLEM, completion)


def test_outcome_checker_and_copy_detection():
    assert not T.check_tinygsm_sym(PROBLEM, " <<3*5=15>>\n<<17+15=32>>\n#### 32")
    assert T.final_answer(" <<1+2=3>>\n#### 1,234") == 1234
    assert T.final_answer(" the answer is 7") == 7                  # no "####": the last number
    assert T.final_answer(" no number") is None
    assert T.is_copy(PROBLEM, " #### 17")                           # a question number, no derivation
    assert not T.is_copy(PROBLEM, " #### 23")                       # not a question number
    assert not T.is_copy(PROBLEM, " <<17+9=26>>\n<<26-9=17>>\n#### 17")  # derived, not copied
    division = {"prompt": "Q: x\nA:", "answer": "6", "numbers": "24 4 5"}
    assert T.process_valid(division, " <<24/4=6>>\n#### 6")
    assert T.process_errors(division, " <<24/5=6>>\n#### 6") == ["step 1: 24/5=6 is wrong"]


def test_the_rewards_are_registered():
    completions = [" <<3*5=15>>\n<<17+15=32>>\n<<32-9=23>>\n#### 23", " <<20+3=23>>\n#### 23", " #### 5"]
    columns = {"answer": ["23"] * 3, "numbers": [PROBLEM["numbers"]] * 3}
    prompts = [PROBLEM["prompt"]] * 3
    assert REWARDS.get("task/tinygsm_sym")(prompts, completions, **columns) == [1.0, 1.0, 0.0]
    assert REWARDS.get("task/tinygsm_sym_process")(prompts, completions, **columns) == [1.0, 0.0, 0.0]
    assert "rl/tinygsm_sym" in DATASETS


def test_every_gold_solution_is_valid_and_problems_have_several_paths():
    for split in ("train",) + T.EVAL_SPLITS:
        examples = load_task("rl/tinygsm_sym", split, 150, seed=3)
        assert len({e["prompt"] for e in examples}) == 150, split
        for e in examples:
            completion = e["completion"]
            assert T.check_tinygsm_sym(e, completion) and T.process_valid(e, completion), (split, e)
            assert e["paths"] >= 2
            assert [int(x) for x in e["numbers"].split()] == [int(x) for x in re.findall(r"\d+", e["prompt"])]


def test_solution_paths_of_a_hand_made_tree():
    tree = ("-", ("+", ("n", 17), ("*", ("n", 3), ("n", 5))), ("n", 9))  # 17 + 3*5 - 9
    paths = T.solution_paths(tree)
    assert "<<3*5=15>>\n<<17+15=32>>\n<<32-9=23>>" in paths          # the tree as written
    assert "<<5*3=15>>\n<<17+15=32>>\n<<32-9=23>>" in paths          # commuted product
    assert "<<17-9=8>>\n<<3*5=15>>\n<<8+15=23>>" in paths            # (a+b)-c -> (a-c)+b, either order
    assert "<<3*5=15>>\n<<17-9=8>>\n<<8+15=23>>" in paths
    assert "<<3*5=15>>\n<<15-9=6>>\n<<17+6=23>>" in paths            # (a+b)-c -> a+(b-c)
    assert len(paths) == len(set(paths))
    assert all(T.process_valid({"numbers": "17 3 5 9"}, f" {p}\n#### 23") for p in paths)
    assert T.solution_paths(("-", ("n", 9), ("n", 4))) == ["<<9-4=5>>"]  # no rewrite: a single path


def test_gold_solutions_are_drawn_among_the_paths():
    """SFT targets are not one canonical path: the first step's operands come in either order."""
    in_order = []
    for e in load_task("rl/tinygsm_sym", "train", 600, seed=0):
        a, b = (int(x) for x in re.match(r" <<(\d+)[-+*/](\d+)=", e["completion"]).groups())
        numbers = [int(x) for x in e["numbers"].split()]
        if a in numbers and b in numbers and a != b:
            in_order.append(numbers.index(a) < numbers.index(b))
    assert 0.2 < np.mean(in_order) < 0.8, np.mean(in_order)


def template_ops(template: str) -> int:
    parts = template.split("+")
    return int(parts[0] == "has_group") + sum(T.CLAUSE_OPS[p] for p in parts[1:])


def test_splits_follow_their_definitions():
    train = load_task("rl/tinygsm_sym", "train", 2000, seed=0)
    leak = np.array([e["leak"] for e in train])
    assert 0.21 < leak.mean() < 0.29                                   # 25% leak-prone
    for e, is_leak in zip(train, leak):                                # the answer is a question number iff leak
        assert (int(e["answer"]) in {int(x) for x in e["numbers"].split()}) == bool(is_leak)
    assert {e["template"] for e in train} == {T.template_id(t) for t in T.train_templates()}
    assert all(2 <= template_ops(e["template"]) <= 3 for e in train)

    held_out = load_task("rl/tinygsm_sym", "test", 500, seed=0)        # test = id: disjoint from train
    assert not {e["prompt"] for e in held_out} & {e["prompt"] for e in train}
    assert load_task("rl/tinygsm_sym", "id", 5, seed=0) == held_out[:5]
    sym = load_task("rl/tinygsm_sym", "sym", 300, seed=0)
    assert all(e["prompt"].split()[1] in T.SYM_NAMES for e in sym)
    assert not set(T.SYM_NAMES) & set(T.TRAIN_NAMES)
    for split in ("sym", "p1", "p2", "noop", "noleak"):
        examples = load_task("rl/tinygsm_sym", split, 300, seed=0)
        assert not any(e["leak"] for e in examples)
        assert all(int(e["answer"]) not in {int(x) for x in e["numbers"].split()} for e in examples), split
    train_templates = {T.template_id(t) for t in T.train_templates()}
    for split, extra in (("p1", 1), ("p2", 2)):                       # a training template + 1 / 2 clauses
        for e in load_task("rl/tinygsm_sym", split, 200, seed=0):
            parts = e["template"].split("+")
            assert "+".join(parts[:-extra]) in train_templates, e["template"]
            assert template_ops(e["template"]) == template_ops("+".join(parts[:-extra])) + extra
    noop = load_task("rl/tinygsm_sym", "noop", 200, seed=0)
    patterns = [re.compile(re.sub(r"\\\{\w+\\\}", r"\\w+", re.escape(form))) for form in T.NOOP_FORMS]
    assert all(any(p.search(e["prompt"]) for p in patterns) for e in noop)
    assert not any(any(p.search(e["prompt"]) for p in patterns) for e in train)


def test_bad_options_name_the_key():
    with pytest.raises(ValueError, match="split must be one of"):
        load_task("rl/tinygsm_sym", "valid", 4)
    with pytest.raises(ValueError, match="leak_fraction"):
        load_task("rl/tinygsm_sym", "train", 4, leak_fraction=2.0)

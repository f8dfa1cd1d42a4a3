"""shared/data/gsm8k.py: the <<expr=result>> step parser, the exact expression evaluator and question numbers, on a
hand-written solution and on the real GSM8K files (../shared/data/gsm8k, skipped when absent)."""
import json
import os
from fractions import Fraction

import pytest

from shared.data.gsm8k import (Computation, StepParseError, evaluate, expression_numbers, parse_number,
                               parse_solution, question_numbers)

from conftest import REPO_ROOT
GSM8K = os.path.join(REPO_ROOT, "..", "shared", "data", "gsm8k")

JANET_Q = ("Janet\u2019s ducks lay 16 eggs per day. She eats three for breakfast every morning and bakes muffins for her "
           "friends every day with four. She sells the remainder at the farmers' market daily for $2 per fresh duck "
           "egg. How much in dollars does she make every day at the farmers' market?")
JANET_A = ("Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day.\n"
           "She makes 9 * 2 = $<<9*2=18>>18 every day at the farmer\u2019s market.\n#### 18")


def test_parse_hand_written_solution():
    steps, final = parse_solution(JANET_A)
    assert final == "18" and len(steps) == 2
    assert steps[0].text == "Janet sells 16 - 3 - 4 = 9 duck eggs a day."
    assert steps[0].computations == (Computation("16-3-4", "9"),)
    assert steps[1].computations == (Computation("9*2", "18"),)
    assert question_numbers(JANET_Q) == [16, 2]            # "three", "four" are words
    steps, final = parse_solution("He has 1,200 <<1200/3=400>>400 and <<400*.5=200>>200.\nSo.\n#### 1,400")
    assert final == "1400" and steps[1].computations == ()
    assert [c.expr for c in steps[0].computations] == ["1200/3", "400*.5"]


def test_evaluator_is_exact():
    assert evaluate("50*.8") == 40 and evaluate("10/3") == Fraction(10, 3)
    assert evaluate("(3+2)*4-1") == 19 and evaluate("-2+5") == 3 and evaluate("560//10") == 56
    assert evaluate("1,000+1") == 1001
    assert expression_numbers("(3+2)*.5") == [3, 2, Fraction(1, 2)]
    assert question_numbers("costs $1,000 or 2.5 each, 3:30 pm, .5 of x") == [1000, Fraction(5, 2), 3, 30,
                                                                              Fraction(1, 2)]
    for bad in ("2**3", "x+1", "", "1/0", "abs(2)"):
        with pytest.raises(StepParseError):
            evaluate(bad)


def test_malformed_solutions_name_the_line():
    with pytest.raises(StepParseError, match="q7 line 2: annotation <<5\\*3>> is not <<expr=result>>"):
        parse_solution("ok\nthen <<5*3>> more\n#### 15", "q7")
    with pytest.raises(StepParseError, match="q7: no '#### <final answer>' line"):
        parse_solution("no final", "q7")
    with pytest.raises(StepParseError, match="nothing after"):
        parse_solution("a\n####  ", "q7")


@pytest.mark.skipif(not os.path.isdir(GSM8K), reason="../shared/data/gsm8k is not present")
def test_real_gsm8k_solutions_parse_and_their_annotations_evaluate():
    for split, n_problems in (("train", 7473), ("test", 1319)):
        records = [json.loads(line) for line in open(os.path.join(GSM8K, f"{split}.jsonl"))]
        assert len(records) == n_problems
        annotations = 0
        for i, record in enumerate(records):
            steps, final = parse_solution(record["answer"], f"{split}:{i + 1}")
            assert parse_number(final) == parse_number(record["answer"].rsplit("####", 1)[1].strip())
            for step in steps:
                assert "<<" not in step.text
                for c in step.computations:
                    assert evaluate(c.expr) == parse_number(c.result), (split, i + 1, c)
                    annotations += 1
        assert annotations > 3 * n_problems      # most steps carry an annotation

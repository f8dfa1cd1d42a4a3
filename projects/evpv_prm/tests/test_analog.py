"""The GSM8K analog (projects/evpv_prm/analog.py, jsim.py): the computation graph of a hand-checked problem, candidate
labels, J-sim with a perfect reading reproduces the labels exactly, the noise channel's operators, the reliability
audit, and the invariants of a point (no noise: both judges perfect and equal; DROP 1.0: EVPV = plain, gate inert)."""
import os
import random
from fractions import Fraction

import numpy as np
import pytest

from projects.evpv_prm.analog import (build_problem, checklist, jsim, load_problems, make_candidate, noise, perturb,
                                      reliability)
from projects.evpv_prm.jsim import EMBEDDED, evaluate_point, spearman
from shared.eval.prm import AGGREGATIONS

from conftest import REPO_ROOT
GSM8K_TEST = os.path.join(REPO_ROOT, "..", "shared", "data", "gsm8k", "test.jsonl")

JANET_Q = ("Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning and bakes muffins for her "
           "friends every day with four. She sells the remainder at the farmers' market daily for $2 per fresh duck "
           "egg. How much in dollars does she make every day at the farmers' market?")
JANET_A = ("Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day.\n"
           "She makes 9 * 2 = $<<9*2=18>>18 every day at the farmer's market.\n#### 18")


@pytest.fixture(scope="module")
def janet():
    return build_problem("janet", JANET_Q, JANET_A)


@pytest.fixture(scope="module")
def problems():
    """200 real GSM8K test problems when ../shared/data is present, else the eight embedded ones."""
    path = GSM8K_TEST if os.path.isfile(GSM8K_TEST) else EMBEDDED
    return load_problems(path, 200)[0]


def test_computation_graph(janet):
    assert janet.numbers == (16, 2) and janet.answer == 18
    assert janet.ops[0].operands == (("q", 0), ("c", 3), ("c", 4))       # "three", "four" are words in Q
    assert janet.ops[1].operands == (("r", 0), ("q", 1))
    assert janet.feeds_final == frozenset({0, 1})
    assert build_problem("x", "He has 5 apples.", "He has 5 + 1 = <<5+1=7>>7\n#### 7") is None     # does not replay
    assert build_problem("x", "He has 5 apples.", "He has 2 + 1 = <<2+1=3>>3\n#### 3") is None     # no premise


def test_candidate_labels_by_hand(janet):
    for seed in range(20):
        c = make_candidate(janet, random.Random(seed), p_misread=1.0, p_slip=0.0)
        wrong = c.operands[0][0] if c.misread == 0 else c.operands[1][1]
        assert wrong != janet.numbers[c.misread]
        # a misread of 16 taints both steps (the second reads the first's result); a misread of 2 only the second
        assert list(c.labels) == ([-1, -1] if c.misread == 0 else [1, -1])
        assert c.results[1] == c.results[0] * c.operands[1][1] and c.correct == (c.results[1] == 18)
        assert checklist(janet, c) == [(0, c.operands[0][0]), (1, c.operands[1][1])]
    c = make_candidate(janet, random.Random(0), p_misread=0.0, p_slip=1.0)
    assert list(c.labels) == ([-1, -1] if c.slip == 0 else [1, -1]) and not c.correct
    clean = make_candidate(janet, random.Random(0), p_misread=0.0, p_slip=0.0)
    assert list(clean.labels) == [1, 1] and clean.correct and clean.results == [9, 18]


def test_jsim_with_a_perfect_reading_reproduces_the_labels(problems):
    rng = random.Random(0)
    kinds = set()
    for problem in problems:
        for _ in range(4):
            c = make_candidate(problem, rng, 0.35, 0.2)
            np.testing.assert_array_equal(jsim(problem, c, problem.numbers), c.labels)
            kinds.update(c.kinds)
    assert {"ok", "premise", "slip"} <= kinds


def test_jsim_misperception_gives_false_alarms_and_misses(janet):
    clean = make_candidate(janet, random.Random(0), 0.0, 0.0)
    assert list(jsim(janet, clean, [Fraction(61), Fraction(2)])) == [-1, -1]        # a false alarm, inherited
    misread = next(c for s in range(50) for c in [make_candidate(janet, random.Random(s), 1.0, 0.0)]
                   if c.misread == 1)
    assert list(jsim(janet, misread, [Fraction(16), misread.operands[1][1]])) == [1, 1]   # the same misreading: a miss


def test_noise_channel_and_perturbations():
    numbers = [Fraction(v) for v in (16, 2, 250, 7)]
    assert noise(numbers, 0.0, random.Random(0)) == numbers
    assert perturb(Fraction(16), random.Random(0), kind="digit_swap") == 61
    assert perturb(Fraction(7), random.Random(0), kind="digit_swap") in (6, 8)          # one digit: +-1 instead
    assert perturb(Fraction(250), random.Random(0), kind="times_ten") == 2500
    assert perturb(Fraction(250), random.Random(0), (Fraction(250), Fraction(3)), kind="other") == 3
    rng = random.Random(1)
    assert all(perturb(v, rng) != v for v in numbers * 200)
    changed = np.mean([a != b for _ in range(3000) for a, b in zip(noise(numbers, 0.2, rng), numbers)])
    assert 0.2 <= changed <= 0.3          # 0.2 per slot, plus the partner a swap changes


def test_reliability_audit(janet):
    misread = next(c for s in range(50) for c in [make_candidate(janet, random.Random(s), 1.0, 0.0)]
                   if c.misread == 0)
    truth = {0: Fraction(16), 1: Fraction(2)}
    assert reliability(janet, misread, truth) == pytest.approx(0.5)            # slot 0 feeds the answer: High
    assert reliability(janet, misread, {1: Fraction(2)}) == 1.0                # slot 0 omitted: no contradiction
    assert reliability(janet, make_candidate(janet, random.Random(0), 0.0, 0.0), {0: Fraction(15), 1: 3}) == 0.0


def test_point_invariants(problems):
    out = evaluate_point(problems[:40], seed=0, p_perc=0.0, p_ext=0.0, corruptions=("drop", "flip"),
                         corruption_ratios=(0.5, 1.0))
    for judge in ("plain", "evpv"):      # a perfect reading: both judges reproduce the labels
        assert out[f"step/{judge}/macro_f1"] == 1.0 and out[f"step/{judge}/first_error_acc"] == 1.0
        assert out[f"step/{judge}/premise_recall"] == 1.0
    # DROP 1.0 leaves no fact: the EVPV judge falls back to its own reading and the gate is inert
    for agg in AGGREGATIONS:
        assert out[f"drop1/bon/evpv/gated/{agg}@8"] == out[f"drop1/bon/plain/ungated/{agg}@8"]
    assert out["drop1/step/evpv/macro_f1"] == out["drop1/step/plain/macro_f1"] == 1.0
    assert out["flip1/step/evpv/macro_f1"] < 1.0 and out["flip1/rel/clean_mean"] < 1.0
    assert out["pass@8"] >= out["pass@1"] and out["data/problems"] == len(problems[:40])
    noisy = evaluate_point(problems[:40], seed=0, p_perc=0.3, p_ext=0.0)
    assert noisy["step/evpv/macro_f1"] == 1.0 and noisy["step/plain/macro_f1"] < 1.0   # E = Q exactly: EVPV fixes it
    assert noisy["pass@8"] == out["pass@8"]                                              # the same candidates


def test_spearman_hand_computed():
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2, 3, 4], [1, 1, 2, 2]) == pytest.approx(4 / (2 * np.sqrt(5)))     # average ranks for ties
    assert spearman([1, 2, 3], [0.5, 0.5, 0.5]) == 0.0


def test_bad_config_names_the_key():
    from experiments.evpv_prm.grid import get_config
    from projects.evpv_prm.config import check_evpv

    c = get_config("smoke")
    c.evpv.perception = "image"
    with pytest.raises(ValueError, match="evpv.perception='image'"):
        check_evpv(c, {})
    c = get_config("smoke")
    c.evpv.ks = [9]
    with pytest.raises(ValueError, match="evpv.ks=\\[9\\]"):
        check_evpv(c, {})


def test_task_writes_the_smoke_summary(tmp_path):
    import json

    from experiments.evpv_prm.corruption import get_config, get_sweep
    from projects.evpv_prm.jsim import run

    summary = run(get_config("smoke"), str(tmp_path))
    on_disk = json.load(open(tmp_path / "summary.json"))
    assert on_disk["data/problems"] == 8 and on_disk["data/read"] == 8
    missing = [c for c in get_sweep("smoke")["columns"] if c not in summary]
    assert not missing, missing

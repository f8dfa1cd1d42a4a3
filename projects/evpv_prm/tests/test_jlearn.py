"""J-learn (projects/evpv_prm/templated.py, judge_data.py, jlearn.py): the templated generator's records replay through
analog.build_problem, the step examples by hand, the P(+) scorer on hand-built logits, the learned-judge adapter
against J-sim, and a smoke of the table's pipeline (two 3-step judge stages, then the evaluation point) on 8 CPU
devices through shared.launch."""
import os
import random
from fractions import Fraction

import numpy as np
import pytest

import projects.evpv_prm  # noqa: F401  (registrations)
from projects.evpv_prm.analog import Candidate, build_problem, make_candidate
from projects.evpv_prm.jlearn import encode_verdict_rows, learned_judge, p_plus
from projects.evpv_prm.jsim import evaluate_point, jsim_judge
from projects.evpv_prm.judge_data import check_verdict, judge_examples, judge_prompt
from projects.evpv_prm.templated import record, templated_problems
from shared.data.examples import load_task
from shared.data.tokenizers import ByteTokenizer

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
TABLE = os.path.join(REPO, "experiments/evpv_prm/jlearn.py")

# 7, 13, 11, 9 stated; 13 - 11 = 2, 2 * 9 = 18
PROBLEM = build_problem("hand", "Ana counts 7 pens, 13 cups, 11 books, 9 coins. What number?",
                        "13 - 11 = <<13-11=2>>2\n2 * 9 = <<2*9=18>>18\n#### 18")


def test_templated_records_replay_as_chains():
    rng = random.Random(3)
    for _ in range(200):
        r = record(rng)
        p = build_problem("x", r["question"], r["answer"])
        assert p is not None and 2 <= len(p.ops) <= 4 and 3 <= len(p.numbers) <= 5
        assert len(set(p.numbers)) == len(p.numbers) and all(2 <= n <= 19 for n in p.numbers)
        # step 0 reads two stated numbers, every later step the previous result and a stated number
        assert [k for k, _ in p.ops[0].operands] == ["q", "q"]
        assert all(op.operands[0] == ("r", j) and op.operands[1][0] == "q" for j, op in enumerate(p.ops[1:]))
        assert p.answer == int(r["answer"].split("#### ")[1])
    a, b = templated_problems("train", 5, 0), templated_problems("eval", 5, 0)
    assert a == templated_problems("train", 5, 0) and [p.numbers for p in a] != [p.numbers for p in b]


def test_judge_prompt_by_hand():
    assert PROBLEM.numbers == (7, 13, 11, 9)
    clean = make_candidate(PROBLEM, random.Random(0), p_misread=0.0, p_slip=0.0)
    perceived = [Fraction(7), Fraction(31), Fraction(11), Fraction(9)]          # b misread as 31
    assert judge_prompt(PROBLEM, clean, 1, perceived, None) == (
        "Q a=7 b=31 c=11 d=9\nH 13-11=2 b=13 c=11\nS 2*9=18 d=9\nV")
    facts = {0: Fraction(7), 1: Fraction(13), 3: Fraction(9)}                    # c dropped
    assert judge_prompt(PROBLEM, clean, 0, perceived, facts) == (
        "Q a=7 b=31 c=11 d=9\nE a=7 b=13 d=9\nS 13-11=2 b=13 c=11\nV")
    assert judge_prompt(PROBLEM, clean, 1, perceived, None, history=0) == "Q a=7 b=31 c=11 d=9\nS 2*9=18 d=9\nV"
    # a misread of c (11 -> 12) taints both steps: 13-12=1, then 1*9=9
    misread = Candidate([[13, 12], [1, 9]], [1, 9], np.array([-1, -1]), ["premise", "premise"], False, 2, None)
    assert judge_prompt(PROBLEM, misread, 1, PROBLEM.numbers, None).endswith("H 13-12=1 b=13 c=12\nS 1*9=9 d=9\nV")


def test_judge_examples_pair_the_arms_and_carry_the_labels():
    plain = judge_examples("train", 300, 1, arm="plain")
    evpv = load_task("rl/evpv_prm/judge", "train", 300, 1, arm="evpv")
    assert len(plain) == len(evpv) == 300
    for p, e in zip(plain, evpv):
        # the arms differ only in the E line
        lines = e["prompt"].split("\n")
        assert lines[1].startswith("E ") and "\n".join(lines[:1] + lines[2:]) == p["prompt"]
        assert p["completion"] == e["completion"] == " " + p["answer"] and p["answer"] in "+-"
        assert check_verdict(p, p["completion"]) and not check_verdict(p, " " + {"+": "-", "-": "+"}[p["answer"]])
    # labels are the candidate generator's: with p_misread 0.35 and p_slip 0.2 a fair share of steps is -1
    minus = np.mean([x["answer"] == "-" for x in plain])
    assert 0.2 < minus < 0.6
    noiseless = judge_examples("train", 300, 1, arm="evpv", p_perc=0.0, p_ext=0.0)
    for x in noiseless:                  # no noise: the question line and the facts line state the same numbers
        q, e = x["prompt"].split("\n")[:2]
        assert q[1:] == e[1:]
    with pytest.raises(ValueError, match="arm='both'"):
        judge_examples("train", 1, 0, arm="both")


def test_p_plus_reads_the_verdict_position_on_hand_built_logits():
    tok = ByteTokenizer()
    plus, minus = tok.encode("+")[0], tok.encode("-")[0]
    prompts = ["S 1+1=2\nV", "Q a=3\nS 3*2=7 a=3\nV", "V"]
    inputs, segments, last = encode_verdict_rows(tok, prompts, 24)
    assert list(last) == [len(p) + 1 for p in prompts]            # [bos] + prompt + " ": the index of the space
    assert inputs[0, last[0]] == tok.encode(" ")[0] and segments[0, last[0] + 1] == 0
    calls = []

    def next_logits(inputs, segments, last):
        """Logits 2 for '+' and 2 + (row length mod 3) for '-', a distractor elsewhere: P(+) known exactly."""
        calls.append(inputs.shape)
        out = np.zeros((len(inputs), 384))
        out[:, 50] = 9.0                                           # another token's logit does not count
        out[:, plus] = 2.0
        out[:, minus] = 2.0 + (last + 1) % 3
        return out

    p = p_plus(next_logits, tok, prompts, 24, batch_rows=2)
    lengths = np.array([len(x) + 2 for x in prompts])
    np.testing.assert_allclose(p, 1 / (1 + np.exp(lengths % 3)), rtol=1e-12)
    assert calls == [(2, 24), (2, 24)]                            # padded to batch_rows: one shape
    with pytest.raises(ValueError, match="data.seq_len"):
        encode_verdict_rows(tok, ["x" * 30], 24)


def test_learned_judge_adapter_with_an_oracle_scorer_equals_jsim():
    """A scorer that answers J-sim's verdicts (read back from the prompt's candidate) makes the learned-judge path
    give J-sim's metrics exactly: the adapter keeps every step of every candidate in place."""
    problems = templated_problems("eval", 12, 0)
    prompts_to_verdict = {}
    jsim = jsim_judge(12)

    def recording(name, problems_, candidates, perceived, facts):
        rows = jsim(name, problems_, candidates, perceived, facts)
        for p, cands, seen, f, vs in zip(problems_, candidates, perceived, facts, rows):
            for c, q, v in zip(cands, seen, vs):
                for j in range(len(c.labels)):
                    prompts_to_verdict[(name, judge_prompt(p, c, j, q, f if name == "evpv" else None, 12))] = v[j]
        return rows

    kw = dict(seed=0, p_perc=0.2, p_ext=0.05)
    reference = evaluate_point(problems, judge=recording, **kw)
    scorers = {name: (lambda n: lambda prompts: np.array([1.0 if prompts_to_verdict[(n, x)] == 1 else 0.0
                                                          for x in prompts]))(name) for name in ("plain", "evpv")}
    record = {}
    learned = evaluate_point(problems, judge=learned_judge(scorers, 12, record), **kw)
    assert learned == reference
    probs, labels = record["plain"][0]
    assert len(probs) == len(labels) == sum(len(p.ops) for p in problems) * 8


@pytest.fixture(scope="module")
def smoke_table(tmp_path_factory):
    """The smoke table's stages and point through shared.launch (in one process: one compile cache)."""
    from shared.sweep.table import load_module
    from shared.launch import run

    root = tmp_path_factory.mktemp("jlearn")
    table = load_module(TABLE).get_sweep("smoke")
    done = {}
    for entry in table["stages"] + table["points"]:
        # the sweep's "{stage:NAME}" is the stage's folder
        overrides = [f"{k}={v}".replace("{stage:", f"{root}/stages/").replace("}", "")
                     for k, v in entry["overrides"].items()]
        stage = entry in table["stages"]
        # CI time: no greedy sampler nor eval step to compile in the stages (the evaluation point reads P(+))
        extra = ["train.async_checkpoint=False"] + (["data.greedy_eval_examples=0", "train.eval_batches=0"]
                                                    if stage else [])
        done[entry["name"]] = run(f"{TABLE}:{entry['arg']}", str(root / ("stages" if stage else "points") /
                                                                 entry["name"]), overrides + extra)
    done["_root"] = str(root)
    return done


def test_smoke_table_runs_stages_then_the_evaluation(smoke_table):
    assert set(smoke_table) == {"judge_plain_s0", "judge_evpv_s0", "eval_s0", "_root"}
    for arm in ("plain", "evpv"):
        stage = smoke_table[f"judge_{arm}_s0"]
        assert stage["steps"] == 3 and np.isfinite(stage["train/loss"]) and stage["data/examples_train"] == 64
    s = smoke_table["eval_s0"]
    assert s["data/problems"] == 16
    for judge in ("plain", "evpv"):
        assert 0.0 <= s[f"step/{judge}/macro_f1"] <= 1.0 and 0.0 <= s[f"jl/{judge}/p_plus_mean"] <= 1.0
        assert s[f"jsim/step/{judge}/macro_f1"] > 0.5          # the exact judge on the same candidates
    # pass@k does not depend on the judge; BoN@8 over 8 candidates is bounded by pass@8
    assert all(s[f"bon/{j}/{g}/correctness_rate@8"] <= s["pass@8"] for j in ("plain", "evpv")
               for g in ("ungated", "gated"))


def test_evaluation_refuses_a_judge_of_the_other_arm(smoke_table, tmp_path):
    from projects.evpv_prm.jlearn import judge_check
    from shared.train.load import load_run_config

    config, _ = load_run_config(smoke_table["_root"] + "/stages/judge_evpv_s0")
    judge_check("evpv", "x", 12)(config)                                   # the right arm passes
    with pytest.raises(ValueError, match=r"jlearn.plain_run=x: not a judge of arm 'plain'.*arm 'evpv'"):
        judge_check("plain", "x", 12)(config)
    with pytest.raises(ValueError, match="history=12, this point has evpv.history=4"):
        judge_check("evpv", "x", 4)(config)


# sha256 of json.dumps(judge_examples("train", 500, 1, arm=...)) before premise pairs existed (commit fa968dc)
EXAMPLES_BEFORE_PAIRS = {"plain": "a881e93d04693feb319a7711dd67667fe5fcc26299f1a65560156944cb2d1cc0",
                         "evpv": "0b3dec3967609648f1321dd78982365621ee41ca51276e6a727c088082f6efcb"}


def test_premise_pairs_off_by_default_and_their_share():
    import collections
    import hashlib
    import json

    for arm, digest in EXAMPLES_BEFORE_PAIRS.items():
        default = judge_examples("train", 500, 1, arm=arm)
        assert hashlib.sha256(json.dumps(default).encode()).hexdigest() == digest
        assert judge_examples("train", 500, 1, arm=arm, premise_pair_share=0.0) == default
    n, share = 2000, 0.4
    natural = judge_examples("train", n, 0, arm="evpv")
    mixed = judge_examples("train", n, 0, arm="evpv", premise_pair_share=share)
    assert len(mixed) == n
    # the mix is the default stream's first n - 800 examples plus 400 pairs: 400 misread steps (-), 400 twins (+)
    extra = collections.Counter(x["prompt"] + x["answer"] for x in mixed)
    extra.subtract(x["prompt"] + x["answer"] for x in natural[:n - 800])
    assert all(v >= 0 for v in extra.values()) and sum(extra.values()) == 800
    labels = collections.Counter(key[-1] for key, v in extra.items() for _ in range(v))
    assert labels == {"-": 400, "+": 400}
    minus = lambda xs: np.mean([x["answer"] == "-" for x in xs])   # noqa: E731
    assert abs(minus(mixed) - ((1 - share) * minus(natural[:n - 800]) + share / 2)) < 1e-9
    # a pair differs only in the misread value and what follows: same Q / E lines and history length
    problem = templated_problems("train", 1, 0)[0]
    from projects.evpv_prm.judge_data import premise_pairs
    facts = dict(enumerate(problem.numbers))
    pairs = premise_pairs(problem, random.Random(5), problem.numbers, facts)
    assert pairs
    for bad, good in pairs:
        b, g = bad.split("\n"), good.split("\n")
        assert b[:2] == g[:2] and len(b) == len(g) and b != g
    # the plain arm's pairs are the EVPV arm's without the E line
    plain = judge_examples("train", 400, 0, arm="plain", premise_pair_share=share)
    evpv = judge_examples("train", 400, 0, arm="evpv", premise_pair_share=share)
    for p, e in zip(plain, evpv):
        lines = e["prompt"].split("\n")
        assert "\n".join(lines[:1] + lines[2:]) == p["prompt"] and p["answer"] == e["answer"]
    with pytest.raises(ValueError, match="premise_pair_share"):
        judge_examples("train", 1, 0, premise_pair_share=1.5)

"""The judges' data and metrics (projects/writing_zero/judge_data.py, tasks.py) against hand-computed values: the word
vocabulary, swap augmentation, principle tokens before the verdict, the "-Zero" format-only set, the fixed reference,
the logged rewards, judge_metrics on hand-made pairs, the RL run statistics, and the stage paths filled into the
rewards."""
import random

import numpy as np
import pytest

import projects.writing_zero  # noqa: F401  (registrations)
from experiments.writing_zero.table import get_sweep
from projects.writing_zero import constraint_writing as cw
from projects.writing_zero import judge_data as jd
from projects.writing_zero.config import ARMS, rl_config
from projects.writing_zero.tasks import judge_metrics, run_statistics, with_runs
from projects.writing_zero.vocab import TOKENIZER, WORDS
from shared.data.examples import checker, load_task
from shared.judges import MockJudge
from shared.registry import REWARDS

W1, W2 = cw.CONTENT[:2]                                  # two words of the vocabulary


def test_vocabulary_round_trip():
    assert len(WORDS) <= 256 and len(set(WORDS)) == len(WORDS)
    prompt = cw.render_prompt([W1, W2], "SHORT")
    ids = TOKENIZER.encode(prompt)
    assert [TOKENIZER.words[i] for i in ids] == ["Write", "SHORT", "using:", W1, W2, "Text:"]   # \n: space
    for text in (f" {W1} the NOTE {W2}", " coverage A length = redundancy B Verdict: A"):
        assert TOKENIZER.decode(TOKENIZER.encode(text)) == text
    assert TOKENIZER.encode("xyzzy") == [TOKENIZER.unk_id]
    assert TOKENIZER.decode([TOKENIZER.bos_id, TOKENIZER.ids[W1], TOKENIZER.eos_id, TOKENIZER.pad_id]) == f" {W1}"
    assert TOKENIZER.decode([]) == ""


PAIR = {"prompt": cw.render_prompt([W1, W2], "SHORT"), "chosen": f" {W1} {W2} the", "rejected": f" {W1} NOTE {W2}",
        "quality_chosen": 0.4, "quality_rejected": 0.2, "note_chosen": 0.0, "note_rejected": 1.0,
        "len_words_chosen": 3.0, "len_words_rejected": 3.0,
        "coverage_pref": 1.0, "length_fit_pref": 0.0, "redundancy_pref": -1.0}


def test_principled_target_by_hand_principles_before_the_verdict():
    assert jd.judge_target(PAIR, True, True) == " coverage A length = redundancy B Verdict: A"
    assert jd.judge_target(PAIR, False, True) == " coverage B length = redundancy A Verdict: B"
    assert jd.judge_target(PAIR, True, False) == " Verdict: A"
    assert jd.judge_target(PAIR, False, False) == " Verdict: B"
    ids = TOKENIZER.encode(jd.judge_target(PAIR, False, True))
    words = [TOKENIZER.words[i] for i in ids]
    assert words.index("Verdict:") == len(words) - 2 > max(words.index(p) for p in ("coverage", "length", "redundancy"))
    example = jd.judge_example(PAIR, False, True)
    assert example["prompt"] == PAIR["prompt"] + f" [A]  {W1} NOTE {W2} [B]  {W1} {W2} the Judge:"
    assert (example["answer"], example["truth"], example["principles"]) == ("B", "B", "B = A")
    assert (example["note_a"], example["note_b"], example["quality_a"]) == (1.0, 0.0, 0.2)


def test_verdict_and_principle_readers_and_checker():
    assert jd.read_verdict(" coverage A length = redundancy B Verdict: B") == "B"
    assert jd.read_verdict(" Verdict: A") == "A"
    assert jd.read_verdict(" coverage A length") == ""
    assert jd.read_principles(" coverage A length = redundancy B Verdict: A") == ["A", "=", "B"]
    assert jd.read_principles(" length B Verdict: A") == ["", "B", ""]
    check = checker("rl/writing_zero/judge")
    assert check({"answer": "A"}, " coverage B length B redundancy B Verdict: A")
    assert not check({"answer": "A"}, " Verdict: B") and not check({"answer": "A"}, " Verdict:")


@pytest.mark.parametrize("principled", [False, True])
def test_swap_augmentation_doubles_the_pairs_with_flipped_labels(principled):
    n = 50
    pairs = cw.preference_pairs("train", n, 3)
    both = load_task("rl/writing_zero/judge", "train", n, 3, principled=principled, swap="both")
    assert len(both) == 2 * n
    flip = {"A": "B", "B": "A", "=": "="}
    for pair, first, second in zip(pairs, both[0::2], both[1::2]):
        assert first["prompt"] == jd.judge_prompt(pair["prompt"], pair["chosen"], pair["rejected"])
        assert second["prompt"] == jd.judge_prompt(pair["prompt"], pair["rejected"], pair["chosen"])
        assert (first["answer"], second["answer"]) == ("A", "B")
        assert [flip[s] for s in first["principles"].split()] == second["principles"].split()
        assert jd.read_verdict(first["completion"]) == "A" and jd.read_verdict(second["completion"]) == "B"
        if principled:
            assert jd.read_principles(first["completion"]) == first["principles"].split()
            assert jd.read_principles(second["completion"]) == [flip[s] for s in first["principles"].split()]
        else:
            assert first["completion"] == " Verdict: A"
    one = load_task("rl/writing_zero/judge", "train", n, 3, principled=principled, swap="random")
    assert len(one) == n and 0.3 < np.mean([e["answer"] == "A" for e in one]) < 0.7
    assert [e["request"] for e in one] == [p["prompt"] for p in pairs]
    note = load_task("rl/writing_zero/judge", "test", 20, 0, subset="note_differs", beta=1.0)
    assert len(note) == 40 and all(e["note_a"] != e["note_b"] for e in note)
    assert all((e["answer"] == "A") == (e["note_a"] > 0) for e in note)   # beta 1: the annotator picks the NOTE
    with pytest.raises(ValueError, match="swap"):
        load_task("rl/writing_zero/judge", "train", 2, 0, swap="sometimes")


def test_format_only_set_and_fixed_reference():
    examples = load_task("rl/writing_zero/format_only", "train", 2000, 0)
    gold = load_task("rl/writing_zero/constraint_writing", "train", 2000, 0)
    assert [e["prompt"] for e in examples] == [e["prompt"] for e in gold]
    p = jd.FORMAT_ONLY
    body_lengths, note, required_rate = [], [], []
    for e in examples:
        body, suffix = cw.split_response(e["completion"])
        assert e["completion"].startswith(" ") and set(e["completion"].split()) <= set(WORDS)
        body_lengths.append(len(body))
        note.append(bool(suffix))
        required_rate.extend(w in e["required"].split() for w in body)
        assert len(suffix) <= p["max_suffix"] and set(suffix) <= set(e["required"].split())
    assert (min(body_lengths), max(body_lengths)) == (p["min_words"], p["max_words"])
    assert abs(np.mean(note) - p["p_note"]) < 0.04
    assert abs(np.mean(required_rate) - p["p_required"]) < 0.02          # (+ chance draws of content words: ~0)
    plain = load_task("rl/writing_zero/constraint_writing", "train", 5, 0)
    with_ref = load_task("rl/writing_zero/constraint_writing", "train", 5, 0, reference="format_only")
    assert "reference" not in plain[0]
    assert [{k: v for k, v in e.items() if k != "reference"} for e in with_ref] == plain
    rng = random.Random("writing_zero/constraint_writing/train/0/reference")
    assert [e["reference"] for e in with_ref] == [jd.random_response(rng, e["required"].split()) for e in plain]


def test_logged_rewards_by_hand():
    prompts = [cw.render_prompt([W1, W2], "SHORT")] * 3
    texts = [f" {W1} {W2} " + " ".join(cw.CONTENT[2:10]) + f" NOTE {W1}",   # body 10 words: in band, NOTE
             f" {W1}",                                                         # 1 word: short of 8
             ""]
    assert REWARDS.get("writing_zero/note")(prompts, texts) == [1.0, 0.0, 0.0]
    assert REWARDS.get("writing_zero/words")(prompts, texts) == [12.0, 1.0, 0.0]
    assert REWARDS.get("writing_zero/in_band")(prompts, texts) == [1.0, 0.0, 0.0]
    cols = {"required": [f"{W1} {W2}"] * 3, "band": ["LONG"] * 3}      # columns win over the prompt
    assert REWARDS.get("writing_zero/in_band")(prompts, texts, **cols) == [0.0, 0.0, 0.0]


# ---------------------------------------------------------------- judge_metrics on hand-made pairs

# text -> (Q, NOTE, words); pairs 1-2 differ in NOTE, 3-4 in length only; labels contradict Q in 2 and 4
PROPS = {"c1": (1.0, 0, 10), "r1": (0.5, 1, 12), "c2": (0.2, 1, 14), "r2": (0.8, 0, 10),
         "c3": (0.9, 0, 12), "r3": (0.4, 0, 8), "c4": (0.3, 0, 9), "r4": (0.6, 0, 11)}


def hand_pairs():
    out = []
    for k in range(1, 5):
        c, r = PROPS[f"c{k}"], PROPS[f"r{k}"]
        out.append({"prompt": f"q{k}", "chosen": f"c{k}", "rejected": f"r{k}", "quality_chosen": c[0],
                    "quality_rejected": r[0], "note_chosen": float(c[1]), "note_rejected": float(r[1]),
                    "len_words_chosen": float(c[2]), "len_words_rejected": float(r[2]),
                    "coverage_pref": 1.0, "length_fit_pref": 0.0, "redundancy_pref": -1.0})
    return out


def test_judge_metrics_of_an_oracle_by_hand():
    judge = MockJudge(lambda p, a, b: int(np.sign(PROPS[a][0] - PROPS[b][0])))
    m = judge_metrics(judge, hand_pairs())
    expected = {"pairs": 4, "label_acc": 0.5, "truth_acc": 1.0, "consistency": 1.0, "first_rate": 0.5, "tie": 0.0,
                "malformed": 0.0, "note_pref": 0.0, "longer_pref": 1.0, "label_note_pref": 0.5,
                "truth_note_pref": 0.0, "label_longer_pref": 0.5, "truth_longer_pref": 1.0}
    assert {k: m[k] for k in expected} == pytest.approx(expected)
    assert judge.cost()["calls"] == 8                                   # every pair in both orders


def test_judge_metrics_of_position_biased_tied_and_principled_judges_by_hand():
    first = judge_metrics(MockJudge("first"), hand_pairs())
    assert (first["label_acc"], first["consistency"], first["first_rate"], first["note_pref"]) == (0.5, 0.0, 1.0, 0.5)
    tie = judge_metrics(MockJudge("tie"), hand_pairs())
    assert (tie["label_acc"], tie["tie"], tie["consistency"]) == (0.0, 1.0, 0.0) and np.isnan(tie["first_rate"])
    # annotations (+1, 0, -1) for the chosen: order 1 wants "A = B" (3 of 3 right), order 2 "B = A" (1 of 3)
    reply = MockJudge(replies=lambda p, a, b: " coverage A length = redundancy B Verdict: A")
    principled = judge_metrics(reply, hand_pairs())
    assert principled["principle_acc"] == pytest.approx(16 / 24)
    assert principled["label_acc"] == 0.5 and principled["first_rate"] == 1.0


def test_run_statistics_by_hand():
    rows = [{"step": 0, "wz/q": 0.2, "wz/note_rate": 0.0},
            {"step": 1, "rl/reward_mean": 0.1},
            {"step": 2, "rl/reward_mean": 0.3, "wz/q": 0.5, "wz/note_rate": 0.2, "judge/calls_total": 10.0},
            {"step": 3, "rl/reward_mean": 0.5},
            {"step": 4, "rl/reward_mean": 0.9, "wz/q": 0.3, "wz/note_rate": 0.6, "judge/calls_total": 20.0}]
    s = run_statistics(rows, steps=4, window=2)
    expected = {"wz/q_before": 0.2, "wz/q_peak": 0.5, "wz/q_peak_step": 2, "wz/q_final": 0.3, "wz/q_drop": 0.4,
                "wz/proxy_at_peak": 0.2, "wz/proxy_final": 0.7, "wz/proxy_rise": 0.5, "wz/hacked": 1.0,
                "wz/judge_calls": 20.0, "wz/judge_calls_per_step": 5.0}
    assert s == pytest.approx(expected)
    rows[-1]["wz/note_rate"] = 0.4                                     # NOTE rate not above 50%: no hack
    assert run_statistics(rows, 4, 2)["wz/hacked"] == 0.0
    # a run resumed from its step-2 checkpoint: metrics.jsonl was cut back to step 2 and the judge's totals came
    # back with the checkpoint, so the counter goes on from 10 and its last value is the run's total
    resumed = rows[:3] + [{"step": 3, "judge/calls_total": 15.0}, {"step": 4, "wz/q": 0.3, "judge/calls_total": 20.0}]
    assert run_statistics(resumed, 4, 2)["wz/judge_calls"] == 20.0
    assert run_statistics([{"step": 1, "rl/reward_mean": 0.0}], 4, 2) == {"wz/judge_calls": 0.0,
                                                                         "wz/judge_calls_per_step": 0.0}


def test_stage_runs_are_filled_into_the_rewards():
    c = rl_config("R3", smoke=True)
    with pytest.raises(ValueError, match="judge_run"):
        with_runs(c)
    c.writing_zero.judge_run = "/runs/judge"
    filled = with_runs(c).rl.rewards
    assert filled[0][0] == "model/pairwise_judge"
    assert filled[0][2] == {"backend": "sampler", "path": "/runs/judge", "swap": "random",
                            "template": jd.JUDGE_TEMPLATE, "max_new_tokens": 12}
    assert [tuple(s[:2]) for s in filled[1:]] == [tuple(s[:2]) for s in c.rl.rewards[1:]]
    r1 = rl_config("R1", smoke=True)
    r1.writing_zero.rm_run = "/runs/rm"
    assert with_runs(r1).rl.rewards[0][2] == {"path": "/runs/rm", "batch_size": 256}
    r6 = rl_config("R6", smoke=True)
    assert with_runs(r6).rl.rewards[0][2]["backend"] == "oracle"            # nothing to fill


def test_arms_and_the_sweep_matrix():
    expected = {"R0": ("grpo", "writing_zero/quality"), "R1": ("grpo", "model/scalar_rm"),
                "R2": ("brpo", "model/pairwise_judge"), "R3": ("brpo", "model/pairwise_judge"),
                "R3n": ("brpo-norm", "model/pairwise_judge"), "R4": ("round-robin", "model/pairwise_judge"),
                "R5": ("fixed-reference", "model/pairwise_judge"), "R6": ("brpo", "model/pairwise_judge"),
                "R7": ("round-robin", "model/pairwise_judge"), "R8": ("fixed-reference", "model/pairwise_judge")}
    for arm, (advantage, reward) in expected.items():
        c = rl_config(arm)
        assert (c.rl.advantage, c.rl.rewards[0][0], c.rl.rewards[0][1]) == (advantage, reward, 1.0), arm
        assert all(spec[1] == 0.0 for spec in c.rl.rewards[1:]), arm                  # logged only
        assert c.rl.task_options.reference == ("format_only" if advantage == "fixed-reference" else "")
    table = get_sweep()
    assert {p["arm"] for p in table["points"]} == set(ARMS) and len(table["points"]) == 3 * len(ARMS)
    assert len(table["stages"]) == 3 * 4                                  # warm start, 2 judges, RM per seed
    r2 = next(p for p in table["points"] if p["name"] == "R2_s1")
    assert r2["overrides"] == {"seed": 1, "train.init_from": "run:{stage:zero_s1}",
                               "writing_zero.judge_run": "{stage:judge_plain_s1}"}
    assert {s["name"] for s in get_sweep("c1")["stages"]} == {"zero_s0", "zero_s1", "zero_s2"}

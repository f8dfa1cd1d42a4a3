"""MARCH on NumFacts-RAG: the number matcher, the Proposer/Checker parsers, the vote and the reward variants on hand-made
trajectories; the information barrier on token ids (the Checker's prompt never holds the Solver's answer, the
symmetric ablation's does); the shared reward on the Solver and on the kept audit's last valid token; the oracle's
hallucination/coverage checks; the task's worlds and traces; a smoke of the RL loop on 8 CPU devices."""
import json
import re

import jax
import numpy as np
import pytest

import projects.march  # noqa: F401
from projects.march import numfacts as nf
from projects.march.game import MarchGame, true_value
from projects.march.matching import numbers_match, parse_audit, parse_questions, self_check_reward, vote
from shared.agent import Episode, Turn, pack_episodes
from shared.agent.roles import RoleSpec
from shared.data import ByteTokenizer

TOK = ByteTokenizer()


@pytest.mark.parametrize("a, b, same", [
    ("532", "532", True), ("1,204", "1204", True), ("45%", "45", True), ("3k", "3", True), ("12W", "12", True),
    ("532", "533", False), ("532", "532.0", True), ("2.05", "2.1", True), ("2.0", "2.2", False),
    ("12.5", "12.56", True), ("abc", "abc", True), ("abc", "12", False), ("", "", False), ("-7", "-7", True),
    ("1,204", "1.204", False),
])
def test_numbers_match(a, b, same):
    assert numbers_match(a, b) is same
    assert numbers_match(b, a) is same


def test_parsers_vote_and_rewards_on_hand_made_trajectories():
    proposer = ("\n- Question: How many buses did Ko have in 2021? [Answer: 532]"
                "\nnoise line\n- Question: How many taxis did Ko have in 2021? [Answer: many]"
                "\n- Question: What is buses plus taxis for Ko in 2021? [Answer: 1,736]")
    pairs = parse_questions(proposer)
    assert pairs == [("How many buses did Ko have in 2021?", "532"), ("What is buses plus taxis for Ko in 2021?", "1,736")]
    audits = [parse_audit("\n1. Evidence: [2] Ko 2021 buses 532 [Answer: 532]\n2. Evidence: 532 + 1204 [Answer: 1736]"),
              parse_audit("\n1. Evidence: x [Answer: 532]\n2. Cannot answer"),
              parse_audit("\n2. Evidence: y [Answer: 1700]\n1. Evidence: z [Answer: 530]\n1. again [Answer: 532]")]
    assert audits[1] == {1: "532"} and audits[2] == {2: "1700", 1: "530"}
    answers = [a for _, a in pairs]
    # question 1: +1 +1 -1 = 1 (kept); question 2: +1 (1,736 = 1736) -1 (no answer) -1 = -1 (fault)
    assert vote(answers, audits) == [False, True]
    assert vote(answers, audits[:1]) == [False, False]
    assert vote(["5"], [{}, {}, {1: "5"}]) == [True]
    faults = [True, False, True]
    assert self_check_reward(faults, "ztr") == -1.0 and self_check_reward([False] * 3, "ztr") == 0.0
    assert self_check_reward(faults, "ztr01") == 0.0 and self_check_reward([False] * 3, "ztr01") == 1.0
    assert self_check_reward(faults, "err") == pytest.approx(-0.2)
    assert self_check_reward([True] * 20, "err") == pytest.approx(-1.3)
    assert self_check_reward([], "ztr") == 0.0 == self_check_reward([], "err")   # no question extracted: 0
    with pytest.raises(ValueError, match="march.reward"):
        self_check_reward(faults, "zt")
    assert len(parse_questions("\n".join(["- Question: q? [Answer: 1]"] * 14))) == 10


def test_worlds_prompts_and_the_oracle():
    examples = nf.numfacts("train", 40, seed=3)
    assert examples[0]["prompt"] == nf.numfacts("train", 1, seed=3)[0]["prompt"]          # deterministic
    assert examples[0]["prompt"] != nf.numfacts("test", 1, seed=3)[0]["prompt"]           # splits differ
    for e in examples:
        w = e["world"]
        assert 4 <= len(w["docs"]) <= 8 and 1 <= sum(d["relevant"] for d in w["docs"]) <= 2
        assert 3 <= len(w["asked"]) <= 5
        kinds = {(d["text"].split(":")[0].split()[1] == w["town"], int(d["text"].split()[0]) == w["year"])
                 for d in w["docs"] if not d["relevant"]}
        assert kinds <= {(True, False), (False, True), (False, False)} and kinds   # confusers only
        check = nf.oracle_check(w, e["completion"])
        assert check == {"hallucinated": False, "coverage": 1.0, "numbers": len(w["asked"]) + 1}
        # one confuser value in place of a true one: hallucinated, coverage loses that value (and the derived one if
        # it uses it)
        bad = nf.solver_answer(w, nf.corrupt(w, np.random.default_rng(0)))
        check = nf.oracle_check(w, bad)
        assert check["hallucinated"] and check["coverage"] < 1.0
        # the Proposer's questions have the true values the templates name
        for (question, n), (name, _) in zip(parse_questions(nf.proposer_target(w, e["completion"])),
                                            nf.answer_items(e["completion"])):
            assert true_value(w, question) == int(n)
    w = examples[0]["world"]
    assert nf.oracle_check(w, " nothing here") == {"hallucinated": False, "coverage": 0.0, "numbers": 0}
    assert nf.oracle_check(w, f" {w['asked'][0]} {w['year']}")["hallucinated"] is False   # the year is in the docs


def test_traces_inject_confuser_errors_into_solver_targets_only():
    traces = nf.traces("train", 600, seed=0, error_rate=0.3)
    roles = [t["role"] for t in traces]
    assert roles.count("solver") == roles.count("proposer") == roles.count("checker") == 200
    solver = [t for t in traces if t["role"] == "solver"]
    share = np.mean([t["corrupted"] for t in solver])
    assert 0.22 < share < 0.38
    assert not any(t["corrupted"] for t in traces if t["role"] != "solver")
    # checker traces answer from the documents: every audit line's answer is a number of the documents or a sum /
    # difference of two of them; a share show the response (the symmetric format)
    checker = [t for t in traces if t["role"] == "checker"]
    shown = np.mean(["Response:" in t["prompt"] for t in checker])
    assert 0.35 < shown < 0.65
    for t in checker[:50]:
        audit = parse_audit(t["completion"])
        questions = [line.split(". ", 1)[1] for line in t["prompt"].split("Questions:\n")[1].splitlines()
                     if line[:1].isdigit()]
        assert sorted(audit) == list(range(1, len(questions) + 1))


class StubLearner:
    """Scripted episodes in place of the policy: run_episodes resets each environment (the prompt becomes token ids, as
    the EpisodeSampler encodes it) and answers with the role's scripted texts, in order."""

    def __init__(self, scripts):
        self.scripts = {k: list(v) for k, v in scripts.items()}
        self.prompts = {}

    def role(self, name):
        return RoleSpec(name)

    def run_episodes(self, envs, examples, role, rng, greedy=False):
        out = []
        self.prompts[role] = []
        for env, example in zip(envs, examples):
            prompt = [TOK.bos_id] + TOK.encode(env.reset(example))
            self.prompts[role].append(prompt)
            text = self.scripts[role].pop(0)
            ids = TOK.encode(text)
            out.append(Episode(prompt=prompt, tokens=ids + [TOK.eos_id], mask=[1.0] * (len(ids) + 1),
                               logprobs=[-1.0] * (len(ids) + 1), turns=[Turn(0, len(ids) + 1, text, None, 0.0, "eos")],
                               end="eos", role=role, example=example))
        return out


class Config:
    def __init__(self, **march):
        self.march = type("M", (), {"reward": "ztr", "symmetric_checker": False, "checker_samples": 3, **march})


def contains(haystack, needle):
    return any(haystack[i:i + len(needle)] == needle for i in range(len(haystack) - len(needle) + 1))


def scripted_step(example, checker_answers, **march):
    """One MARCH step over one example: the Solver reports 987654 (a number no document holds) for an attribute outside
    the derived value and the truth for the rest; the Proposer asks about every number; the 3 audits answer with checker_answers[m] for the marker."""
    w = example["world"]
    values = dict(w["truth"])
    marked = next(a for a in w["asked"] if a not in (w["derived"]["left"], w["derived"]["right"]))
    values[marked] = 987654
    answer = nf.solver_answer(w, values)
    proposer = nf.proposer_target(w, answer)
    items = [name for name, _ in nf.answer_items(answer)]
    clean = nf.checker_target(w, items)
    audits = [clean.replace(f"[Answer: {w['truth'][marked]}]", f"[Answer: {a}]", 1) for a in checker_answers]
    learner = StubLearner({"solver": [answer], "proposer": [proposer], "checker": audits})
    batches = MarchGame(Config(**march)).play(learner, [example], jax.random.key(0))
    return learner, {b.role: b for b in batches}, answer


def test_checker_prompt_never_holds_the_solvers_answer_on_token_ids():
    example = nf.numfacts("train", 1, seed=5)[0]
    for symmetric in (False, True):
        learner, _, answer = scripted_step(example, ["1", "2", "3"], symmetric_checker=symmetric)
        marker = TOK.encode("987654")
        assert contains(learner.prompts["proposer"][0], marker)            # the Proposer reads the answer
        for prompt in learner.prompts["checker"]:
            assert len(learner.prompts["checker"]) == 3
            # the blind Checker: neither the answer's number nor its text, nor the Proposer's answers
            assert contains(prompt, marker) is symmetric
            assert contains(prompt, TOK.encode(answer.strip())) is symmetric
            assert not contains(prompt, TOK.encode("[Answer:"))
            assert contains(prompt, TOK.encode(example["world"]["docs"][0]["text"]))
        assert not contains(learner.prompts["proposer"][0], TOK.encode(example["world"]["docs"][0]["text"]))


def test_shared_reward_on_the_solver_and_on_the_kept_audits_last_token():
    example = nf.numfacts("train", 1, seed=5)[0]
    w = example["world"]
    truth = str(w["truth"][next(a for a in w["asked"] if a not in (w["derived"]["left"], w["derived"]["right"]))])
    # 2 of 3 audits give the documents' value for the marked number: a fault -> ZTR -1 on both roles
    _, batches, _ = scripted_step(example, [truth, truth, "987654"])
    solver, checker = batches["solver"].episodes[0], batches["checker"].episodes[0]
    assert solver.reward == -1.0 and checker.reward == -1.0
    assert checker.text.count("987654") == 1                          # the kept audit is the third sample
    assert batches["solver"].metrics["halluc_rate"] == 1.0 and batches["solver"].metrics["flagged"] == 1.0
    assert batches["checker"].metrics["agreement"] == 1.0
    packed = pack_episodes([checker], TOK.pad_id)
    last = int(np.flatnonzero(packed["mask"][0])[-1])
    assert last == len(checker.tokens) - 1 and packed["token_rewards"][0, last] == -1.0
    assert packed["token_rewards"][0].sum() == -1.0
    # 2 of 3 audits confirm the marker: no fault -> 0 (the checker missed the hallucination)
    _, batches, _ = scripted_step(example, ["987654", "987654", truth])
    assert batches["solver"].episodes[0].reward == 0.0 and batches["checker"].metrics["agreement"] == 0.0
    assert batches["checker"].metrics["confirm_rate"] == 1.0 and batches["checker"].metrics["oracle_confirm_rate"] < 1
    # the variants on the same trajectories
    _, batches, _ = scripted_step(example, [truth, truth, truth], reward="ztr01")
    assert batches["solver"].episodes[0].reward == 0.0
    _, batches, _ = scripted_step(example, ["987654"] * 3, reward="ztr01")
    assert batches["solver"].episodes[0].reward == 1.0
    _, batches, _ = scripted_step(example, [truth] * 3, reward="err")
    assert batches["solver"].episodes[0].reward == pytest.approx(-0.1)
    # oracle: the programmatic check for the Solver whatever the Checker says; the Checker keeps the self-check reward
    _, batches, _ = scripted_step(example, ["987654"] * 3, reward="oracle")
    assert batches["solver"].episodes[0].reward == -1.0 and batches["checker"].episodes[0].reward == 0.0


def test_march_rl_smoke_on_8_cpu_devices(tmp_path):
    """The RL loop end to end (no warm start) on the smoke config: 8 CPU devices (cpu_8), all three roles sampled,
    Solver and Checker trained, role-tagged metrics and the evaluation written."""
    from experiments.march.numfacts import get_config
    from shared.registry import TASKS

    assert jax.device_count() == 8
    config = get_config("smoke")
    config.rl.warmup_sft_steps = 0
    config.train.steps = 1
    # fewer programs to compile (the vote and the KL are covered above and in tests/test_agent_roles.py): one audit
    # per response makes the three roles' rollouts one shape
    config.march.checker_samples = 1
    config.rl.kl_coef = 0.0
    config.lock()
    summary = TASKS.get("march/rl")(config, str(tmp_path))
    assert summary["num_devices"] == 8 and summary["steps"] == 1
    for key in ("eval/halluc_rate_before", "eval/coverage", "rl/role/solver/halluc_rate", "rl/role/checker/agreement",
                "rl/role/proposer/questions", "rl/role/solver/advantage_mean", "rl/role/checker/advantage_mean",
                "train/value_loss"):
        assert key in summary, key
    assert "rl/role/proposer/advantage_mean" not in summary       # sampled, never trained
    assert summary["rl/role/checker/episodes"] == summary["rl/role/solver/episodes"] == 8
    assert json.loads((tmp_path / "summary.json").read_text())["steps"] == 1


def test_worlds_without_the_derived_value():
    """derived=False (table.py:mini_copy): the same world (same documents, same asked values) with a query and an
    answer of copied values only; the oracle accepts the clean answer and flags a computed number."""
    with_d = nf.make_world(np.random.default_rng(7))
    world = nf.make_world(np.random.default_rng(7), derived=False)
    assert world["docs"] == with_d["docs"] and world["asked"] == with_d["asked"] and world["derived"] is None
    query = nf.query_text(world)
    assert "+" not in query and "-" not in query and query.endswith(f" and {world['asked'][-1]}.")
    answer = nf.solver_answer(world)
    assert [name for name, _ in nf.answer_items(answer)] == world["asked"]
    assert nf.oracle_check(world, answer) == {"hallucinated": False, "coverage": 1.0, "numbers": len(world["asked"])}
    flagged = nf.oracle_check(world, answer + "; total 99991")
    assert flagged["hallucinated"] and flagged["coverage"] == 1.0
    rows = nf.traces("train", 6, seed=1, derived=False)
    assert all("+" not in r["completion"] and " minus " not in r["completion"] and " plus " not in r["completion"]
               for r in rows)


def test_evaluation_scores_faithful_answers_greedy_and_sampled():
    """The evaluation path on scripted Solver answers: the clean answers (greedy pass) are faithful with full coverage;
    the SFT traces' answers (sampled pass: a share error_rate carries a confuser value) hallucinate in that share. A
    warm start that imitated its traces would show ~0 greedy and ~error_rate sampled (D.2's band is the latter)."""
    examples = nf.numfacts("test", 40, seed=2, derived=False, name_first=True)
    rng = np.random.default_rng(0)
    corrupted = [bool(rng.random() < 0.3) for _ in examples]
    sampled = [nf.solver_answer(e["world"], nf.corrupt(e["world"], rng) if c else None)
               for e, c in zip(examples, corrupted)]
    learner = StubLearner({"solver": [e["completion"] for e in examples] + sampled})
    game = MarchGame(Config(eval_print=2))
    out = game.evaluate(learner, examples)
    assert out["halluc_rate"] == 0.0 and out["coverage"] == 1.0
    assert out["numbers_per_response"] == np.mean([len(e["world"]["asked"]) for e in examples])
    assert out["halluc_rate_sampled"] == pytest.approx(np.mean(corrupted))
    assert out["coverage_sampled"] < 1.0
    # the eval prompts are the Solver prompts the SFT traces train on (same world options, same template)
    trace = nf.traces("test", 1, seed=2, derived=False, name_first=True, roles="solver")[0]
    assert trace["prompt"].endswith("\nAnswer:") and examples[0]["prompt"].endswith("\nAnswer:")
    for prompt in (trace["prompt"], examples[0]["prompt"]):
        query = prompt.split("Query:")[1]
        assert "+" not in query and "-" not in query
        assert re.search(r": [a-z]+ \d+, [a-z]+ \d+", prompt)      # name-first documents


def test_name_first_worlds_keep_the_draws_and_the_oracle():
    """name_first=True writes "buses 532" in the documents (the attribute before its value, as the answers and the
    Checker's evidence do): the same draws, the same truth, the Checker's evidence cites the right document, and the
    oracle accepts the clean answer; max_value bounds the values; min/max_asked the number of asked values."""
    for seed in range(20):
        a = nf.make_world(np.random.default_rng(seed), derived=False)
        b = nf.make_world(np.random.default_rng(seed), derived=False, name_first=True)
        assert a["truth"] == b["truth"] and a["asked"] == b["asked"] and len(a["docs"]) == len(b["docs"])
        for da, db in zip(a["docs"], b["docs"]):
            assert da["relevant"] == db["relevant"] and sorted(nf.NUMBER.findall(da["text"])) == sorted(
                nf.NUMBER.findall(db["text"]))
        for attr in b["asked"]:
            doc = b["docs"][nf._doc_of(b, attr) - 1]
            assert doc["relevant"] and f" {attr} {b['all_truth'][attr]}" in doc["text"]
            assert f" {a['all_truth'][attr]} {attr}" in a["docs"][nf._doc_of(a, attr) - 1]["text"]
        assert nf.oracle_check(b, nf.solver_answer(b))["coverage"] == 1.0
    small = nf.numfacts("train", 30, seed=1, max_value=100, min_asked=2, max_asked=2, name_first=True)
    assert all(v < 100 for e in small for v in e["world"]["all_truth"].values())
    assert all(len(e["world"]["asked"]) == 2 for e in small)
    # corrupting needs a confuser value that differs from the truth: with two documents and values in {10, 11} some
    # attributes have none (another attribute is corrupted), with values all 10 none has (the answer stays clean)
    for max_value, most in ((12, 0.35), (11, 0.0)):
        rows = nf.traces("train", 300, seed=1, roles="solver", min_docs=2, max_docs=2, max_value=max_value)
        wrong = [nf.oracle_check(nf.make_world(nf._rng(1, "train", 10_000_000 + i), (2, 2), max_value=max_value),
                                 r["completion"])["hallucinated"] for i, r in enumerate(rows)]
        assert np.mean(wrong) <= most and (np.mean(wrong) > 0.1 or most == 0.0)
    solver_only = nf.traces("train", 5, seed=1, roles="solver", name_first=True)
    assert {t["role"] for t in solver_only} == {"solver"}
    with pytest.raises(ValueError, match="roles"):
        nf.traces("train", 1, roles="judge")


@pytest.mark.parametrize("variant", ["mini", "mini_copy", "mini_recall", "mini_recall_long", "mini_recall_fresh",
                                     "mini_recall_spec"])
def test_a_tables_world_reaches_its_warm_start_its_rl_prompts_and_its_evaluation(variant):
    """Every world option (derived, name_first, ...) of a table's SFT stage equals the RL points' (rl.task_options:
    the RL prompts and the evaluation's test split) and their own SFT options (agent.sft_options): a flag that
    reached the warm start but not the evaluation (or back) would evaluate a warm start on worlds it never saw."""
    from experiments.march.numfacts import world_options
    from shared.config import load_config
    from shared.sweep.table import config_spec, format_override_value, load_sweep

    sweep = load_sweep(config_spec("experiments/march/table.py", variant))
    keys = list(world_options().keys())
    pick = lambda options: {k: options[k] for k in keys}   # noqa: E731
    stages, configs = {}, []
    for stage in sweep.stages:
        config = load_config(config_spec("experiments/march/table.py", stage.arg),
                             [f"{k}={format_override_value(v)}" for k, v in stage.overrides.items()])
        stages[stage.name] = pick(config.data.task_options)
        configs.append(config)
    for point in sweep.points:
        config = load_config(config_spec("experiments/march/table.py", point.arg),
                             [f"{k}={format_override_value(v)}" for k, v in point.overrides.items()])
        configs.append(config)
        stage = stages[f"warmstart_s{config.seed}"]
        assert pick(config.rl.task_options) == stage == pick(config.agent.sft_options), point.name
    if variant.startswith("mini_recall"):
        assert stage["name_first"] and not stage["derived"]
        steps = {s.overrides["train.steps"] for s in sweep.stages}
        assert steps == {{"mini_recall": 3000, "mini_recall_spec": 3000}.get(variant, 10000)}
        n_train = {s.overrides.get("data.n_train") for s in sweep.stages}
        assert n_train == {320000 if variant == "mini_recall_fresh" else None}
        assert nf.numfacts("test", 1, seed=0, **stage)[0]["world"]["name_first"]
    # the spec's 8 x 512 model in the warm start and in every RL point that starts from it, or none of them
    shapes = {(c.model.d_model, c.model.n_layers, c.model.d_ff) for c in configs}
    assert shapes == {(512, 8, 2048) if variant == "mini_recall_spec" else (256, 4, 1024)}

"""The warm start stopped at a target solver accuracy (task ssp/warmstart): where it stops, what it saves, that a
re-run is a no-op and that an RL arm starts from the saved step; its validation questions; the accuracy count."""
import json
import os

import pytest

import projects.ssp  # noqa: F401  registrations
from projects.ssp import warmstart as W
from shared.agent.episodes import Episode, Turn


def sft_smoke(**overrides):
    from experiments.ssp.selfplay import get_config

    c = get_config("sft_smoke")
    for key, value in overrides.items():
        node = c
        *path, last = key.split(".")
        for p in path:
            node = node[p]
        node[last] = value
    c.lock()
    return c


def test_stops_at_the_first_check_over_the_target(tmp_path, monkeypatch):
    """Checks at steps 2, 4, 6 see 0.1, 0.4, 0.9: the stage stops at step 4 (target 0.35) with that step saved, a
    re-run does nothing, and an RL arm's init_from=run:<stage> reads the step-4 weights."""
    from shared.config import validate, write_config
    from shared.registry import TASKS
    from shared.train.tasks import run_params

    c = sft_smoke(**{"train.steps": 8})
    validate(c, 8)
    write_config(c, str(tmp_path))   # as the launcher does: run_params rebuilds the stage's model from it
    seen = iter([0.1, 0.4, 0.9])
    checked = []

    def fake_accuracy(self, trainer):
        checked.append(int(trainer.state["step"]))
        return next(seen), 2.0

    monkeypatch.setattr(W.WarmTarget, "accuracy", fake_accuracy)
    summary = TASKS.get("ssp/warmstart")(c, str(tmp_path))
    assert checked == [2, 4]
    assert summary["steps"] == 4 and summary["warm/reached"] is True and summary["warm/stopped_at"] == 4
    assert summary["warm/acc"] == 0.4
    assert sorted(os.listdir(tmp_path / "checkpoints"))[-1] == "4"
    rows = [json.loads(line) for line in open(tmp_path / "metrics.jsonl")]
    assert [(r["step"], r["warm/acc"]) for r in rows if "warm/acc" in r] == [(2, 0.1), (4, 0.4)]
    assert json.load(open(tmp_path / "summary.json"))["steps"] == 4

    monkeypatch.setattr(W.WarmTarget, "accuracy", lambda self, trainer: pytest.fail("a finished stage re-ran"))
    assert TASKS.get("ssp/warmstart")(c, str(tmp_path))["steps"] == 4

    import jax
    import numpy as np
    from shared.train import Trainer

    stage = Trainer(json_config(tmp_path), str(tmp_path))
    assert int(stage.state["step"]) == 4
    abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding), stage.params)
    loaded = run_params(str(tmp_path), abstract)
    assert all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(loaded), jax.tree.leaves(stage.params)))
    stage.close()


def json_config(workdir):
    import ml_collections

    return ml_collections.ConfigDict(json.load(open(workdir / "config.json")))


def test_runs_to_the_cap_when_the_target_is_never_reached(tmp_path, monkeypatch):
    from shared.registry import TASKS

    c = sft_smoke()
    monkeypatch.setattr(W.WarmTarget, "accuracy", lambda self, trainer: (0.0, 0.0))
    summary = TASKS.get("ssp/warmstart")(c, str(tmp_path))
    assert summary["steps"] == c.train.steps and summary["warm/reached"] is False and summary["warm/acc"] == 0.0


def test_validation_questions_are_over_the_pool_only():
    from projects.ssp.data import env_of, ssp_qa
    from projects.ssp.selfplay import kb_options_of

    c = sft_smoke(**{"ssp.warm_val_questions": 20})
    qs = W.validation_questions(c)
    env = env_of(kb_options_of(c))
    assert len(qs) == 20 and {q["hops"] for q in qs} == {2}
    assert {q["answer"] for q in qs} <= set(env.pool)
    evals = ssp_qa("test", 30, 0, hops=[1, 2, 3], **kb_options_of(c))
    assert not {q["answer"] for q in qs} & {e["answer"] for e in evals}
    assert W.validation_questions(sft_smoke(**{"seed": 3, "ssp.warm_val_questions": 20})) == qs  # every seed's


def test_solver_episodes_count_exact_answers():
    """The accuracy the check and the RL evaluation share: right iff the episode's answer is a* (after the
    normalisation of the solver reward), in calls of `rows` episodes."""
    from projects.ssp.selfplay import solver_episodes

    examples = [{"prompt": f"solve : what is the mentor of x{i} ?", "answer": f"Ab{i}"} for i in range(5)]
    calls = []

    def run(envs, chunk):
        calls.append(len(chunk))
        out = []
        for env, e in zip(envs, chunk):
            env.reset(e)
            said = e["answer"] if int(e["answer"][2:]) % 2 == 0 else "Zz"
            text = f"<answer> {said} </answer>"
            out.append(Episode(prompt=[1], turns=[Turn(0, 1, text, None, 0.0, "eos")]))
        return out

    eps, correct = solver_episodes(run, None, examples, 2, 10)
    assert calls == [2, 2, 1] and len(eps) == 5
    assert correct == [True, False, True, False, True]


@pytest.mark.parametrize("overrides,message", [
    ({"ssp.warm_check_every": 3, "train.log_every": 2}, "multiple of train.log_every"),
    ({"ssp.warm_target": 1.5}, "warm_target=1.5"),
])
def test_bad_stop_configs_name_the_key(overrides, message):
    from shared.config import ConfigError, validate

    with pytest.raises(ConfigError, match=message):
        validate(sft_smoke(**overrides), 8)

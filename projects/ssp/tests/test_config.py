"""config.ssp's check: bad values, a KB the tokenizer would not see, no trained role; every arm validates."""
import pytest

import projects.ssp  # noqa: F401
from experiments.ssp.selfplay import get_config
from projects.ssp.config import ARMS
from shared.config import ConfigError, validate


def with_overrides(overrides, variant="smoke"):
    c = get_config(variant)
    for key, value in overrides.items():
        node = c
        *path, last = key.split(".")
        for p in path:
            node = node[p]
        node[last] = value
    return c


@pytest.mark.parametrize("arm", sorted(ARMS))
def test_every_arm_validates(arm):
    validate(with_overrides(ARMS[arm]), 8)


@pytest.mark.parametrize("overrides,message", [
    ({"ssp.rag": "judge"}, "config.ssp.rag='judge'"),
    ({"ssp.n_distractors": -1}, "n_distractors=-1"),
    ({"ssp.kb_seed": 5}, "must repeat config.ssp's KB"),
    ({"agent.roles.proposer.train": False, "agent.roles.solver.train": False}, "nothing is trained"),
    ({"ssp.questions": "supervised", "agent.roles.solver.train": False}, "solver.train must be True"),
])
def test_bad_configs_name_the_key(overrides, message):
    with pytest.raises(ConfigError, match=message):
        validate(with_overrides(overrides), 8)

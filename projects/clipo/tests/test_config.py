"""CLIPO is a config switch over each base algorithm: add_clipo changes only the hook list and config.clipo, and the
config.clipo validator rejects bad values with a one-line message naming the key."""
import pytest

import projects.clipo  # noqa: F401
import shared.builtin  # noqa: F401
from projects.clipo.config import BASE_ALGORITHMS, add_clipo, set_base_algorithm
from shared.config import validate
from shared.config.base import base_config
from shared.config.loader import ConfigError


def rl_config(base):
    c = base_config()
    c.task = "rl"
    c.mesh.preset = "cpu_1"
    c.rl.task = "rl/tinygsm_sym"
    return set_base_algorithm(c, base)


@pytest.mark.parametrize("base", sorted(BASE_ALGORITHMS))
def test_clipo_switches_on_over_every_base_algorithm(base):
    plain = rl_config(base)
    clipo = add_clipo(rl_config(base))
    validate(clipo, num_devices=1, platform="cpu")
    assert clipo.rl.to_dict() == plain.rl.to_dict()                    # the algorithm is untouched
    assert clipo.train.hooks == ["clipo/contrastive"] and clipo.project == "clipo"
    for key, value in BASE_ALGORITHMS[base].items():
        assert clipo.rl[key] == value
    differing = {k for k in clipo.to_dict() if k not in plain or clipo.to_dict()[k] != plain.to_dict()[k]}
    assert differing == {"project", "train", "clipo"}
    assert clipo.clipo.tau == 0.05 and clipo.clipo.weight == 0.2 and clipo.clipo.clamp == -0.5


@pytest.mark.parametrize("key,value,message", [
    ("mode", "on", "clipo.mode='on'"),
    ("tau", 0.0, "clipo.tau=0.0"),
    ("clamp", 0.5, "clipo.clamp=0.5"),
    ("warmup_steps", 1000, "clipo.warmup_steps=1000 leaves no policy update"),
])
def test_bad_clipo_values_name_the_key(key, value, message):
    c = add_clipo(rl_config("grpo"))
    c.clipo[key] = value
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        validate(c, num_devices=1, platform="cpu")


def test_a_clipo_mode_without_the_hook_is_an_error():
    c = add_clipo(rl_config("grpo"))
    c.train.hooks = []
    with pytest.raises(ConfigError, match="lacks 'clipo/contrastive'"):
        validate(c, num_devices=1, platform="cpu")

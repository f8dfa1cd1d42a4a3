"""Every experiment config builds and validates, for its default and its :smoke variant, and so do its sweep points.

Collected from `experiments/**/*.py` at collection time (files whose name starts with "_" are helpers, not
experiments), so a new paper's configs are covered without editing this file. Nothing is compiled or run here:
tests/test_train.py and tests/test_sweep_e2e.py run the quickstart end to end.

Device counts: a `:smoke` variant must validate on the CI machine (8 CPU devices, platform cpu). A default
config is validated on the hardware its preset names (`num_devices`, `hosts`), or on 8 devices when the preset
names none (`auto`), so a full-scale config for a TPU pod slice is checked against that slice.
"""
import glob
import os

import ml_collections
import pytest

import shared.builtin  # noqa: F401  registers every built-in name before validation
from shared.config import load_config, validate
from shared.config.loader import ConfigError
from shared.launch import import_project
from shared.sweep.table import config_spec, format_override_value, load_module, load_sweep
from tpu_configs.presets import get_preset

from conftest import REPO_ROOT as REPO  # noqa: E402
CI_DEVICES = 8


def experiment_files() -> list[str]:
    paths = glob.glob(os.path.join(REPO, "experiments", "**", "*.py"), recursive=True)
    return sorted(os.path.relpath(p, REPO) for p in paths
                  if not os.path.basename(p).startswith("_") and os.path.relpath(p, REPO) not in NOT_CONFIGS)


NOT_CONFIGS = {"experiments/campaign.py"}  # the campaign's list of tables (tests/test_campaign.py), not a config


EXPERIMENTS = experiment_files()
VARIANTS = [None, "smoke"]


def extra_variants() -> list[tuple[str, str]]:
    """(file, variant) for files that list further variants in a module-level VARIANTS tuple (e.g. model sizes)."""
    pairs = []
    for path in EXPERIMENTS:
        module = load_module(os.path.join(REPO, path))
        pairs += [(path, v) for v in getattr(module, "VARIANTS", ()) if v not in (None, "smoke")]
    return pairs


@pytest.mark.parametrize("path,variant", extra_variants())
def test_extra_variants_build_and_validate(path, variant):
    try:
        load_and_validate(config_spec(path, variant), smoke=False)
    except ConfigError as e:
        pytest.fail(f"{path}:{variant}: {e}")


def test_the_glob_finds_the_experiments():
    assert "experiments/quickstart.py" in EXPERIMENTS


def load_and_validate(spec: str, smoke: bool, overrides=()) -> ml_collections.ConfigDict:
    """The config `spec` builds, after importing its project, validated as described in the module doc."""
    config = load_config(spec, overrides)  # a relative path resolves against the repo root from any cwd
    import_project(config.project)  # its blocks/losses/tasks must be registered before names are checked
    if smoke:
        validate(config, num_devices=CI_DEVICES, platform="cpu")
    else:
        preset = get_preset(config.mesh.preset)
        validate(config, num_devices=preset["num_devices"] or CI_DEVICES, process_count=preset["hosts"] or 1)
    return config


def lookup(config: ml_collections.ConfigDict, key: str):
    node = config
    for part in key.split("."):
        node = node[part]
    return node


def plain(value):
    """Comparable form of a config value: ConfigDicts as dicts, tuples as lists."""
    if isinstance(value, (ml_collections.ConfigDict, ml_collections.FrozenConfigDict)):
        value = value.to_dict()
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


@pytest.mark.parametrize("variant", VARIANTS, ids=["default", "smoke"])
@pytest.mark.parametrize("path", EXPERIMENTS)
def test_config_builds_and_validates(path, variant):
    spec = config_spec(path, variant)
    try:
        config = load_and_validate(spec, smoke=variant == "smoke")
    except ConfigError as e:
        pytest.fail(f"{spec}: {e}")
    assert config.is_locked, f"{spec}: load_config must return a locked config"


def sweep_variants() -> list[tuple[str, str]]:
    """(file, variant) for sweep tables that list further get_sweep variants in a module-level SWEEP_VARIANTS."""
    return [(path, v) for path in EXPERIMENTS
            for v in getattr(load_module(os.path.join(REPO, path)), "SWEEP_VARIANTS", ())]


@pytest.mark.parametrize("path,variant", sweep_variants())
def test_extra_sweep_variants_apply_to_their_configs(path, variant):
    test_sweep_points_apply_to_their_configs(path, variant)


@pytest.mark.parametrize("variant", VARIANTS, ids=["default", "smoke"])
@pytest.mark.parametrize("path", EXPERIMENTS)
def test_sweep_points_apply_to_their_configs(path, variant):
    """Each point's overrides go through the launcher's parser, land in the config, and the result validates."""
    if not callable(getattr(load_module(os.path.join(REPO, path)), "get_sweep", None)):
        pytest.skip(f"{path} defines no get_sweep")
    sweep = load_sweep(config_spec(os.path.join(REPO, path), variant))  # the loader wants a real file path
    assert sweep.points, f"{path}: get_sweep({variant!r}) has no points"
    for point in sweep.points:
        # Exactly the strings shared.sweep passes to the launcher as --config.<key>=<value>.
        overrides = [f"{key}={format_override_value(value)}" for key, value in point.overrides.items()]
        spec = config_spec(path, point.arg)
        try:
            config = load_and_validate(spec, smoke=(point.arg or "").endswith("smoke"), overrides=overrides)
        except ConfigError as e:
            pytest.fail(f"{spec} point {point.name!r}: {e}")
        for key, value in point.overrides.items():
            assert plain(lookup(config, key)) == plain(value), f"{spec} point {point.name!r}: {key}"

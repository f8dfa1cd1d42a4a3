"""shared.config: loading "file.py:variant" with typed overrides, one-line errors, validation checks."""
import importlib
import json
import textwrap

import pytest

from shared.config import (ConfigError, base_config, config_to_json, load_config, register_validator, validate,
                           write_config)
from shared.registry import Registry

# The package exports the function `validate`, which hides the submodule of the same name.
validate_module = importlib.import_module("shared.config.validate")

EXPERIMENT = textwrap.dedent('''
    from shared.config import base_config

    def get_config(arg=None):
        c = base_config()
        c.train.steps = 7
        if arg == "smoke":
            c.train.steps = 2
            c.model.d_model = 64
        return c
''')


@pytest.fixture
def experiment(tmp_path):
    path = tmp_path / "exp.py"
    path.write_text(EXPERIMENT)
    return str(path)


def assert_one_line(error: pytest.ExceptionInfo, *fragments: str) -> str:
    message = str(error.value)
    assert "\n" not in message, message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    return message


# ----------------------------------------------------------------------------- loading


def test_load_with_and_without_variant(experiment):
    assert load_config(experiment).train.steps == 7
    smoke = load_config(experiment + ":smoke")
    assert (smoke.train.steps, smoke.model.d_model) == (2, 64)
    assert smoke.is_locked
    with pytest.raises(AttributeError):
        smoke.train.new_key = 1  # locked: no new keys after loading


def test_overrides_are_parsed_by_the_current_type(experiment):
    c = load_config(experiment, [
        "train.steps=5", "optim.lr=1e-3", "optim.grad_clip=2", "train.async_checkpoint=false",
        "train.progress=True", "data.source=text", "model.heads=['lm', 'scalar']", "mesh.tensor=-1",
        "optim.param_groups={'embed': 0.5}", "train.sample_at_end=1 + 1",
    ])
    assert c.train.steps == 5 and type(c.train.steps) is int
    assert c.optim.lr == 1e-3
    assert c.optim.grad_clip == 2.0 and type(c.optim.grad_clip) is float
    assert c.train.async_checkpoint is False and c.train.progress is True
    assert c.data.source == "text"
    assert list(c.model.heads) == ["lm", "scalar"]
    assert c.mesh.tensor == -1
    assert c.optim.param_groups.to_dict() == {"embed": 0.5}
    assert c.train.sample_at_end == "1 + 1"  # strings are taken verbatim, never evaluated
    # Unquoted comma lists are accepted for list fields (easier to type in a shell).
    assert list(load_config(experiment, ["model.heads=lm,scalar"]).model.heads) == ["lm", "scalar"]
    # The override value may contain "=".
    assert load_config(experiment, ["data.path=a=b.txt"]).data.path == "a=b.txt"


def test_unknown_key_names_the_key_and_the_closest_one(experiment):
    with pytest.raises(ConfigError) as e:
        load_config(experiment, ["optim.lrr=1"])
    assert_one_line(e, "'optim.lrr'", "Did you mean 'optim.lr'?")
    with pytest.raises(ConfigError) as e:
        load_config(experiment, ["modle.d_model=1"])
    assert_one_line(e, "'modle.d_model'", "Did you mean 'model.d_model'?")
    with pytest.raises(ConfigError) as e:  # named by its last part: the full key, not a top-level look-alike
        load_config(experiment, ["lr=1"])
    assert_one_line(e, "'lr'", "Did you mean 'optim.lr'?")
    with pytest.raises(ConfigError) as e:
        load_config(experiment, ["optim.lr.x=1"])
    assert_one_line(e, "'optim.lr' is a float, not a group")


@pytest.mark.parametrize("override,expected", [
    ("train.steps=abc", "expects an int"),
    ("train.steps=2.5", "expects an int"),
    ("optim.lr=fast", "expects a float"),
    ("train.progress=maybe", "expects a bool"),
    ("optim.param_groups=[1]", "expects a dict"),
])
def test_wrong_type_names_key_value_and_type(experiment, override, expected):
    key, _, value = override.partition("=")
    with pytest.raises(ConfigError) as e:
        load_config(experiment, [override])
    assert_one_line(e, repr(key), repr(value), expected)


def test_missing_file_and_missing_get_config(tmp_path):
    with pytest.raises(ConfigError) as e:
        load_config(str(tmp_path / "nope.py") + ":smoke")
    assert_one_line(e, "config file not found", str(tmp_path / "nope.py"))
    no_fn = tmp_path / "empty.py"
    no_fn.write_text("x = 1\n")
    with pytest.raises(ConfigError) as e:
        load_config(str(no_fn))
    assert_one_line(e, str(no_fn), "no get_config")
    (tmp_path / "quickstart.py").write_text("def get_config(arg=None):\n    return None\n")
    with pytest.raises(ConfigError) as e:   # a misspelt file name: the closest file of its folder
        load_config(str(tmp_path / "quickstrat.py"))
    assert_one_line(e, "config file not found", f"did you mean {tmp_path / 'quickstart.py'}?")
    with pytest.raises(ConfigError) as e:   # a folder: its config files
        load_config(str(tmp_path))
    assert_one_line(e, f"config path {tmp_path} is a folder", "empty.py, quickstart.py")
    with pytest.raises(ConfigError) as e:   # a module name instead of a path
        load_config("experiments.quickstart")
    assert_one_line(e, "config file not found", "--config=experiments/quickstart.py")
    no_arg = tmp_path / "noarg.py"
    no_arg.write_text("from shared.config import base_config\ndef get_config():\n    return base_config()\n")
    assert load_config(str(no_arg)).task == "pretrain"
    with pytest.raises(ConfigError) as e:
        load_config(str(no_arg) + ":smoke")
    assert_one_line(e, "takes no argument", "'smoke'")


def test_malformed_override(experiment):
    with pytest.raises(ConfigError) as e:
        load_config(experiment, ["train.steps"])
    assert_one_line(e, "key=value")


def test_config_json_round_trip(experiment, tmp_path):
    c = load_config(experiment + ":smoke", ["model.heads=lm,scalar"])
    text = config_to_json(c)
    assert text.index('"data"') < text.index('"model"') < text.index('"optim"')  # sorted keys
    path = write_config(c, str(tmp_path / "run" / "nested"))
    assert path.endswith("config.json")
    with open(path) as f:
        saved = json.load(f)
    assert saved == json.loads(text)
    assert saved["model"]["heads"] == ["lm", "scalar"] and saved["train"]["steps"] == 2
    assert saved == json.loads(json.dumps(c.to_dict()))  # same values as the ConfigDict itself


# ----------------------------------------------------------------------------- registry names


def test_registry_names_error_prefixes_the_key():
    blocks, heads = Registry("block"), Registry("head")
    for name in ("prenorm", "postnorm"):
        blocks.register(name, object())
    for name in ("lm", "scalar"):
        heads.register(name, object())
    table = {"model.block": blocks, "model.heads": heads, "no.such.key": blocks}  # missing keys are skipped
    c = base_config()
    validate_module.check_registry_names(c, table)
    c.model.block = "prenrom"
    with pytest.raises(ConfigError) as e:
        validate_module.check_registry_names(c, table)
    assert str(e.value) == ("model.block: unknown block 'prenrom'. Did you mean 'prenorm'? "
                            "Known block names: postnorm, prenorm")
    c.model.block = "siamesenorm/siamese"   # a project's name before its project is imported
    with pytest.raises(ConfigError) as e:
        validate_module.check_registry_names(c, table)
    assert_one_line(e, "unknown block 'siamesenorm/siamese'", "load with --config.project=siamesenorm")
    c.model.block = "prenorm"
    c.model.heads = ["lm", "scalr"]
    with pytest.raises(ConfigError) as e:
        validate_module.check_registry_names(c, table)
    assert_one_line(e, "model.heads: unknown head 'scalr'. Did you mean 'scalar'?")


def test_registry_key_table_covers_the_base_config():
    c = base_config()
    for key in validate_module.REGISTRY_KEYS:
        present, _ = validate_module._lookup(c, key)
        assert present, key


# ----------------------------------------------------------------------------- mesh and model dims


def mesh_config(preset="auto", **sizes):
    c = base_config()
    c.mesh.preset = preset
    for axis, size in sizes.items():
        c.mesh[axis] = size
    return c


def test_mesh_resolution():
    assert validate_module.check_mesh(mesh_config("cpu_8"), 8) == {"data": 2, "fsdp": 2, "tensor": 2}
    assert validate_module.check_mesh(mesh_config("auto"), 8) == {"data": 1, "fsdp": 8, "tensor": 1}
    assert validate_module.check_mesh(mesh_config("auto", tensor=2), 8) == {"data": 1, "fsdp": 4, "tensor": 2}
    assert validate_module.check_mesh(mesh_config("gpu_2x8"), 16) == {"data": 2, "fsdp": 8, "tensor": 1}


def test_mesh_errors_are_one_line():
    with pytest.raises(ConfigError) as e:
        validate_module.check_mesh(mesh_config("auto", tensor=3), 8)
    assert_one_line(e, "mesh", "tensor=3", "8 devices")
    with pytest.raises(ConfigError) as e:
        validate_module.check_mesh(mesh_config("cpu8"), 8)
    assert_one_line(e, "mesh.preset: unknown mesh preset 'cpu8'. Did you mean 'cpu_8'?")
    with pytest.raises(ConfigError) as e:
        validate_module.check_mesh(mesh_config("v5p_64"), 8)
    assert_one_line(e, "mesh.preset", "expects 32 devices", "8 are present")
    with pytest.raises(ConfigError) as e:
        validate_module.check_mesh(mesh_config("gpu_1"), 1, platform="cpu")
    assert_one_line(e, "mesh.preset", "'gpu_1' is for gpu", "cpu")


def test_model_dims_divide_their_mesh_axes():
    shape = {"data": 1, "fsdp": 2, "tensor": 4}
    c = base_config()
    c.model.update(n_heads=8, n_kv_heads=2, d_ff=1024, vocab_size=32000, d_model=256)
    validate_module.check_model_dims(c, shape)  # 2 KV heads on tensor=4: replicated, allowed
    cases = [
        (dict(n_heads=6, n_kv_heads=6), "model.n_heads=6 is not divisible by mesh tensor=4"),
        (dict(n_heads=12, n_kv_heads=6), "model.n_kv_heads=6 and mesh tensor=4"),
        (dict(n_heads=8, n_kv_heads=3), "model.n_heads=8 is not a multiple of model.n_kv_heads=3"),
        (dict(d_ff=1030), "model.d_ff=1030 is not divisible by mesh tensor=4"),
        (dict(vocab_size=32001), "model.vocab_size=32001 is not divisible by mesh tensor=4"),
        (dict(d_model=255), "model.d_model=255 is not divisible by mesh fsdp=2"),
        (dict(head_dim=63), "model.head_dim=63 must be even"),
    ]
    for change, message in cases:
        bad = base_config()
        bad.model.update(n_heads=8, n_kv_heads=2)
        bad.model.update(**change)
        with pytest.raises(ConfigError) as e:
            validate_module.check_model_dims(bad, shape)
        assert_one_line(e, message)


# ----------------------------------------------------------------------------- batch arithmetic


def batch_config(batch_size, micro_batches):
    c = base_config()
    c.train.batch_size, c.train.micro_batches = batch_size, micro_batches
    return c


def test_batch_arithmetic():
    shape = {"data": 2, "fsdp": 4, "tensor": 1}
    validate_module.check_batch(batch_config(32, 2), shape)  # 16 per micro-batch over 8 shards
    validate_module.check_batch(batch_config(48, 1), shape, process_count=3)  # 48 = 8 * 6 = 3 * 16
    with pytest.raises(ConfigError) as e:
        validate_module.check_batch(batch_config(30, 4), shape)
    assert_one_line(e, "train.batch_size=30 is not divisible by train.micro_batches=4")
    with pytest.raises(ConfigError) as e:
        validate_module.check_batch(batch_config(24, 2), shape)
    assert_one_line(e, "= 12 sequences per micro-batch", "data*fsdp=2*4=8")
    with pytest.raises(ConfigError) as e:
        validate_module.check_batch(batch_config(32, 1), shape, process_count=3)
    assert_one_line(e, "train.batch_size=32", "3 processes")


# ----------------------------------------------------------------------------- validate()


@pytest.fixture
def registries_with_base_names(monkeypatch):
    """Fresh registries holding the base config's names, so validate() does not depend on the built-ins."""
    c = base_config()
    table = {}
    for key, reg in validate_module.REGISTRY_KEYS.items():
        fresh = Registry(reg.kind)
        value = validate_module._lookup(c, key)[1]
        for name in value if isinstance(value, (list, tuple)) else [value]:
            fresh.register(name, object())
        table[key] = fresh
    monkeypatch.setattr(validate_module, "REGISTRY_KEYS", table)
    monkeypatch.setattr(validate_module, "_VALIDATORS", [])
    return table


def test_validate_runs_every_check_and_the_extension_point(registries_with_base_names):
    c = mesh_config("cpu_8")
    assert validate(c, 8) == {"data": 2, "fsdp": 2, "tensor": 2}
    seen = []

    @register_validator
    def needs_even_steps(config, mesh_shape):
        seen.append(dict(mesh_shape))
        if config.train.steps % 2:
            raise ValueError(f"train.steps={config.train.steps} must be even for this project")

    register_validator(needs_even_steps)  # registering twice runs it once
    validate(c, 8)
    assert seen == [{"data": 2, "fsdp": 2, "tensor": 2}]
    c.train.steps = 3
    with pytest.raises(ConfigError) as e:
        validate(c, 8)
    assert_one_line(e, "train.steps=3 must be even")
    c.train.steps = 4
    c.task = "pretrian"
    with pytest.raises(ConfigError) as e:
        validate(c, 8)
    assert_one_line(e, "task: unknown task 'pretrian'. Did you mean 'pretrain'?")
    c.task = "pretrain"
    c.model.n_heads = c.model.n_kv_heads = 6
    c.mesh.preset, c.mesh.tensor = "auto", 4
    with pytest.raises(ConfigError) as e:
        validate(c, 8)
    assert_one_line(e, "model.n_heads=6 is not divisible by mesh tensor=4")


@pytest.mark.parametrize("key,value,expected", [
    ("model.attention", "flash", "model.attention='flash': expected one of auto, xla, cudnn, splash, tokamax"),
    ("model.tokamax_implementation", "pallas",
     "model.tokamax_implementation='pallas': expected '' (the library's choice) or one of mosaic, triton"),
    ("model.remat", "attn", "model.remat='attn': expected one of none, full, dots, dots_all, mlp"),
    ("optim.mu_dtype", "float16", "optim.mu_dtype='float16': expected '' (the params' dtype) or 'bfloat16'"),
    ("rl.sample_draw", "gumble", "rl.sample_draw='gumble': expected 'gumbel' or 'inverse_cdf'"),
])
def test_named_modes_are_checked_in_one_line(registries_with_base_names, key, value, expected):
    c = mesh_config("cpu_8")
    group, name = key.split(".")
    c[group][name] = value
    with pytest.raises(ConfigError) as e:
        validate(c, 8)
    assert_one_line(e, expected)


def test_tokamax_attention_without_the_package_says_how_to_install_it(registries_with_base_names, monkeypatch):
    c = mesh_config("cpu_8")
    c.model.attention = "tokamax"
    real_find_spec = validate_module.importlib.util.find_spec
    monkeypatch.setattr(validate_module.importlib.util, "find_spec",
                        lambda name, *a: None if name == "tokamax" else real_find_spec(name, *a))
    with pytest.raises(ConfigError) as e:
        validate(c, 8)
    assert_one_line(e, "model.attention='tokamax' needs the tokamax package", ".[kernels]")


def test_preset_for_fewer_devices_uses_the_first_ones():
    # cpu_1 under 8 fake devices (and gpu_1 on a 4-GPU host) runs on the first device(s).
    assert validate_module.check_mesh(mesh_config("cpu_1"), 8) == {"data": 1, "fsdp": 1, "tensor": 1}

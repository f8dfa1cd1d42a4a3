"""shared.launch end to end (subprocesses on a dummy task) and tpu_configs presets.

The dummy task lives in a project package written to a temp folder and put on PYTHONPATH; the config
names it by module path (`config.project = "launch_fixture.echo"`), so projects/ stays clean and the
test does not depend on which built-ins exist yet: the fixture registers every name its config uses.
"""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from shared.config import ConfigError, config_to_json, load_config
from shared.launch import (check_accelerator_present, import_project, prepare_environment, split_config_overrides,
                           wants_distributed)
from shared.registry import ALL_REGISTRIES, UnknownNameError
from tpu_configs.presets import PRESETS, attention_for, get_preset, merge_xla_flags

from conftest import REPO_ROOT as REPO  # noqa: E402

FIXTURE_PROJECT = textwrap.dedent('''
    """Test fixture for tests/test_launch.py: a task that records what the launcher handed it."""
    import json
    import os

    from shared import registry

    for key, reg in [("block", registry.BLOCKS), ("norm", registry.NORMS), ("head", registry.HEADS),
                     ("loss", registry.LOSSES), ("optimizer", registry.OPTIMIZERS),
                     ("schedule", registry.SCHEDULES), ("dataset", registry.DATASETS),
                     ("tokenizer", registry.TOKENIZERS)]:
        reg.register(f"launch_test/{key}", object())


    @registry.TASKS.register("launch_test/echo")
    def echo(config, workdir):
        import jax

        summary = {"devices": jax.device_count(), "steps": config.train.steps,
                   "saw_config_json": os.path.exists(os.path.join(workdir, "config.json"))}
        with open(os.path.join(workdir, "summary.json"), "w") as f:
            json.dump(summary, f)
        return summary


    @registry.TASKS.register("launch_test/signal_self")
    def signal_self(config, workdir):
        import signal

        os.kill(os.getpid(), getattr(signal, "SIG" + config.train.kill_signal))   # e.g. during a final sample
        return {"never": "reached"}


    @registry.TASKS.register("launch_test/read_data")
    def read_data(config, workdir):
        from shared.data import build_tokenizer
        from shared.data.pipeline import tokenized_shard

        corpus = tokenized_shard(config, build_tokenizer(config.data, workdir, 512), "train")
        return {"documents": corpus.num_docs}
''')

EXPERIMENT = textwrap.dedent('''
    from shared.config import base_config

    def get_config(arg=None):
        c = base_config()
        c.project = "launch_fixture.echo"
        c.task = "launch_test/echo"
        c.model.block = "launch_test/block"
        c.model.norm = "launch_test/norm"
        c.model.heads = ["launch_test/head"]
        c.train.loss = "launch_test/loss"
        c.optim.name = "launch_test/optimizer"
        c.optim.schedule = "launch_test/schedule"
        c.data.source = "launch_test/dataset"
        c.data.tokenizer = "launch_test/tokenizer"
        c.mesh.preset = "auto"
        c.train.steps = 100
        if arg == "smoke":
            c.train.steps = 2
        return c
''')


@pytest.fixture(scope="module")
def fixture_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("launch")
    package = root / "launch_fixture"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "echo.py").write_text(FIXTURE_PROJECT)
    (root / "exp.py").write_text(EXPERIMENT)
    return root


def launch(fixture_dir, *args, preset_sets_devices=False):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(fixture_dir), REPO])
    env.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
    env.setdefault("JAX_PLATFORMS", "cpu")
    if preset_sets_devices:  # leave XLA_FLAGS/JAX_PLATFORMS to the preset, as on a fresh machine
        env.pop("XLA_FLAGS")
        env.pop("JAX_PLATFORMS")
    return subprocess.run([sys.executable, "-m", "shared.launch", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)


def test_end_to_end_on_a_dummy_task(fixture_dir, tmp_path):
    spec = str(fixture_dir / "exp.py") + ":smoke"
    workdir = tmp_path / "run"
    result = launch(fixture_dir, f"--config={spec}", f"--workdir={workdir}", "--mesh=cpu_8",
                    "--config.train.steps=3", "--config.optim.lr=0.01", preset_sets_devices=True)
    assert result.returncode == 0, result.stderr
    # 8 devices although the environment set none: cpu_8's flags reached XLA before jax started.
    summary = json.loads((workdir / "summary.json").read_text())
    assert summary == {"devices": 8, "steps": 3, "saw_config_json": True}
    # a few human lines, not the one-line JSON (summary.json has every metric)
    assert "final metrics:" not in result.stdout
    assert f"[done] {spec}" in result.stdout and f"3 metrics in {workdir / 'summary.json'}" in result.stdout
    # config.json is the resolved config: variant, overrides and --mesh applied.
    expected = load_config(spec, ["train.steps=3", "optim.lr=0.01"])
    expected.mesh.preset = "cpu_8"
    written = (workdir / "config.json").read_text()
    assert json.loads(written) == json.loads(config_to_json(expected))
    assert json.loads(written)["mesh"]["preset"] == "cpu_8"


@pytest.mark.parametrize("args,message", [
    (["--config=/nonexistent/exp.py"], "config file not found: /nonexistent/exp.py"),
    (["--config={exp}", "--config.optim.lrr=1"], "unknown config key 'optim.lrr'. Did you mean 'optim.lr'?"),
    (["--config={exp}", "--config.train.steps=many"], "config key 'train.steps' expects an int, got 'many'"),
    (["--config={exp}", "--mesh=cpu8"], "--mesh: unknown mesh preset 'cpu8'. Did you mean 'cpu_8'?"),
    (["--config={exp}", "--config.model.block=launch_test/blok"],
     "model.block: unknown block 'launch_test/blok'. Did you mean 'launch_test/block'?"),
    (["--config={exp}", "--config.mesh.tensor=3"], "tensor=3 do not divide the 8 devices"),
    (["--config={exp}", "--config.mesh.tensor=4", "--config.model.n_heads=6", "--config.model.n_kv_heads=6"],
     "model.n_heads=6 is not divisible by mesh tensor=4"),
    (["--config={exp}", "--config.project=no_such_project"], "project: no module 'projects.no_such_project'"),
    (["--config={exp}"], "--config and --workdir are required"),
    (["--config={exp}", "--workdir=x", "--bogus"], "Unknown command line flag 'bogus'"),
    (["--config={exp}", "--workdir=x", "--steps=3"], "flag 'steps'; config keys are set with --config.KEY=VALUE: "
                                                     "--config.train.steps=..."),
    (["--config=experiments/quickstart.py:nosuch"], "get_config('nosuch') failed: ValueError: "
                                                    "experiments/quickstart.py: unknown variant 'nosuch'"),
])
def test_bad_input_exits_2_with_one_line(fixture_dir, tmp_path, args, message):
    args = [a.format(exp=fixture_dir / "exp.py") for a in args]
    if not any(a.startswith("--workdir") for a in args) and "required" not in message:
        args.append(f"--workdir={tmp_path / 'run'}")
    result = launch(fixture_dir, *args)
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert message in lines[0], lines[0]
    assert not (tmp_path / "run" / "config.json").exists()  # nothing ran


def test_rerun_with_another_config_is_refused_unless_the_change_is_allowed(fixture_dir, tmp_path):
    spec, workdir = f"--config={fixture_dir / 'exp.py'}:smoke", tmp_path / "run"
    assert launch(fixture_dir, spec, f"--workdir={workdir}", "--config.train.steps=3").returncode == 0
    first = (workdir / "config.json").read_bytes()

    refused = launch(fixture_dir, spec, f"--workdir={workdir}", "--config.train.steps=5", "--config.optim.lr=0.5")
    assert refused.returncode == 2
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "train.steps: 3 -> 5" in lines[0] and "optim.lr: 0.0003 -> 0.5" in lines[0], lines
    assert "--allow_config_change=optim.lr,train.steps" in lines[0]
    assert (workdir / "config.json").read_bytes() == first and not (workdir / "config_history.jsonl").exists()

    # the same config again (and another mesh: hardware, not science) is accepted
    assert launch(fixture_dir, spec, f"--workdir={workdir}", "--config.train.steps=3", "--mesh=cpu_1").returncode == 0
    allowed = launch(fixture_dir, spec, f"--workdir={workdir}", "--config.train.steps=5", "--mesh=cpu_1",
                     "--allow_config_change=train")
    assert allowed.returncode == 0, allowed.stderr
    history = [json.loads(line) for line in (workdir / "config_history.jsonl").read_text().splitlines()]
    assert [h["changes"] for h in history] == [{"mesh.preset": {"old": "auto", "new": "cpu_1"}},
                                               {"train.steps": {"old": 3, "new": 5}}]
    assert json.loads((workdir / "config.json").read_text())["train"]["steps"] == 5


def test_workdir_that_is_a_file_is_one_line(fixture_dir, tmp_path):
    path = tmp_path / "file"
    path.write_text("x")
    result = launch(fixture_dir, f"--config={fixture_dir / 'exp.py'}", f"--workdir={path}")
    assert result.returncode == 2 and result.stderr.strip() == f"error: --workdir={path} is a file, not a folder"


@pytest.mark.parametrize("content,message", [
    ('{"text": "a"}\n{"text": "b"\n', "data.jsonl:2: invalid JSON"),
    ("", "gave no"),
    (None, "does not exist"),
])
def test_data_errors_are_one_line_and_leave_no_workdir(fixture_dir, tmp_path, content, message):
    data = tmp_path / "data.jsonl"
    if content is not None:
        data.write_text(content)
    workdir = tmp_path / "run"
    result = launch(fixture_dir, f"--config={fixture_dir / 'exp.py'}", f"--workdir={workdir}",
                    "--config.task=launch_test/read_data", "--config.data.source=jsonl", "--config.data.tokenizer=byte",
                    f"--config.data.path={data}")
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], result.stderr
    assert not workdir.exists()


@pytest.mark.parametrize("name,code", [("TERM", 143), ("INT", 130)])
def test_signal_outside_a_training_loop_is_one_line_and_exit_128_plus_signal(fixture_dir, tmp_path, name, code):
    result = launch(fixture_dir, f"--config={fixture_dir / 'exp.py'}", f"--workdir={tmp_path / 'run'}",
                    "--config.task=launch_test/signal_self", f"--config.train.kill_signal={name}")
    assert result.returncode == code, result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines == [f"interrupted by SIG{name} before any checkpoint was written; re-run the same command to start "
                     "again"], result.stderr


def test_an_interruption_names_the_checkpoints_to_resume_from_only_when_there_are_some(tmp_path):
    from shared.launch import interrupted_message

    assert "before any checkpoint" in interrupted_message("SIGINT", str(tmp_path / "never_made"))
    (tmp_path / "run" / "checkpoints").mkdir(parents=True)
    assert "before any checkpoint" in interrupted_message("SIGINT", str(tmp_path / "run"))
    (tmp_path / "run" / "checkpoints" / "5").mkdir()
    assert interrupted_message("SIGINT", str(tmp_path / "run")) == (
        "interrupted by SIGINT: checkpoints in the workdir are complete; re-run the same command to resume")


def test_list_prints_every_registry(fixture_dir):
    result = launch(fixture_dir, "--list")
    assert result.returncode == 0, result.stderr
    listed = {line.split(" (")[0] for line in result.stdout.splitlines()}
    assert set(ALL_REGISTRIES) | {"mesh preset"} <= listed
    presets = result.stdout.split("mesh preset", 1)[1]  # wrapped: the names continue on indented lines
    assert all(name in presets for name in PRESETS)
    # lines wrap (100 columns off a terminal, e.g. piped); a wrapped entry goes on indented lines
    assert max(len(line) for line in result.stdout.splitlines()) <= 100
    assert any(line.startswith("    ") for line in result.stdout.splitlines())


# ----------------------------------------------------------------------------- launcher pieces


def test_importing_the_launcher_does_not_start_jax():
    # The preset's XLA flags only work if jax is imported after they are set.
    code = "import sys, shared.launch, shared.config, tpu_configs; assert 'jax' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, timeout=60)


def test_split_config_overrides():
    rest, overrides = split_config_overrides(["--config=x.py:smoke", "--config.a.b=1", "--workdir=w",
                                              "--config.c=x=y"])
    assert rest == ["--config=x.py:smoke", "--workdir=w"]
    assert overrides == ["a.b=1", "c=x=y"]
    with pytest.raises(ConfigError, match="--config.a.b=VALUE"):
        split_config_overrides(["--config.a.b", "1"])


def test_prepare_environment_appends_flags_and_keeps_user_settings():
    environ = {"XLA_FLAGS": "--xla_gpu_enable_latency_hiding_scheduler=false"}
    prepare_environment(get_preset("gpu_1x8"), environ)
    flags = environ["XLA_FLAGS"].split()
    assert flags[0] == "--xla_gpu_enable_latency_hiding_scheduler=false"  # the user's value wins
    assert "--xla_gpu_enable_pipelined_all_gather=true" in flags
    assert len(flags) == len(get_preset("gpu_1x8")["xla_flags"].split())
    environ = {"JAX_PLATFORMS": "cuda"}
    prepare_environment(get_preset("cpu_8"), environ)
    assert environ == {"JAX_PLATFORMS": "cuda", "XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
    environ = {}
    prepare_environment(get_preset("gpu_1"), environ)
    assert environ == {}


def test_a_gpu_preset_without_a_gpu_fails_before_jax_probes_the_backends(monkeypatch):
    import glob
    monkeypatch.setattr(glob, "glob", lambda pattern: [])                      # a machine with no accelerator files
    with pytest.raises(ConfigError, match=r"^--mesh: preset 'gpu_1' is for gpu, but this machine has no GPU"):
        check_accelerator_present("gpu_1", get_preset("gpu_1"), "--mesh", {})
    with pytest.raises(ConfigError, match=r"mesh.preset: preset 'v5p_64' is for tpu"):
        check_accelerator_present("v5p_64", get_preset("v5p_64"), "mesh.preset", {})
    check_accelerator_present("cpu_8", get_preset("cpu_8"), "--mesh", {})      # cpu and auto presets pass
    check_accelerator_present("auto", get_preset("auto"), "--mesh", {})
    check_accelerator_present("gpu_1", get_preset("gpu_1"), "--mesh", {"JAX_PLATFORMS": "cuda"})  # the user's call
    monkeypatch.setattr(glob, "glob", lambda pattern: ["/dev/nvidia0"] if "nvidia" in pattern else [])
    check_accelerator_present("gpu_1", get_preset("gpu_1"), "--mesh", {})


def test_wants_distributed():
    assert not wants_distributed(get_preset("cpu_8"), False, {})
    assert wants_distributed(get_preset("cpu_8"), True, {})
    assert wants_distributed(get_preset("auto"), False, {"JAX_COORDINATOR_ADDRESS": "10.0.0.1:1234"})
    assert wants_distributed(get_preset("v5p_64"), False, {})


def test_import_project_errors_list_projects():
    with pytest.raises(ConfigError) as e:
        import_project("no_such_project")
    assert "\n" not in str(e.value) and "Packages in projects/:" in str(e.value)
    assert import_project("") is None


# ----------------------------------------------------------------------------- presets


def test_get_preset_suggests_close_names():
    with pytest.raises(UnknownNameError) as e:
        get_preset("v5p_65")
    assert "Did you mean 'v5p_64'?" in str(e.value) and "cpu_8" in str(e.value)
    preset = get_preset("cpu_8")
    preset["ici"]["data"] = 99  # a copy: the table stays intact
    assert PRESETS["cpu_8"]["ici"]["data"] == 2


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_is_well_formed_and_tiles_its_devices(name):
    from shared.config import base_config
    from shared.sharding import resolve_mesh_shape

    preset = PRESETS[name]
    assert preset["platform"] in ("cpu", "gpu", "tpu", "auto")
    assert preset["attention"] in ("xla", "cudnn", "splash", "auto")
    assert set(preset["ici"]) == set(preset["dcn"]) == {"data", "fsdp", "tensor"}
    assert preset["description"]
    mesh = base_config().mesh
    mesh.preset = name
    devices = preset["num_devices"] or 8
    shape = resolve_mesh_shape(mesh, devices)
    assert shape["data"] * shape["fsdp"] * shape["tensor"] == devices
    if preset["platform"] != "gpu":
        assert "xla_gpu" not in preset["xla_flags"]


def test_attention_by_platform_and_flag_merge():
    auto = get_preset("auto")
    assert [attention_for(auto, p) for p in ("cpu", "gpu", "tpu")] == ["xla", "cudnn", "splash"]
    assert attention_for(get_preset("gpu_1x8"), "gpu") == "cudnn"
    assert merge_xla_flags("--a=1 --b=2", "--b=3 --c=4") == "--a=1 --b=2 --c=4"
    assert merge_xla_flags("", "--c=4") == "--c=4"


# ----------------------------------------------------------------------------- one launch per workdir


def test_workdir_lock_names_its_holder_and_dies_with_it(tmp_path):
    """A second launch in a workdir whose first is alive is refused, naming it; the kernel drops the lock when
    the holder dies, SIGKILL included."""
    import signal
    import time

    from shared.launch.lock import WorkdirBusy, WorkdirLock

    workdir = str(tmp_path / "run")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from shared.launch.lock import WorkdirLock; "
         f"WorkdirLock({workdir!r}, command='the first launch').acquire(); print('held', flush=True); time.sleep(60)"],
        cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(WorkdirBusy) as busy:
            WorkdirLock(workdir).acquire()
        message = str(busy.value)
        assert f"workdir {workdir} is in use by another launch (pid {holder.pid} on " in message
        assert "the first launch" in message and "\n" not in message
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    with WorkdirLock(workdir) as lock:  # released by the kernel
        with pytest.raises(WorkdirBusy):
            WorkdirLock(workdir).acquire()  # another open file description: refused in this process too
    time.sleep(0)
    WorkdirLock(workdir).acquire().release()
    assert lock._fd is None

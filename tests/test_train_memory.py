"""The memory preflight (shared.train.memory): exact state sizes from shapes, per device under the mesh, and a
Trainer that stops with the sizes before allocating anything when they cannot fit."""
import os
import subprocess
import sys

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec  # noqa: E402

from shared.model import count_params, create_sharded  # noqa: E402
from shared.train import Trainer, memory  # noqa: E402
from tests.test_train import REPO, mesh_of, tiny_config  # noqa: E402


def abstract_params(config, mesh):
    seen = {}
    create_sharded(config.model, mesh, 0, check=lambda p: seen.setdefault("params", p))
    return seen["params"]


def test_sizes_match_the_materialised_state():
    config = tiny_config()
    mesh = mesh_of(1)
    graphdef, state = create_sharded(config.model, mesh, 0)
    params = abstract_params(config, mesh)
    from shared.train.optim import make_optimizer
    optimizer, _ = make_optimizer(config.optim, config.train.steps, params)
    sizes = memory.state_sizes(params, jax.eval_shape(optimizer.init, params))
    assert sizes["n_params"] == count_params(state)
    real_bytes = sum(x.nbytes for x in jax.tree.leaves(state))
    assert sizes["params"] == sizes["params_total"] == real_bytes == sizes["grads"]
    # adamw: mu and nu are params-shaped float32 trees (the float32 model's bytes twice), plus small counters
    assert 2 * real_bytes <= sizes["opt"] <= 2 * real_bytes + 64


def test_per_device_bytes_follow_the_shardings():
    mesh = mesh_of(8)
    sharded = jax.ShapeDtypeStruct((64, 32), np.float32, sharding=NamedSharding(mesh, PartitionSpec(("data", "fsdp", "tensor"))))
    replicated = jax.ShapeDtypeStruct((64, 32), np.float32, sharding=NamedSharding(mesh, PartitionSpec()))
    assert memory.per_device_bytes(sharded) == 64 * 32 * 4 // 8
    assert memory.per_device_bytes(replicated) == memory.leaf_bytes(replicated) == 64 * 32 * 4
    sizes = memory.state_sizes({"w": sharded, "b": replicated}, {"mu": {"w": sharded, "b": replicated}})
    assert sizes["params"] == 64 * 32 * 4 // 8 + 64 * 32 * 4
    assert sizes["opt"] == sizes["params"]  # moments shard like their parameters


def test_check_raises_with_the_sizes_and_warns_near_the_limit(capsys):
    mesh = mesh_of(1)
    w = jax.ShapeDtypeStruct((1024, 1024), np.float32, sharding=NamedSharding(mesh, PartitionSpec()))  # 4 MiB
    opt = {"mu": w, "nu": w}  # 8 MiB
    with pytest.raises(memory.StateDoesNotFit, match=r"1.0M parameters.*params 0.00 GiB.*adamw.*cpu_1.*--config.mesh"):
        memory.check_state_fits({"w": w}, opt, mesh.devices.flat, "adamw", "cpu_1", available=11 * 2 ** 20,
                                where="test")
    memory.check_state_fits({"w": w}, opt, mesh.devices.flat, "adamw", "cpu_1", available=13 * 2 ** 20, where="t")
    assert "warning" in capsys.readouterr().err  # 12 MiB of state + 4 MiB of gradients > 0.9 x 13 MiB
    memory.check_state_fits({"w": w}, opt, mesh.devices.flat, "adamw", "cpu_1", available=64 * 2 ** 20, where="t")
    assert capsys.readouterr().err == ""


def test_host_available_reads_meminfo(tmp_path):
    path = tmp_path / "meminfo"
    path.write_text("MemTotal:       24000000 kB\nMemFree:         1000 kB\nMemAvailable:   20000000 kB\n")
    assert memory.host_available_bytes(str(path)) == 20000000 * 1024
    assert memory.host_available_bytes(str(tmp_path / "absent")) is None


def test_trainer_stops_before_allocating_when_the_state_cannot_fit(tmp_path, monkeypatch):
    """On 8 CPU devices each gets an eighth of MemAvailable; 8 KiB of host RAM is less than this model's state."""
    monkeypatch.setattr(memory, "host_available_bytes", lambda meminfo="": 8 << 10)
    config = tiny_config()
    with pytest.raises(memory.StateDoesNotFit, match=r"the training state does not fit: [\d,]+ parameters.*8 device"):
        Trainer(config, str(tmp_path / "run"))
    assert not os.path.exists(tmp_path / "run" / "checkpoints")
    monkeypatch.setattr(memory, "host_available_bytes", lambda meminfo="": 1 << 34)
    trainer = Trainer(config, str(tmp_path / "run2"))  # fits: no error
    trainer.close()


def test_launch_of_a_config_too_big_for_this_machine_is_one_line_and_leaves_no_workdir(tmp_path):
    """A 41B-parameter model on one CPU device: the launcher's one-line error, before any array is made."""
    big = ["--config.model.d_model=8192", "--config.model.n_layers=48", "--config.model.n_heads=64",
           "--config.model.n_kv_heads=8", "--config.model.head_dim=128", "--config.model.d_ff=28672",
           "--config.model.vocab_size=32768"]
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=1"}
    result = subprocess.run([sys.executable, "-m", "shared.launch", "--config=experiments/quickstart.py",
                             f"--workdir={tmp_path / 'run'}", *big], cwd=REPO, env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr + result.stdout
    assert "the training state does not fit: 41.34B parameters" in result.stderr + result.stdout
    assert not os.path.exists(tmp_path / "run")


def test_a_step_out_of_device_memory_is_one_line_that_keeps_xla_s_words():
    """What the launcher prints for XLA's RESOURCE_EXHAUSTED mid-run: the sizes XLA gave, the keys that shrink a
    step, and XLA's own words, which shared.sweep reads to requeue a point that shared its GPU."""
    from jax.errors import JaxRuntimeError

    from shared.launch import device_oom_message
    from shared.sweep.runner import ran_out_of_gpu_memory

    error = JaxRuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 17179869184 bytes.\n"
                            "BufferAssignment OOM Debugging.\n" + "x" * 5000)
    message = device_oom_message(error, "pretrain")
    assert message.startswith("out of device memory: RESOURCE_EXHAUSTED: Out of memory while trying to allocate "
                              "17179869184 bytes.") and "\n" not in message and len(message) < 900
    assert "--config.train.micro_batches" in message and "rl.micro_batch_tokens" not in message
    assert "--config.rl.micro_batch_tokens" in device_oom_message(error, "rl")
    assert ran_out_of_gpu_memory(1, message)
    assert device_oom_message(JaxRuntimeError("INVALID_ARGUMENT: shapes"), "rl") is None
    assert device_oom_message(RuntimeError("RESOURCE_EXHAUSTED but not from XLA"), "rl") is None

"""Multi-host RL on one machine: the GRPO smoke experiment in 2 CPU processes x 4 devices (jax.distributed,
gloo collectives, launched as on a cluster through JAX_COORDINATOR_ADDRESS) equals 1 process x 8 devices.

The run starts from the random init (no SFT warm start: its data order depends on the process count) and
uses an entropy bonus, so the update has a gradient even while the tiny policy earns no task reward."""
import json
import os
import socket
import subprocess
import sys

import pytest

from conftest import REPO_ROOT

CONFIG = "experiments/rl/grpo_arithmetic.py:smoke"
OVERRIDES = ["--config.rl.warmup_sft_steps=0", "--config.train.steps=3", "--config.rl.entropy_coef=0.01"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _launch(workdir: str, devices: int, extra_env: dict, *extra_args: str) -> subprocess.Popen:
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}",
           **extra_env}
    return subprocess.Popen([sys.executable, "-m", "shared.launch", f"--config={CONFIG}", f"--workdir={workdir}",
                             *OVERRIDES, *extra_args], cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _final_metrics(proc: subprocess.Popen, name: str) -> dict:
    out, _ = proc.communicate(timeout=600)
    lines = [line for line in out.splitlines() if line.startswith("final metrics:")]
    assert proc.returncode == 0 and lines, f"{name} failed (exit {proc.returncode}):\n{out[-3000:]}"
    return json.loads(lines[-1][len("final metrics:"):])


def test_rl_in_two_processes_equals_one_process(tmp_path):
    port = _free_port()
    hosts = [_launch(str(tmp_path / "multi"), 4, {"JAX_COORDINATOR_ADDRESS": f"localhost:{port}",
                                                  "JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": str(i)})
             for i in range(2)]
    multi = [_final_metrics(p, f"process {i} of 2") for i, p in enumerate(hosts)]
    single = _final_metrics(_launch(str(tmp_path / "single"), 8, {}), "single process")
    assert multi[0]["num_devices"] == single["num_devices"] == 8
    assert single["train/grad_norm"] > 0  # the update really moved the policy
    for key in ("train/loss", "train/entropy", "train/grad_norm", "train/param_norm", "train/ppo_kl",
                "rl/response_length", "reward/mean"):
        for metrics in multi:
            assert metrics[key] == pytest.approx(single[key], rel=1e-5, abs=1e-9), key


def test_sigterm_on_one_process_stops_both_at_the_same_saved_step(tmp_path):
    """Process 1 alone gets SIGTERM after step 1; the flag is agreed over the processes at step 2, so both save
    step 2 (a collective save: acting on one process's flag alone would hang) and exit 143."""
    port = _free_port()
    workdir = str(tmp_path / "multi")
    env = [{"JAX_COORDINATOR_ADDRESS": f"localhost:{port}", "JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": str(i)}
           for i in range(2)]
    plain = _launch(workdir, 4, env[0])
    signalled = _launch(workdir, 4, env[1], "--config.train.kill_at_step=1", "--config.train.kill_signal=TERM")
    outs = [p.communicate(timeout=600)[0] for p in (plain, signalled)]
    assert [plain.returncode, signalled.returncode] == [143, 143], "\n".join(o[-2000:] for o in outs)
    assert all("[rl] SIGTERM: saved step 2 to " in out for out in outs), outs
    assert os.path.isdir(os.path.join(workdir, "checkpoints", "2"))

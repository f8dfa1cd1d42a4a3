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
           "SHARED_LAUNCH_METRICS_JSON": "1", **extra_env}
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


def _pretrain(workdir: str, port: int, *extra_args: str) -> list[subprocess.Popen]:
    """quickstart :smoke pretraining in 2 processes x 4 CPU devices (each process reads its own documents)."""
    return [subprocess.Popen(
        [sys.executable, "-m", "shared.launch", "--config=experiments/quickstart.py:smoke", f"--workdir={workdir}",
         "--config.train.steps=9", "--config.train.log_every=1", "--config.train.sample_at_end=", *extra_args],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": "--xla_force_host_platform_device_count=4",
             "JAX_COORDINATOR_ADDRESS": f"localhost:{port}", "JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": str(i)})
        for i in range(2)]


def _wait(procs: list[subprocess.Popen]) -> tuple[list[int], list[str]]:
    outs = [p.communicate(timeout=600)[0] for p in procs]
    return [p.returncode for p in procs], outs


def test_two_process_pretraining_resumes_like_an_uninterrupted_run(tmp_path):
    """Multi-host resume is re-running the same command on every host: both processes stop on SIGTERM at the
    step-5 checkpoint, then restore it, each with its own data position (the checkpoint keeps one per process),
    and the loss curve and final metrics equal an uninterrupted 2-process run's."""
    straight, resumed = str(tmp_path / "straight"), str(tmp_path / "resumed")
    reference = _pretrain(straight, _free_port())
    codes, outs = _wait(_pretrain(resumed, _free_port(), "--config.train.kill_at_step=4",
                                  "--config.train.kill_signal=TERM"))
    assert codes == [143, 143], "\n".join(o[-2000:] for o in outs)
    with open(os.path.join(resumed, "checkpoints", "5", "data_state", "metadata")) as f:
        positions = json.load(f)["per_process"]
    assert [p["layout"]["process_index"] for p in positions] == [0, 1]
    codes, outs = _wait(_pretrain(resumed, _free_port()))
    assert codes == [0, 0], "\n".join(o[-2000:] for o in outs)
    assert all(f"resumed from {resumed}/checkpoints/5 (step 5)" in out for out in outs)
    codes, straight_outs = _wait(reference)
    assert codes == [0, 0], "\n".join(o[-2000:] for o in straight_outs)

    def rows(workdir):
        with open(os.path.join(workdir, "metrics.jsonl")) as f:
            return [{k: v for k, v in json.loads(line).items() if k != "time" and not k.startswith("perf/")}
                    for line in f]

    want, got = rows(straight), rows(resumed)
    assert [r["step"] for r in got] == [r["step"] for r in want] == [1, 2, 3, 3, 4, 5, 6, 6, 7, 8, 9, 9]
    for a, b in zip(want, got):
        assert a == pytest.approx(b, rel=1e-6), a["step"]

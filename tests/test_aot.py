"""shared.aot compiles a run's train step for a TPU topology on this CPU machine (libtpu describes the chips;
no TPU is used). Each check runs the command in a fresh process, as a user would."""
import os
import re
import subprocess
import sys

import pytest

from shared.aot import Report

from conftest import REPO_ROOT

pytest.importorskip("libtpu", reason="the TPU compiler comes with the tpu extra (CI installs it)")


def aot(*args):
    env = {**os.environ, "PYTHONPATH": REPO_ROOT, "JAX_PLATFORMS": "cpu"}
    env.pop("XLA_FLAGS", None)  # the 8 fake CPU devices of the tests are not the TPU slice
    return subprocess.run([sys.executable, "-m", "shared.aot", *args], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=600, env=env)


def test_quickstart_compiles_for_a_v5e_16_slice_and_fits():
    out = aot("--config=experiments/quickstart.py", "--mesh=v5e_16")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "v5e_16: 16 x TPU v5e (16 GiB HBM" in out.stdout
    needed = float(re.search(r"needed ([\d.]+) of 16 GiB", out.stdout).group(1))
    assert 0 < needed < 16


def test_a_step_that_does_not_fit_fails_with_one_line_naming_the_chip():
    # 1.3B parameters, 2048 x 2048 tokens in one micro-batch: the TPU compiler needs ~99 GiB of temporaries
    out = aot("--config=experiments/siamesenorm/lm_1p3b.py", "--mesh=v5e_16", "--config.train.micro_batches=1")
    assert out.returncode == 1, out.stdout + out.stderr[-2000:]
    line = [x for x in out.stderr.splitlines() if x.startswith("does not fit:")]
    assert len(line) == 1 and "TPU v5e chip" in line[0] and "16 GiB HBM" in line[0]


def test_a_gpu_preset_is_refused():
    out = aot("--config=experiments/quickstart.py", "--mesh=gpu_1x8")
    assert out.returncode == 2 and "not a TPU preset" in out.stderr


def test_report_arithmetic_by_hand():
    r = Report("v5e_16", "v5e", 16, argument_bytes=3 * 2**30, temp_bytes=5 * 2**30, output_bytes=3 * 2**30,
               alias_bytes=2 * 2**30, model_flops=197e12 * 0.5, xla_flops=1.0, bytes_accessed=1.0, tokens=1000)
    assert r.needed_bytes == 9 * 2**30          # arguments + temporaries + outputs not aliased to arguments
    assert r.step_time_s == pytest.approx(0.5)  # half a second of v5e peak
    assert "needed 9.000 of 16 GiB" in "\n".join(r.lines())
